package wasmhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"

	"github.com/warrenmq/warren/internal/poll"
)

func TestLoadDescribes(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "content-router", buildGo(t, "content-router"))
	info := p.Info()
	if info.Name != "content-router" || info.Version != "1.0.0" || info.ABI != "1.1" || len(info.Hash) != 64 ||
		!slices.Equal(info.Types, []string{"x-content"}) || !slices.Equal(info.Features, []string{"body"}) ||
		info.Instances != 1 || info.Disabled != "" {
		t.Fatalf("info: %+v", info)
	}
	if got, ok := h.plugin("content-router"); !ok || got != p {
		t.Fatal("Plugin does not find the loaded plugin")
	}
	if _, err := h.Load(context.Background(), "content-router", buildGo(t, "content-router")); !errors.Is(err, errLoaded) {
		t.Fatalf("loading twice: %v", err)
	}
	if _, err := h.Load(context.Background(), "other-name", buildGo(t, "content-router")); !errors.Is(err, errDescription) ||
		!strings.Contains(err.Error(), `calls itself "content-router" but was loaded as "other-name"`) {
		t.Fatalf("loading under another name: %v", err)
	}
}

func TestInspect(t *testing.T) {
	h := newHost(t, testConfig(t))
	info, err := h.Inspect(context.Background(), "misbehave", buildGo(t, "misbehave"))
	if err != nil || info.Name != "misbehave" || !slices.Equal(info.Types, []string{"x-misbehave"}) ||
		!slices.Equal(info.Features, []string{"headers"}) || info.Instances != 0 {
		t.Fatalf("%+v %v", info, err)
	}
	if _, ok := h.plugin("misbehave"); ok {
		t.Fatal("Inspect kept the plugin")
	}
	if _, err := h.Inspect(context.Background(), "abi2", readFixture(t, "abi2.wasm")); !errors.Is(err, errABIVersion) {
		t.Fatalf("inspecting a v2 module: %v", err)
	}
}

func TestRefusesOtherABIVersions(t *testing.T) {
	h := newHost(t, testConfig(t))
	_, err := h.Load(context.Background(), "abi2", readFixture(t, "abi2.wasm"))
	if !errors.Is(err, errABIVersion) || !strings.Contains(err.Error(), "v2.0") || !strings.Contains(err.Error(), "this broker speaks v1.1") {
		t.Errorf("ABI v2 module: %v", err)
	}
	_, err = h.Load(context.Background(), "importv2", readFixture(t, "importv2.wasm"))
	if !errors.Is(err, errABIVersion) || !strings.Contains(err.Error(), "warren_v2") || !strings.Contains(err.Error(), "warren_v1") {
		t.Errorf("module importing warren_v2: %v", err)
	}
	_, err = h.Load(context.Background(), "noabi", readFixture(t, "noabi.wasm"))
	if !errors.Is(err, errNotPlugin) || !strings.Contains(err.Error(), "warren_abi_version") {
		t.Errorf("module without a version: %v", err)
	}
	_, err = h.Load(context.Background(), "junk", []byte("\x00asm but not really"))
	if !errors.Is(err, errNotPlugin) {
		t.Errorf("junk: %v", err)
	}
	if len(h.loadedPlugins()) != 0 {
		t.Errorf("failed loads left plugins behind: %v", h.loadedPlugins())
	}
}

func TestContentRouter(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "content-router", buildGo(t, "content-router"))
	r := declare(t, typ(t, p, "x-content"), "orders", nil)
	bind(t, r, "norway", "", protocol.Table{"x-path": "order.country", "x-value": "NO"})
	bind(t, r, "big", "", protocol.Table{"order.total": int64(1000), "order.rush": true, "x-match": "any"})
	bind(t, r, "sweden", "", protocol.Table{"order.country": "SE"})

	cases := []struct {
		body string
		want []string
	}{
		{`{"order": {"country": "NO", "total": 5}}`, []string{"norway"}},
		{`{"order": {"country": "SE", "total": 1000}}`, []string{"big", "sweden"}},
		{`{"order": {"rush": true}}`, []string{"big"}},
		{`not json`, nil},
	}
	for _, c := range cases {
		got, _, err := route(r, msg(t, "ignored", nil, c.body))
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: routed to %v, want %v", c.body, got, c.want)
		}
	}
	info := r.Info()
	if info["bindings"] != int64(3) || info["paths"] != int64(3) {
		t.Errorf("info: %v", info)
	}
	// A binding the type refuses: the plugin's 406 reaches the client.
	err := r.ValidateBinding(&exchange.Binding{Key: "k", Args: protocol.Table{"x-match": "most"}})
	if e := reply.As(err); e == nil || e.Code != protocol.PreconditionFailed || !strings.Contains(e.Text, "x-match must be 'all' or 'any'") {
		t.Errorf("bad binding: %v", err)
	}
	if p.Exchanges() != 1 {
		t.Errorf("Exchanges() = %d", p.Exchanges())
	}
	r.Delete()
	if p.Exchanges() != 0 {
		t.Errorf("after Delete, Exchanges() = %d", p.Exchanges())
	}
}

func TestDeclareError(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	x := typ(t, p, "x-misbehave")
	err := x.ValidateDeclare(exchange.Definition{Name: "e", Type: x.Name(), Args: protocol.Table{"x-foo": int64(1)}})
	if e := reply.As(err); e.Code != protocol.PreconditionFailed || e.Text != "PRECONDITION_FAILED - x-foo must be a string" {
		t.Fatalf("got %v", err)
	}
	if err := x.ValidateDeclare(exchange.Definition{Name: "e", Type: x.Name(), Args: protocol.Table{"x-foo": "ok"}}); err != nil {
		t.Fatal(err)
	}
	r := declare(t, x, "e", nil)
	b := &exchange.Binding{Key: "k", Args: protocol.Table{"x-reject": true}}
	if e := reply.As(r.ValidateBinding(b)); e == nil || e.Code != protocol.PreconditionFailed {
		t.Fatalf("rejected binding: %v", e)
	}
	// Reply errors from route: the plugin's own, and a plain Go error (406).
	bind(t, r, "q", "error", nil)
	if _, _, err := route(r, msg(t, "error", nil, "")); reply.As(err).Text != "PRECONDITION_FAILED - refused: asked to" {
		t.Errorf("route error: %v", err)
	}
	if _, _, err := route(r, msg(t, "plain-error", nil, "")); reply.As(err).Text != "PRECONDITION_FAILED - a plain error" {
		t.Errorf("plain route error: %v", err)
	}
	if d, _ := p.disabled(); d || p.Info().Instances == 0 {
		t.Error("reply errors are not failures")
	}
}

func TestViaAndHeaders(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	bind(t, r, "q1", "blue", nil)
	_, res, err := route(r, msg(t, "via", nil, ""))
	if err != nil || res.Via != "direct" || res.Hold != 1500*time.Millisecond || len(res.Bindings) != 0 {
		t.Fatalf("via: %+v, %v", res, err)
	}
	got, _, err := route(r, msg(t, "header", protocol.Table{"route-to": "blue"}, ""))
	if err != nil || !slices.Equal(got, []string{"q1"}) {
		t.Fatalf("routing on a header: %v, %v", got, err)
	}
}

func TestSettings(t *testing.T) {
	cfg := testConfig(t)
	cfg.PluginSettings = map[string]map[string]any{"misbehave": {"greeting": "hello"}}
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	if info := r.Info(); info["greeting"] != "hello" {
		t.Fatalf("info: %v", info)
	}
	if got := p.Info().Settings; len(got) != 1 || got[0].Name != "greeting" || got[0].Kind != "string" {
		t.Fatalf("declared settings: %+v", got)
	}

	for _, bad := range []map[string]any{{"greting": "typo"}, {"greeting": 7}} {
		cfg.PluginSettings = map[string]map[string]any{"misbehave": bad}
		h2 := newHost(t, cfg)
		if _, err := h2.Load(context.Background(), "misbehave", buildGo(t, "misbehave")); !errors.Is(err, errSettings) {
			t.Errorf("settings %v: %v", bad, err)
		}
	}
}

// TestInstancesAgree routes from several goroutines through a pool of
// instances while bindings change between rounds: every instance must
// answer with the current bindings.
func TestInstancesAgree(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 3
	h := newHost(t, cfg)
	p := load(t, h, "direct", buildGo(t, "direct"))
	x := typ(t, p, "x-direct")
	a := declare(t, x, "a", nil)
	other := declare(t, x, "other", nil)
	bind(t, other, "o", "k", nil)
	growPool(t, p, 3)
	var live []*exchange.Binding
	for round := range 6 {
		// Mutate: add two bindings, drop the oldest.
		live = append(live, bind(t, a, "q"+string(rune('0'+round)), "k", nil), bind(t, a, "extra", "other-key", nil))
		if len(live) > 4 {
			if err := a.RemoveBindings(live[:2]); err != nil {
				t.Fatal(err)
			}
			live = live[2:]
		}
		var want []string
		for _, b := range live {
			if b.Key == "k" {
				want = append(want, b.Destination.Name)
			}
		}
		slices.Sort(want)
		// Each instance in turn routes (the others held aside), so every
		// one of them proves it caught up.
		for i := range 3 {
			held := holdAllBut(t, p, 1)
			got, _, err := route(a, msg(t, "k", nil, ""))
			slices.Sort(got)
			release(p, held)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("round %d, instance %d: routed to %v (%v), want %v", round, i, got, err, want)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					got, _, err := route(a, msg(t, "k", nil, ""))
					slices.Sort(got)
					if err != nil || !slices.Equal(got, want) {
						errs <- strings.Join(got, ",")
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("round %d: an instance routed to [%s], want %v", round, e, want)
		}
	}
	if got, _, _ := route(other, msg(t, "k", nil, "")); !slices.Equal(got, []string{"o"}) {
		t.Errorf("the other exchange routes to %v", got)
	}
}

// TestTrapFailsOneCall: a panic in one route fails that publish with 541;
// the instance is replaced by one rebuilt from the bindings (in their
// order), and every exchange keeps routing.
func TestTrapFailsOneCall(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 1
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	x := typ(t, p, "x-misbehave")
	a, b := declare(t, x, "a", nil), declare(t, x, "b", nil)
	bind(t, a, "first-queue", "zzz", nil)
	bind(t, a, "qa", "k", nil)
	bind(t, b, "qb", "k", nil)
	_, _, err := route(a, msg(t, "panic", nil, ""))
	e := reply.As(err)
	if e == nil || e.Code != protocol.InternalError || !strings.Contains(e.Text, "plugin 'misbehave'") || !strings.Contains(e.Text, "asked to panic") {
		t.Fatalf("panic: %v", err)
	}
	for _, c := range []struct {
		r    exchange.Router
		key  string
		want string
	}{{a, "k", "qa"}, {b, "k", "qb"}, {a, "first", "first-queue"}} {
		got, _, err := route(c.r, msg(t, c.key, nil, ""))
		if err != nil || !slices.Equal(got, []string{c.want}) {
			t.Errorf("after the panic, %s routes to %v (%v), want %s", c.key, got, err, c.want)
		}
	}
	if d, _ := p.disabled(); d {
		t.Error("one failure disabled the plugin")
	}
}

func TestMalformedResults(t *testing.T) {
	cfg := testConfig(t)
	cfg.FailureLimit = 100
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	bind(t, r, "q", "k", nil)
	_, res, err := route(r, msg(t, "badid", nil, ""))
	if e := reply.As(err); e == nil || e.Code != protocol.InternalError || !strings.Contains(e.Text, "binding id 99999") || len(res.Bindings) != 0 {
		t.Errorf("unknown binding id: %v, %v", err, res.Bindings)
	}

	bad := load(t, h, "bad", readFixture(t, "bad.wasm"))
	br := declare(t, typ(t, bad, "x-bad"), "e", nil)
	for key, want := range map[string]string{
		"o": "lies outside memory",
		"s": "unknown output status",
		"c": "truncated",
		"v": "via action together with binding ids",
		"t": "trap in warren_route",
	} {
		_, _, err := route(br, msg(t, key, nil, ""))
		if e := reply.As(err); e == nil || e.Code != protocol.InternalError || !strings.Contains(e.Text, want) {
			t.Errorf("key %s: %v, want %q", key, err, want)
		}
	}
	if got, _, err := route(br, msg(t, "fine", nil, "")); err != nil || len(got) != 0 {
		t.Errorf("a good call after the bad ones: %v, %v", got, err)
	}
}

// TestTooLarge: a message too large for the plugin's memory is refused
// with 406 before the plugin sees it, and is no failure of the plugin.
func TestTooLarge(t *testing.T) {
	cfg := testConfig(t)
	cfg.MemoryLimitBytes = 32 << 20
	cfg.FailureLimit = 1
	h := newHost(t, cfg)
	p := load(t, h, "content-router", buildGo(t, "content-router"))
	r := declare(t, typ(t, p, "x-content"), "e", nil)
	bind(t, r, "q", "", protocol.Table{"a": "b"})
	big := `{"a": "b", "pad": "` + strings.Repeat("x", 9<<20) + `"}`
	_, _, err := route(r, msg(t, "", nil, big))
	if e := reply.As(err); e == nil || e.Code != protocol.PreconditionFailed || !strings.Contains(e.Text, "too large") {
		t.Fatalf("large message: %v", err)
	}
	if got, _, err := route(r, msg(t, "", nil, `{"a": "b"}`)); err != nil || len(got) != 1 {
		t.Fatalf("after it: %v %v", got, err)
	}
	// The bad plugin's buffer holds 60000 bytes: it says no, the host
	// refuses the message, the instance stays.
	bad := load(t, h, "bad", readFixture(t, "bad.wasm"))
	br := declare(t, typ(t, bad, "x-bad"), "e", nil)
	_, _, err = route(br, msg(t, "k", nil, strings.Repeat("x", 70000)))
	if e := reply.As(err); e == nil || e.Code != protocol.PreconditionFailed || !strings.Contains(e.Text, "no room") {
		t.Fatalf("a message the plugin has no room for: %v", err)
	}
	if d, why := bad.disabled(); d {
		t.Fatal(why)
	}
}

func TestLoopIsInterrupted(t *testing.T) { loopIsInterrupted(t) }

// TestLoopIsInterruptedOnOneP: Go cannot preempt compiled wasm, so with a
// single P only the module's own yields let the watchdog run (CI machines
// with one CPU hung here before the patch added them).
func TestLoopIsInterruptedOnOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	loopIsInterrupted(t)
}

// misbehaving returns an exchange of the misbehave plugin, bound to q by
// k, on a host whose calls time out after timeout.
func misbehaving(t *testing.T, timeout time.Duration) (*Host, exchange.Router) {
	cfg := testConfig(t)
	cfg.CallTimeout = timeout
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	bind(t, r, "q", "k", nil)
	return h, r
}

func loopIsInterrupted(t *testing.T) {
	_, r := misbehaving(t, 100*time.Millisecond)
	for _, key := range []string{"loop", "sleep"} {
		start := time.Now()
		_, _, err := route(r, msg(t, key, nil, ""))
		e := reply.As(err)
		if e == nil || e.Code != protocol.InternalError || !strings.Contains(e.Text, "timeout in warren_route") {
			t.Fatalf("%s: %v", key, err)
		}
		t.Logf("%s interrupted after %v", key, time.Since(start))
		if got, _, err := route(r, msg(t, "k", nil, "")); err != nil || !slices.Equal(got, []string{"q"}) {
			t.Fatalf("after %s: %v, %v", key, got, err)
		}
	}
}

// TestLoopDoesNotStopTheWorld: a garbage collection must stop every
// goroutine, and cannot stop one running compiled wasm; before the yields,
// a looping plugin call held every other goroutine of the broker until it
// ended (and the watchdog that would end it was held too).
func TestLoopDoesNotStopTheWorld(t *testing.T) {
	h, r := misbehaving(t, 5*time.Second)
	done := make(chan error, 1)
	go func() {
		_, _, err := route(r, msg(t, "loop", nil, ""))
		done <- err
	}()
	// Wait until the call runs, then collect garbage under it.
	poll.Until(t, 10*time.Second, "the call running", func() bool { return callsRunning(h) > 0 })
	runtime.GC()
	select {
	case err := <-done:
		t.Fatalf("the looping call ended before the collection did: %v", err)
	default:
	}
	if e := reply.As(<-done); e == nil || !strings.Contains(e.Text, "timeout in warren_route") {
		t.Fatalf("loop: %v", e)
	}
}

func TestMemoryBomb(t *testing.T) {
	cfg := testConfig(t)
	cfg.MemoryLimitBytes = 64 << 20
	cfg.CallTimeout = 5 * time.Second // the limit must bite, not the deadline
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	bind(t, r, "q", "k", nil)
	start := time.Now()
	_, _, err := route(r, msg(t, "bomb", nil, ""))
	if e := reply.As(err); e == nil || e.Code != protocol.InternalError || strings.Contains(e.Text, "timeout") {
		t.Fatalf("bomb: %v", err)
	}
	t.Logf("memory bomb stopped after %v: %v", time.Since(start), err)
	if got, _, err := route(r, msg(t, "k", nil, "")); err != nil || !slices.Equal(got, []string{"q"}) {
		t.Fatalf("after the bomb: %v, %v", got, err)
	}
}

// TestRepeatedFailuresDisable: the failure limit disables the plugin; its
// routers then refuse with 406 and OnDisabled hears why.
func TestRepeatedFailuresDisable(t *testing.T) {
	cfg := testConfig(t)
	cfg.FailureLimit = 3
	disabled := make(chan string, 1)
	cfg.OnDisabled = func(plugin, reason string) { disabled <- plugin + ": " + reason }
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	bind(t, r, "q", "k", nil)
	for range 3 {
		if _, _, err := route(r, msg(t, "panic", nil, "")); err == nil {
			t.Fatal("a panic routed")
		}
	}
	select {
	case why := <-disabled:
		if !strings.HasPrefix(why, "misbehave: 3 failures within") || !strings.Contains(why, "asked to panic") {
			t.Errorf("OnDisabled: %s", why)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnDisabled was not called")
	}
	_, _, err := route(r, msg(t, "k", nil, ""))
	if e := reply.As(err); e == nil || e.Code != protocol.PreconditionFailed || !strings.Contains(e.Text, "plugin 'misbehave' is disabled") {
		t.Fatalf("routing on a disabled plugin: %v", err)
	}
	if d, why := p.disabled(); !d || why == "" || p.Info().Disabled == "" {
		t.Fatal("disabled() does not say so")
	}
	if _, err := typ(t, p, "x-misbehave").Create(exchange.Definition{Name: "new"}); reply.As(err).Code != protocol.PreconditionFailed {
		t.Fatalf("creating on a disabled plugin: %v", err)
	}
	// Unbinding and deleting still work: nothing to undo.
	if err := r.RemoveBindings(nil); err != nil {
		t.Fatal(err)
	}
	r.Delete()
}

// TestGarbageAndIdle: a plugin making garbage on every call stays within
// its memory limit, and the janitor gives used instances warren_idle.
// (Go 1.26 guests collect within export calls too; idle is where a plugin
// trims caches and the SDK shrinks outsized buffers.)
func TestGarbageAndIdle(t *testing.T) {
	cfg := testConfig(t)
	cfg.MemoryLimitBytes = 64 << 20
	cfg.IdleInterval = 10 * time.Millisecond
	cfg.PoolSize = 1
	h := newHost(t, cfg)
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	m := msg(t, "garbage", nil, "")
	for i := range 400 { // 100 MiB of garbage in all
		if _, _, err := route(r, m); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if !poll.Within(5*time.Second, func() bool { idles, _ := r.Info()["idles"].(int64); return idles > 0 }) {
		t.Fatal("warren_idle was never called")
	}
}

func TestRegisterAllOrNothing(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "content-router", buildGo(t, "content-router"))
	reg := exchange.NewRegistry()
	if err := p.Register(reg); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Lookup("x-content"); !ok {
		t.Fatal("x-content not registered")
	}
	if err := p.Register(reg); err == nil {
		t.Fatal("registering twice succeeded")
	}
	p.Unregister(reg)
	if _, ok := reg.Lookup("x-content"); ok {
		t.Fatal("x-content still registered")
	}
	p.Close()
	if _, ok := h.plugin("content-router"); ok {
		t.Fatal("closed plugin still listed")
	}
	// A closed plugin's name can be loaded again.
	load(t, h, "content-router", buildGo(t, "content-router"))
}

func TestPluginLogs(t *testing.T) {
	h := newHost(t, testConfig(t))
	p := load(t, h, "misbehave", buildGo(t, "misbehave"))
	r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
	for range 300 { // beyond the burst: dropped, not an error
		if _, _, err := route(r, msg(t, "log:hello from the plugin", nil, "")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHostClose(t *testing.T) {
	h, err := New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	p := load(t, h, "direct", buildGo(t, "direct"))
	r := declare(t, typ(t, p, "x-direct"), "e", nil)
	bind(t, r, "q", "k", nil)
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := route(r, msg(t, "k", nil, "")); reply.As(err).Code != protocol.PreconditionFailed {
		t.Fatalf("routing after Close: %v", err)
	}
	if _, err := h.Load(context.Background(), "direct", buildGo(t, "direct")); !errors.Is(err, errHostClosed) {
		t.Fatalf("Load after Close: %v", err)
	}
}

// TestMutationsWhileRouting routes one exchange from several goroutines
// while another exchange of the same plugin is created, bound, unbound and
// deleted: core allows that (only the same router's mutations exclude its
// routes), and every instance must keep answering right.
func TestMutationsWhileRouting(t *testing.T) {
	cfg := testConfig(t)
	cfg.PoolSize = 3
	h := newHost(t, cfg)
	p := load(t, h, "direct", buildGo(t, "direct"))
	x := typ(t, p, "x-direct")
	a := declare(t, x, "a", nil)
	bind(t, a, "qa", "k", nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res exchange.Result
			m := msg(t, "k", nil, "")
			for {
				select {
				case <-stop:
					return
				default:
				}
				res.Reset()
				if err := a.Route(m, &res); err != nil || len(res.Bindings) != 1 || res.Bindings[0].Destination.Name != "qa" {
					errs <- fmt.Errorf("routed to %v: %v", res.Bindings, err)
					return
				}
			}
		}()
	}
	for i := range 30 {
		b := declare(t, x, fmt.Sprintf("b%d", i), nil)
		bs := []*exchange.Binding{bind(t, b, "qb", "k", nil), bind(t, b, "qb2", "k", nil)}
		if got, _, err := route(b, msg(t, "k", nil, "")); err != nil || len(got) != 2 {
			t.Fatalf("b%d routes to %v, %v", i, got, err)
		}
		if err := b.RemoveBindings(bs[:1]); err != nil {
			t.Fatal(err)
		}
		b.Delete()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := p.Exchanges(); n != 1 {
		t.Fatalf("%d exchanges left", n)
	}
}

// TestRestartReplay: a new host (a broker restart) loads the module from
// the compilation cache, and the broker's replay of creates and bindings
// brings routing back, order-sensitive state included.
func TestRestartReplay(t *testing.T) {
	cfg := testConfig(t)
	cfg.CacheDir = t.TempDir()
	wasm := buildGo(t, "misbehave")
	var want []string
	for run := range 2 {
		h := newHost(t, cfg)
		start := time.Now()
		p := load(t, h, "misbehave", wasm)
		t.Logf("run %d: loaded in %v", run, time.Since(start))
		r := declare(t, typ(t, p, "x-misbehave"), "e", nil)
		for _, q := range []string{"q3", "q1", "q2"} { // the broker replays in Seq order
			bind(t, r, q, "k", nil)
		}
		got, _, err := route(r, msg(t, "first", nil, ""))
		if err != nil {
			t.Fatal(err)
		}
		all, _, _ := route(r, msg(t, "k", nil, ""))
		got = append(got, all...)
		if run == 0 {
			want = got
		} else if !slices.Equal(got, want) {
			t.Fatalf("after the restart: %v, before: %v", got, want)
		}
		h.Close(context.Background())
	}
	if entries, _ := os.ReadDir(cfg.CacheDir); len(entries) == 0 {
		t.Fatal("nothing in the compilation cache")
	}
}
