package selector

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs in testdata/*.txt")

// mapEnv is an Env over a map: the headers of a test message.
type mapEnv map[string]Value

func (e mapEnv) Lookup(_ int, name string) Value { return e[name] }

// TestData runs the data-driven cases of testdata/*.txt. A case is one or
// more commands, a line "----", then one line of output per command:
//
//	headers name:type=value ...   set the message's headers; prints "ok"
//	                              (types: str int float bool null; a value
//	                              may be double-quoted, with Go escapes)
//	sql SELECTOR                  evaluate: true, false or unknown, or
//	erl TERM                      "error: ..." when it does not parse
//	sql-print SELECTOR            print the parsed tree: "SQL | Erlang"
//	erl-print TERM
//
// Blank lines and lines starting with '#' separate cases. With -rewrite
// the outputs are replaced by what the code answers.
func TestData(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runDataFile(t, file) })
	}
}

func runDataFile(t *testing.T, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	f.Close()

	env := mapEnv{}
	var out []string // the file, rewritten
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out = append(out, line)
			i++
			continue
		}
		start := i
		var cmds []string
		for i < len(lines) && lines[i] != "----" {
			cmds = append(cmds, lines[i])
			i++
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: case without ----", file, start+1)
		}
		i++ // ----
		var want []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" && !strings.HasPrefix(lines[i], "#") {
			want = append(want, lines[i])
			i++
		}
		var got []string
		for _, c := range cmds {
			got = append(got, runCommand(t, env, c))
		}
		out = append(out, cmds...)
		out = append(out, "----")
		out = append(out, got...)
		if *rewrite {
			continue
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:%d:\n%s\ngot:\n%s\nwant:\n%s", file, start+1,
				strings.Join(cmds, "\n"), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runCommand(t *testing.T, env mapEnv, line string) string {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "headers":
		clear(env)
		for _, f := range splitFields(arg) {
			name, rest, ok := strings.Cut(f, ":")
			typ, val, ok2 := strings.Cut(rest, "=")
			if !ok || (!ok2 && typ != "null") {
				t.Fatalf("bad header %q", f)
			}
			if strings.HasPrefix(val, `"`) {
				s, err := strconv.Unquote(val)
				if err != nil {
					t.Fatalf("bad quoted value %q", val)
				}
				val = s
			}
			switch typ {
			case "str":
				env[name] = StringValue(val)
			case "int":
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				env[name] = IntValue(n)
			case "float":
				x, err := strconv.ParseFloat(val, 64)
				if err != nil {
					t.Fatal(err)
				}
				env[name] = FloatValue(x)
			case "bool":
				env[name] = BoolValue(val == "true")
			case "null":
				env[name] = Value{}
			default:
				t.Fatalf("bad header type %q", typ)
			}
		}
		return "ok"
	case "sql", "erl", "sql-print", "erl-print":
		parse := ParseSQL
		if strings.HasPrefix(cmd, "erl") {
			parse = ParseErlang
		}
		s, err := parse(arg)
		if err != nil {
			return "error: " + err.Error()
		}
		checkRoundTrip(t, s, cmd[:3] == "sql")
		if strings.HasSuffix(cmd, "-print") {
			return s.SQL() + " | " + s.Erlang()
		}
		checkProgram(t, s, env)
		return s.Eval(env).String()
	}
	t.Fatalf("unknown command %q", line)
	return ""
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

// splitFields splits on spaces outside double quotes.
func splitFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && quoted && i+1 < len(s):
			cur.WriteByte(c)
			cur.WriteByte(s[i+1])
			i++
		case c == '"':
			quoted = !quoted
			cur.WriteByte(c)
		case c == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
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
