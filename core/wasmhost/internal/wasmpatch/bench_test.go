package wasmpatch

import (
	"context"
	"os"
	"testing"
)

// BenchmarkSpin measures what the checks cost: a tight loop of a few
// instructions per iteration, original and patched.
//
//	go test ./core/wasmhost/internal/wasmpatch -bench Spin
func BenchmarkSpin(b *testing.B) {
	orig, err := os.ReadFile("testdata/loops.wasm")
	if err != nil {
		b.Fatal(err)
	}
	res, err := Patch(orig, exportName)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		wasm []byte
	}{{"original", orig}, {"patched", res.Wasm}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			m := newHost(b, true).instantiate(b, c.wasm)
			f := m.ExportedFunction("spin")
			stack := make([]uint64, 1)
			const iterations = 1 << 20
			for b.Loop() {
				stack[0] = iterations + 1
				if err := f.CallWithStack(ctx, stack); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/iterations, "ns/iteration")
		})
	}
}

func BenchmarkPatchGoModule(b *testing.B) {
	path := os.Getenv("WASMPATCH_GO_MODULE")
	if path == "" {
		b.Skip("set WASMPATCH_GO_MODULE to a Go-built .wasm")
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Patch(orig, exportName); err != nil {
			b.Fatal(err)
		}
	}
}
