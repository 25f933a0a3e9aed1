package wasmhost

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Routing ABI 1.1 through the host, with the misbehave test plugin: the
// validate-as checks, type_exists, set-headers and settings that change.

// hostWithTypes is a host whose type_exists and validate-as find the
// built-in types and the plugins registered in the returned registry.
func hostWithTypes(t *testing.T) (*Host, *exchange.Registry) {
	reg := exchange.NewRegistry()
	cfg := testConfig(t)
	cfg.LookupType = reg.Lookup
	return newHost(t, cfg), reg
}

func expectReply(t *testing.T, err error, code uint16, text string) {
	t.Helper()
	var e *reply.Error
	if !errors.As(err, &e) || e.Code != code || !strings.Contains(e.Error(), text) {
		t.Fatalf("got %v, want %d saying %q", err, code, text)
	}
}

func TestValidateAs(t *testing.T) {
	h, reg := hostWithTypes(t)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	if err := p.Register(reg); err != nil {
		t.Fatal(err)
	}
	x := typ(t, p, "x-misbehave")
	def := func(args protocol.Table) exchange.Definition {
		return exchange.Definition{VHost: "/", Name: "e", Type: "x-misbehave", Args: args}
	}
	if err := x.ValidateDeclare(def(protocol.Table{"x-as": "direct"})); err != nil {
		t.Fatalf("validate as direct: %v", err)
	}
	expectReply(t, x.ValidateDeclare(def(protocol.Table{"x-as": "x-nothing"})), 406, "exchange type 'x-nothing' does not exist")
	// The headers type refuses a bad x-match on a binding: asked to check
	// a binding as headers, the plugin's exchange refuses it too.
	r := declare(t, x, "e", protocol.Table{})
	b := &exchange.Binding{Destination: exchange.Destination{Kind: exchange.ToQueue, Name: "q"}, Key: "k",
		Args: protocol.Table{"x-as": "headers", "x-match": "most"}, Seq: 1}
	expectReply(t, r.ValidateBinding(b), 406, "x-match")
	b.Args["x-match"] = "any"
	if err := r.ValidateBinding(b); err != nil {
		t.Fatalf("a binding headers accepts: %v", err)
	}
	// Asking to validate as its own type is the plugin's bug: a failure.
	err := x.ValidateDeclare(def(protocol.Table{"x-as": "x-misbehave"}))
	if err == nil || !strings.Contains(err.Error(), "asked to validate as its own exchange type 'x-misbehave'") {
		t.Fatalf("validate as its own type: %v", err)
	}
	// type_exists.
	if err := x.ValidateDeclare(def(protocol.Table{"x-exists": "topic"})); err != nil {
		t.Fatalf("topic exists: %v", err)
	}
	if err := x.ValidateDeclare(def(protocol.Table{"x-exists": "x-misbehave"})); err != nil {
		t.Fatalf("its own type exists: %v", err)
	}
	expectReply(t, x.ValidateDeclare(def(protocol.Table{"x-exists": "x-nothing"})), 404, "no exchange type x-nothing")
}

func TestSetHeaders(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	_, res, err := route(r, msg(t, "stamp", protocol.Table{"route-to": "blue", "keep": int32(1)}, ""))
	if err != nil || res.Via != "direct" || res.Hold != time.Second {
		t.Fatalf("%+v %v", res, err)
	}
	want := protocol.Table{"stamped": "yes", "route-to": nil}
	if len(res.SetHeaders) != 2 || res.SetHeaders["stamped"] != "yes" || res.SetHeaders["route-to"] != nil {
		t.Fatalf("set headers %v, want %v", res.SetHeaders, want)
	}
	// Without a hold the answer is malformed: the publish fails with 541.
	_, _, err = route(r, msg(t, "stamp-now", nil, ""))
	expectReply(t, err, 541, "failed to route")
}

func TestConfigure(t *testing.T) {
	cfg := testConfig(t)
	cfg.PluginSettings = map[string]map[string]any{"misbehave": {"greeting": "hello"}}
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	growPool(t, p, 2)
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	if err := h.Configure("misbehave", map[string]any{"greeting": "bonjour"}); err != nil {
		t.Fatal(err)
	}
	// Every instance answers with the new settings.
	for range 4 {
		if info := r.Info(); info["greeting"] != "bonjour" {
			t.Fatalf("info after configure: %v", info)
		}
	}
	if s := p.Info().Settings; len(s) != 1 || s[0].Value != "bonjour" {
		t.Fatalf("listed settings %+v", s)
	}
	expectReply(t, h.Configure("misbehave", map[string]any{"greeting": "refuse"}), 406, "greeting refused as asked")
	if err := h.Configure("misbehave", map[string]any{"greting": "typo"}); !errors.Is(err, errSettings) || !strings.Contains(err.Error(), `unknown setting "greting"`) {
		t.Fatalf("unknown setting: %v", err)
	}
	if info := r.Info(); info["greeting"] != "bonjour" {
		t.Fatalf("a refused change took effect: %v", info)
	}
	// A plugin loaded again keeps the settings given last.
	p.Close()
	p = load(t, h, "misbehave", buildGo(t, "misbehave"))
	r = declare(t, typ(t, p, "x-misbehave"), "e", nil)
	if info := r.Info(); info["greeting"] != "bonjour" {
		t.Fatalf("after loading again: %v", info)
	}
}

// A Go plugin built as a command rather than a reactor traps in its first
// export; the error says why and how to build it.
func TestCommandModuleIsExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	out := filepath.Join(t.TempDir(), "direct.wasm")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", out, goPlugins["direct"])
	cmd.Dir = goModRoot
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, testConfig(t))
	_, err = h.Load(context.Background(), "direct", wasm)
	if !errors.Is(err, errNotPlugin) || !strings.Contains(err.Error(), "WASI command") ||
		!strings.Contains(err.Error(), "go build -buildmode=c-shared -o direct.wasm") {
		t.Fatalf("%v", err)
	}
}
