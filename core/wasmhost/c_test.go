package wasmhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/protocol"
)

// TestCHeaderCompiles checks sdk/warren_plugin.h as C99 and C++ with the
// host's compilers, warnings as errors.
func TestCHeaderCompiles(t *testing.T) {
	src := filepath.Join(t.TempDir(), "hdr.c")
	if err := os.WriteFile(src, []byte("#include \"warren_plugin.h\"\nint main(void) { return WARREN_ABI_VERSION == 0x10000 ? 0 : 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sdk := filepath.Join(goModRoot, "sdk")
	ran := false
	for _, c := range [][]string{
		{"gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-I", sdk, src},
		{"g++", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-x", "c++", "-I", sdk, src},
		{"clang", "-std=c99", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", sdk, src},
	} {
		if _, err := exec.LookPath(c[0]); err != nil {
			continue
		}
		ran = true
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", c[0], err, out)
		}
	}
	if !ran {
		t.Skip("no C compiler")
	}
}

// buildC builds testdata/c/direct.c with clang for wasm32, or skips.
func buildC(t testing.TB) []byte {
	t.Helper()
	if _, err := exec.LookPath("clang"); err != nil {
		t.Skip("clang not installed")
	}
	out := filepath.Join(t.TempDir(), "direct-c.wasm")
	cmd := exec.Command("clang", "--target=wasm32", "-O2", "-nostdlib", "-Wall", "-Wextra", "-Werror",
		"-Wl,--no-entry", "-I", filepath.Join(goModRoot, "sdk"), "-o", out, filepath.Join("testdata", "c", "direct.c"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		s := string(msg)
		if strings.Contains(s, "unknown target") || strings.Contains(s, "unable to create target") ||
			strings.Contains(s, "wasm-ld") || strings.Contains(s, "No available targets") {
			t.Skipf("clang cannot build wasm32 here: %s", firstLine(s))
		}
		t.Fatalf("clang: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCPlugin loads the C plugin built from the header: no WASI, no
// _initialize, a static exchange buffer.
func TestCPlugin(t *testing.T) {
	wasm := buildC(t)
	h := newHost(t, testConfig(t))
	p := load(t, h, "direct-c", wasm)
	if info := p.Info(); info.Version != "1.0.0" || !slices.Equal(info.Types, []string{"x-direct-c"}) {
		t.Fatalf("info: %+v", info)
	}
	x := typ(t, p, "x-direct-c")
	a, b := declare(t, x, "a", nil), declare(t, x, "b", protocol.Table{"k": "v"})
	ba := bind(t, a, "qa1", "k", nil)
	bind(t, a, "qa2", "k", nil)
	bind(t, b, "qb", "k", nil)
	got, _, err := route(a, msg(t, "k", nil, ""))
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"qa1", "qa2"}) {
		t.Fatalf("route a: %v %v", got, err)
	}
	if err := a.RemoveBindings([]*exchange.Binding{ba}); err != nil {
		t.Fatal(err)
	}
	if got, _, err = route(a, msg(t, "k", nil, "")); err != nil || !slices.Equal(got, []string{"qa2"}) {
		t.Fatalf("after unbinding: %v %v", got, err)
	}
	if got, _, err = route(b, msg(t, "hello-log", nil, "")); err != nil || len(got) != 0 {
		t.Fatalf("route b: %v %v", got, err)
	}
	a.Delete()
	if got, _, err = route(b, msg(t, "k", nil, "")); err != nil || !slices.Equal(got, []string{"qb"}) {
		t.Fatalf("after deleting a, b routes to %v %v", got, err)
	}
}
