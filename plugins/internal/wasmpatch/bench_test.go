package wasmpatch

import (
	"os"
	"testing"
)

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
