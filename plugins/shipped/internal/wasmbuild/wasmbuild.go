// Package wasmbuild builds the plugins Warren ships from their source, the
// same way for `go generate ./plugins/shipped` and for the test that checks
// the committed modules are what the source builds to.
package wasmbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Plugins maps each shipped plugin's name (its module is NAME.wasm) to its
// package, relative to the module root.
var Plugins = map[string]string{
	"consistent-hash": "./plugins/consistent-hash",
	"delayed-message": "./plugins/delayed-message",
	"jms":             "./plugins/jms",
}

// Names returns the plugins' names, sorted.
func Names() []string {
	var names []string
	for n := range Plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Flags are the build flags of a shipped module: a WASI reactor, without
// the paths of the machine that built it nor version-control stamps, so
// the same source and toolchain give the same bytes anywhere.
var Flags = []string{"-trimpath", "-buildvcs=false", "-buildmode=c-shared"}

// Env is the environment of a build: the caller's, with the target set and
// the variables that would change the output pinned (a user's GOFLAGS
// could add flags; GOWASM enables instructions).
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "GOOS", "GOARCH", "GOFLAGS", "GOWASM", "CGO_ENABLED", "GOEXPERIMENT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=", "GOWASM=", "CGO_ENABLED=0")
}

// GoCommand is the go command of the toolchain running the caller when it
// can be found (so a test builds with its own toolchain), else "go".
func GoCommand() string {
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		bin := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	return "go"
}

func goOutput(ctx context.Context, goCmd, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", goCmd, strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// GoVersion is the version of goCmd's toolchain, e.g. "go1.26.8".
func GoVersion(ctx context.Context, goCmd string) (string, error) {
	return goOutput(ctx, goCmd, ".", "env", "GOVERSION")
}

// ModuleRoot is the directory of the go.mod of the module around dir.
func ModuleRoot(ctx context.Context, goCmd, dir string) (string, error) {
	gomod, err := goOutput(ctx, goCmd, dir, "env", "GOMOD")
	if err != nil {
		return "", err
	}
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%s is not inside a Go module", dir)
	}
	return filepath.Dir(gomod), nil
}

// Build builds every plugin into outDir as NAME.wasm. -buildmode=c-shared
// takes one main package per go command, so the builds run side by side,
// sharing the build cache.
func Build(ctx context.Context, goCmd, root, outDir string) error {
	out, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(Plugins))
	for i, name := range Names() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"build"}, Flags...)
			args = append(args, "-o", filepath.Join(out, name+".wasm"), Plugins[name])
			cmd := exec.CommandContext(ctx, goCmd, args...)
			cmd.Dir, cmd.Env = root, Env()
			if msg, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("building %s: %v\n%s", name, err, msg)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
