package wasmpatch

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const exportName = "warren_interrupt"

func instantiate(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	t.Cleanup(func() { r.Close(ctx) })
	m, err := r.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func call(t *testing.T, m api.Module, name string, args ...uint64) (uint64, error) {
	t.Helper()
	res, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		return 0, err
	}
	return res[0], nil
}

func TestPatchKeepsBehaviour(t *testing.T) {
	orig, err := os.ReadFile("testdata/loops.wasm")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Patch(orig, exportName)
	if err != nil {
		t.Fatal(err)
	}
	if res.Functions != 4 || res.Loops != 1 || res.Global != 1 {
		t.Fatalf("got %d functions, %d loops, global %d; want 4, 1, 1", res.Functions, res.Loops, res.Global)
	}
	a, b := instantiate(t, orig), instantiate(t, res.Wasm)
	for _, c := range []struct {
		fn   string
		args []uint64
	}{{"spin", []uint64{6}}, {"dispatch", []uint64{0}}, {"dispatch", []uint64{1}}, {"dispatch", []uint64{7}}, {"misc", nil}} {
		want, err1 := call(t, a, c.fn, c.args...)
		got, err2 := call(t, b, c.fn, c.args...)
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("%s%v: patched %d (%v), original %d (%v)", c.fn, c.args, got, err2, want, err1)
		}
	}
	if g := b.ExportedGlobal(exportName); g == nil || g.Get() != 0 {
		t.Fatalf("interrupt global missing or not zero: %v", g)
	}
}

// TestInterrupt sets the global from another goroutine while the module
// loops or recurses, as the host's watchdog does.
func TestInterrupt(t *testing.T) {
	orig, _ := os.ReadFile("testdata/loops.wasm")
	res, err := Patch(orig, exportName)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"spin", "recurse"} {
		m := instantiate(t, res.Wasm)
		g := m.ExportedGlobal(exportName).(api.MutableGlobal)
		timer := time.AfterFunc(20*time.Millisecond, func() { g.Set(1) })
		start := time.Now()
		_, err := call(t, m, fn, 0)
		timer.Stop()
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("%s: want an unreachable trap, got %v", fn, err)
		}
		if fn == "spin" && time.Since(start) > 5*time.Second {
			t.Fatalf("%s: interrupt took %v", fn, time.Since(start))
		}
	}
}

func TestPatchRefuses(t *testing.T) {
	orig, _ := os.ReadFile("testdata/loops.wasm")
	res, err := Patch(orig, exportName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Patch(res.Wasm, exportName); err == nil || !strings.Contains(err.Error(), "already exports") {
		t.Errorf("patching twice: %v", err)
	}
	if _, err := Patch([]byte("not wasm at all"), exportName); err != ErrNotWasm {
		t.Errorf("garbage: %v", err)
	}
	for cut := 9; cut < len(orig); cut += 7 {
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
	t.Logf("%d bytes -> %d bytes, %d functions, %d loops, in %v", len(orig), len(res.Wasm), res.Functions, res.Loops, time.Since(start))
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler())
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, res.Wasm); err != nil {
		t.Fatal(err)
	}
}
