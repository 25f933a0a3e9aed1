package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
)

// Plugins built from source once per test run, into one directory that
// every broker in these tests uses as its plugin directory.
var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

var testPlugins = map[string]string{
	"content-router": "./examples/content-router",
	"misbehave":      "./core/wasmhost/testdata/misbehave",
}

func builtPlugins(t testing.TB) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp(scratchDir, "plugins")
		if pluginErr != nil {
			return
		}
		for name, pkg := range testPlugins {
			cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(pluginDir, name+".wasm"), pkg)
			cmd.Dir = ".."
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if out, err := cmd.CombinedOutput(); err != nil {
				pluginErr = fmt.Errorf("building %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir
}

// startWithPlugins runs an in-process broker with the built plugins
// available and its admin API on an httptest server.
func startWithPlugins(t *testing.T) (*server, string) {
	dir := builtPlugins(t)
	s := startWarren(t, func(c *config.Config) { c.Plugins.Dir = dir })
	api := httptestServer(t, admin.Handler(s.b))
	return s, api
}

func httptestServer(t *testing.T, h http.Handler) string {
	srv := &http.Server{Handler: h}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

type pluginRow struct {
	Name    string   `json:"name"`
	Enabled bool     `json:"enabled"`
	Version string   `json:"version"`
	Types   []string `json:"types"`
	State   string   `json:"state"`
}

func listPlugins(t *testing.T, api string) map[string]pluginRow {
	t.Helper()
	req, _ := http.NewRequest("GET", api+"/api/plugins", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rows []pluginRow
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out := map[string]pluginRow{}
	for _, r := range rows {
		out[r.Name] = r
	}
	return out
}

func TestContentRouterPluginEnableRouteDisable(t *testing.T) {
	s, api := startWithPlugins(t)
	_, ch := confirmChannel(t, s)
	x := "orders"

	// Not enabled yet: its type is unknown (503, as RabbitMQ answers an
	// unknown type), and listed as available.
	c2, ch2 := channel(t, s)
	closed := c2.NotifyClose(make(chan *amqp.Error, 1))
	expectCode(t, ch2.ExchangeDeclare(x, "x-content", false, false, false, false, nil), amqp.CommandInvalid)
	expectClose(t, closed, amqp.CommandInvalid)
	if p := listPlugins(t, api)["content-router"]; p.Enabled || len(p.Types) != 1 || p.Types[0] != "x-content" {
		t.Fatalf("listing before enabling: %+v", p)
	}

	if err := httpJSON("POST", api+"/api/plugins/content-router/enable", ""); err != nil {
		t.Fatal(err)
	}
	if p := listPlugins(t, api)["content-router"]; !p.Enabled || p.Version == "" {
		t.Fatalf("listing after enabling: %+v", p)
	}
	if err := ch.ExchangeDeclare(x, "x-content", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	norway := declareQueue(t, s, ch, "norway", nil)
	big := declareQueue(t, s, ch, "big", nil)
	bind(t, ch, norway, "", x, amqp.Table{"x-path": "order.country", "x-value": "NO"})
	bind(t, ch, big, "", x, amqp.Table{"x-match": "any", "order.total": int32(1000), "order.rush": true})

	publishConfirmed(t, ch, x, "", body(`{"order":{"country":"NO","total":12}}`))
	publishConfirmed(t, ch, x, "", body(`{"order":{"country":"SE","total":1000.0}}`))
	publishConfirmed(t, ch, x, "", body(`{"order":{"country":"NO","rush":true}}`))
	publishConfirmed(t, ch, x, "", body(`not json`))
	if got := drain(t, ch, norway); len(got) != 2 {
		t.Fatalf("norway got %v", got)
	}
	if got := drain(t, ch, big); len(got) != 2 {
		t.Fatalf("big got %v", got)
	}

	// Disabling is refused while an exchange of its type exists...
	if err := httpJSON("POST", api+"/api/plugins/content-router/disable", ""); err == nil || !strings.Contains(err.Error(), "force") {
		t.Fatalf("disable without force: %v", err)
	}
	// ...and with force the exchange stays, with its bindings, refusing to route.
	if err := httpJSON("POST", api+"/api/plugins/content-router/disable?force=true", ""); err != nil {
		t.Fatal(err)
	}
	c3, ch3 := channel(t, s)
	closed = c3.NotifyClose(make(chan *amqp.Error, 1))
	_ = ch3.Confirm(false)
	chClosed := ch3.NotifyClose(make(chan *amqp.Error, 1))
	_ = ch3.PublishWithContext(context.Background(), x, "", false, false, body(`{"order":{"country":"NO"}}`))
	select {
	case e := <-chClosed:
		if e == nil || e.Code != amqp.PreconditionFailed || !strings.Contains(e.Reason, "x-content") {
			t.Fatalf("publish to a disabled type's exchange: %v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("publish to a disabled type's exchange was not refused")
	}
	_ = closed
	if err := ch.ExchangeDeclarePassive(x, "x-content", false, false, false, false, nil); err != nil {
		t.Fatalf("the exchange went with its plugin: %v", err)
	}

	// Enabled again, the same bindings route.
	if err := httpJSON("POST", api+"/api/plugins/content-router/enable", ""); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, x, "", body(`{"order":{"country":"NO"}}`))
	if got := drain(t, ch, norway); len(got) != 1 {
		t.Fatalf("after re-enabling, norway got %v", got)
	}
}

// A plugin that traps, loops, exhausts its memory or answers garbage fails
// that publish only: the client gets 541 (or the plugin's own reply), the
// broker and other exchanges carry on, and a plugin that keeps failing is
// disabled with its reason listed.
func TestMisbehavingPluginFailsOnlyItsPublish(t *testing.T) {
	s, api := startWithPlugins(t)
	if err := s.b.EnablePlugin("misbehave"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	x := uniq(t, "mis")
	if err := ch.ExchangeDeclare(x, "x-misbehave", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "ok", nil)
	for _, key := range []string{"ok", "panic", "loop", "bomb", "badid", "error"} {
		bind(t, ch, q, key, x, nil)
	}
	// An ordinary exchange beside it.
	other := declareQueue(t, s, ch, "other", nil)

	// A declare argument the plugin refuses reaches the client as its 406.
	_, chd := channel(t, s)
	expectCode(t, chd.ExchangeDeclare(uniq(t, "bad-arg"), "x-misbehave", false, false, false, false, amqp.Table{"x-foo": int32(1)}), amqp.PreconditionFailed)

	for _, tc := range []struct {
		key  string
		code int
	}{
		{"panic", amqp.InternalError},
		{"loop", amqp.InternalError},
		{"bomb", amqp.InternalError},
		{"badid", amqp.InternalError},
		{"error", amqp.PreconditionFailed},
	} {
		_, pch := channel(t, s)
		closed := pch.NotifyClose(make(chan *amqp.Error, 1))
		_ = pch.PublishWithContext(context.Background(), x, tc.key, false, false, body(tc.key))
		select {
		case e := <-closed:
			if e == nil || e.Code != tc.code {
				t.Fatalf("%s: got %v, want %d", tc.key, e, tc.code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: channel not closed", tc.key)
		}
		// The broker keeps routing around the plugin, and through it.
		publishConfirmed(t, ch, "", other, body("still here"))
		publishConfirmed(t, ch, x, "ok", body("through the plugin"))
	}
	if got := drain(t, ch, other); len(got) != 5 {
		t.Fatalf("the default exchange routed %d of 5", len(got))
	}
	if got := drain(t, ch, q); len(got) != 5 {
		t.Fatalf("the plugin exchange routed %d of 5 between failures", len(got))
	}
	// Four failures so far (a reply like "error" is not one); the fifth
	// within the window disables the plugin, and its exchange refuses (406).
	_, pch := channel(t, s)
	closed := pch.NotifyClose(make(chan *amqp.Error, 1))
	_ = pch.PublishWithContext(context.Background(), x, "panic", false, false, body("again"))
	<-closed
	eventually(t, "the failing plugin to be disabled", func() bool {
		return strings.Contains(listPlugins(t, api)["misbehave"].State, "disabled after failures")
	})
	_, pch = channel(t, s)
	closed = pch.NotifyClose(make(chan *amqp.Error, 1))
	_ = pch.PublishWithContext(context.Background(), x, "ok", false, false, body("refused"))
	if e := <-closed; e == nil || e.Code != amqp.PreconditionFailed {
		t.Fatalf("publish through a disabled plugin: %v", e)
	}
}

// Bindings of a plugin exchange come back after a restart: the host replays
// them into the plugin in creation order.
func TestPluginExchangeSurvivesRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("[plugins]\ndir = %q\ncache_dir = %q\n", builtPlugins(t), sharedWasmCache(t))
	p := startProcessWith(t, dir, cfg)
	if err := httpJSON("POST", "http://"+p.admin+"/api/plugins/content-router/enable", ""); err != nil {
		t.Fatal(err)
	}
	_, ch := dialProcess(t, p)
	if err := ch.ExchangeDeclare("durable-content", "x-content", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i, country := range []string{"NO", "SE", "DK"} {
		q := "content-" + country
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(q, "", "durable-content", false, amqp.Table{"x-path": "c", "x-value": country}); err != nil {
			t.Fatal(err)
		}
		_ = i
	}
	p.stop(syscall.SIGTERM)

	p = startProcessWith(t, dir, cfg)
	_, ch = dialProcess(t, p)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 3))
	for _, country := range []string{"NO", "SE", "DK"} {
		if err := ch.PublishWithContext(context.Background(), "durable-content", "", false, false,
			amqp.Publishing{Body: []byte(`{"c":"` + country + `"}`)}); err != nil {
			t.Fatal(err)
		}
		if c := <-confirms; !c.Ack {
			t.Fatal("nack")
		}
	}
	for _, country := range []string{"NO", "SE", "DK"} {
		if got := getAll(t, ch, "content-"+country); len(got) != 1 {
			t.Fatalf("content-%s got %d messages after the restart", country, len(got))
		}
	}
}

// A module of another ABI major version is refused, naming both versions,
// and the broker carries on.
func TestPluginOfAnotherABIVersionIsRefused(t *testing.T) {
	dir := t.TempDir()
	wasm, err := os.ReadFile("../core/wasmhost/testdata/wat/abi2.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "abi2.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startWarren(t, func(c *config.Config) { c.Plugins.Dir = dir })
	err = s.b.EnablePlugin("abi2")
	if err == nil || !strings.Contains(err.Error(), "2.0") || !strings.Contains(err.Error(), "1.") {
		t.Fatalf("enabling an ABI 2 module: %v", err)
	}
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publish(t, ch, "", q, body("still serving"))
	if got := get(t, ch, q); string(got.Body) != "still serving" {
		t.Fatal("broker did not carry on")
	}
}
