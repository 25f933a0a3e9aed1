package selector

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Erlang form: RabbitMQ's JMS client compiles a selector to the text
// of an Erlang term (SqlCompilerVisitor in rabbitmq-jms-client), which the
// broker reads with erl_scan and erl_parse:parse_term and evaluates with
// sjx_evaluator. Here the text is read in two steps: a small reader for
// the term syntax the client writes (tuples, lists, atoms, binaries,
// numbers), then a conversion of the term into the selector tree that
// checks each operator's shape.

type termKind uint8

const (
	termAtom termKind = iota
	termInt
	termFloat
	termBinary
	termTuple
	termList
)

type term struct {
	kind  termKind
	pos   int
	s     string // atom name, binary content
	i     int64
	f     float64
	elems []term
}

func (t *term) describe() string {
	switch t.kind {
	case termAtom:
		return "atom '" + t.s + "'"
	case termInt:
		return "integer " + strconv.FormatInt(t.i, 10)
	case termFloat:
		return "float " + formatFloat(t.f, true)
	case termBinary:
		return "binary " + quoteErlang(t.s)
	case termTuple:
		if len(t.elems) > 0 && t.elems[0].kind == termAtom {
			return fmt.Sprintf("tuple {'%s', ...} of %d elements", t.elems[0].s, len(t.elems))
		}
		return fmt.Sprintf("tuple of %d elements", len(t.elems))
	}
	return fmt.Sprintf("list of %d elements", len(t.elems))
}

type termReader struct {
	src   string
	i     int
	depth int
	count int
}

func (r *termReader) errorf(pos int, format string, args ...any) error {
	return &SyntaxError{pos, fmt.Sprintf(format, args...)}
}

// skip passes whitespace and % comments.
func (r *termReader) skip() {
	for r.i < len(r.src) {
		switch c := r.src[r.i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			r.i++
		case c == '%':
			for r.i < len(r.src) && r.src[r.i] != '\n' {
				r.i++
			}
		default:
			return
		}
	}
}

func (r *termReader) peekByte() byte {
	r.skip()
	if r.i < len(r.src) {
		return r.src[r.i]
	}
	return 0
}

func (r *termReader) expect(s string) error {
	r.skip()
	if !strings.HasPrefix(r.src[r.i:], s) {
		return r.errorf(r.i, "expected '%s', found %s", s, r.found())
	}
	r.i += len(s)
	return nil
}

func (r *termReader) found() string {
	if r.i >= len(r.src) {
		return "the end"
	}
	c, _ := utf8.DecodeRuneInString(r.src[r.i:])
	return fmt.Sprintf("%q", c)
}

func (r *termReader) term() (term, error) {
	r.skip()
	start := r.i
	if r.count++; r.count > MaxNodes*4 {
		return term{}, r.errorf(start, "selector too long")
	}
	if r.i >= len(r.src) {
		return term{}, r.errorf(start, "expected a term, found the end")
	}
	c := r.src[r.i]
	switch {
	case c == '{' || c == '[':
		closer := byte('}')
		kind := termTuple
		if c == '[' {
			closer, kind = ']', termList
		}
		// Terms nest as deep as the tree they stand for (a left-deep chain
		// of ANDs from the JMS client, say), so the bound is the node limit.
		if r.depth++; r.depth > MaxNodes+2 {
			return term{}, r.errorf(start, "selector nested too deeply (more than %d levels)", MaxNodes+2)
		}
		r.i++
		t := term{kind: kind, pos: start}
		if r.peekByte() == closer {
			r.i++
		} else {
			for {
				e, err := r.term()
				if err != nil {
					return term{}, err
				}
				t.elems = append(t.elems, e)
				if r.peekByte() == ',' {
					r.i++
					continue
				}
				if err := r.expect(string(closer)); err != nil {
					return term{}, err
				}
				break
			}
		}
		r.depth--
		return t, nil
	case c == '<' && strings.HasPrefix(r.src[r.i:], "<<"):
		return r.binary()
	case c == '\'':
		s, err := r.quoted('\'')
		return term{kind: termAtom, pos: start, s: s}, err
	case c >= 'a' && c <= 'z':
		j := r.i
		for j < len(r.src) && isAtomChar(r.src[j]) {
			j++
		}
		t := term{kind: termAtom, pos: start, s: r.src[r.i:j]}
		r.i = j
		return t, nil
	case c >= '0' && c <= '9' || ((c == '-' || c == '+') && r.i+1 < len(r.src) && r.src[r.i+1] >= '0' && r.src[r.i+1] <= '9'):
		return r.number()
	case c >= 'A' && c <= 'Z' || c == '_':
		return term{}, r.errorf(start, "variables are not allowed in a selector term")
	case c == '"':
		return term{}, r.errorf(start, "strings must be binaries, <<\"...\">>")
	}
	return term{}, r.errorf(start, "unexpected %s", r.found())
}

func isAtomChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@'
}

// number reads an Erlang integer or float (digits, a fraction, then an
// optional exponent; the fraction is required before an exponent).
func (r *termReader) number() (term, error) {
	start := r.i
	j := r.i
	if r.src[j] == '-' || r.src[j] == '+' {
		j++
	}
	digits := func(k int) int {
		for k < len(r.src) && r.src[k] >= '0' && r.src[k] <= '9' {
			k++
		}
		return k
	}
	j = digits(j)
	isFloat := false
	if j+1 < len(r.src) && r.src[j] == '.' && r.src[j+1] >= '0' && r.src[j+1] <= '9' {
		isFloat = true
		j = digits(j + 1)
		if j < len(r.src) && (r.src[j] == 'e' || r.src[j] == 'E') {
			k := j + 1
			if k < len(r.src) && (r.src[k] == '+' || r.src[k] == '-') {
				k++
			}
			if m := digits(k); m > k {
				j = m
			} else {
				return term{}, r.errorf(j, "exponent without digits")
			}
		}
	}
	if j < len(r.src) && (isAtomChar(r.src[j]) || r.src[j] == '#') {
		return term{}, r.errorf(start, "malformed number")
	}
	text := r.src[start:j]
	r.i = j
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return term{}, r.errorf(start, "number out of range")
		}
		return term{kind: termFloat, pos: start, f: f}, nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(text, "+"), 10, 64)
	if err != nil {
		return term{}, r.errorf(start, "integer out of range")
	}
	return term{kind: termInt, pos: start, i: n}, nil
}

// binary reads <<>>, <<"text">> (adjacent strings join), or byte values
// <<104,105>>, optionally mixed: <<"a",98>>.
func (r *termReader) binary() (term, error) {
	start := r.i
	r.i += 2
	var b strings.Builder
	if r.peekByte() == '>' {
		return term{kind: termBinary, pos: start}, r.expect(">>")
	}
	for {
		switch c := r.peekByte(); {
		case c == '"':
			for r.peekByte() == '"' {
				s, err := r.quoted('"')
				if err != nil {
					return term{}, err
				}
				b.WriteString(s)
			}
		case c >= '0' && c <= '9':
			at := r.i
			t, err := r.number()
			if err != nil {
				return term{}, err
			}
			if t.kind != termInt || t.i > 255 {
				return term{}, r.errorf(at, "a binary's byte values are integers from 0 to 255")
			}
			b.WriteByte(byte(t.i))
		default:
			return term{}, r.errorf(r.i, "expected a string or a byte value in a binary, found %s", r.found())
		}
		if r.peekByte() == '/' {
			// A type specifier: only the ones that keep the bytes as written.
			r.i++
			j := r.i
			for j < len(r.src) && isAtomChar(r.src[j]) {
				j++
			}
			if spec := r.src[r.i:j]; spec != "utf8" && spec != "binary" {
				return term{}, r.errorf(r.i, "unsupported binary type specifier '/%s'", spec)
			}
			r.i = j
		}
		if r.peekByte() == ',' {
			r.i++
			continue
		}
		if err := r.expect(">>"); err != nil {
			return term{}, err
		}
		return term{kind: termBinary, pos: start, s: b.String()}, nil
	}
}

// quoted reads a quoted atom or string with Erlang's escapes.
func (r *termReader) quoted(q byte) (string, error) {
	start := r.i
	r.i++
	var b strings.Builder
	for {
		if r.i >= len(r.src) {
			return "", r.errorf(start, "unterminated %s", map[byte]string{'"': "string", '\'': "quoted atom"}[q])
		}
		c := r.src[r.i]
		if c == q {
			r.i++
			return b.String(), nil
		}
		if c != '\\' {
			b.WriteByte(c)
			r.i++
			continue
		}
		if r.i+1 >= len(r.src) {
			return "", r.errorf(r.i, "unterminated escape")
		}
		r.i++
		e := r.src[r.i]
		r.i++
		switch e {
		case 'b':
			b.WriteByte('\b')
		case 'd':
			b.WriteByte(0x7f)
		case 'e':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 's':
			b.WriteByte(' ')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && r.i < len(r.src) && r.src[r.i] >= '0' && r.src[r.i] <= '7'; k++ {
				v = v*8 + int(r.src[r.i]-'0')
				r.i++
			}
			if v > 255 {
				return "", r.errorf(r.i, "octal escape above 255")
			}
			b.WriteByte(byte(v))
		case 'x':
			j := r.i
			braced := j < len(r.src) && r.src[j] == '{'
			if braced {
				j++
			}
			k := j
			for k < len(r.src) && strings.IndexByte("0123456789abcdefABCDEF", r.src[k]) >= 0 && (braced || k-j < 2) {
				k++
			}
			if k == j || (!braced && k-j < 2) || (braced && (k >= len(r.src) || r.src[k] != '}')) {
				return "", r.errorf(r.i, "malformed \\x escape")
			}
			v, err := strconv.ParseUint(r.src[j:k], 16, 32)
			if err != nil || v > 255 {
				// Erlang truncates code points to bytes in a latin-1 binary; a
				// selector should not rely on that.
				return "", r.errorf(r.i, "\\x escape above 255")
			}
			b.WriteByte(byte(v))
			if braced {
				k++
			}
			r.i = k
		case '^':
			if r.i >= len(r.src) {
				return "", r.errorf(r.i, "unterminated escape")
			}
			b.WriteByte(r.src[r.i] & 0x1f)
			r.i++
		default: // \\ \' \" and any other character stand for themselves
			b.WriteByte(e)
		}
	}
}

// ParseErlang parses a selector in the Erlang term form RabbitMQ's JMS
// client sends in the rjms_erlang_selector binding argument. The final
// full stop is optional.
func ParseErlang(src string) (*Selector, error) {
	r := &termReader{src: src}
	t, err := r.term()
	if err != nil {
		return nil, err
	}
	if r.peekByte() == '.' {
		r.i++
	}
	if r.skip(); r.i < len(r.src) {
		return nil, r.errorf(r.i, "unexpected %s after the term", r.found())
	}
	c := &termConverter{}
	root, err := c.expr(&t)
	if err != nil {
		return nil, err
	}
	return newSelector(root, true), nil
}

type termConverter struct{ nodes int }

func (c *termConverter) node(t *term, n *node) (*node, error) {
	if c.nodes++; c.nodes > MaxNodes {
		return nil, &SyntaxError{t.pos, fmt.Sprintf("selector too long (more than %d operators and operands)", MaxNodes)}
	}
	return n, nil
}

var binaryOps = map[string]op{
	"and": opAnd, "or": opOr, "=": opEq, "<>": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe,
	"+": opAdd, "-": opSub, "*": opMul, "/": opDiv,
}

func shapeError(t *term, want string) error {
	return &SyntaxError{t.pos, fmt.Sprintf("%s: expected %s", t.describe(), want)}
}

// expr converts a term into a selector tree.
func (c *termConverter) expr(t *term) (*node, error) {
	switch t.kind {
	case termInt:
		return c.node(t, &node{op: opLit, val: IntValue(t.i)})
	case termFloat:
		return c.node(t, &node{op: opLit, val: FloatValue(t.f)})
	case termBinary:
		return c.node(t, &node{op: opLit, val: StringValue(t.s)})
	case termAtom:
		switch t.s {
		case "true", "false":
			return c.node(t, &node{op: opLit, val: BoolValue(t.s == "true")})
		}
		return nil, &SyntaxError{t.pos, fmt.Sprintf("unexpected atom '%s' (only 'true' and 'false' are values)", t.s)}
	case termList:
		return nil, &SyntaxError{t.pos, "a list is only allowed as the values of 'in' and 'not_in'"}
	}
	if len(t.elems) == 0 || t.elems[0].kind != termAtom {
		return nil, &SyntaxError{t.pos, "a selector tuple starts with an operator atom, like {'=', ...}"}
	}
	name, args := t.elems[0].s, t.elems[1:]
	operands := func(n int) ([]*node, error) {
		out := make([]*node, n)
		for i := range out {
			x, err := c.expr(&args[i])
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	switch name {
	case "ident":
		if len(args) != 1 || args[0].kind != termBinary {
			return nil, shapeError(t, "{'ident', <<\"name\">>}")
		}
		return c.node(t, &node{op: opIdent, name: args[0].s, slot: -1})
	case "not", "is_null", "not_null":
		if len(args) != 1 {
			return nil, shapeError(t, fmt.Sprintf("{'%s', Expression}", name))
		}
		a, err := operands(1)
		if err != nil {
			return nil, err
		}
		o := map[string]op{"not": opNot, "is_null": opIsNull, "not_null": opIsNotNull}[name]
		return c.node(t, &node{op: o, a: a[0]})
	case "in", "not_in":
		if len(args) != 2 || args[1].kind != termList || len(args[1].elems) == 0 {
			return nil, shapeError(t, fmt.Sprintf("{'%s', Expression, [Value, ...]}", name))
		}
		a, err := c.expr(&args[0])
		if err != nil {
			return nil, err
		}
		list := make([]Value, 0, len(args[1].elems))
		for i := range args[1].elems {
			e := &args[1].elems[i]
			switch e.kind {
			case termBinary:
				list = append(list, StringValue(e.s))
			case termInt:
				list = append(list, IntValue(e.i))
			case termFloat:
				list = append(list, FloatValue(e.f))
			default:
				return nil, &SyntaxError{e.pos, fmt.Sprintf("%s in the values of '%s': expected a binary or a number", e.describe(), name)}
			}
		}
		return c.node(t, &node{op: pick(name == "in", opIn, opNotIn), a: a, list: list})
	case "like", "not_like":
		// {'like', E, Pattern, Escape}, or the older {'like', E, {Pattern, Escape}}.
		var pat, esc *term
		switch {
		case len(args) == 3:
			pat, esc = &args[1], &args[2]
		case len(args) == 2 && args[1].kind == termTuple && len(args[1].elems) == 2:
			pat, esc = &args[1].elems[0], &args[1].elems[1]
		default:
			return nil, shapeError(t, fmt.Sprintf("{'%s', Expression, <<\"pattern\">>, 'no_escape' | <<\"c\">>}", name))
		}
		if pat.kind != termBinary {
			return nil, &SyntaxError{pat.pos, fmt.Sprintf("%s as a LIKE pattern: expected a binary", pat.describe())}
		}
		escape := ""
		switch {
		case esc.kind == termAtom && esc.s == "no_escape":
		case esc.kind == termBinary && utf8.RuneCountInString(esc.s) == 1:
			escape = esc.s
		default:
			return nil, &SyntaxError{esc.pos, fmt.Sprintf("%s as a LIKE escape: expected 'no_escape' or a one-character binary", esc.describe())}
		}
		lp, err := compileLike(pat.s, escape)
		if err != nil {
			return nil, &SyntaxError{pat.pos, err.Error()}
		}
		a, err := c.expr(&args[0])
		if err != nil {
			return nil, err
		}
		return c.node(t, &node{op: pick(name == "like", opLike, opNotLike), a: a, like: lp})
	case "between", "not_between":
		// {'between', E, Lo, Hi}, or {'between', E, {'range', Lo, Hi}}.
		var ts []term
		switch {
		case len(args) == 3:
			ts = args
		case len(args) == 2 && args[1].kind == termTuple && len(args[1].elems) == 3 &&
			args[1].elems[0].kind == termAtom && args[1].elems[0].s == "range":
			ts = []term{args[0], args[1].elems[1], args[1].elems[2]}
		default:
			return nil, shapeError(t, fmt.Sprintf("{'%s', Expression, Low, High}", name))
		}
		args = ts
		x, err := operands(3)
		if err != nil {
			return nil, err
		}
		return c.node(t, &node{op: pick(name == "between", opBetween, opNotBetween), a: x[0], b: x[1], c: x[2]})
	}
	if o, ok := binaryOps[name]; ok {
		if len(args) == 1 && (name == "-" || name == "+") {
			a, err := operands(1)
			if err != nil {
				return nil, err
			}
			return c.node(t, &node{op: pick(name == "-", opNeg, opPos), a: a[0]})
		}
		if len(args) != 2 {
			return nil, shapeError(t, fmt.Sprintf("{'%s', Left, Right}", name))
		}
		x, err := operands(2)
		if err != nil {
			return nil, err
		}
		return c.node(t, &node{op: o, a: x[0], b: x[1]})
	}
	return nil, &SyntaxError{t.elems[0].pos, fmt.Sprintf("unknown selector operator '%s'", name)}
}

// Erlang prints the selector as the Erlang term RabbitMQ's JMS client
// would send, with the final full stop. ParseErlang reads it back to the
// same tree.
func (s *Selector) Erlang() string {
	var b strings.Builder
	writeErlang(&b, s.root)
	b.WriteByte('.')
	return b.String()
}

var erlangOps = map[op]string{
	opNot: "not", opAnd: "and", opOr: "or", opEq: "=", opNe: "<>", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/", opNeg: "-", opPos: "+",
	opBetween: "between", opNotBetween: "not_between", opIn: "in", opNotIn: "not_in",
	opLike: "like", opNotLike: "not_like", opIsNull: "is_null", opIsNotNull: "not_null",
}

func writeErlangValue(b *strings.Builder, v Value) {
	switch v.Kind {
	case Bool:
		b.WriteString(pickStr(v.Bool, "'true'", "'false'"))
	case Int:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case Float:
		b.WriteString(formatFloat(v.Float, true))
	case String:
		b.WriteString(quoteErlang(v.Str))
	default:
		b.WriteString("'undefined'") // not produced by a parse
	}
}

func writeErlang(b *strings.Builder, n *node) {
	switch n.op {
	case opLit:
		writeErlangValue(b, n.val)
		return
	case opIdent:
		b.WriteString("{'ident',")
		b.WriteString(quoteErlang(n.name))
		b.WriteByte('}')
		return
	}
	b.WriteString("{'")
	b.WriteString(erlangOps[n.op])
	b.WriteByte('\'')
	for _, x := range []*node{n.a, n.b, n.c} {
		if x != nil {
			b.WriteByte(',')
			writeErlang(b, x)
		}
	}
	switch n.op {
	case opIn, opNotIn:
		b.WriteString(",[")
		for i, v := range n.list {
			if i > 0 {
				b.WriteByte(',')
			}
			writeErlangValue(b, v)
		}
		b.WriteByte(']')
	case opLike, opNotLike:
		b.WriteByte(',')
		b.WriteString(quoteErlang(n.like.src))
		if n.like.esc != "" {
			b.WriteByte(',')
			b.WriteString(quoteErlang(n.like.esc))
		} else {
			b.WriteString(",'no_escape'")
		}
	}
	b.WriteByte('}')
}

// quoteErlang writes s as an Erlang binary: quotes and backslashes
// escaped, control bytes in octal, other bytes as they are.
func quoteErlang(s string) string {
	var b strings.Builder
	b.WriteString(`<<"`)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString(`">>`)
	return b.String()
}
