package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// The definitions verbs register themselves here, beside their code.
func init() {
	commands["export_definitions"] = command{form: "export_definitions FILE (- for stdout)", min: 1, max: 1,
		run: func(c *client, _ *opts, out io.Writer, args []string) error { return exportDefinitions(c, out, args) }}
	commands["import_definitions"] = command{form: "import_definitions FILE (- for stdin)", min: 1, max: 1,
		run: func(c *client, _ *opts, out io.Writer, args []string) error { return importDefinitions(c, out, args) }}
}

// exportDefinitions writes GET /api/definitions to FILE, or to stdout for
// "-", as rabbitmqctl export_definitions does. The file holds password
// hashes, so only its owner may read it.
func exportDefinitions(c *client, out io.Writer, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: warrenctl export_definitions FILE (- for stdout)")
	}
	var doc json.RawMessage
	if err := c.get("/api/definitions", &doc); err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, doc, "", "  "); err != nil {
		return fmt.Errorf("export_definitions: the broker's answer is not JSON: %v", err)
	}
	pretty.WriteByte('\n')
	if args[0] == "-" {
		_, err := out.Write(pretty.Bytes())
		return err
	}
	if err := os.WriteFile(args[0], pretty.Bytes(), 0o600); err != nil {
		return fmt.Errorf("export_definitions: %v", err)
	}
	return nil
}

// importDefinitions posts FILE (stdin for "-") to /api/definitions. The
// broker checks the whole document before applying any of it.
func importDefinitions(c *client, out io.Writer, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: warrenctl import_definitions FILE (- for stdin)")
	}
	var doc []byte
	var err error
	if args[0] == "-" {
		doc, err = io.ReadAll(os.Stdin)
	} else {
		doc, err = os.ReadFile(args[0])
	}
	if err != nil {
		return fmt.Errorf("import_definitions: %v", err)
	}
	if !json.Valid(doc) {
		return fmt.Errorf("import_definitions: %s is not JSON", args[0])
	}
	if err := c.do("POST", "/api/definitions", json.RawMessage(doc)); err != nil {
		return err
	}
	fmt.Fprintf(out, "definitions imported from %s\n", args[0])
	return nil
}
