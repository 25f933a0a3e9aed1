package broker

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/wasmhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A plugin's settings are broker.toml's [plugins.settings.NAME] with the
// values an operator set in the running broker on top (warrenctl plugins
// configure, PUT /api/plugins/NAME/settings/KEY). Those overrides are
// stored, one global parameter per plugin, so they outlive a restart and a
// reload of broker.toml; resetting a key drops its override and the file's
// value (or none) applies again. Every change reaches the plugin at once
// (wasmhost.Host.Configure), which may refuse it: then nothing changes.

// pluginSettingsParam is the name of the parameter holding a plugin's
// overrides.
func pluginSettingsParam(name string) string { return pluginSettingsPrefix + name }

// pluginSettingsPrefix begins the stored names of plugins' settings,
// which share their keyspace (storage.KindParameter) with the global
// parameters and are none of them.
const pluginSettingsPrefix = "plugin_settings:"

// loadSettingOverrides reads the stored overrides of every plugin.
func (pm *pluginManager) loadSettingOverrides() error {
	params, err := pm.b.store.Meta(storage.KindParameter, "")
	if err != nil {
		return err
	}
	pm.overrides = map[string]map[string]any{}
	for _, p := range params {
		name, ok := strings.CutPrefix(p.Name, pluginSettingsPrefix)
		if !ok {
			continue
		}
		rec, err := readSettingsRecord(p.Rec)
		if err != nil {
			return fmt.Errorf("stored settings of plugin '%s': %w", name, err)
		}
		if rec.Settings != nil {
			pm.overrides[name] = map[string]any(rec.Settings)
		}
	}
	return nil
}

// effectiveSettings merges a plugin's file settings and overrides; pm.mu
// is held.
func (pm *pluginManager) effectiveSettings(name string) map[string]any {
	out := map[string]any{}
	maps.Copy(out, pm.fileSettings[name])
	maps.Copy(out, pm.overrides[name])
	return out
}

// allSettings is what the host loads plugins with; pm.mu is held.
func (pm *pluginManager) allSettings() map[string]map[string]any {
	out := map[string]map[string]any{}
	for name := range pm.fileSettings {
		out[name] = pm.effectiveSettings(name)
	}
	for name := range pm.overrides {
		out[name] = pm.effectiveSettings(name)
	}
	return out
}

// ConfigurePlugin sets one setting of a plugin (value nil resets it to
// broker.toml's). The value is converted to the setting's declared kind:
// an operator's "30" for an int setting is 30.
func (b *Broker) ConfigurePlugin(name, key string, value any) error {
	pm := b.plugins
	pm.mu.Lock()
	info, err := pm.describe(name)
	if err != nil {
		pm.mu.Unlock()
		return err
	}
	overrides := maps.Clone(pm.overrides[name])
	if overrides == nil {
		overrides = map[string]any{}
	}
	if value == nil {
		delete(overrides, key)
	} else {
		v, err := settingValue(info, key, value)
		if err != nil {
			pm.mu.Unlock()
			return err
		}
		overrides[key] = v
	}
	err = pm.setOverrides(name, overrides)
	pm.mu.Unlock()
	if err != nil || b.cluster.Load() == nil {
		return err
	}
	return b.propose(changeTable(configurePlugin{Name: name, Settings: protocol.Table(overrides)}))
}

// opConfigurePlugin replicates a plugin's overrides in a cluster.
const opConfigurePlugin = "configure_plugin"

// setOverrides hands the plugin its new settings and stores the
// overrides; pm.mu is held.
func (pm *pluginManager) setOverrides(name string, overrides map[string]any) error {
	old := pm.overrides[name]
	pm.overrides[name] = overrides
	if err := pm.host.Configure(name, pm.effectiveSettings(name)); err != nil {
		pm.overrides[name] = old
		return settingsError(name, err)
	}
	var err error
	if len(overrides) == 0 {
		err = pm.b.store.DeleteMeta(storage.KindParameter, "", pluginSettingsParam(name))
	} else {
		err = pm.b.store.PutMeta(storage.KindParameter, "", pluginSettingsParam(name), settingsRecord{Settings: protocol.Table(overrides)}.Table())
	}
	if err != nil {
		return reply.Internal("the settings of plugin '%s' took effect but could not be stored: %v", name, err)
	}
	pm.b.log.Info().Str("plugin", name).Interface("settings", pm.effectiveSettings(name)).Msg("plugin settings changed")
	return nil
}

// settingsError is a refused change as the operator sees it.
func settingsError(name string, err error) error {
	if _, ok := err.(*reply.Error); ok {
		return err
	}
	return reply.PreconditionFailed("plugin '%s': %v", name, err)
}

// describe is the plugin's description, enabled or not; pm.mu is held.
func (pm *pluginManager) describe(name string) (wasmhost.PluginInfo, error) {
	if p, ok := pm.enabled[name]; ok {
		return p.Info(), nil
	}
	wasm, _, err := pm.module(name)
	if err != nil {
		return wasmhost.PluginInfo{}, err
	}
	info, err := pm.inspect(name, wasm)
	if err != nil {
		return wasmhost.PluginInfo{}, reply.PreconditionFailed("plugin '%s': %v", name, err)
	}
	return info, nil
}

// settingValue checks a key against the plugin's declared settings and
// converts value to its kind. Text (from the command line) is parsed:
// numbers, true/false, JSON for arrays and tables.
func settingValue(info wasmhost.PluginInfo, key string, value any) (any, error) {
	var declared *wasmhost.SettingInfo
	var names []string
	for i := range info.Settings {
		names = append(names, info.Settings[i].Name)
		if info.Settings[i].Name == key {
			declared = &info.Settings[i]
		}
	}
	if declared == nil {
		if len(names) == 0 {
			return nil, reply.PreconditionFailed("plugin '%s' takes no settings (asked to set '%s')", info.Name, key)
		}
		return nil, reply.PreconditionFailed("plugin '%s' has no setting '%s' (it has %s)", info.Name, key, strings.Join(names, ", "))
	}
	value = fromJSON(value)
	bad := func(why string) error {
		return reply.PreconditionFailed("setting '%s' of plugin '%s' must be %s: %s", key, info.Name, declared.Kind, why)
	}
	text, isText := value.(string)
	switch declared.Kind {
	case "string", "any":
		return value, nil
	case "bool":
		if isText {
			v, err := strconv.ParseBool(text)
			if err != nil {
				return nil, bad("not " + strconv.Quote(text))
			}
			return v, nil
		}
		if v, ok := value.(bool); ok {
			return v, nil
		}
	case "int":
		if isText {
			v, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return nil, bad("not " + strconv.Quote(text))
			}
			return v, nil
		}
		if v, ok := value.(int64); ok {
			return v, nil
		}
	case "float":
		if isText {
			v, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, bad("not " + strconv.Quote(text))
			}
			return v, nil
		}
		switch v := value.(type) {
		case float64:
			return v, nil
		case int64:
			return float64(v), nil
		}
	case "array", "table":
		if isText {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				return nil, bad("not JSON: " + err.Error())
			}
			value = fromJSON(v)
		}
		want := reflect.Slice
		if declared.Kind == "table" {
			want = reflect.Map
		}
		if value != nil && reflect.TypeOf(value).Kind() == want {
			return value, nil
		}
	}
	return nil, bad("a JSON " + reflect.TypeOf(value).String() + " is not")
}

// fromJSON turns the json.Numbers of a decoded JSON value into int64 (when
// integral) or float64, the types settings are encoded from.
func fromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fromJSON(e)
		}
		return out
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	}
	return v
}

// ReloadPluginSettings takes broker.toml's plugin settings again (SIGHUP):
// each plugin whose settings change gets them; one that refuses keeps its
// old ones, and the error says which.
func (b *Broker) ReloadPluginSettings(file map[string]map[string]any) error {
	pm := b.plugins
	pm.mu.Lock()
	defer pm.mu.Unlock()
	names := map[string]bool{}
	for n := range file {
		names[n] = true
	}
	for n := range pm.fileSettings {
		names[n] = true
	}
	old := pm.fileSettings
	var errs []string
	for name := range names {
		before := pm.effectiveSettings(name)
		next := map[string]map[string]any{}
		maps.Copy(next, pm.fileSettings)
		next[name] = file[name]
		pm.fileSettings = next
		if reflect.DeepEqual(before, pm.effectiveSettings(name)) {
			continue
		}
		if err := pm.host.Configure(name, pm.effectiveSettings(name)); err != nil {
			next[name] = old[name]
			errs = append(errs, settingsError(name, err).Error())
			continue
		}
		b.log.Info().Str("plugin", name).Interface("settings", pm.effectiveSettings(name)).Msg("plugin settings reloaded from the configuration")
	}
	if len(errs) > 0 {
		return reply.PreconditionFailed("%s", strings.Join(errs, "; "))
	}
	return nil
}
