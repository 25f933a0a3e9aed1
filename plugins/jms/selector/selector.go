// Package selector parses and evaluates JMS message selectors, in the two
// forms a binding of an x-jms-topic exchange may carry them:
//
//   - ParseSQL reads the SQL-92 subset of the JMS specification, e.g.
//     `weight > 10 AND color IN ('red', 'blue')` (binding argument
//     x-selector).
//   - ParseErlang reads the Erlang term RabbitMQ's JMS client compiles a
//     selector into, e.g. `{'>', {'ident', <<"weight">>}, 10}.` (binding
//     argument rjms_erlang_selector).
//
// Both give the same tree, which Eval runs against a message's values (its
// headers, through an Env) with JMS's three-valued logic: an absent value
// is NULL, comparisons and arithmetic with NULL are unknown, and a message
// is selected only when the selector is true. SQL and Erlang print a tree
// back in either syntax, and parsing what they print gives the same tree
// (in SQL, as long as the headers it names are SQL identifiers: the Erlang
// form can name any header).
//
// Parsing compiles the tree into a small program for a stack machine,
// which is what Eval runs (vm.go).
//
// # Grammar (SQL form)
//
//	selector   = or
//	or         = and { OR and }
//	and        = not { AND not }
//	not        = NOT not | comparison
//	comparison = sum [ ( "=" | "<>" | "<" | "<=" | ">" | ">=" ) sum
//	                 | [NOT] BETWEEN sum AND sum
//	                 | [NOT] IN "(" literal { "," literal } ")"
//	                 | [NOT] LIKE string [ESCAPE string]
//	                 | IS [NOT] NULL ]
//	sum        = product { ( "+" | "-" ) product }
//	product    = unary { ( "*" | "/" ) unary }
//	unary      = ( "+" | "-" ) unary | primary
//	primary    = "(" or ")" | identifier | literal
//	literal    = string | number | TRUE | FALSE
//
// Keywords are case-insensitive; identifiers are case-sensitive, start
// with a letter, '_' or '$' and go on with letters, digits, '_', '$' and
// '.'. Strings are in single quotes, a quote doubled inside. Numbers are
// decimal integers (an L suffix allowed), hexadecimal ones (0x1F) or
// decimals with a fraction or an exponent (1.5, .5, 7., 6E3, an F or D
// suffix allowed). The ESCAPE string is one character.
//
// # Grammar (Erlang form)
//
// One term, optionally followed by a full stop. Atoms may be quoted or
// not; strings are binaries (<<"text">>, escapes as in Erlang, or byte
// values <<104,105>>); numbers are Erlang integers and floats (1.5e3).
//
//	{'and', E, E}  {'or', E, E}  {'not', E}
//	{'=', E, E}  {'<>', E, E}  {'<', E, E}  {'<=', E, E}  {'>', E, E}  {'>=', E, E}
//	{'+', E, E}  {'-', E, E}  {'*', E, E}  {'/', E, E}  {'-', E}  {'+', E}
//	{'between', E, E, E}  {'not_between', E, E, E}   (or E, {'range', E, E})
//	{'in', E, [V, ...]}  {'not_in', E, [V, ...]}
//	{'like', E, <<"pattern">>, 'no_escape' | <<"c">>}   (or E, {Pattern, Escape})
//	{'not_like', ...}  {'is_null', E}  {'not_null', E}
//	{'ident', <<"name">>}  'true'  'false'  numbers  binaries
//
// # Semantics
//
// Values are NULL, booleans, 64-bit integers, floats and strings. Integers
// and floats compare by value; strings and booleans only with = and <>.
// A comparison of values of different types is false (JMS 1.1 §3.8.1.2),
// with NULL it is unknown. AND, OR and NOT follow SQL's truth tables, with
// any non-boolean operand taken as unknown. Arithmetic with NULL or a
// non-number is unknown; integers wrap on overflow like Java's longs; an
// integer division by zero is unknown; float division follows IEEE 754.
// In the SQL form an integer divided by an integer is an integer (Java's
// rule); in the Erlang form '/' always divides as floats (Erlang's rule),
// so both read as the client that wrote them meant. (By zero, RabbitMQ's
// evaluator answers atoms that order above every number instead of IEEE
// infinities; the plugin's README gives the difference.)
//
// x BETWEEN a AND b is a <= x AND x <= b, x NOT BETWEEN a AND b is x < a
// OR x > b; x IN (a, b) is x = a OR x = b, x NOT IN (a, b) is x <> a AND
// x <> b. LIKE matches the whole string, '_' one character (one Unicode
// code point) and '%' any run of them, the escape character making the
// next one literal; a non-string is not LIKE anything (nor NOT LIKE).
// IS NULL is true of an absent value.
package selector

import (
	"math"
	"strconv"
)

// Limits on a selector, so that evaluation stays cheap on the route path.
const (
	// MaxDepth is the deepest nesting of parentheses, NOTs and signs in
	// the SQL form. (Erlang terms nest as deep as their tree: MaxNodes
	// bounds them.)
	MaxDepth = 100
	// MaxNodes is the most operators and operands a selector may have.
	MaxNodes = 1000
)

// Kind is the type of a Value.
type Kind uint8

const (
	Null Kind = iota
	Bool
	Int
	Float
	String
)

// Value is a value a selector works on: a message's header, a literal or
// an intermediate result.
type Value struct {
	Kind  Kind
	Bool  bool
	Int   int64
	Float float64
	Str   string
}

// Values of each kind.
func BoolValue(b bool) Value        { return Value{Kind: Bool, Bool: b} }
func IntValue(i int64) Value        { return Value{Kind: Int, Int: i} }
func FloatValue(f float64) Value    { return Value{Kind: Float, Float: f} }
func StringValue(s string) Value    { return Value{Kind: String, Str: s} }
func (v Value) isNumber() bool      { return v.Kind == Int || v.Kind == Float }
func (v Value) truth() (bool, bool) { return v.Bool, v.Kind == Bool }

func (v Value) float() float64 {
	if v.Kind == Int {
		return float64(v.Int)
	}
	return v.Float
}

// String formats v for messages and tests.
func (v Value) String() string {
	switch v.Kind {
	case Bool:
		if v.Bool {
			return "TRUE"
		}
		return "FALSE"
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		return formatFloat(v.Float, false)
	case String:
		return quoteSQL(v.Str)
	}
	return "NULL"
}

// Env supplies the values of identifiers: a message's headers. Lookup
// returns a Value of Kind Null for a name the message does not have. slot
// is the number SetSlots gave the identifier, or -1: an Env serving many
// selectors can keep each value it looked up for a message by slot, and
// look each header up once however many selectors name it.
type Env interface {
	Lookup(slot int, name string) Value
}

// SetSlots numbers the selector's identifiers: slot(name) is called once
// per identifier and its answer is passed to Env.Lookup.
func (s *Selector) SetSlots(slot func(name string) int) {
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if n.op == opIdent {
			n.slot = int32(slot(n.name))
		}
		walk(n.a)
		walk(n.b)
		walk(n.c)
	}
	walk(s.root)
}

// Tri is a truth value of three-valued logic.
type Tri int8

const (
	Unknown Tri = iota
	False
	True
)

func (t Tri) String() string {
	switch t {
	case True:
		return "true"
	case False:
		return "false"
	}
	return "unknown"
}

// Selector is a parsed selector: its tree, which prints, and the program
// compiled from it, which evaluates (see vm.go).
type Selector struct {
	root *node
	// floatDiv: '/' divides as floats even between integers (the Erlang
	// form's rule).
	floatDiv bool
	prog     program
}

func newSelector(root *node, floatDiv bool) *Selector {
	s := &Selector{root: root, floatDiv: floatDiv}
	s.prog.compile(root)
	return s
}

type op uint8

const (
	opLit op = iota
	opIdent
	opNot
	opAnd
	opOr
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opAdd
	opSub
	opMul
	opDiv
	opNeg
	opPos
	opBetween
	opNotBetween
	opIn
	opNotIn
	opLike
	opNotLike
	opIsNull
	opIsNotNull
)

// node is one operator or operand. a, b and c are the operands in order;
// list holds IN's values, like LIKE's pattern.
type node struct {
	op      op
	a, b, c *node
	val     Value  // opLit
	name    string // opIdent
	slot    int32  // opIdent: see SetSlots
	list    []Value
	like    *likePattern
}

// Eval evaluates the selector against env. A Selector evaluates with
// scratch space of its own: it is not for concurrent use.
func (s *Selector) Eval(env Env) Tri {
	v := s.run(env)
	if v.Kind != Bool {
		return Unknown
	}
	if v.Bool {
		return True
	}
	return False
}

// Matches reports whether the selector is true for env: a message is
// selected only then, not when it is false or unknown.
func (s *Selector) Matches(env Env) bool {
	v := s.run(env)
	return v.Kind == Bool && v.Bool
}

var (
	null   = Value{}
	vTrue  = BoolValue(true)
	vFalse = BoolValue(false)
)

func boolOf(b bool) Value {
	if b {
		return vTrue
	}
	return vFalse
}

func and3(l, r Value) Value {
	lb, lok := l.truth()
	rb, rok := r.truth()
	switch {
	case (lok && !lb) || (rok && !rb):
		return vFalse
	case lok && rok:
		return vTrue
	}
	return null
}

func or3(l, r Value) Value {
	lb, lok := l.truth()
	rb, rok := r.truth()
	switch {
	case (lok && lb) || (rok && rb):
		return vTrue
	case lok && rok:
		return vFalse
	}
	return null
}

// equal compares two values of like types; ok is false when they are not
// (a number and a string, say), and then they are not equal.
func equal(l, r Value) (eq, ok bool) {
	switch {
	case l.Kind == Int && r.Kind == Int:
		return l.Int == r.Int, true
	case l.isNumber() && r.isNumber():
		return l.float() == r.float(), true
	case l.Kind == String && r.Kind == String:
		return l.Str == r.Str, true
	case l.Kind == Bool && r.Kind == Bool:
		return l.Bool == r.Bool, true
	}
	return false, false
}

func compare(o op, l, r Value) Value {
	if l.Kind == Null || r.Kind == Null {
		return null
	}
	switch o {
	case opEq:
		eq, _ := equal(l, r)
		return boolOf(eq)
	case opNe:
		eq, ok := equal(l, r)
		return boolOf(ok && !eq)
	}
	if !l.isNumber() || !r.isNumber() {
		return vFalse // strings and booleans have no order
	}
	var c int
	if l.Kind == Int && r.Kind == Int {
		switch {
		case l.Int < r.Int:
			c = -1
		case l.Int > r.Int:
			c = 1
		}
	} else {
		x, y := l.float(), r.float()
		switch {
		case x < y:
			c = -1
		case x > y:
			c = 1
		case x != y: // NaN: unordered
			return vFalse
		}
	}
	switch o {
	case opLt:
		return boolOf(c < 0)
	case opLe:
		return boolOf(c <= 0)
	case opGt:
		return boolOf(c > 0)
	}
	return boolOf(c >= 0)
}

func (s *Selector) arith(o op, l, r Value) Value {
	if !l.isNumber() || !r.isNumber() {
		return null
	}
	if l.Kind == Int && r.Kind == Int && !(o == opDiv && s.floatDiv) {
		x, y := l.Int, r.Int
		switch o {
		case opAdd:
			return IntValue(x + y)
		case opSub:
			return IntValue(x - y)
		case opMul:
			return IntValue(x * y)
		}
		switch y {
		case 0:
			return null // Java throws: the selector cannot say
		case -1:
			return IntValue(-x) // no trap on the most negative value
		}
		return IntValue(x / y)
	}
	x, y := l.float(), r.float()
	switch o {
	case opAdd:
		return FloatValue(x + y)
	case opSub:
		return FloatValue(x - y)
	case opMul:
		return FloatValue(x * y)
	}
	return FloatValue(x / y)
}

// formatFloat prints f so that it reads back as a float in both syntaxes:
// with a fraction always (Erlang needs it before an exponent).
func formatFloat(f float64, erlang bool) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64) // not from a parse
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' {
			mant, exp = s[:i], s[i:]
			break
		}
	}
	hasDot := false
	for i := 0; i < len(mant); i++ {
		if mant[i] == '.' {
			hasDot = true
		}
	}
	if !hasDot && (erlang || exp == "") {
		mant += ".0"
	}
	return mant + exp
}

// Idents returns the identifiers the selector reads, each once, in the
// order they first appear.
func (s *Selector) Idents() []string {
	var out []string
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if n.op == opIdent {
			for _, x := range out {
				if x == n.name {
					return
				}
			}
			out = append(out, n.name)
		}
		walk(n.a)
		walk(n.b)
		walk(n.c)
	}
	walk(s.root)
	return out
}
