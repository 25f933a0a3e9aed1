package tests

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// pluginSetting reads one setting's value of a plugin from /api/plugins.
func pluginSetting(t *testing.T, api, plugin, key string) any {
	t.Helper()
	for _, row := range listPluginInfo(t, api) {
		if row.Name != plugin || row.Info == nil {
			continue
		}
		for _, s := range row.Info.Settings {
			if s.Name == key {
				return s.Value
			}
		}
	}
	return nil
}

// Settings change in a running broker: through the admin API (what
// warrenctl plugins configure sends), kept across a restart, refused when
// the plugin or the kind refuses them, reset to broker.toml's, and
// reloaded from broker.toml on SIGHUP.
func TestPluginSettingsChangeWhileRunning(t *testing.T) {
	if reference() != "" {
		t.Skip("Warren's plugins")
	}
	dir := builtPlugins(t)
	data := t.TempDir()
	conf := fmt.Sprintf("[plugins]\ndir = %q\nenabled = [\"content-router\"]\n[plugins.settings.content-router]\nmax_body = 1000\n", dir)
	p := startProcessWith(t, data, conf)
	api := "http://" + p.admin
	if v := pluginSetting(t, api, "content-router", "max_body"); v != float64(1000) {
		t.Fatalf("max_body from broker.toml: %v", v)
	}
	setting := api + "/api/plugins/content-router/settings/max_body"
	if err := httpJSON("PUT", setting, `{"value": "64"}`); err != nil {
		t.Fatal(err)
	}
	if v := pluginSetting(t, api, "content-router", "max_body"); v != float64(64) {
		t.Fatalf("max_body after configure: %v", v)
	}
	for body, want := range map[string]string{
		`{"value": "lots"}`: "must be int",
		`{"value": -3}`:     "max_body must be a positive number of bytes", // the plugin's own refusal
		`{"value": null}`:   "not null",
	} {
		if err := httpJSON("PUT", setting, body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	if err := httpJSON("PUT", api+"/api/plugins/content-router/settings/max_bdy", `{"value": 1}`); err == nil ||
		!strings.Contains(err.Error(), "has no setting 'max_bdy' (it has max_body)") {
		t.Errorf("unknown setting: %v", err)
	}
	if v := pluginSetting(t, api, "content-router", "max_body"); v != float64(64) {
		t.Fatalf("a refused change took effect: %v", v)
	}

	// Kept across a restart, over broker.toml's value.
	p.stop(syscall.SIGTERM)
	p = startProcessWith(t, data, conf)
	api = "http://" + p.admin
	if v := pluginSetting(t, api, "content-router", "max_body"); v != float64(64) {
		t.Fatalf("max_body after a restart: %v", v)
	}
	// Reset: broker.toml's applies again.
	if err := httpJSON("DELETE", api+"/api/plugins/content-router/settings/max_body", ""); err != nil {
		t.Fatal(err)
	}
	if v := pluginSetting(t, api, "content-router", "max_body"); v != float64(1000) {
		t.Fatalf("max_body after reset: %v", v)
	}

	// SIGHUP reads broker.toml's plugin settings again.
	path := p.cmd.Args[2] // warren -config PATH ...
	if err := os.WriteFile(path, []byte(strings.Replace(mustRead(t, path), "max_body = 1000", "max_body = 77", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reloaded setting", func() bool {
		return pluginSetting(t, api, "content-router", "max_body") == float64(77)
	})
	if !strings.Contains(p.logText(), "SIGHUP: plugin settings reloaded") {
		t.Error("the reload is not in the log")
	}
	// A file that does not load changes nothing and says so.
	if err := os.WriteFile(path, []byte("[plugins\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	eventually(t, "the failed reload in the log", func() bool {
		return strings.Contains(p.logText(), "the configuration file did not load; nothing changed")
	})
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type pluginInfoRow struct {
	Name string `json:"name"`
	Info *struct {
		Settings []struct {
			Name  string `json:"name"`
			Value any    `json:"value"`
		} `json:"settings"`
	} `json:"info"`
}

func listPluginInfo(t *testing.T, api string) []pluginInfoRow {
	t.Helper()
	var rows []pluginInfoRow
	apiGet(t, api+"/api/plugins", &rows)
	return rows
}
