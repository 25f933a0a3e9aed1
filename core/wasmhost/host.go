package wasmhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/wasmhost/internal/wasmpatch"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/sdk/abi"
)

// Config configures a Host. The zero value of every field picks the
// default documented on it.
type Config struct {
	// CacheDir holds wazero's compilation cache, so a module is compiled
	// to machine code once and later loads (and broker restarts) take it
	// from disk. Empty: compile in memory, once per process.
	CacheDir string
	// MemoryLimitBytes caps each instance's linear memory (rounded down to
	// 64 KiB pages). Default 128 MiB.
	MemoryLimitBytes uint64
	// CallTimeout is how long one call into a plugin may run before it is
	// interrupted. The watchdog checks four times per timeout, so a call
	// is stopped between 1 and 1.25 times it. Default 500ms.
	CallTimeout time.Duration
	// PoolSize is the most instances a plugin runs at once, the number of
	// publishers that route through it in parallel. Default GOMAXPROCS.
	PoolSize int
	// FailureLimit failures within FailureWindow disable a plugin.
	// Defaults 5 and one minute.
	FailureLimit  int
	FailureWindow time.Duration
	// IdleInterval is how often instances used since their last idle
	// call get warren_idle, their chance to do housekeeping off the route
	// path (a Go guest yields to its runtime's background work there).
	// Default one second.
	IdleInterval time.Duration
	// Logger receives the host's and the plugins' logs.
	Logger zerolog.Logger
	// OnDisabled is called, on its own goroutine, when the host disables
	// a plugin that keeps failing; the broker marks its exchanges
	// unavailable there (Registry.Unregister and vhost.TypeGone).
	OnDisabled func(plugin, reason string)
	// PluginSettings holds each plugin's settings by plugin name (from
	// broker.toml). A plugin reads its own through the config host
	// function; Load refuses settings the plugin does not declare.
	PluginSettings map[string]map[string]any
	// LookupType finds an exchange type by name among every type clients
	// can declare now (the broker's registry): the type_exists host
	// function and the validate-as checks of ABI 1.1 ask it. Nil: no
	// type exists.
	LookupType func(name string) (exchange.Type, bool)
}

func (c *Config) setDefaults() {
	if c.MemoryLimitBytes == 0 {
		c.MemoryLimitBytes = 128 << 20
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 500 * time.Millisecond
	}
	if c.PoolSize <= 0 {
		c.PoolSize = runtime.GOMAXPROCS(0)
	}
	if c.FailureLimit <= 0 {
		c.FailureLimit = 5
	}
	if c.FailureWindow <= 0 {
		c.FailureWindow = time.Minute
	}
	if c.IdleInterval <= 0 {
		c.IdleInterval = time.Second
	}
}

// Host runs plugins: one wazero runtime for all of them, a watchdog that
// interrupts calls past their deadline, and a janitor that gives idle
// instances their warren_idle call.
type Host struct {
	cfg Config
	rt  wazero.Runtime // compiles the modules that are loaded
	// inspectRT interprets the modules that are only inspected: a few
	// calls do not repay the compiler, which takes ten times as long.
	inspectRT wazero.Runtime
	started   time.Time
	log       zerolog.Logger

	mu       lockorder.Mutex[lockorder.PluginHost]
	plugins  map[string]*Plugin
	closed   bool
	settings map[string]map[string]any // Configure's, over cfg.PluginSettings

	instMu    lockorder.RWMutex[lockorder.PluginInstances]
	instances map[*instance]struct{}

	stop chan struct{}
	wg   sync.WaitGroup
}

// New starts a host: its runtimes, its watchdog and its janitor.
func New(cfg Config) (*Host, error) {
	cfg.setDefaults()
	ctx := context.Background()
	h := &Host{
		cfg:       cfg,
		started:   time.Now(),
		log:       cfg.Logger.With().Str("component", "plugins").Logger(),
		plugins:   make(map[string]*Plugin),
		instances: make(map[*instance]struct{}),
		stop:      make(chan struct{}),
	}
	compiler := wazero.NewRuntimeConfigCompiler()
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("plugins: compilation cache: %w", err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugins: compilation cache: %w", err)
		}
		compiler = compiler.WithCompilationCache(cache)
	}
	var err error
	if h.rt, err = h.newRuntime(ctx, compiler); err != nil {
		return nil, err
	}
	if h.inspectRT, err = h.newRuntime(ctx, wazero.NewRuntimeConfigInterpreter()); err != nil {
		h.rt.Close(ctx)
		return nil, err
	}
	h.wg.Add(2)
	go h.watchdog()
	go h.janitor()
	return h, nil
}

// newRuntime makes a runtime of rc with the memory limit, WASI and the
// host functions every module imports.
func (h *Host) newRuntime(ctx context.Context, rc wazero.RuntimeConfig) (wazero.Runtime, error) {
	rc = rc.WithMemoryLimitPages(uint32(min(h.cfg.MemoryLimitBytes>>16, 65536))).
		WithDebugInfoEnabled(false)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("plugins: WASI: %w", err)
	}
	if err := h.instantiateHostModule(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("plugins: host functions: %w", err)
	}
	return rt, nil
}

// Errors of Load and Inspect, wrapped with what went wrong.
var (
	errNotPlugin   = errors.New("not a Warren plugin")
	errABIVersion  = errors.New("routing ABI version not supported")
	errDescription = errors.New("invalid plugin description")
	errSettings    = errors.New("invalid plugin settings")
	errLoaded      = errors.New("plugin already loaded")
	errHostClosed  = errors.New("plugin host closed")
)

// Load compiles a module (from the compilation cache when it is there),
// checks its imports, ABI version, exports and description, instantiates
// it once and keeps it under name. The description must name the plugin
// name too. The plugin's types are not registered anywhere: see Register.
func (h *Host) Load(ctx context.Context, name string, wasm []byte) (*Plugin, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errHostClosed
	}
	if _, dup := h.plugins[name]; dup {
		h.mu.Unlock()
		return nil, fmt.Errorf("plugins: %w: %s", errLoaded, name)
	}
	h.plugins[name] = nil // reserve the name while loading
	h.mu.Unlock()

	p, err := h.load(ctx, h.rt, name, wasm)
	h.mu.Lock()
	if err != nil || h.closed {
		delete(h.plugins, name)
	} else {
		h.plugins[name] = p
	}
	closed := h.closed
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("plugins: loading %s: %w", name, err)
	}
	if closed {
		p.disable("host closed")
		return nil, errHostClosed
	}
	h.log.Info().Str("plugin", name).Str("version", p.desc.Version).Strs("types", p.desc.Types).
		Int("bytes", len(wasm)).Msg("plugin loaded")
	return p, nil
}

// Inspect loads a module as Load does and describes it, then lets it go: a
// listing of the plugin directory can show what a plugin that is not
// enabled would provide. With the compilation cache warm it costs an
// instantiation (milliseconds for a Go guest).
func (h *Host) Inspect(ctx context.Context, name string, wasm []byte) (PluginInfo, error) {
	p, err := h.load(ctx, h.inspectRT, name, wasm)
	if err != nil {
		return PluginInfo{}, fmt.Errorf("plugins: inspecting %s: %w", name, err)
	}
	info := p.Info()
	p.disable("inspected only")
	p.pool.waitClosed(time.Now().Add(2 * h.cfg.CallTimeout))
	p.compiled.Close(ctx)
	info.Instances = 0
	info.Disabled = ""
	return info, nil
}

// load compiles wasm in rt, instantiates it once and checks what it
// says of itself.
func (h *Host) load(ctx context.Context, rt wazero.Runtime, name string, wasm []byte) (*Plugin, error) {
	patched, err := wasmpatch.Patch(wasm, interruptExport)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotPlugin, err)
	}
	compiled, err := rt.CompileModule(ctx, patched.Wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotPlugin, err)
	}
	p := &Plugin{
		h:            h,
		name:         name,
		rt:           rt,
		compiled:     compiled,
		size:         len(wasm),
		hash:         sha256.Sum256(wasm),
		loaded:       time.Now(),
		log:          h.log.With().Str("plugin", name).Logger(),
		exchanges:    make(map[uint32]*exchangeRecord),
		viaNames:     make(map[string]string),
		routeLatency: newRouteLatency(name),
	}
	p.pool = newPool(p, h.cfg.PoolSize)
	fail := func(err error) (*Plugin, error) {
		compiled.Close(ctx)
		return nil, err
	}
	if err := checkImports(compiled); err != nil {
		return fail(err)
	}
	exports := compiled.ExportedFunctions()
	if err := checkSignature(exports, abi.ExportVersion, nil, []api.ValueType{api.ValueTypeI32}); err != nil {
		return fail(err)
	}
	values := h.settingsOf(name)
	enc, err := encodeSettings(values)
	if err != nil {
		return fail(err)
	}
	p.settings.Store(&enc)
	p.settingValues = values

	in, err := p.newInstance()
	if err != nil {
		return fail(err)
	}
	fail = func(err error) (*Plugin, error) {
		in.close()
		compiled.Close(ctx)
		return nil, err
	}
	v, err := in.version()
	if err != nil {
		if _, command := compiled.ExportedFunctions()["_start"]; command {
			return fail(fmt.Errorf("%w: %v: the module is a WASI command (it exports _start), and a plugin must be a reactor, "+
				"whose exports work without a main; build a Go plugin with "+
				"`GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o %s.wasm .`, a Rust one as a cdylib", errNotPlugin, err, name))
		}
		return fail(err)
	}
	major, minor := v>>16, v&0xffff
	if major != abi.Major || minor > abi.Minor {
		return fail(fmt.Errorf("%w: the module speaks routing ABI v%d.%d, this broker speaks v%d.%d",
			errABIVersion, major, minor, abi.Major, abi.Minor))
	}
	p.abiMinor = minor
	if err := checkExports(exports); err != nil {
		return fail(err)
	}
	o, err := in.run(fnDescribe, nil)
	if err != nil {
		return fail(err)
	}
	if o.Status != abi.StatusOK {
		return fail(fmt.Errorf("%w: describe answered %d %s", errDescription, o.Code, o.Text))
	}
	if p.desc, err = abi.ReadDescription(o.Payload); err != nil {
		return fail(fmt.Errorf("%w: %v", errDescription, err))
	}
	if err := p.checkDescription(); err != nil {
		return fail(err)
	}
	if err := checkSettings(p.desc.Settings, values); err != nil {
		return fail(err)
	}
	p.ref = &pluginRef{}
	p.ref.cur.Store(p)
	for _, t := range p.desc.Types {
		p.types = append(p.types, &exchangeType{ref: p.ref, name: t})
	}
	p.pool.seed(in)
	return p, nil
}

// checkImports allows WASI and this ABI's host functions; importing
// another version of the host functions names both versions.
func checkImports(cm wazero.CompiledModule) error {
	for _, f := range cm.ImportedFunctions() {
		module, name, _ := f.Import()
		switch {
		case module == abi.ImportModule || module == wasi_snapshot_preview1.ModuleName:
		case module == wasmpatch.ImportModule: // added by Patch, which refuses a module that had it
		case strings.HasPrefix(module, "warren_v"):
			return fmt.Errorf("%w: the module imports host functions %s.%s; this broker provides %s (routing ABI v%d.%d)",
				errABIVersion, module, name, abi.ImportModule, abi.Major, abi.Minor)
		default:
			return fmt.Errorf("%w: the module imports %s.%s; a plugin may import only %s and %s",
				errNotPlugin, module, name, abi.ImportModule, wasi_snapshot_preview1.ModuleName)
		}
	}
	if len(cm.ExportedMemories()) == 0 {
		return fmt.Errorf("%w: the module exports no memory", errNotPlugin)
	}
	return nil
}

func checkSignature(exports map[string]api.FunctionDefinition, name string, params, results []api.ValueType) error {
	f, ok := exports[name]
	if !ok {
		return fmt.Errorf("%w: the module does not export %s", errNotPlugin, name)
	}
	if !slices.Equal(f.ParamTypes(), params) || !slices.Equal(f.ResultTypes(), results) {
		return fmt.Errorf("%w: export %s has signature %v -> %v, the ABI wants %v -> %v",
			errNotPlugin, name, typeNames(f.ParamTypes()), typeNames(f.ResultTypes()), typeNames(params), typeNames(results))
	}
	return nil
}

func checkExports(exports map[string]api.FunctionDefinition) error {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	for fn, name := range fnNames {
		if _, ok := exports[name]; !ok && !fnRequired[fn] {
			continue
		}
		results := []api.ValueType{i64}
		if fn == fnBuffer {
			results = []api.ValueType{i32}
		}
		if err := checkSignature(exports, name, []api.ValueType{i32}, results); err != nil {
			return err
		}
	}
	if f, ok := exports[abi.ExportInitialize]; ok && (len(f.ParamTypes()) > 0 || len(f.ResultTypes()) > 0) {
		return fmt.Errorf("%w: _initialize must take and return nothing", errNotPlugin)
	}
	return nil
}

func typeNames(ts []api.ValueType) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return names
}

func (p *Plugin) checkDescription() error {
	d := &p.desc
	if d.Name != p.name {
		return fmt.Errorf("%w: the module calls itself %q but was loaded as %q", errDescription, d.Name, p.name)
	}
	if d.Version == "" {
		return fmt.Errorf("%w: no version", errDescription)
	}
	if len(d.Types) == 0 {
		return fmt.Errorf("%w: no exchange types", errDescription)
	}
	seen := map[string]bool{}
	for _, t := range d.Types {
		if t == "" || seen[t] {
			return fmt.Errorf("%w: exchange type %q is empty or listed twice", errDescription, t)
		}
		seen[t] = true
	}
	return nil
}

// checkSettings refuses settings the plugin does not declare or of the
// wrong kind, naming the setting.
func checkSettings(declared []abi.Setting, given map[string]any) error {
	kinds := map[string]uint8{}
	var names []string
	for _, s := range declared {
		kinds[s.Name] = s.Kind
		names = append(names, s.Name)
	}
	sort.Strings(names)
	keys := make([]string, 0, len(given))
	for k := range given {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kind, ok := kinds[k]
		if !ok {
			if len(names) == 0 {
				return fmt.Errorf("%w: unknown setting %q: the plugin takes no settings", errSettings, k)
			}
			return fmt.Errorf("%w: unknown setting %q (the plugin knows %s)", errSettings, k, strings.Join(names, ", "))
		}
		if !kindAccepts(kind, given[k]) {
			return fmt.Errorf("%w: setting %q must be %s, not %T", errSettings, k, kindName(kind), given[k])
		}
	}
	return nil
}

func kindAccepts(kind uint8, v any) bool {
	switch kind {
	case abi.SettingBool:
		_, ok := v.(bool)
		return ok
	case abi.SettingString:
		_, ok := v.(string)
		return ok
	case abi.SettingInt:
		switch v.(type) {
		case int, int8, int16, int32, int64, uint8, uint16, uint32:
			return true
		}
		return false
	case abi.SettingFloat:
		switch v.(type) {
		case float32, float64, int, int8, int16, int32, int64, uint8, uint16, uint32:
			return true
		}
		return false
	case abi.SettingArray:
		return v != nil && reflect.TypeOf(v).Kind() == reflect.Slice
	case abi.SettingTable:
		return v != nil && reflect.TypeOf(v).Kind() == reflect.Map
	}
	return true
}

// encodeSettings encodes a plugin's settings as a field table, converting
// what a TOML decoder produces (maps, slices of maps) to table types.
func encodeSettings(s map[string]any) ([]byte, error) {
	if len(s) == 0 {
		return abi.EmptyTable, nil
	}
	t, ok := toTableValue(s).(protocol.Table)
	if !ok {
		return nil, fmt.Errorf("%w: cannot encode settings", errSettings)
	}
	b, err := protocol.AppendTable(nil, t)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errSettings, err)
	}
	return b, nil
}

func toTableValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		t := make(protocol.Table, len(x))
		for k, e := range x {
			t[k] = toTableValue(e)
		}
		return t
	case protocol.Table:
		return toTableValue(map[string]any(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toTableValue(e)
		}
		return out
	case []byte:
		return x
	case int:
		return int64(x)
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = toTableValue(rv.Index(i).Interface())
		}
		return out
	}
	return v
}

// settingsOf returns the settings a plugin loads with: the last
// Configure's, else the configuration's.
func (h *Host) settingsOf(name string) map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.settings[name]; ok {
		return s
	}
	return h.cfg.PluginSettings[name]
}

// Configure replaces a plugin's settings (all of them: a key left out is
// unset) in the running broker. When the plugin is loaded they are checked
// against what it declares and handed to it, which may refuse them; the
// plugin keeps them when it is loaded again (enabled after a disable, or
// upgraded).
func (h *Host) Configure(name string, values map[string]any) error {
	if p, ok := h.plugin(name); ok {
		if err := p.configure(values); err != nil {
			return err
		}
	}
	h.mu.Lock()
	if h.settings == nil {
		h.settings = make(map[string]map[string]any)
	}
	h.settings[name] = values
	h.mu.Unlock()
	return nil
}

// plugin returns the loaded plugin called name.
func (h *Host) plugin(name string) (*Plugin, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.plugins[name]
	return p, p != nil
}

// loadedPlugins lists the loaded plugins by name.
func (h *Host) loadedPlugins() []*Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	ps := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		if p != nil {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].name < ps[j].name })
	return ps
}

// forget drops a closed plugin; its compiled code goes too unless calls
// were still out (then it stays until the runtime closes).
func (h *Host) forget(p *Plugin, idle bool) {
	h.mu.Lock()
	if h.plugins[p.name] == p {
		delete(h.plugins, p.name)
	}
	h.mu.Unlock()
	if idle {
		p.compiled.Close(context.Background())
	} else {
		p.log.Warn().Msg("plugin unloaded with calls still running; its code is kept until the host closes")
	}
}

// Close disables every plugin, waits (up to twice the call timeout) for the
// calls in flight, and releases the runtime.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		if p != nil {
			ps = append(ps, p)
		}
	}
	h.mu.Unlock()
	for _, p := range ps {
		p.disable("host closed")
	}
	deadline := time.Now().Add(2 * h.cfg.CallTimeout)
	for _, p := range ps {
		if !p.pool.waitClosed(deadline) {
			h.log.Warn().Str("plugin", p.name).Msg("closing the plugin host with calls still running")
		}
	}
	close(h.stop)
	h.wg.Wait()
	return errors.Join(h.rt.Close(ctx), h.inspectRT.Close(ctx))
}

// ---- watchdog and janitor ----

func (h *Host) watch(in *instance) {
	h.instMu.Lock()
	h.instances[in] = struct{}{}
	h.instMu.Unlock()
}

func (h *Host) unwatch(in *instance) {
	h.instMu.Lock()
	delete(h.instances, in)
	h.instMu.Unlock()
}

// watchdogTicks is how many watchdog periods make a call timeout.
const watchdogTicks = 4

// watchdog interrupts calls that run past CallTimeout. Calls do not tell it
// when they start (that would cost a clock read per call); it samples each
// instance's call counter every CallTimeout/4 instead, and a call seen
// running at watchdogTicks samples in a row, always the same call, is
// interrupted: wasmpatch's check calls yield at the next function entry or
// loop iteration, and yield fails the call.
func (h *Host) watchdog() {
	defer h.wg.Done()
	t := time.NewTicker(max(h.cfg.CallTimeout/watchdogTicks, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		h.instMu.RLock()
		for in := range h.instances {
			s := in.seq.Load()
			if s&1 == 0 || s != in.wdSeq {
				in.wdSeq, in.wdTicks = s, 0
				continue
			}
			in.wdTicks++
			if in.wdTicks == watchdogTicks && !in.interrupted.Load() {
				// Marked only: the module's own checks call yield within
				// wasmpatch.Budget of them, and yield fails the call.
				// Zeroing the budget global from here, to be quicker by
				// those few microseconds, raced the module's own writes
				// of it (the race detector found it).
				in.interrupted.Store(true)
				in.p.log.Warn().Dur("timeout", h.cfg.CallTimeout).Msg("interrupting a plugin call past its deadline")
			}
		}
		h.instMu.RUnlock()
	}
}

// janitor gives used instances their warren_idle call, off the hot path.
func (h *Host) janitor() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.IdleInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		for _, p := range h.loadedPlugins() {
			if d, _ := p.disabled(); !d {
				p.pool.idle()
			}
		}
	}
}
