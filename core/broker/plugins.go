package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/wasmhost"
	"github.com/warrenmq/warren/storage"
)

// pluginManager enables and disables exchange-type plugins in the running
// broker. A plugin is available when its module is shipped with Warren or
// sits in the plugin directory as NAME.wasm (the directory wins, so a newer
// build replaces a shipped one); it is enabled when its types are
// registered. The enabled set is stored, and brought back at start
// together with broker.toml's plugins.enabled.
//
// Enabling loads the module, registers its types and rebuilds the routers
// of existing exchanges of those types from their bindings. Disabling
// unregisters the types: exchanges of them stay declared, keep their
// bindings and queues keep their messages, but they refuse to route (406)
// until the plugin is enabled again. Disabling a plugin whose types have
// exchanges needs force.
type pluginManager struct {
	b       *Broker
	host    *wasmhost.Host
	shipped map[string][]byte

	mu        lockorder.Mutex[lockorder.BrokerPlugins] // serializes enable and disable
	enabled   map[string]*wasmhost.Plugin
	failed    map[string]string                // plugins the host disabled, and why
	inspected map[[32]byte]wasmhost.PluginInfo // descriptions of modules not enabled, by content

	// Settings (plugin_settings.go): broker.toml's, and the overrides set
	// in the running broker, by plugin.
	fileSettings map[string]map[string]any
	overrides    map[string]map[string]any

	// The cluster's committed plugin changes, made in order by a
	// goroutine started on the first (see EnablePlugin).
	followOnce sync.Once
	changes    chan pluginChange
}

func (b *Broker) startPlugins(shipped map[string][]byte) error {
	pm := &pluginManager{b: b, shipped: shipped, enabled: make(map[string]*wasmhost.Plugin),
		failed: make(map[string]string), inspected: make(map[[32]byte]wasmhost.PluginInfo),
		fileSettings: b.cfg.Plugins.Settings}
	if err := pm.loadSettingOverrides(); err != nil {
		return err
	}
	host, err := wasmhost.New(wasmhost.Config{
		CacheDir:       b.cfg.PluginCacheDir(),
		Logger:         b.log.With().Str("component", "plugins").Logger(),
		PluginSettings: pm.allSettings(),
		OnDisabled:     pm.onDisabled,
		LookupType:     b.types.Lookup,
	})
	if err != nil {
		return fmt.Errorf("plugin host: %w", err)
	}
	pm.host = host
	b.plugins = pm

	want := map[string]bool{}
	recs, err := b.store.Meta(storage.KindPlugin, "")
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, err := readPluginRecord(r.Rec); err != nil {
			return fmt.Errorf("enabled plugin '%s': %w", r.Name, err)
		}
		want[r.Name] = true
	}
	for _, name := range b.cfg.Plugins.Enabled {
		want[name] = true
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := pm.enable(name, false); err != nil {
			// A plugin that cannot be enabled leaves its exchanges refusing
			// to route; the broker still starts.
			b.log.Error().Err(err).Str("plugin", name).Msg("plugin not enabled at start")
		}
	}
	return nil
}

// module returns a plugin's module bytes and where they came from.
func (pm *pluginManager) module(name string) ([]byte, string, error) {
	if strings.ContainsAny(name, `/\`) || name == "" || strings.HasPrefix(name, ".") {
		return nil, "", reply.PreconditionFailed("invalid plugin name '%s'", name)
	}
	if dir := pm.b.cfg.PluginDir(); dir != "" {
		path := filepath.Join(dir, name+".wasm")
		if wasm, err := os.ReadFile(path); err == nil {
			return wasm, path, nil
		} else if !os.IsNotExist(err) {
			return nil, "", reply.PreconditionFailed("reading %s: %v", path, err)
		}
	}
	if wasm, ok := pm.shipped[name]; ok {
		return wasm, "shipped", nil
	}
	return nil, "", reply.NotFound("no plugin '%s' (neither shipped nor %s)", name, filepath.Join(pm.b.cfg.PluginDir(), name+".wasm"))
}

// Enable loads a plugin and registers its types. Enabling an enabled one
// whose module changed (a new file in the plugin directory) upgrades it
// live; with the same module it is a no-op.
func (pm *pluginManager) Enable(name string) error { return pm.enable(name, true) }

func (pm *pluginManager) enable(name string, persist bool) error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	if p, ok := pm.enabled[name]; ok {
		return pm.upgrade(p)
	}
	wasm, source, err := pm.module(name)
	if err != nil {
		return err
	}
	p, err := pm.host.Load(context.Background(), name, wasm)
	if err != nil {
		return reply.PreconditionFailed("plugin '%s' (%s): %v", name, source, err)
	}
	if err := p.Register(pm.b.types); err != nil {
		p.Close()
		return reply.PreconditionFailed("plugin '%s': %v", name, err)
	}
	if persist {
		if err := pm.b.store.PutMeta(storage.KindPlugin, "", name, pluginRecord{Source: source}.Table()); err != nil {
			p.Unregister(pm.b.types)
			p.Close()
			return reply.Internal("could not store the enabled plugin: %v", err)
		}
	}
	pm.enabled[name] = p
	delete(pm.failed, name)
	info := p.Info()
	for _, t := range info.Types {
		pm.typeBack(t)
	}
	pm.b.log.Info().Str("plugin", name).Str("version", info.Version).Strs("types", info.Types).Str("source", source).Msg("plugin enabled")
	return nil
}

// upgrade replaces an enabled plugin by its module as it is now, if that
// changed: the host switches every exchange over without a publish
// failing; a module that cannot take over leaves the running one, and the
// error says why. pm.mu is held.
func (pm *pluginManager) upgrade(old *wasmhost.Plugin) error {
	name := old.Name()
	wasm, source, err := pm.module(name)
	if err != nil {
		return err
	}
	was := old.Info()
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) == was.Hash {
		return nil
	}
	next, err := pm.host.Upgrade(context.Background(), old, wasm)
	if err != nil {
		return reply.PreconditionFailed("plugin '%s' (%s): version %s keeps running: %v", name, source, was.Version, err)
	}
	now := next.Info()
	// Types the new version added are registered, and exchanges of them
	// declared while the plugin lacked them start routing; types it
	// dropped (no exchange used them, or Upgrade refused) go.
	for _, t := range next.Types() {
		if !slices.Contains(was.Types, t.Name()) {
			if err := pm.b.types.Register(t); err != nil {
				pm.b.log.Warn().Err(err).Str("plugin", name).Str("type", t.Name()).Msg("a type the upgraded plugin added could not be registered")
				continue
			}
			pm.typeBack(t.Name())
		}
	}
	for _, t := range was.Types {
		if !slices.Contains(now.Types, t) {
			pm.b.types.Unregister(t)
		}
	}
	pm.enabled[name] = next
	if err := pm.b.store.PutMeta(storage.KindPlugin, "", name, pluginRecord{Source: source}.Table()); err != nil {
		pm.b.log.Warn().Err(err).Str("plugin", name).Msg("could not store the upgraded plugin's source")
	}
	pm.b.log.Info().Str("plugin", name).Str("from", was.Version).Str("to", now.Version).Str("source", source).Msg("plugin upgraded")
	return nil
}

// typeBack has every vhost rebuild the routers of exchanges of type t;
// pm.mu is held.
func (pm *pluginManager) typeBack(t string) {
	for _, vh := range pm.b.VHosts() {
		if v, ok := pm.b.VHost(vh); ok {
			if err := v.TypeBack(t); err != nil {
				pm.b.log.Warn().Err(err).Str("vhost", vh).Str("type", t).Msg("exchanges of the plugin's type could not be rebuilt")
			}
		}
	}
}

// Disable unregisters a plugin's types. With exchanges of those types
// declared it refuses (406) unless force is set.
func (pm *pluginManager) Disable(name string, force bool) error {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	p, err := pm.mayDisable(name, force)
	if p == nil || err != nil {
		return err
	}
	if err := pm.b.store.DeleteMeta(storage.KindPlugin, "", name); err != nil {
		return reply.Internal("could not store the change: %v", err)
	}
	pm.remove(p)
	delete(pm.enabled, name)
	pm.b.log.Info().Str("plugin", name).Bool("forced", force).Msg("plugin disabled")
	return nil
}

// mayDisable checks a disable: the plugin, nil when it is not enabled (a
// disable that changes nothing), or why it may not be disabled; pm.mu is
// held.
func (pm *pluginManager) mayDisable(name string, force bool) (*wasmhost.Plugin, error) {
	p, ok := pm.enabled[name]
	if !ok {
		_, _, err := pm.module(name)
		return nil, err
	}
	if n := p.Exchanges(); n > 0 && !force {
		return nil, reply.PreconditionFailed("plugin '%s' has %d exchange(s) of its types; they would stop routing (disable with force to do it anyway)", name, n)
	}
	return p, nil
}

// remove unregisters p's types and turns its exchanges' routers into
// refusals; pm.mu is held.
func (pm *pluginManager) remove(p *wasmhost.Plugin) {
	p.Unregister(pm.b.types)
	types := p.Info().Types
	for _, vh := range pm.b.VHosts() {
		if v, ok := pm.b.VHost(vh); ok {
			for _, t := range types {
				v.TypeGone(t)
			}
		}
	}
	p.Close()
}

// onDisabled runs when the host gives up on a plugin that keeps failing.
// It stays in the stored enabled set, so a restart tries it again.
func (pm *pluginManager) onDisabled(name, reason string) {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	p, ok := pm.enabled[name]
	if !ok {
		return
	}
	pm.remove(p)
	delete(pm.enabled, name)
	pm.failed[name] = reason
	pm.b.log.Error().Str("plugin", name).Str("reason", reason).Msg("plugin disabled after repeated failures")
}

// PluginStatus is one row of `warrenctl plugins list`.
type PluginStatus struct {
	Name      string   `json:"name"`
	Enabled   bool     `json:"enabled"`
	Version   string   `json:"version,omitempty"`
	Types     []string `json:"types"`
	Source    string   `json:"source"`
	State     string   `json:"state"`
	Exchanges int      `json:"exchanges"`
	// From the module: the routing ABI version it speaks, its features
	// and the sha256 of its bytes (to tell which build is running).
	ABI      string   `json:"abi,omitempty"`
	Features []string `json:"features"`
	Hash     string   `json:"hash,omitempty"`
	// Info is the module's own description (ABI version, features,
	// settings, size, instances), when it could be read.
	Info *wasmhost.PluginInfo `json:"info,omitempty"`
}

// List describes every available or enabled plugin, by name.
func (pm *pluginManager) List() []PluginStatus {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	names := map[string]bool{}
	for n := range pm.shipped {
		names[n] = true
	}
	if dir := pm.b.cfg.PluginDir(); dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*.wasm"))
		for _, f := range files {
			names[strings.TrimSuffix(filepath.Base(f), ".wasm")] = true
		}
	}
	for n := range pm.enabled {
		names[n] = true
	}
	out := make([]PluginStatus, 0, len(names))
	for n := range names {
		st := PluginStatus{Name: n, Types: []string{}, State: "available"}
		if wasm, source, err := pm.module(n); err == nil {
			st.Source = source
			if p, ok := pm.enabled[n]; ok {
				info := p.Info()
				st.Enabled, st.Version, st.Types, st.State, st.Exchanges = true, info.Version, info.Types, "enabled", info.Exchanges
				st.Info = &info
			} else if info, err := pm.inspect(n, wasm); err == nil {
				st.Version, st.Types = info.Version, info.Types
				st.Info = &info
			} else {
				st.State = "invalid: " + err.Error()
			}
		} else if p, ok := pm.enabled[n]; ok {
			info := p.Info()
			st.Enabled, st.Version, st.Types, st.State = true, info.Version, info.Types, "enabled (module file removed)"
			st.Info = &info
		}
		if reason, ok := pm.failed[n]; ok {
			st.State = "disabled after failures: " + reason
		}
		st.Features = []string{}
		if st.Info != nil {
			st.ABI, st.Features, st.Hash = st.Info.ABI, st.Info.Features, st.Info.Hash
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// inspect describes a module that is not enabled, remembering the answer
// by the module's content: a listing should not compile every module each
// time. pm.mu is held.
func (pm *pluginManager) inspect(name string, wasm []byte) (wasmhost.PluginInfo, error) {
	sum := sha256.Sum256(wasm)
	if info, ok := pm.inspected[sum]; ok && info.Name == name {
		return info, nil
	}
	info, err := pm.host.Inspect(context.Background(), name, wasm)
	if err == nil {
		pm.inspected[sum] = info
	}
	return info, err
}

func (pm *pluginManager) close() {
	if pm == nil || pm.host == nil {
		return
	}
	_ = pm.host.Close(context.Background())
}

// EnablePlugin, DisablePlugin and Plugins are the admin API's view.
//
// In a cluster the enabled set is replicated: an enable is checked by
// enabling the plugin here, then proposed; a disable is checked here,
// proposed, then done here. The other nodes follow on a goroutine of
// their own (loading a module takes long enough to stall Raft's loop if
// it ran there), in the order the changes were committed. An exchange of
// a type a node does not have yet is declared there all the same and
// routes once the type arrives.
func (b *Broker) EnablePlugin(name string) error {
	if b.cluster.Load() == nil {
		return b.plugins.Enable(name)
	}
	was := b.plugins.isEnabled(name)
	if err := b.plugins.Enable(name); err != nil {
		return err
	}
	if err := b.propose(changeTable(enablePlugin{Name: name})); err != nil {
		if !was {
			_ = b.plugins.Disable(name, true)
		}
		return err
	}
	return nil
}

func (b *Broker) DisablePlugin(name string, force bool) error {
	if b.cluster.Load() == nil {
		return b.plugins.Disable(name, force)
	}
	pm := b.plugins
	pm.mu.Lock()
	_, err := pm.mayDisable(name, force)
	pm.mu.Unlock()
	if err != nil {
		return err
	}
	if err := b.propose(changeTable(disablePlugin{Name: name})); err != nil {
		return err
	}
	return pm.Disable(name, true)
}

// The replicated plugin changes' ops.
const (
	opEnablePlugin  = "enable_plugin"
	opDisablePlugin = "disable_plugin"
)

func (pm *pluginManager) isEnabled(name string) bool {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	_, ok := pm.enabled[name]
	return ok
}

// pluginChange is a committed enable, disable or change of settings, for
// this node to follow.
type pluginChange struct {
	name     string
	enable   bool
	settings map[string]any // the plugin's overrides, when not nil: a configure
}

// follow queues a committed plugin change; the follower goroutine makes
// them in order. It is called from the cluster's apply and never waits
// for a module to load.
func (pm *pluginManager) follow(c pluginChange) {
	pm.followOnce.Do(func() {
		pm.changes = make(chan pluginChange, 1024)
		pm.b.wg.Add(1)
		go pm.follower()
	})
	select {
	case pm.changes <- c:
	case <-pm.b.stop:
	}
}

func (pm *pluginManager) follower() {
	defer pm.b.wg.Done()
	for {
		select {
		case <-pm.b.stop:
			return
		case c := <-pm.changes:
			var err error
			switch {
			case c.settings != nil:
				pm.mu.Lock()
				err = pm.setOverrides(c.name, c.settings)
				pm.mu.Unlock()
			case c.enable:
				err = pm.Enable(c.name)
			default:
				err = pm.Disable(c.name, true)
			}
			if err != nil {
				pm.b.log.Error().Err(err).Str("plugin", c.name).Bool("enable", c.enable).
					Msg("a plugin change the cluster made could not be made on this node")
			}
		}
	}
}

// storedPlugins names the plugins the store holds enabled.
func (b *Broker) storedPlugins() []string {
	recs, err := b.store.Meta(storage.KindPlugin, "")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Name)
	}
	sort.Strings(names)
	return names
}
func (b *Broker) Plugins() []PluginStatus { return b.plugins.List() }

// EnabledPlugins names the enabled plugins, sorted. Unlike Plugins it
// looks at no module that is not enabled (describing one means compiling
// it), so it is cheap enough for every /api/nodes.
func (b *Broker) EnabledPlugins() []string {
	pm := b.plugins
	pm.mu.Lock()
	defer pm.mu.Unlock()
	names := make([]string, 0, len(pm.enabled))
	for n := range pm.enabled {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
