package wasmhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// The Go plugins are built from source once per `go test` run, into a
// directory shared by every test, with one compilation cache: the first
// test to load a module compiles it (about a second for a Go guest), the
// others take it from the cache.
var (
	testDir   string
	cacheDir  string
	buildMu   sync.Mutex
	builds    = map[string]*buildResult{}
	goModRoot string
)

type buildResult struct {
	once sync.Once
	wasm []byte
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warren-plugins-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testDir = dir
	cacheDir = filepath.Join(dir, "cache")
	wd, _ := os.Getwd()
	goModRoot = filepath.Join(wd, "..", "..")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goPlugins maps a plugin name to its package, relative to the module root.
var goPlugins = map[string]string{
	"content-router": "./examples/content-router",
	"direct":         "./core/wasmhost/testdata/direct",
	"misbehave":      "./core/wasmhost/testdata/misbehave",
}

// buildGo builds a Go plugin (once per run) and returns its module.
func buildGo(t testing.TB, name string) []byte { return buildGoWith(t, name, "") }

// buildGoWith builds a Go plugin with -ldflags (once per run and flags),
// for other versions of a test plugin.
func buildGoWith(t testing.TB, name, ldflags string) []byte {
	t.Helper()
	key := name + "\x00" + ldflags
	buildMu.Lock()
	b := builds[key]
	if b == nil {
		b = &buildResult{}
		builds[key] = b
	}
	n := len(builds)
	buildMu.Unlock()
	b.once.Do(func() {
		out := filepath.Join(testDir, fmt.Sprintf("%s-%d.wasm", name, n))
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-ldflags="+ldflags, "-o", out, goPlugins[name])
		cmd.Dir = goModRoot
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", name, err, msg)
			return
		}
		b.wasm, b.err = os.ReadFile(out)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.wasm
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "wat", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testConfig is a host configuration for tests: the shared cache, logs
// into the test's log, and a call deadline that guards against a hang,
// not a slow machine (200 ms failed TestUpgradeWhileRouting under the race
// detector on two busy cores); a test of the deadline sets its own.
func testConfig(t testing.TB) Config {
	return Config{
		CacheDir:    cacheDir,
		CallTimeout: 5 * time.Second,
		PoolSize:    2,
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
}

func newHost(t testing.TB, cfg Config) *Host {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

func load(t testing.TB, h *Host, name string, wasm []byte) *Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), name, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// typ returns the plugin's type called name.
func typ(t testing.TB, p *Plugin, name string) exchange.Type {
	t.Helper()
	for _, x := range p.Types() {
		if x.Name() == name {
			return x
		}
	}
	t.Fatalf("plugin %s has no type %s", p.Name(), name)
	return nil
}

func declare(t testing.TB, x exchange.Type, name string, args protocol.Table) exchange.Router {
	t.Helper()
	def := exchange.Definition{VHost: "/", Name: name, Type: x.Name(), Durable: true, Args: args}
	if err := x.ValidateDeclare(def); err != nil {
		t.Fatal(err)
	}
	r, err := x.Create(def)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var bindSeq uint64

func bind(t testing.TB, r exchange.Router, queue, key string, args protocol.Table) *exchange.Binding {
	t.Helper()
	bindSeq++
	b := &exchange.Binding{Destination: exchange.Destination{Kind: exchange.ToQueue, Name: queue}, Key: key, Args: args, Seq: bindSeq}
	if err := r.ValidateBinding(b); err != nil {
		t.Fatal(err)
	}
	if err := r.AddBinding(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func msg(t testing.TB, key string, headers protocol.Table, body string) *message.Message {
	t.Helper()
	var flags uint16
	var props []byte
	if headers != nil {
		p := protocol.Properties{Flags: protocol.FlagHeaders, Headers: headers}
		var err error
		if props, err = p.Append(nil); err != nil {
			t.Fatal(err)
		}
		flags = p.Flags
	}
	m, err := message.New("x", key, flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// route routes m and returns the queue names it reached, in order.
func route(r exchange.Router, m *message.Message) ([]string, *exchange.Result, error) {
	var res exchange.Result
	if err := r.Route(m, &res); err != nil {
		return nil, &res, err
	}
	var qs []string
	for _, b := range res.Bindings {
		qs = append(qs, b.Destination.Name)
	}
	return qs, &res, nil
}

// growPool grows p's pool to n instances, one background instantiation at
// a time, as contention would.
func growPool(t testing.TB, p *Plugin, n int) {
	t.Helper()
	for p.pool.count() < n {
		before := p.pool.count()
		p.pool.grow()
		if !poll.Within(10*time.Second, func() bool { return p.pool.count() != before && p.pool.free() >= p.pool.count() }) {
			t.Fatalf("the pool did not grow past %d", before)
		}
	}
}

// holdAllBut takes all free instances but keep out of the pool, rotating
// which stay: the held ones go back to the end of the free list.
func holdAllBut(t testing.TB, p *Plugin, keep int) []*instance {
	t.Helper()
	var held []*instance
	for p.pool.free() > keep {
		held = append(held, p.pool.tryGet(0))
	}
	return held
}

func release(p *Plugin, held []*instance) {
	for _, in := range held {
		p.pool.store(in)
	}
}

// callsRunning counts the host's instances in a call.
func callsRunning(h *Host) int {
	h.instMu.RLock()
	defer h.instMu.RUnlock()
	n := 0
	for in := range h.instances {
		if in.inCall() {
			n++
		}
	}
	return n
}
