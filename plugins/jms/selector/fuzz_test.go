package selector

import (
	"errors"
	"testing"
)

// fuzzEnv has a header of every kind, under names the seeds use.
var fuzzEnv = mapEnv{
	"a": IntValue(1), "b": IntValue(-7), "weight": IntValue(2501), "f": FloatValue(0.5),
	"color": StringValue("blue"), "s": StringValue("é_%x"), "t": BoolValue(true), "n": {},
}

// checkParsed is what both fuzz targets check: a refused selector says
// where, an accepted one round-trips and evaluates without panicking, and
// Matches agrees with Eval.
func checkParsed(t *testing.T, src string, s *Selector, err error, fromSQL bool) {
	if err != nil {
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("%q: error of type %T: %v", src, err, err)
		}
		if se.Pos < 0 || se.Pos > len(src) {
			t.Fatalf("%q: error position %d outside the selector", src, se.Pos)
		}
		return
	}
	checkRoundTrip(t, s, fromSQL)
	checkProgram(t, s, fuzzEnv)
	if s.Matches(fuzzEnv) != (s.Eval(fuzzEnv) == True) {
		t.Fatalf("%q: Matches and Eval disagree", src)
	}
}

func FuzzSQL(f *testing.F) {
	for _, s := range []string{
		"weight > 10 AND color IN ('red','blue')",
		"NOT (a BETWEEN -1 AND 1.5e3) OR s LIKE '!_%' ESCAPE '!'",
		"n IS NULL AND t IS NOT NULL AND t = TRUE",
		"a + b * -(f / 2) <> 0x1F - 10L",
		"color NOT LIKE 'b_ue' AND weight NOT IN (1, 2.5, 'x')",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ParseSQL(src)
		checkParsed(t, src, s, err, true)
		// The Erlang form means the same, division aside (it divides
		// integers as floats).
		if err == nil && !hasDiv(s.root) {
			e, err := ParseErlang(s.Erlang())
			if err != nil {
				t.Fatal(err)
			}
			if x, y := s.Eval(fuzzEnv), e.Eval(fuzzEnv); x != y {
				t.Fatalf("%q: %v in SQL, %v as %s", src, x, y, s.Erlang())
			}
		}
	})
}

func FuzzErlang(f *testing.F) {
	for _, s := range []string{
		`{'>', {'ident', <<"weight">>}, 10}.`,
		`{'and',{'in',{'ident',<<"color">>},[<<"red">>,<<"blue">>]},{'not',{ident,<<"t">>}}}.`,
		`{'like',{'ident',<<"s">>},<<"!_%">>,<<"!">>}.`,
		`{'between',{'-',{'ident',<<"a">>}},{'range',-1,1.5e3}}.`,
		`{'or',{'is_null',{'ident',<<"n">>}},{'=',{'/',5,2},2.5}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := ParseErlang(src)
		checkParsed(t, src, s, err, false)
	})
}

func hasDiv(n *node) bool {
	return n != nil && (n.op == opDiv || hasDiv(n.a) || hasDiv(n.b) || hasDiv(n.c))
}
