package shipped

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/warrenmq/warren/plugins/shipped/internal/wasmbuild"
)

func TestModules(t *testing.T) {
	mods := Modules()
	var names []string
	for name, wasm := range mods {
		names = append(names, name)
		if !bytes.HasPrefix(wasm, []byte("\x00asm\x01\x00\x00\x00")) {
			t.Errorf("%s is not a WebAssembly 1.0 module", name)
		}
	}
	slices.Sort(names)
	if want := wasmbuild.Names(); !slices.Equal(names, want) {
		t.Errorf("shipped %v, want %v (run go generate ./plugins/shipped)", names, want)
	}
	// Callers get their own copies.
	mods["jms"][0] = 'X'
	if Modules()["jms"][0] != 0 {
		t.Error("Modules shares its bytes between calls")
	}
	if got := Names(); !slices.Equal(got, names) {
		t.Errorf("Names() = %v, Modules() has %v", got, names)
	}
	if v := GoVersion(); len(v) < 4 || v[:2] != "go" {
		t.Errorf("GoVersion() = %q", v)
	}
}

// TestReproducible rebuilds every shipped module from its source and
// checks the bytes are the shipped ones: the committed modules are what
// the committed source builds to. A Go version other than the one that
// built them gives other bytes, so the test then skips.
func TestReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds the shipped modules; skipped in -short mode")
	}
	want := GoVersion()
	if v := runtime.Version(); v != want {
		t.Skipf("the shipped modules were built with %s and this is %s: the bytes cannot be compared", want, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goCmd := wasmbuild.GoCommand()
	if v, err := wasmbuild.GoVersion(ctx, goCmd); err != nil || v != want {
		t.Skipf("the go command at hand (%s) is %s %v, not %s", goCmd, v, err, want)
	}
	root, err := wasmbuild.ModuleRoot(ctx, goCmd, ".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := wasmbuild.Build(ctx, goCmd, root, dir); err != nil {
		t.Fatal(err)
	}
	shipped := Modules()
	for _, name := range wasmbuild.Names() {
		built, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(built, shipped[name]) {
			t.Errorf("%s.wasm (%d bytes) is not what its source builds to (%d bytes): run go generate ./plugins/shipped and commit the result",
				name, len(shipped[name]), len(built))
		}
	}
}
