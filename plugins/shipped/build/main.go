// Command build rebuilds the plugin modules Warren ships into
// plugins/shipped and records the Go version that built them in
// GOVERSION. It is the package's go:generate step:
//
//	go generate ./plugins/shipped
//
// Commit the .wasm files and GOVERSION it writes. The same source built
// by the same Go version gives the same bytes (TestReproducible checks).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenmq/warren/plugins/shipped/internal/wasmbuild"
)

func main() {
	dir := flag.String("o", ".", "directory to write the modules and GOVERSION into")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()

	goCmd := wasmbuild.GoCommand()
	version, err := wasmbuild.GoVersion(ctx, goCmd)
	if err != nil {
		log.Fatal(err)
	}
	root, err := wasmbuild.ModuleRoot(ctx, goCmd, *dir)
	if err != nil {
		log.Fatal(err)
	}
	if err := wasmbuild.Build(ctx, goCmd, root, *dir); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "GOVERSION"), []byte(version+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	// A module whose plugin is no longer shipped goes.
	stale, _ := filepath.Glob(filepath.Join(*dir, "*.wasm"))
	for _, path := range stale {
		if _, ok := wasmbuild.Plugins[strings.TrimSuffix(filepath.Base(path), ".wasm")]; !ok {
			if err := os.Remove(path); err != nil {
				log.Fatal(err)
			}
		}
	}
	for _, name := range wasmbuild.Names() {
		fi, err := os.Stat(filepath.Join(*dir, name+".wasm"))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-22s %8d bytes\n", name+".wasm", fi.Size())
	}
	fmt.Printf("built with %s\n", version)
}
