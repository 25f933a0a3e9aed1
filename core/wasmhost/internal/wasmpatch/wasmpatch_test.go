package wasmpatch

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const exportName = "warren_interrupt"

// host is a runtime with what the fixture imports (env.wasm) and a yield
// that does what the broker's does: fail the call once it is marked
// interrupted, else let other goroutines run and renew the budget.
type host struct {
	rt          wazero.Runtime
	interrupted atomic.Bool
	yields      atomic.Int64
}

var errInterrupted = errors.New("interrupted")

func newHost(t testing.TB, withYield bool) *host {
	t.Helper()
	ctx := context.Background()
	h := &host{rt: wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())}
	t.Cleanup(func() { h.rt.Close(ctx) })
	env, err := os.ReadFile("testdata/env.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.rt.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
		t.Fatal(err)
	}
	if withYield {
		_, err := h.rt.NewHostModuleBuilder(ImportModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
				h.yields.Add(1)
				if h.interrupted.Load() {
					panic(errInterrupted)
				}
				runtime.Gosched()
				stack[0] = Budget
			}), nil, []api.ValueType{api.ValueTypeI32}).Export(ImportYield).Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *host) instantiate(t testing.TB, wasm []byte) api.Module {
	t.Helper()
	m, err := h.rt.InstantiateWithConfig(context.Background(), wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func call(m api.Module, name string, args ...uint64) (uint64, error) {
	res, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		return 0, err
	}
	return res[0], nil
}

func fixture(t testing.TB) ([]byte, *Result) {
	t.Helper()
	orig, err := os.ReadFile("testdata/loops.wasm")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Patch(orig, exportName)
	if err != nil {
		t.Fatal(err)
	}
	return orig, res
}

func TestPatchKeepsBehaviour(t *testing.T) {
	orig, res := fixture(t)
	// One imported function (env.twice) before the yield; one imported
	// global and three defined ones before the budget.
	// Entry checks: indirect, direct, reffunc and recurse call; the
	// others are leaves.
	if res.Functions != 11 || res.Entries != 4 || res.Loops != 1 || res.Global != 4 || res.Yield != 1 {
		t.Fatalf("got %d functions, %d entry checks, %d loops, global %d, yield %d; want 11, 4, 1, 4, 1",
			res.Functions, res.Entries, res.Loops, res.Global, res.Yield)
	}
	a, b := newHost(t, false).instantiate(t, orig), newHost(t, true).instantiate(t, res.Wasm)
	for _, c := range []struct {
		fn   string
		args []uint64
	}{
		{"indirect", []uint64{0}}, {"indirect", []uint64{1}}, {"indirect", []uint64{2}}, {"indirect", []uint64{3}},
		{"direct", []uint64{4}}, {"reffunc", []uint64{6}}, {"started", nil},
		{"spin", []uint64{6}}, {"dispatch", []uint64{0}}, {"dispatch", []uint64{1}}, {"dispatch", []uint64{7}}, {"misc", nil},
	} {
		want, err1 := call(a, c.fn, c.args...)
		got, err2 := call(b, c.fn, c.args...)
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("%s%v: patched %d (%v), original %d (%v)", c.fn, c.args, got, err2, want, err1)
		}
	}
	if g := b.ExportedGlobal(exportName); g == nil || g.Get() == 0 || g.Get() > Budget {
		t.Fatalf("budget global missing or out of range: %v", g)
	}
	// The name section was renumbered with the functions: every export
	// still carries its own name.
	for name, def := range b.ExportedFunctionDefinitions() {
		if def.Name() != name {
			t.Errorf("export %q is named %q in the patched module", name, def.Name())
		}
	}
}

// TestBudgetYields: a long loop calls yield once per Budget checks.
func TestBudgetYields(t *testing.T) {
	_, res := fixture(t)
	h := newHost(t, true)
	m := h.instantiate(t, res.Wasm)
	const iterations = 10 * Budget
	if _, err := call(m, "spin", iterations+1); err != nil {
		t.Fatal(err)
	}
	if got := h.yields.Load(); got < 9 || got > 11 {
		t.Fatalf("%d iterations yielded %d times, want about %d", iterations, got, iterations/Budget)
	}
}

// TestInterrupt marks the call and zeroes the budget from another
// goroutine while the module loops or recurses, as the host's watchdog
// does.
func TestInterrupt(t *testing.T) {
	_, res := fixture(t)
	for _, fn := range []string{"spin", "recurse"} {
		h := newHost(t, true)
		m := h.instantiate(t, res.Wasm)
		g := m.ExportedGlobal(exportName).(api.MutableGlobal)
		timer := time.AfterFunc(20*time.Millisecond, func() {
			h.interrupted.Store(true)
			g.Set(0)
		})
		_, err := call(m, fn, 0)
		timer.Stop()
		if err == nil || !strings.Contains(err.Error(), errInterrupted.Error()) {
			t.Fatalf("%s: want the yield's failure, got %v", fn, err)
		}
	}
}

// TestInterruptOnOneP: with a single P, the goroutine that interrupts can
// only run because the loop yields. Without the yield this test hangs.
func TestInterruptOnOneP(t *testing.T) {
	_, res := fixture(t)
	h := newHost(t, true)
	m := h.instantiate(t, res.Wasm)
	g := m.ExportedGlobal(exportName).(api.MutableGlobal)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	timer := time.AfterFunc(20*time.Millisecond, func() {
		h.interrupted.Store(true)
		g.Set(0)
	})
	defer timer.Stop()
	if _, err := call(m, "spin", 0); err == nil || !strings.Contains(err.Error(), errInterrupted.Error()) {
		t.Fatalf("want the yield's failure, got %v", err)
	}
}

func TestPatchRefuses(t *testing.T) {
	orig, res := fixture(t)
	if _, err := Patch(res.Wasm, exportName); err == nil || !strings.Contains(err.Error(), "already imports") {
		t.Errorf("patching twice: %v", err)
	}
	if _, err := Patch([]byte("not wasm at all"), exportName); err != ErrNotWasm {
		t.Errorf("garbage: %v", err)
	}
	// A cut that ends a section leaves a well-formed (if useless) list of
	// sections, which wazero refuses later; every other cut is an error.
	boundaries := map[int]bool{}
	for d := (decoder{b: orig, pos: 8}); d.pos < len(d.b) && d.err == nil; {
		d.byte()
		d.bytes(int(d.u32()))
		boundaries[d.pos] = true
	}
	for cut := 9; cut < len(orig); cut++ {
		if boundaries[cut] {
			continue
		}
		if _, err := Patch(orig[:cut], exportName); err == nil {
			t.Errorf("module cut at %d bytes patched without error", cut)
		}
	}
}

// TestPatchGoModule patches a Go-built module when the test is given one
// (the host's tests build Go plugins and exercise the result fully).
func TestPatchGoModule(t *testing.T) {
	path := os.Getenv("WASMPATCH_GO_MODULE")
	if path == "" {
		t.Skip("set WASMPATCH_GO_MODULE to a Go-built .wasm")
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := Patch(orig, exportName)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes -> %d bytes, %d functions, %d entry checks, %d loops, in %v",
		len(orig), len(res.Wasm), res.Functions, res.Entries, res.Loops, time.Since(start))
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, res.Wasm); err != nil {
		t.Fatal(err)
	}
}
