// Command gen writes protocol/methods_gen.go from the AMQP 0-9-1 spec XML.
//
// It runs from the protocol directory through `go generate` (see
// protocol/doc.go). The output is a pure function of the XML, so a test in
// this package regenerates it and compares with the committed file.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
)

func main() {
	spec := flag.String("spec", "spec/amqp0-9-1.stripped.extended.xml", "spec XML to read")
	out := flag.String("out", "methods_gen.go", "Go file to write")
	flag.Parse()

	xmlBytes, err := os.ReadFile(*spec)
	if err != nil {
		log.Fatal(err)
	}
	src, err := Generate(xmlBytes)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s (%d bytes)\n", *out, len(src))
}
