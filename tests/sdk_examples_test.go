package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
)

// The plugin guides (sdk/README.md for Go, sdk/rust/README.md,
// sdk/c/README.md) each take an author from an empty folder to a plugin.
// TestSDKExamples builds each guide's example by running the guide's own
// build block (the fenced block after the line "<!-- sdk-test: build -->")
// with sh in a temporary folder outside the repository, WARREN set to this
// checkout, as a reader would paste it; then loads the module into a
// broker, enables it and routes through an exchange of its type over AMQP.
// So the guides' commands cannot rot without this test failing.
//
// A language whose toolchain is missing is skipped, naming what is
// missing, unless WARREN_REQUIRE_SDK_TOOLCHAINS=1 (CI sets it after
// installing them): then it fails.

const sdkBuildMarker = "<!-- sdk-test: build -->"

type sdkExample struct {
	lang   string
	readme string // relative to the repository root
	plugin string // the plugin's name: NAME.wasm, warrenctl plugins enable NAME
	typ    string // its exchange type
	// toolchain checks what the build needs and returns environment
	// variables to add, or why it cannot run.
	toolchain func(t *testing.T) (env []string, missing string)
}

var sdkExamples = []sdkExample{
	{"go", "sdk/README.md", "go-key", "x-go-key", goToolchain},
	{"rust", "sdk/rust/README.md", "rust-key", "x-rust-key", rustToolchain},
	{"c", "sdk/c/README.md", "c-key", "x-c-key", cToolchain},
}

func TestSDKExamples(t *testing.T) {
	if reference() != "" {
		t.Skip("loads plugins into Warren")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range sdkExamples {
		t.Run(ex.lang, func(t *testing.T) {
			env, missing := ex.toolchain(t)
			if missing != "" {
				if os.Getenv("WARREN_REQUIRE_SDK_TOOLCHAINS") == "1" {
					t.Fatalf("%s toolchain: %s (WARREN_REQUIRE_SDK_TOOLCHAINS=1)", ex.lang, missing)
				}
				t.Skipf("%s toolchain: %s", ex.lang, missing)
			}
			block := readmeBuildBlock(t, filepath.Join(root, ex.readme))
			wasm := buildSDKExample(t, root, block, env, ex.plugin)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ex.plugin+".wasm"), wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			checkKeyExchange(t, dir, ex.plugin, ex.typ)
		})
	}
}

// readmeBuildBlock returns the fenced block after the build marker.
func readmeBuildBlock(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	state := 0 // 0 before the marker, 1 before the fence, 2 inside
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == sdkBuildMarker:
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 1 && strings.TrimSpace(line) != "":
			t.Fatalf("%s: the build marker is not followed by a fenced block", path)
		case state == 2 && strings.HasPrefix(line, "```"):
			return strings.Join(lines, "\n") + "\n"
		case state == 2:
			lines = append(lines, line)
		}
	}
	t.Fatalf("%s: no fenced block after %q", path, sdkBuildMarker)
	return ""
}

// buildSDKExample runs a guide's build block in a fresh folder and
// returns NAME/NAME.wasm, the module the block leaves.
func buildSDKExample(t *testing.T, root, block string, env []string, plugin string) []byte {
	t.Helper()
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ex", "-c", block)
	cmd.Dir = work
	cmd.Env = append(cleanEnv(), "WARREN="+root)
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's build block failed: %v\n--- block\n%s--- output\n%s", err, block, out)
	}
	t.Logf("built %s in %v", plugin, time.Since(start).Round(time.Millisecond))
	wasm, err := os.ReadFile(filepath.Join(work, plugin, plugin+".wasm"))
	if err != nil {
		t.Fatalf("the guide's build block left no %s/%s.wasm: %v\n%s", plugin, plugin, err, out)
	}
	return wasm
}

// cleanEnv is the test's environment without what would send a guide's
// commands elsewhere than a reader's would go (a cargo target folder, a
// Go workspace, flags for the test's own build).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "CARGO_TARGET_DIR", "CARGO_BUILD_TARGET", "GOFLAGS", "GOWORK", "GOOS", "GOARCH", "WARREN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOWORK=off", "GOFLAGS=-mod=mod")
}

func goToolchain(t *testing.T) ([]string, string) {
	if _, err := exec.LookPath("go"); err != nil {
		return nil, "go not found"
	}
	return nil, ""
}

// rustToolchain finds a cargo whose rustc has the wasm32-unknown-unknown
// standard library: the first on PATH (rustup's, say) if it has it, else
// Debian's in /usr/bin (rustc, cargo, libstd-rust-dev-wasm32), put first
// on PATH for the guide's commands.
func rustToolchain(t *testing.T) ([]string, string) {
	hasTarget := func(rustc string) bool {
		out, err := exec.Command(rustc, "--print", "target-libdir", "--target", "wasm32-unknown-unknown").Output()
		if err != nil {
			return false
		}
		libs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "libcore-*.rlib"))
		return len(libs) > 0
	}
	cargo, errCargo := exec.LookPath("cargo")
	rustc, errRustc := exec.LookPath("rustc")
	if errCargo == nil && errRustc == nil && hasTarget(rustc) {
		return nil, ""
	}
	if _, err := os.Stat("/usr/bin/cargo"); err == nil && hasTarget("/usr/bin/rustc") {
		bin := t.TempDir()
		for _, tool := range []string{"cargo", "rustc", "rustdoc"} {
			if _, err := os.Stat("/usr/bin/" + tool); err == nil {
				if err := os.Symlink("/usr/bin/"+tool, filepath.Join(bin, tool)); err != nil {
					t.Fatal(err)
				}
			}
		}
		return []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "RUSTC=/usr/bin/rustc"}, ""
	}
	switch {
	case errCargo != nil:
		return nil, "cargo not found (rustup, or Debian's rustc cargo libstd-rust-dev-wasm32)"
	case errRustc != nil:
		return nil, "rustc not found"
	}
	return nil, fmt.Sprintf("%s has no wasm32-unknown-unknown target (rustup target add wasm32-unknown-unknown, or Debian's libstd-rust-dev-wasm32) and /usr/bin has none either", cargo)
}

// cToolchain checks that clang links a wasm32 module (clang and lld).
func cToolchain(t *testing.T) ([]string, string) {
	if _, err := exec.LookPath("clang"); err != nil {
		return nil, "clang not found (Debian's clang and lld)"
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte("int f(void) { return 1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("clang", "--target=wasm32", "-nostdlib", "-Wl,--no-entry", "-o", filepath.Join(dir, "probe.wasm"), src).CombinedOutput()
	if err != nil {
		return nil, "clang cannot link wasm32 (is lld installed?): " + firstLine(string(out))
	}
	return nil, ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// checkKeyExchange runs the examples' exchange type in a broker: a
// message goes to the bindings whose key equals its routing key, or the
// value of the header the declare names in x-key-header; a bad argument
// is refused with the plugin's 406.
func checkKeyExchange(t *testing.T, pluginDir, plugin, typ string) {
	s := startWarren(t, func(c *config.Config) { c.Plugins.Dir = pluginDir })
	if err := s.b.EnablePlugin(plugin); err != nil {
		t.Fatalf("enable %s: %v", plugin, err)
	}
	_, ch := confirmChannel(t, s)

	byKey := uniq(t, "by-key")
	if err := ch.ExchangeDeclare(byKey, typ, false, false, false, false, nil); err != nil {
		t.Fatalf("declare %s: %v", typ, err)
	}
	byHeader := uniq(t, "by-header")
	if err := ch.ExchangeDeclare(byHeader, typ, false, false, false, false, amqp.Table{"x-key-header": "tenant"}); err != nil {
		t.Fatalf("declare %s with x-key-header: %v", typ, err)
	}
	orders := declareQueue(t, s, ch, "orders", nil)
	acme := declareQueue(t, s, ch, "acme", nil)
	other := declareQueue(t, s, ch, "other", nil)
	bind(t, ch, orders, "orders", byKey, nil)
	bind(t, ch, other, "other", byKey, nil)
	bind(t, ch, acme, "acme", byHeader, nil)
	bind(t, ch, orders, "orders", byHeader, nil)

	publishConfirmed(t, ch, byKey, "orders", body("by key"))
	publishConfirmed(t, ch, byKey, "nobody", body("nowhere"))
	withTenant := amqp.Publishing{Headers: amqp.Table{"region": "eu", "tenant": "acme"}, Body: []byte("by header")}
	publishConfirmed(t, ch, byHeader, "orders", withTenant)
	publishConfirmed(t, ch, byHeader, "orders", body("no header: by key"))

	for _, c := range []struct {
		queue string
		want  []string
	}{
		{orders, []string{"by key", "no header: by key"}},
		{acme, []string{"by header"}},
		{other, nil},
	} {
		if got := drain(t, ch, c.queue); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s got %q, want %q", c.queue, got, c.want)
		}
	}

	// Unbinding takes effect.
	if err := ch.QueueUnbind(orders, "orders", byKey, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, byKey, "orders", body("after unbind"))
	if got := drain(t, ch, orders); len(got) != 0 {
		t.Errorf("after unbinding, orders got %q", got)
	}

	// The plugin's own refusal reaches the client as its 406 and text.
	_, bad := channel(t, s)
	err := bad.ExchangeDeclare(uniq(t, "bad"), typ, false, false, false, false, amqp.Table{"x-key-header": int32(5)})
	expectCode(t, err, amqp.PreconditionFailed)
	if !strings.Contains(err.Error(), "x-key-header must be a non-empty string") {
		t.Errorf("refusal: %v", err)
	}
}
