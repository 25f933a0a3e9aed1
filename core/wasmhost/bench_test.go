package wasmhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/examples/content-router/content"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/sdk"
)

// The route benchmarks compare the same routing logic run natively and
// through a plugin, on one goroutine and on every P (b.RunParallel), with
// a message of about 220 bytes (routing key, a property list with headers,
// a JSON body) going to 4 bindings:
//
//	go test ./core/wasmhost -run XXX -bench Route -benchmem
//
// direct: core's built-in direct type against the direct test plugin (the
// same semantics in Go through the SDK). content: the content-router's
// logic called natively against the content-router plugin.

func benchMessage(b *testing.B) *message.Message {
	p := protocol.Properties{
		Flags:        protocol.FlagContentType | protocol.FlagHeaders | protocol.FlagDeliveryMode | protocol.FlagMessageID,
		ContentType:  "application/json",
		Headers:      protocol.Table{"tenant": "acme", "attempt": int32(1), "trace-id": "4bf92f3577b34da6a3ce929d0e0e4736"},
		DeliveryMode: 2,
		MessageID:    "msg-000000123456",
	}
	props, err := p.Append(nil)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"order": {"id": 123456, "customer": "acme", "country": "NO", "total": 99.5}}`
	m, err := message.New("orders", "orders.created", p.Flags, props, []byte(body))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchHost(b *testing.B) *Host {
	cfg := testConfig(b)
	cfg.PoolSize = runtime.GOMAXPROCS(0)
	cfg.Logger = zerolog.Nop()
	return newHost(b, cfg)
}

type routeFunc interface {
	Route(*message.Message, *exchange.Result) error
}

func runRoute(b *testing.B, r routeFunc, m *message.Message, want int) {
	runRouteEach(b, func() routeFunc { return r }, m, want)
}

// runRouteEach takes a router per goroutine from newRouter.
func runRouteEach(b *testing.B, newRouter func() routeFunc, m *message.Message, want int) {
	b.Run("1", func(b *testing.B) {
		r := newRouter()
		var res exchange.Result
		b.ReportAllocs()
		for b.Loop() {
			res.Reset()
			if err := r.Route(m, &res); err != nil || len(res.Bindings) != want {
				b.Fatalf("%d bindings, %v", len(res.Bindings), err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := newRouter()
			var res exchange.Result
			for pb.Next() {
				res.Reset()
				if err := r.Route(m, &res); err != nil || len(res.Bindings) != want {
					b.Errorf("%d bindings, %v", len(res.Bindings), err)
					return
				}
			}
		})
	})
}

func BenchmarkRouteDirect(b *testing.B) {
	m := benchMessage(b)
	bindFour := func(r exchange.Router) {
		for i, q := range []string{"q1", "q2", "q3", "q4"} {
			bnd := &exchange.Binding{Destination: exchange.Destination{Name: q}, Key: "orders.created", Seq: uint64(i)}
			if err := r.AddBinding(bnd); err != nil {
				b.Fatal(err)
			}
			other := &exchange.Binding{Destination: exchange.Destination{Name: q}, Key: "orders.other", Seq: uint64(i + 10)}
			if err := r.AddBinding(other); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("native", func(b *testing.B) {
		r, _ := exchange.Direct{}.Create(exchange.Definition{Name: "e"})
		bindFour(r)
		runRoute(b, r, m, 4)
	})
	b.Run("plugin", func(b *testing.B) {
		h := benchHost(b)
		p := load(b, h, "direct", buildGo(b, "direct"))
		r := declare(b, typ(b, p, "x-direct"), "e", nil)
		bindFour(r)
		growPool(b, p, runtime.GOMAXPROCS(0))
		runRoute(b, r, m, 4)
	})
	b.Run("plugin-c", func(b *testing.B) {
		wasm := buildC(b)
		h := benchHost(b)
		p := load(b, h, "direct-c", wasm)
		r := declare(b, typ(b, p, "x-direct-c"), "e", nil)
		bindFour(r)
		growPool(b, p, runtime.GOMAXPROCS(0))
		runRoute(b, r, m, 4)
	})
	b.Run("plugin-rust", func(b *testing.B) {
		wasm := buildRustExample(b)
		h := benchHost(b)
		p := load(b, h, "rust-key", wasm)
		r := declare(b, typ(b, p, "x-rust-key"), "e", nil)
		bindFour(r)
		growPool(b, p, runtime.GOMAXPROCS(0))
		runRoute(b, r, m, 4)
	})
}

// buildRustExample builds the Rust SDK's example plugin (x-rust-key:
// bindings whose key equals the routing key, the direct semantics) with
// Debian's Rust for wasm32, or skips.
func buildRustExample(b *testing.B) []byte {
	b.Helper()
	if _, err := os.Stat("/usr/lib/rustlib/wasm32-unknown-unknown"); err != nil {
		b.Skip("no Rust standard library for wasm32 (Debian's libstd-rust-dev-wasm32)")
	}
	target := b.TempDir()
	cmd := exec.Command("/usr/bin/cargo", "build", "--offline", "--release", "--target", "wasm32-unknown-unknown")
	cmd.Dir = filepath.Join(goModRoot, "sdk", "rust", "example")
	cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+target, "RUSTC=/usr/bin/rustc")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("cargo: %v\n%s", err, out)
	}
	wasm, err := os.ReadFile(filepath.Join(target, "wasm32-unknown-unknown", "release", "rust_key.wasm"))
	if err != nil {
		b.Fatal(err)
	}
	return wasm
}

// BenchmarkHeaderLookups reads four of ten headers in a Go guest, through
// the SDK's header index (Message.Header) and by scanning the table for
// each (Table.Get), as the SDK did before its index; "found" is the same
// route reading no header.
func BenchmarkHeaderLookups(b *testing.B) {
	h := benchHost(b)
	p := load(b, h, "misbehave", buildGo(b, "misbehave"))
	r := declare(b, typ(b, p, "x-misbehave"), "e", nil)
	bind(b, r, "q", "found", nil)
	headers := protocol.Table{}
	for i := range 10 {
		headers[fmt.Sprintf("h%d", i)] = "value"
	}
	// "found" reads no header: the route's own cost with this message.
	for _, key := range []string{"found", "headers4", "headers4-scan"} {
		m := msg(b, key, headers, "")
		b.Run(key, func(b *testing.B) {
			var res exchange.Result
			for b.Loop() {
				res.Reset()
				if err := r.Route(m, &res); err != nil || len(res.Bindings) != 1 {
					b.Fatalf("%v %v", res.Bindings, err)
				}
			}
		})
	}
}

// nativeContent runs the content-router's exchange natively, seeing the
// message the way the SDK does, without allocating.
type nativeContent struct {
	x     sdk.Exchange
	slots []*exchange.Binding
	msg   sdk.Message
	res   sdk.Result
}

func (n *nativeContent) Route(m *message.Message, res *exchange.Result) error {
	n.msg.Reset(m.RoutingKey, m.Flags, m.Props, m.Body)
	n.res.Reset()
	if err := n.x.Route(&n.msg, &n.res); err != nil {
		return err
	}
	for i := range n.res.Len() {
		res.Bindings = append(res.Bindings, n.slots[n.res.ID(i)])
	}
	return nil
}

func BenchmarkRouteContent(b *testing.B) {
	m := benchMessage(b)
	args := []protocol.Table{
		{"x-path": "order.country", "x-value": "NO"},
		{"order.customer": "acme"},
		{"order.total": 99.5, "order.country": "NO"},
		{"order.id": nil},
		{"order.country": "SE"},
		{"order.total": int64(100)},
	}
	b.Run("native", func(b *testing.B) {
		// The exchange keeps per-message scratch (one instance runs one
		// call at a time), so each goroutine gets its own.
		runRouteEach(b, func() routeFunc {
			x, _ := content.Type{}.Create(&sdk.Declaration{Name: "e"})
			n := &nativeContent{x: x}
			for i, a := range args {
				t, err := sdk.MakeTable(a)
				if err != nil {
					b.Fatal(err)
				}
				if err := x.AddBinding(&sdk.Binding{ID: sdk.BindingID(i), Args: t}); err != nil {
					b.Fatal(err)
				}
				n.slots = append(n.slots, &exchange.Binding{Destination: exchange.Destination{Name: "q"}, Args: a})
			}
			return n
		}, m, 4)
	})
	b.Run("plugin", func(b *testing.B) {
		h := benchHost(b)
		p := load(b, h, "content-router", buildGo(b, "content-router"))
		r := declare(b, typ(b, p, "x-content"), "e", nil)
		for i, a := range args {
			if err := r.AddBinding(&exchange.Binding{Destination: exchange.Destination{Name: "q"}, Args: a, Seq: uint64(i)}); err != nil {
				b.Fatal(err)
			}
		}
		growPool(b, p, runtime.GOMAXPROCS(0))
		runRoute(b, r, m, 4)
	})
}

// BenchmarkLoad measures loading a Go plugin: compiling it cold, and taking
// it from the compilation cache with a new host (a broker restart).
func BenchmarkLoad(b *testing.B) {
	wasm := buildGo(b, "content-router")
	for _, cold := range []bool{true, false} {
		name := "cached"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			if !cold {
				h, _ := New(Config{CacheDir: dir, Logger: zerolog.Nop()})
				if _, err := h.Load(context.Background(), "content-router", wasm); err != nil {
					b.Fatal(err)
				}
				h.Close(context.Background())
			}
			for b.Loop() {
				cfg := Config{CacheDir: dir, Logger: zerolog.Nop()}
				if cold {
					cfg.CacheDir = ""
				}
				h, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := h.Load(context.Background(), "content-router", wasm); err != nil {
					b.Fatal(err)
				}
				h.Close(context.Background())
			}
		})
	}
}

// BenchmarkInstantiate measures a fresh instance: instantiation, the Go
// runtime's initialization and the replay of one exchange with 100
// bindings, the work the pool does in the background.
func BenchmarkInstantiate(b *testing.B) {
	h := benchHost(b)
	p := load(b, h, "direct", buildGo(b, "direct"))
	r := declare(b, typ(b, p, "x-direct"), "e", nil)
	for i := range 100 {
		bnd := &exchange.Binding{Destination: exchange.Destination{Name: "q"}, Key: string(rune('a' + i%26)), Seq: uint64(i)}
		if err := r.AddBinding(bnd); err != nil {
			b.Fatal(err)
		}
	}
	var rss []uint64
	for b.Loop() {
		in, err := p.freshInstance()
		if err != nil {
			b.Fatal(err)
		}
		rss = append(rss, uint64(in.mem.Size()))
		p.pool.mu.Lock()
		delete(p.pool.all, in)
		p.pool.mu.Unlock()
		in.close()
	}
	b.ReportMetric(float64(rss[0])/(1<<20), "MiB-linear-memory")
}

// BenchmarkInstanceMemory reports what one more instance of a Go plugin
// costs the broker's process: resident memory (Linux) and Go heap.
func BenchmarkInstanceMemory(b *testing.B) {
	h := benchHost(b)
	p := load(b, h, "direct", buildGo(b, "direct"))
	const n = 8
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		rss0 := residentBytes()
		var ins []*instance
		for range n {
			in, err := p.freshInstance()
			if err != nil {
				b.Fatal(err)
			}
			ins = append(ins, in)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		rss1 := residentBytes()
		b.ReportMetric(float64(rss1-rss0)/n/(1<<20), "MiB-RSS/instance")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n/(1<<20), "MiB-heap/instance")
		b.ReportMetric(float64(ins[0].mem.Size())/(1<<20), "MiB-linear-memory")
		for _, in := range ins {
			p.pool.mu.Lock()
			delete(p.pool.all, in)
			p.pool.mu.Unlock()
			in.close()
		}
	}
}

// residentBytes reads VmRSS from /proc (0 elsewhere).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
