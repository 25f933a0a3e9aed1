package storage

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven tests")

// openMem opens a store on fs (a fresh in-memory filesystem if nil).
func openMem(t testing.TB, fs vfs.FS) (*Store, vfs.FS) {
	t.Helper()
	if fs == nil {
		fs = vfs.NewMem()
	}
	s, err := Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, fs
}

// openRecovered opens a store on fs and recovers it keeping every queue.
func openRecovered(t testing.TB, fs vfs.FS) (*Store, vfs.FS) {
	t.Helper()
	s, fs := openMem(t, fs)
	if _, err := s.Recover(nil); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s, fs
}

// commit commits t durably and fails the test on error.
func commit(tb testing.TB, t *Txn) {
	tb.Helper()
	if err := t.commitWait(); err != nil {
		tb.Fatalf("commit: %v", err)
	}
}

// ---- a small data-driven test runner, in the style of Pebble's datadriven
// package: a file holds cases, each a command line, optional input lines,
// a "----" line, and the expected output up to a blank line. Lines starting
// with '#' between cases are comments. go test -run X -rewrite rewrites the
// expected output.

type ddCase struct {
	line     int
	raw      string   // the command line as written
	comments []string // comment lines before it
	cmd      string
	args     ddArgs
	input    []string
	expected string
}

type ddArgs map[string]string

func (a ddArgs) has(k string) bool { _, ok := a[k]; return ok }

func (a ddArgs) u64(t testing.TB, k string, def uint64) uint64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", k, v, err)
	}
	return n
}

func (a ddArgs) i64(t testing.TB, k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", k, v, err)
	}
	return n
}

func parseArgs(fields []string) ddArgs {
	a := ddArgs{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

func parseDD(t *testing.T, path string) []ddCase {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cases []ddCase
	var comments []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			comments = append(comments, l)
			continue
		}
		fields := strings.Fields(l)
		c := ddCase{line: i + 1, raw: l, comments: comments, cmd: fields[0], args: parseArgs(fields[1:])}
		comments = nil
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "----"; i++ {
			if in := strings.TrimSpace(lines[i]); in != "" {
				c.input = append(c.input, in)
			}
		}
		if i >= len(lines) {
			t.Fatalf("%s:%d: no ---- after the command", path, c.line)
		}
		var exp []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases
}

// runDD runs the cases of path through run, comparing (or with -rewrite,
// replacing) the expected output.
func runDD(t *testing.T, path string, run func(c *ddCase) string) {
	cases := parseDD(t, path)
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(run(&c), "\n")
		if *rewrite {
			for _, l := range c.comments {
				fmt.Fprintf(&out, "%s\n", l)
			}
			fmt.Fprintf(&out, "%s\n", c.raw)
			for _, in := range c.input {
				fmt.Fprintf(&out, "%s\n", in)
			}
			fmt.Fprintf(&out, "----\n%s\n\n", got)
			continue
		}
		if got != c.expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.line, c.cmd, got, c.expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
