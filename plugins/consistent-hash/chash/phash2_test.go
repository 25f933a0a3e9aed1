package chash

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// eterm is an Erlang term for tests: it prints itself as an Erlang
// expression (for testdata/phash2.erl) and streams itself into a phash.
type eterm interface {
	erl() string
	hash(p *phash)
}

type (
	eatom string
	ebin  string
	eint  struct {
		neg bool
		mag uint64
	}
	efloat float64
	etuple []eterm
	elist  []eterm
)

func (a eatom) erl() string    { return "'" + string(a) + "'" }
func (a eatom) hash(p *phash)  { p.atom(atomHash(string(a))) }
func (b ebin) hash(p *phash)   { hashBinary(p, string(b)) }
func (i eint) hash(p *phash)   { p.integer(i.neg, i.mag) }
func (f efloat) hash(p *phash) { p.float(float64(f)) }
func (f efloat) erl() string   { return fmt.Sprintf("Fl(16#%X)", math.Float64bits(float64(f))) }
func (t etuple) erl() string   { return "{" + erls(t) + "}" }
func (l elist) erl() string    { return "[" + erls(l) + "]" }
func (t etuple) hash(p *phash) {
	p.tuple(len(t))
	for _, e := range t {
		e.hash(p)
	}
}
func (l elist) hash(p *phash) {
	for _, e := range l {
		e.hash(p)
	}
	p.nil()
}

func (b ebin) erl() string {
	var s []string
	for i := 0; i < len(b); i++ {
		s = append(s, strconv.Itoa(int(b[i])))
	}
	return "<<" + strings.Join(s, ",") + ">>"
}

func (i eint) erl() string {
	if i.neg {
		return "-" + strconv.FormatUint(i.mag, 10)
	}
	return strconv.FormatUint(i.mag, 10)
}

func erls(ts []eterm) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.erl())
	}
	return strings.Join(s, ",")
}

func ei(v int64) eint {
	if v < 0 {
		return eint{true, uint64(-v)}
	}
	return eint{false, uint64(v)}
}

// phash2Cases are the terms whose hashes testdata/phash2.txt records:
// binaries of every tail length, the atoms RabbitMQ's field tables use,
// integers at each boundary of make_hash2's cases, floats, and the
// {Type, Value} tuples, tables and arrays of header values.
func phash2Cases() []eterm {
	var cases []eterm
	for n := range 30 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n*11 + 200)
		}
		cases = append(cases, ebin(b))
	}
	for _, s := range []string{"order-1", "customer.12345.orders", "béla", "k", strings.Repeat("long routing key ", 20)} {
		cases = append(cases, ebin(s))
	}
	for _, a := range []string{"undefined", "true", "false", "longstr", "timestamp", "byte", "unsignedbyte", "short",
		"unsignedshort", "signedint", "unsignedint", "double", "float", "long", "bool", "decimal", "table", "array",
		"binary", "void"} {
		cases = append(cases, eatom(a), etuple{eatom(a)})
	}
	for _, v := range []int64{0, 1, -1, 42, -42, 255, 256, 1<<27 - 1, 1 << 27, -(1 << 27), -(1 << 27) - 1, 1 << 31,
		-(1 << 31), 1<<32 - 1, 1 << 32, 1700000000, 1<<59 - 1, 1 << 59, -(1 << 59), -(1 << 59) - 1, 1 << 60,
		math.MaxInt64, math.MinInt64 + 1, math.MinInt64} {
		cases = append(cases, ei(v), etuple{eatom("long"), ei(v)})
	}
	cases = append(cases, eint{false, math.MaxUint64}, eint{false, 1 << 63}, eint{false, 1<<63 + 12345})
	for _, f := range []float64{0, math.Copysign(0, -1), 1, 1.5, -2.25, 1e300, float64(float32(0.1)), 5e-324, 123456.789} {
		cases = append(cases, efloat(f), etuple{eatom("double"), efloat(f)})
	}
	cases = append(cases,
		etuple{}, elist{}, etuple{elist{}}, elist{etuple{}}, elist{ebin("a"), ebin("b")}, elist{ei(1000), ei(-1)},
		etuple{eatom("longstr"), ebin("abc")},
		etuple{eatom("bool"), eatom("true")},
		etuple{eatom("void"), eatom("undefined")},
		etuple{eatom("decimal"), etuple{ei(2), ei(12345)}},
		etuple{eatom("table"), elist{}},
		etuple{eatom("array"), elist{}},
		etuple{eatom("table"), elist{
			etuple{ebin("a"), eatom("signedint"), ei(1)},
			etuple{ebin("b"), eatom("longstr"), ebin("x")},
			etuple{ebin("c"), eatom("table"), elist{etuple{ebin("d"), eatom("void"), eatom("undefined")}}},
		}},
		etuple{eatom("array"), elist{etuple{eatom("longstr"), ebin("x")}, etuple{eatom("long"), ei(7)},
			etuple{eatom("array"), elist{etuple{eatom("bool"), eatom("false")}}}}},
	)
	return cases
}

// TestPhash2 checks the Go phash2 against values erlang:phash2 gave (see
// testdata/phash2.erl for how).
func TestPhash2(t *testing.T) {
	want := readPhash2(t)
	for _, c := range phash2Cases() {
		expr := c.erl()
		w, ok := want[expr]
		if !ok {
			t.Errorf("no reference value for %s: add the line to testdata/phash2.txt and run testdata/phash2.erl", expr)
			continue
		}
		var p phash
		c.hash(&p)
		if p.h != w {
			t.Errorf("make_hash2(%s) = %d, Erlang says %d", expr, p.h, w)
		}
		if p.phash2() != w&(1<<27-1) {
			t.Errorf("phash2(%s) = %d, want %d", expr, p.phash2(), w&(1<<27-1))
		}
	}
}

func readPhash2(t *testing.T) map[string]uint32 {
	t.Helper()
	f, err := os.Open("testdata/phash2.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]uint32{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		expr, val, ok := strings.Cut(line, "\t")
		v, err := strconv.ParseUint(val, 10, 32)
		if !ok || err != nil {
			t.Fatalf("testdata/phash2.txt: bad line %q", line)
		}
		want[expr] = uint32(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}
