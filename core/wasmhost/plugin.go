package wasmhost

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/sdk/abi"
)

// Plugin is a loaded module: its description, its instance pool and the
// routing state of every exchange of its types.
type Plugin struct {
	h        *Host
	name     string
	desc     abi.Description
	abiMinor uint32
	rt       wazero.Runtime // the host's compiler, or its interpreter for an inspection
	compiled wazero.CompiledModule
	// settings are the plugin's settings in force, as an encoded field
	// table (the config host function answers it from any instance), and
	// as given, for listings.
	settings      atomic.Pointer[[]byte]
	settingValues map[string]any // under stateMu
	size          int
	hash          [32]byte // sha256 of the module as given (before patching)
	loaded        time.Time
	types         []*exchangeType
	ref           *pluginRef // shared with the versions before and after a live upgrade
	log           zerolog.Logger

	pool *pool

	// mutMu serializes the mutations of exchanges (create, delete, bind,
	// unbind, policy): each runs on one instance and then enters the log.
	mutMu lockorder.Mutex[lockorder.PluginMutations]

	// stateMu guards the op log, the exchanges' records and the id
	// counter; epoch is written under it and read anywhere.
	stateMu   lockorder.Mutex[lockorder.PluginState]
	ops       []op   // ops after logBase, in epoch order
	logBase   uint64 // epoch of the op before ops[0]
	epoch     atomic.Uint64
	exchanges map[uint32]*exchangeRecord
	bindOrder uint64   // counts bindings added, for bindingRecord.order
	nextID    uint32   // ids are small and reused, so guests can index a slice
	freeIDs   []uint32 // ids of deleted exchanges, free once the delete is logged

	disabledWhy atomic.Pointer[string] // the reason, once disabled

	failMu   lockorder.Mutex[lockorder.PluginFailures]
	failures []time.Time

	logMu     lockorder.Mutex[lockorder.PluginLog]
	logTokens float64
	logLast   time.Time
	logDrop   int

	viaMu    lockorder.RWMutex[lockorder.PluginVia]
	viaNames map[string]string

	// routeCalls counts route calls; routeLatency times a sample of them
	// (see Route); routeFailures counts those that failed in the plugin
	// (a trap, the deadline, a malformed answer), not its deliberate
	// refusals.
	routeCalls    atomic.Uint64
	routeLatency  prometheus.Histogram
	routeFailures atomic.Uint64
}

// pluginRef is what a plugin's exchange types and routers hold: the
// version of the plugin serving them now. Mutations of exchanges (create,
// bind, unbind, policy, delete) hold mu shared for their whole course, so
// an upgrade, holding it exclusively, sees a state no mutation is halfway
// through and switches cur when none can start on the old version. Routes
// and validations take no lock: they read cur once and finish on that
// version (the old one lives until its calls in flight are done).
type pluginRef struct {
	mu  lockorder.RWMutex[lockorder.PluginRef]
	cur atomic.Pointer[Plugin]
}

// routeTimingEvery is how many route calls on an instance go per timed
// one (the first of each run is timed).
const routeTimingEvery = 64

// RouteMetrics are a plugin's route figures, for /metrics.
type RouteMetrics struct {
	// Latency is the histogram of route call durations in seconds,
	// labelled with the plugin's name, of one call in routeTimingEvery
	// on each instance.
	Latency  prometheus.Histogram
	Calls    uint64
	Failures uint64
}

// RouteMetrics returns the plugin's route figures.
func (p *Plugin) RouteMetrics() RouteMetrics {
	return RouteMetrics{Latency: p.routeLatency, Calls: p.routeCalls.Load(), Failures: p.routeFailures.Load()}
}

// routeBuckets span a plugin's route call: about a microsecond for a small
// module to the 500 ms deadline.
var routeBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2, 0.1, 0.5}

func newRouteLatency(plugin string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:        "warren_plugin_route_duration_seconds",
		Help:        "Time taken by a plugin exchange type's route calls, one in 64 on each instance sampled.",
		ConstLabels: prometheus.Labels{"plugin": plugin},
		Buckets:     routeBuckets,
	})
}

// op is one mutation in the log: the export and its encoded input. Inputs
// are never modified once logged, so a log slice can be read without a lock.
type op struct {
	fn    int
	in    []byte
	epoch uint64
}

// exchangeRecord is what a fresh instance needs to rebuild one exchange.
type exchangeRecord struct {
	create   []byte
	policy   []byte // the policy_changed input in force; nil when none
	bindings map[uint32]bindingRecord
}

type bindingRecord struct {
	order uint64 // when it was added: replay follows it
	in    []byte
}

// PluginInfo describes a loaded plugin for listings.
type PluginInfo struct {
	Name      string        `json:"name"`
	Version   string        `json:"version"`
	ABI       string        `json:"abi"`  // the module's ABI version, "1.1"
	Hash      string        `json:"hash"` // sha256 of the module, hex
	Types     []string      `json:"types"`
	Features  []string      `json:"features"` // "headers", "properties", "body"
	Settings  []SettingInfo `json:"settings,omitempty"`
	Size      int           `json:"size"`      // module bytes
	Instances int           `json:"instances"` // live instances now
	Exchanges int           `json:"exchanges"` // exchanges of its types (routers, including via routers)
	Disabled  string        `json:"disabled,omitempty"`
	Loaded    time.Time     `json:"loaded"`
}

// SettingInfo is a setting the plugin declares, and its value now.
type SettingInfo struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // bool, int, float, string, array, table, any
	Doc   string `json:"doc,omitempty"`
	Value any    `json:"value,omitempty"` // absent when not set
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return p.name }

// Info describes the plugin.
func (p *Plugin) Info() PluginInfo {
	info := PluginInfo{
		Name:      p.name,
		Version:   p.desc.Version,
		ABI:       fmt.Sprintf("%d.%d", abi.Major, p.abiMinor),
		Hash:      hex.EncodeToString(p.hash[:]),
		Types:     slices.Clone(p.desc.Types),
		Size:      p.size,
		Instances: p.pool.count(),
		Exchanges: p.Exchanges(),
		Loaded:    p.loaded,
	}
	info.Features = []string{}
	for _, f := range abi.FeatureNames {
		if p.desc.Features&f.Bit != 0 {
			info.Features = append(info.Features, f.Name)
		}
	}
	p.stateMu.Lock()
	for _, s := range p.desc.Settings {
		info.Settings = append(info.Settings, SettingInfo{Name: s.Name, Kind: kindName(s.Kind), Doc: s.Doc, Value: p.settingValues[s.Name]})
	}
	p.stateMu.Unlock()
	if r := p.disabledWhy.Load(); r != nil {
		info.Disabled = *r
	}
	return info
}

// Types returns the exchange types the plugin provides, in the order its
// description lists them.
func (p *Plugin) Types() []exchange.Type {
	ts := make([]exchange.Type, len(p.types))
	for i, t := range p.types {
		ts[i] = t
	}
	return ts
}

// Register adds every type of the plugin to reg, or none: if one name is
// taken, the ones already added are removed again.
func (p *Plugin) Register(reg *exchange.Registry) error {
	for i, t := range p.types {
		if err := reg.Register(t); err != nil {
			for _, u := range p.types[:i] {
				reg.Unregister(u.name)
			}
			return fmt.Errorf("plugin %s: %w", p.name, err)
		}
	}
	return nil
}

// Unregister removes the plugin's types from reg.
func (p *Plugin) Unregister(reg *exchange.Registry) {
	for _, t := range p.types {
		reg.Unregister(t.name)
	}
}

// Exchanges is the number of live routers of the plugin's types, so the
// broker can refuse to disable a plugin in use.
func (p *Plugin) Exchanges() int {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	return len(p.exchanges)
}

// disabled reports whether the plugin is disabled, and why.
func (p *Plugin) disabled() (bool, string) {
	if r := p.disabledWhy.Load(); r != nil {
		return true, *r
	}
	return false, ""
}

// disable stops the plugin: its instances are released, its routers refuse
// to route with 406 and its types refuse new exchanges. It does not call
// OnDisabled (that reports the host's own decisions) and does not remove
// the plugin from the host (Close does). Disabling twice keeps the first
// reason.
func (p *Plugin) disable(reason string) {
	if !p.disabledWhy.CompareAndSwap(nil, &reason) {
		return
	}
	p.pool.close()
}

// Close disables the plugin, waits for its calls in flight (at most twice
// the call timeout) and forgets it: a later Load of the same name starts
// afresh.
func (p *Plugin) Close() {
	p.disable("unloaded")
	done := p.pool.waitClosed(time.Now().Add(2 * p.h.cfg.CallTimeout))
	p.h.forget(p, done)
}

// disableForFailures is the host's own decision, reported to OnDisabled.
func (p *Plugin) disableForFailures(reason string) {
	if !p.disabledWhy.CompareAndSwap(nil, &reason) {
		return
	}
	p.log.Error().Str("reason", reason).Msg("plugin disabled")
	p.pool.close()
	if f := p.h.cfg.OnDisabled; f != nil {
		go f(p.name, reason)
	}
}

// recordFailure logs a failure and disables the plugin when it has failed
// FailureLimit times within FailureWindow.
func (p *Plugin) recordFailure(err error) {
	if errors.Is(err, errClosed) {
		return
	}
	p.log.Warn().Err(err).Msg("plugin failure")
	now := time.Now()
	p.failMu.Lock()
	cut := 0
	for cut < len(p.failures) && now.Sub(p.failures[cut]) > p.h.cfg.FailureWindow {
		cut++
	}
	p.failures = append(p.failures[cut:], now)
	n := len(p.failures)
	p.failMu.Unlock()
	if n >= p.h.cfg.FailureLimit {
		p.disableForFailures(fmt.Sprintf("%d failures within %v, the last: %v", n, p.h.cfg.FailureWindow, err))
	}
}

// unavailable is the error of a disabled plugin's types and routers.
func (p *Plugin) unavailable(typ string) error {
	_, why := p.disabled()
	return reply.PreconditionFailed("exchange type '%s' is not available: plugin '%s' is disabled (%s)", typ, p.name, why)
}

// callError turns an error of a plugin call into what the client sees.
func (p *Plugin) callError(typ, what string, err error) error {
	var f *failure
	var big errTooLarge
	switch {
	case errors.Is(err, errClosed):
		return p.unavailable(typ)
	case errors.As(err, &big):
		return reply.Internal("plugin '%s' (exchange type '%s') could not %s: %v", p.name, typ, what, err)
	case errors.As(err, &f):
		return reply.Internal("plugin '%s' (exchange type '%s') failed to %s: %v", p.name, typ, what, f)
	}
	return reply.Internal("plugin '%s' (exchange type '%s') failed to %s: %v", p.name, typ, what, err)
}

// replyCodes are the codes a plugin may answer with; they close the
// channel, except 541 which closes the connection as it always does.
var replyCodes = map[uint16]bool{
	protocol.AccessRefused: true, protocol.NotFound: true, protocol.ResourceLocked: true,
	protocol.PreconditionFailed: true, protocol.InternalError: true,
}

// replyOf turns an ERROR output into the reply the client sees.
func (p *Plugin) replyOf(o abi.Output) error {
	if !replyCodes[o.Code] {
		return reply.Internal("plugin '%s' answered reply code %d, which plugins may not use: %s", p.name, o.Code, o.Text)
	}
	return reply.New(o.Code, "%s", o.Text)
}

// takeID reserves an exchange id: a freed one if any, else a new one.
func (p *Plugin) takeID() uint32 {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if n := len(p.freeIDs); n > 0 {
		id := p.freeIDs[n-1]
		p.freeIDs = p.freeIDs[:n-1]
		return id
	}
	p.nextID++
	return p.nextID
}

// giveID returns an id whose create failed.
func (p *Plugin) giveID(id uint32) {
	p.stateMu.Lock()
	p.freeIDs = append(p.freeIDs, id)
	p.stateMu.Unlock()
}

// configure changes the plugin's settings: checked against what it
// declares, handed to one instance (warren_settings_changed, which may
// refuse), then logged for the others as a mutation. The config host
// function answers the new settings from then on.
func (p *Plugin) configure(values map[string]any) error {
	if err := checkSettings(p.desc.Settings, values); err != nil {
		return err
	}
	enc, err := encodeSettings(values)
	if err != nil {
		return err
	}
	return p.mutate(p.desc.Types[0], "change its settings", fnSettingsChanged, enc, func() {
		p.settings.Store(&enc)
		p.settingValues = values
	})
}

// ---- the op log ----

// catchUp applies the ops logged since the instance's epoch.
func (p *Plugin) catchUp(in *instance) error {
	for {
		p.stateMu.Lock()
		e := in.epoch.Load()
		if e < p.logBase {
			p.stateMu.Unlock()
			return &failure{kind: "replay", detail: "instance fell behind the op log"}
		}
		pending := p.ops[e-p.logBase:]
		p.stateMu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		for _, o := range pending {
			if err := p.apply(in, o.fn, o.in); err != nil {
				return err
			}
			in.epoch.Store(o.epoch)
		}
	}
}

// apply runs a logged or replayed op; refusing one the plugin accepted
// before is a failure (the plugin is not deterministic).
func (p *Plugin) apply(in *instance, fn int, input []byte) error {
	o, err := in.run(fn, input)
	if err != nil {
		return err
	}
	if o.Status == abi.StatusError {
		return &failure{export: fnNames[fn], kind: "replay", detail: fmt.Sprintf("refused an operation it accepted before: %d %s", o.Code, o.Text)}
	}
	return nil
}

// freshInstance builds an instance and replays the current state into it:
// every exchange (by id) with its policy, then its bindings in the order
// they were added, which is their Seq order since core adds bindings in
// Seq order. Replaying in arrival order rather than sorting by Seq keeps a
// fresh instance identical to the long-lived ones even if that promise
// broke. Then the ops logged meanwhile.
func (p *Plugin) freshInstance() (*instance, error) {
	in, err := p.newInstance()
	if err != nil {
		return nil, err
	}
	p.stateMu.Lock()
	replay := p.snapshot()
	in.epoch.Store(p.epoch.Load())
	p.pool.add(in)
	p.stateMu.Unlock()
	for _, o := range replay {
		if err = p.apply(in, o.fn, o.in); err != nil {
			break
		}
	}
	if err == nil {
		err = p.catchUp(in)
	}
	if err != nil {
		p.pool.mu.Lock()
		delete(p.pool.all, in)
		p.pool.mu.Unlock()
		in.close()
		return nil, err
	}
	return in, nil
}

// snapshot lists the ops that rebuild the current state; stateMu is held.
func (p *Plugin) snapshot() []op {
	ids := make([]uint32, 0, len(p.exchanges))
	for id := range p.exchanges {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var ops []op
	for _, id := range ids {
		x := p.exchanges[id]
		ops = append(ops, op{fn: fnCreate, in: x.create})
		if x.policy != nil {
			ops = append(ops, op{fn: fnPolicyChanged, in: x.policy})
		}
		bs := make([]bindingRecord, 0, len(x.bindings))
		for _, b := range x.bindings {
			bs = append(bs, b)
		}
		sort.Slice(bs, func(i, j int) bool { return bs[i].order < bs[j].order })
		for _, b := range bs {
			ops = append(ops, op{fn: fnAddBinding, in: b.in})
		}
	}
	return ops
}

// mutate runs a mutation on one instance and, when the plugin accepts it,
// logs it for the others and records it with commit (called under stateMu).
func (p *Plugin) mutate(typ, what string, fn int, input []byte, commit func()) error {
	p.mutMu.Lock()
	defer p.mutMu.Unlock()
	in, _, err := p.runOnce(typ, what, fn, input)
	if in == nil {
		return err
	}
	p.stateMu.Lock()
	e := p.epoch.Load() + 1
	p.ops = append(p.ops, op{fn: fn, in: input, epoch: e})
	if commit != nil {
		commit()
	}
	p.epoch.Store(e)
	in.epoch.Store(e)
	p.trimLog()
	p.stateMu.Unlock()
	p.pool.put(in)
	return nil
}

// trimLog drops the ops every live instance has applied; stateMu is held.
func (p *Plugin) trimLog() {
	if len(p.ops) < 64 {
		return
	}
	low, ok := p.pool.minEpoch()
	if !ok {
		low = p.epoch.Load()
	}
	if low <= p.logBase {
		return
	}
	n := int(low - p.logBase)
	// A fresh slice, never a copy within the old array: catchUp may be
	// reading it.
	p.ops = append([]op(nil), p.ops[n:]...)
	p.logBase = low
}

// runOnce takes an instance and runs fn on it. When the call succeeded the
// instance is returned still held, with its output; otherwise the instance
// is given back (or discarded after a failure) and err is what the caller
// answers: the plugin's own reply, or the failure as 541.
func (p *Plugin) runOnce(typ, what string, fn int, input []byte) (*instance, abi.Output, error) {
	if d, _ := p.disabled(); d {
		return nil, abi.Output{}, p.unavailable(typ)
	}
	in, err := p.pool.get()
	if err != nil {
		return nil, abi.Output{}, p.callError(typ, what, err)
	}
	o, err := in.run(fn, input)
	if err != nil {
		p.pool.discard(in, err)
		return nil, abi.Output{}, p.callError(typ, what, err)
	}
	if o.Status == abi.StatusError {
		p.pool.put(in)
		return nil, abi.Output{}, p.replyOf(o)
	}
	return in, o, nil
}

// call runs a call that changes nothing (validation, info) on any instance.
// The output is decoded by read while the instance is still held.
func (p *Plugin) call(typ, what string, fn int, input []byte, read func(abi.Output) error) error {
	in, o, err := p.runOnce(typ, what, fn, input)
	if in == nil {
		return err
	}
	if read != nil {
		if err := read(o); err != nil {
			p.pool.discard(in, err)
			return p.callError(typ, what, err)
		}
	}
	p.pool.put(in)
	return nil
}

// ---- logging ----

// logLine logs a line from the plugin (log host function, stdout, stderr),
// at most 50 lines a second after a burst of 200, so a chatty plugin cannot
// flood the broker's log.
func (p *Plugin) logLine(level int, msg []byte) {
	p.logMu.Lock()
	now := time.Now()
	p.logTokens = min(200, p.logTokens+now.Sub(p.logLast).Seconds()*50)
	p.logLast = now
	if p.logTokens < 1 {
		p.logDrop++
		p.logMu.Unlock()
		return
	}
	p.logTokens--
	dropped := p.logDrop
	p.logDrop = 0
	p.logMu.Unlock()

	var ev *zerolog.Event
	switch level {
	case abi.LogDebug:
		ev = p.log.Debug()
	case abi.LogInfo:
		ev = p.log.Info()
	case abi.LogWarn:
		ev = p.log.Warn()
	default:
		ev = p.log.Error()
	}
	if dropped > 0 {
		ev = ev.Int("dropped", dropped)
	}
	ev.Str("from", "plugin").Msg(strings.TrimRight(string(msg), "\n"))
}

// intern returns the via type name as a string without allocating for the
// names seen before.
func (p *Plugin) intern(b []byte) string {
	p.viaMu.RLock()
	s, ok := p.viaNames[string(b)]
	p.viaMu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	p.viaMu.Lock()
	if len(p.viaNames) < 64 {
		p.viaNames[s] = s
	}
	p.viaMu.Unlock()
	return s
}

func kindName(k uint8) string {
	switch k {
	case abi.SettingBool:
		return "bool"
	case abi.SettingInt:
		return "int"
	case abi.SettingFloat:
		return "float"
	case abi.SettingString:
		return "string"
	case abi.SettingArray:
		return "array"
	case abi.SettingTable:
		return "table"
	}
	return "any"
}
