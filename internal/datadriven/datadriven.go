// Package datadriven runs data-driven tests in the style of Pebble's
// package of the same name: a file holds cases, each a command line,
// optional input lines, a "----" line, and the expected output up to a
// blank line. Lines starting with '#' between cases are comments that
// stay with the case after them. A command line is a command name and
// key=value arguments (a bare word is a key with an empty value).
//
// go test -run X -rewrite rewrites each file's expected output with what
// the code now produces, for review with git diff.
package datadriven

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven tests")

// Case is one command of a file.
type Case struct {
	Line     int
	Raw      string   // the command line as written
	Comments []string // comment lines before it
	Cmd      string
	Args     Args
	Fields   []string // the command line's words after the command, in order
	Input    []string
	Expected string
}

// Args are a command's key=value arguments.
type Args map[string]string

// ParseArgs reads key=value words (a bare word is a key with an empty
// value), for commands and for input lines shaped like them.
func ParseArgs(fields []string) Args {
	a := Args{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

// Has reports whether key was given.
func (a Args) Has(key string) bool { _, ok := a[key]; return ok }

// Str returns key's value, or def when it is absent.
func (a Args) Str(key, def string) string {
	if v, ok := a[key]; ok {
		return v
	}
	return def
}

// U64 returns key's value as an unsigned integer, or def when absent.
func (a Args) U64(t testing.TB, key string, def uint64) uint64 {
	t.Helper()
	v, ok := a[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", key, v, err)
	}
	return n
}

// I64 returns key's value as an integer, or def when absent.
func (a Args) I64(t testing.TB, key string, def int64) int64 {
	t.Helper()
	v, ok := a[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("argument %s=%q: %v", key, v, err)
	}
	return n
}

// Parse reads the cases of the file at path.
func Parse(t testing.TB, path string) []Case {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var cases []Case
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
		c := Case{Line: i + 1, Raw: l, Comments: comments, Cmd: fields[0], Fields: fields[1:], Args: ParseArgs(fields[1:])}
		comments = nil
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "----"; i++ {
			if in := strings.TrimSpace(lines[i]); in != "" {
				c.Input = append(c.Input, in)
			}
		}
		if i >= len(lines) {
			t.Fatalf("%s:%d: no ---- after the command", path, c.Line)
		}
		var exp []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			exp = append(exp, lines[i])
		}
		c.Expected = strings.Join(exp, "\n")
		cases = append(cases, c)
	}
	return cases
}

// Run runs the cases of path through run, in order, comparing each output
// with the expected one (or, with -rewrite, replacing it).
func Run(t *testing.T, path string, run func(c *Case) string) {
	t.Helper()
	cases := Parse(t, path)
	var out strings.Builder
	for _, c := range cases {
		got := strings.TrimRight(run(&c), "\n")
		if *rewrite {
			for _, l := range c.Comments {
				fmt.Fprintf(&out, "%s\n", l)
			}
			fmt.Fprintf(&out, "%s\n", c.Raw)
			for _, in := range c.Input {
				fmt.Fprintf(&out, "%s\n", in)
			}
			fmt.Fprintf(&out, "----\n%s\n\n", got)
			continue
		}
		if got != c.Expected {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.Line, c.Raw, got, c.Expected)
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
