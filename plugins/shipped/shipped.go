// Package shipped holds the exchange-type plugins that come with Warren,
// compiled to WebAssembly and embedded in the broker's binary:
//
//   - consistent-hash: x-consistent-hash
//   - delayed-message: x-delayed-message
//   - jms: x-jms-topic and x-jms-queue
//
// Their source is in plugins/<name>, each a WASI reactor built with the Go
// SDK; each folder's README says what its types do. Shipped plugins are
// available without a file in the broker's plugin directory, and are used
// when enabled (warrenctl plugins enable NAME); a NAME.wasm in the plugin
// directory replaces the shipped one.
//
// # Building
//
// The .wasm files here are committed build output. After changing a
// plugin (or the SDK), rebuild them and commit the result:
//
//	go generate ./plugins/shipped
//
// which runs `go build -trimpath -buildvcs=false -buildmode=c-shared` for
// GOOS=wasip1 GOARCH=wasm on each plugin (package build) and writes the
// Go version it used to GOVERSION. The build is reproducible:
// TestReproducible rebuilds every module from the source and compares the
// bytes with the shipped ones, when the test runs on that same Go version
// (it skips otherwise, and in -short mode).
package shipped

//go:generate go run ./build

import (
	"embed"
	"strings"
)

//go:embed *.wasm
var modules embed.FS

//go:embed GOVERSION
var goVersion string

// Modules returns the shipped plugin modules by plugin name (the module's
// file name without .wasm, the name `warrenctl plugins enable` takes).
// Each call returns a new map with fresh copies of the modules, so the
// caller may keep or modify them.
func Modules() map[string][]byte {
	entries, err := modules.ReadDir(".")
	if err != nil {
		panic("shipped: reading the embedded modules: " + err.Error())
	}
	out := make(map[string][]byte, len(entries))
	for _, e := range entries {
		b, err := modules.ReadFile(e.Name())
		if err != nil {
			panic("shipped: reading the embedded modules: " + err.Error())
		}
		out[strings.TrimSuffix(e.Name(), ".wasm")] = b
	}
	return out
}

// Names returns the names of the shipped plugins, sorted; each has its
// source, tests and README in plugins/<name>.
func Names() []string {
	entries, err := modules.ReadDir(".")
	if err != nil {
		panic("shipped: reading the embedded modules: " + err.Error())
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = strings.TrimSuffix(e.Name(), ".wasm")
	}
	return names
}

// GoVersion is the version of Go the shipped modules were built with,
// e.g. "go1.26.8".
func GoVersion() string { return strings.TrimSpace(goVersion) }
