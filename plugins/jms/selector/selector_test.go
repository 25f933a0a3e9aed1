package selector

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// mapEnv is an Env over a map: the headers of a test message.
type mapEnv map[string]Value

func (e mapEnv) Lookup(_ int, name string) Value { return e[name] }

// TestDataDriven runs the cases in testdata/*.dd
// (github.com/cockroachdb/datadriven; -rewrite rewrites their expected
// output). Each file starts with a message without headers. The input of
// eval and parse has a selector a line, "sql SELECTOR" or "erl TERM", and
// their output a line for each. The commands:
//
//	headers   set the message's headers, one a line as name:type=value
//	          (types: str int float bool null, null without =value; a
//	          value may be double-quoted, with Go escapes); prints "ok"
//	eval      evaluate each selector on the message: true, false or
//	          unknown, or "error: ..." when it does not parse
//	parse     print each parsed selector back in both syntaxes,
//	          "SQL | Erlang", or "error: ..." when it does not parse
//
// A selector that parses must also read back from what it prints
// (checkRoundTrip), and an evaluated one gives the same from its compiled
// program as from its tree (checkProgram).
func TestDataDriven(t *testing.T) {
	// Not datadriven.Walk(t, "testdata", ...): testdata/fuzz holds the
	// fuzz targets' seed corpus.
	files, err := filepath.Glob("testdata/*.dd")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*.dd: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".dd"), func(t *testing.T) {
			env := mapEnv{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				if len(d.CmdArgs) > 0 {
					d.Fatalf(t, "%s takes no arguments, its input lines", d.Cmd)
				}
				lines := strings.Split(d.Input, "\n")
				switch d.Cmd {
				case "headers":
					setHeaders(t, d, env, lines)
					return "ok"
				case "eval", "parse":
					out := make([]string, len(lines))
					for i, line := range lines {
						out[i] = runSelector(t, d, env, line)
					}
					return strings.Join(out, "\n")
				}
				d.Fatalf(t, "unknown command %q", d.Cmd)
				return ""
			})
		})
	}
}

// setHeaders replaces env's headers with those on lines.
func setHeaders(t *testing.T, d *datadriven.TestData, env mapEnv, lines []string) {
	clear(env)
	for _, line := range lines {
		if line == "" {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		typ, val, ok2 := strings.Cut(rest, "=")
		if !ok || (!ok2 && typ != "null") {
			d.Fatalf(t, "bad header %q: name:type=value", line)
		}
		if strings.HasPrefix(val, `"`) {
			s, err := strconv.Unquote(val)
			if err != nil {
				d.Fatalf(t, "bad quoted value %q", val)
			}
			val = s
		}
		switch typ {
		case "str":
			env[name] = StringValue(val)
		case "int":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				d.Fatalf(t, "header %q: %v", line, err)
			}
			env[name] = IntValue(n)
		case "float":
			x, err := strconv.ParseFloat(val, 64)
			if err != nil {
				d.Fatalf(t, "header %q: %v", line, err)
			}
			env[name] = FloatValue(x)
		case "bool":
			env[name] = BoolValue(val == "true")
		case "null":
			env[name] = Value{}
		default:
			d.Fatalf(t, "bad header type %q", typ)
		}
	}
}

// runSelector parses one input line, "sql SELECTOR" or "erl TERM", and
// answers for the command: d.Cmd eval or parse.
func runSelector(t *testing.T, d *datadriven.TestData, env mapEnv, line string) string {
	syntax, src, _ := strings.Cut(line, " ")
	var s *Selector
	var err error
	switch syntax {
	case "sql":
		s, err = ParseSQL(src)
	case "erl":
		s, err = ParseErlang(src)
	default:
		d.Fatalf(t, "%q: a selector line starts with sql or erl", line)
	}
	if err != nil {
		return "error: " + err.Error()
	}
	checkRoundTrip(t, s, syntax == "sql")
	if d.Cmd == "parse" {
		return s.SQL() + " | " + s.Erlang()
	}
	checkProgram(t, s, env)
	return s.Eval(env).String()
}

// checkProgram: the compiled program gives what the tree means.
func checkProgram(t testing.TB, s *Selector, env Env) {
	t.Helper()
	want := s.evalTree(s.root, env)
	got := s.run(env)
	if got.Kind != want.Kind || got.String() != want.String() {
		t.Fatalf("%s: the program gives %v (%d), the tree %v (%d)", s.SQL(), got, got.Kind, want, want.Kind)
	}
}

// checkRoundTrip: what a selector prints parses back to a selector that
// prints the same, in the Erlang syntax always and in the SQL syntax when
// it came from SQL or names only headers SQL can name.
func checkRoundTrip(t testing.TB, s *Selector, fromSQL bool) {
	t.Helper()
	sqlOK := fromSQL
	if !fromSQL {
		sqlOK = true
		for _, id := range s.Idents() {
			sqlOK = sqlOK && validIdent(id)
		}
	}
	if sql := s.SQL(); sqlOK {
		back, err := ParseSQL(sql)
		if err != nil {
			t.Fatalf("SQL %q does not parse back: %v", sql, err)
		}
		if again := back.SQL(); again != sql {
			t.Fatalf("SQL round trip: %q became %q", sql, again)
		}
	}
	erl := s.Erlang()
	backErl, err := ParseErlang(erl)
	if err != nil {
		t.Fatalf("Erlang %q does not parse back: %v", erl, err)
	}
	if again := backErl.Erlang(); again != erl {
		t.Fatalf("Erlang round trip: %q became %q", erl, again)
	}
}

func TestLike(t *testing.T) {
	cases := []struct {
		pattern, esc string
		s            string
		want         bool
	}{
		{"bl%", "", "blue", true},
		{"bl%", "", "bl", true},
		{"bl%", "", "b", false},
		{"bl_e", "", "blue", true},
		{"bl_e", "", "blee", true},
		{"bl_e", "", "bluee", false},
		{"%ue", "", "blue", true},
		{"%u%", "", "blue", true},
		{"%x%", "", "blue", false},
		{"%", "", "", true},
		{"_", "", "", false},
		{"", "", "", true},
		{"", "", "a", false},
		{"b_!_ue", "!", "bl_ue", true},
		{"b_!_ue", "!", "blxue", false},
		{"100!%", "!", "100%", true},
		{"100!%", "!", "1000", false},
		{"a!!b", "!", "a!b", true},
		{"_é_", "", "xéy", true}, // one character is one code point
		{"__", "", "é", false},   // not one byte
		{"%a%b%c%", "", "xxaxxbxxcxx", true},
		{"%a%b%c%", "", "xxaxxcxxbxx", false},
		{"%aab", "", "aaaab", true},
		{"a%a%a%a%a%b", "", strings.Repeat("a", 200), false},
		{"€%", "€", "%x", false},
		{"€%", "€", "%", true},
		{"'bl%", "", "'blue", true},
	}
	for _, c := range cases {
		p, err := compileLike(c.pattern, c.esc)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := p.match(c.s); got != c.want {
			t.Errorf("%q LIKE %q ESCAPE %q = %v, want %v", c.s, c.pattern, c.esc, got, c.want)
		}
	}
	if _, err := compileLike("abc!", "!"); err == nil {
		t.Error("a pattern ending with its escape character compiled")
	}
}

func TestIdents(t *testing.T) {
	s, err := ParseSQL("a > 1 AND (b = 'x' OR a < 0) AND c IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Idents()); got != "[a b c]" {
		t.Errorf("idents: %s", got)
	}
}

// TestLimits: deep nesting and huge selectors are refused, not stack
// overflows or slow routes.
func TestLimits(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "a" + strings.Repeat(")", MaxDepth+1) + " = 1"
	if _, err := ParseSQL(deep); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep SQL: %v", err)
	}
	ok := strings.Repeat("(", MaxDepth-1) + "a" + strings.Repeat(")", MaxDepth-1) + " = 1"
	if _, err := ParseSQL(ok); err != nil {
		t.Errorf("SQL nested %d deep: %v", MaxDepth-1, err)
	}
	nots := strings.Repeat("NOT ", MaxDepth+1) + "a"
	if _, err := ParseSQL(nots); err == nil {
		t.Error("deep NOTs parsed")
	}
	long := "a = 1" + strings.Repeat(" OR a = 1", MaxNodes)
	if _, err := ParseSQL(long); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("long SQL: %v", err)
	}
	deepErl := strings.Repeat("{'not',", MaxNodes+3) + "'true'" + strings.Repeat("}", MaxNodes+3)
	if _, err := ParseErlang(deepErl); err == nil || !strings.Contains(err.Error(), "nested too deeply") {
		t.Errorf("deep Erlang: %v", err)
	}
	// A long chain of conditions is a deep tree: it prints and reads back
	// in both forms.
	chain := "a = 0" + strings.Repeat(" AND a = 1", MaxNodes/5)
	s, err := ParseSQL(chain)
	if err != nil {
		t.Fatal(err)
	}
	if s.SQL() != chain {
		t.Errorf("a chain printed as %.80s...", s.SQL())
	}
	checkRoundTrip(t, s, true)
	if _, err := ParseErlang(s.Erlang()); err != nil {
		t.Errorf("a chain of %d conditions in the Erlang form: %v", MaxNodes/5+1, err)
	}
	// As deep as the SQL form allows, and printed back just as deep.
	signs := strings.Repeat("-", MaxDepth) + "a = 1"
	notNots := strings.Repeat("NOT ", MaxDepth) + "a"
	parens := "x = " + strings.Repeat("(", MaxDepth) + "a" + strings.Repeat(")", MaxDepth)
	for _, src := range []string{signs, notNots, parens} {
		deep, err := ParseSQL(src)
		if err != nil {
			t.Fatalf("%.30s...: %v", src, err)
		}
		checkRoundTrip(t, deep, true)
	}
}

func BenchmarkEval(b *testing.B) {
	s, err := ParseSQL("weight > 10 AND color IN ('red', 'blue') AND name LIKE 'ord%' AND NOT (flag IS NULL)")
	if err != nil {
		b.Fatal(err)
	}
	env := mapEnv{"weight": IntValue(12), "color": StringValue("blue"), "name": StringValue("order-1"), "flag": BoolValue(true)}
	b.ReportAllocs()
	for b.Loop() {
		if !s.Matches(env) {
			b.Fatal("no match")
		}
	}
}
