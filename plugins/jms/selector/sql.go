package selector

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SyntaxError is a selector that does not parse: what is wrong and where
// (a byte offset into the selector, from 0).
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at position %d", e.Msg, e.Pos+1)
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt
	tFloat
	tOp // = <> < <= > >= + - * / ( ) ,
	// keywords
	tNot
	tAnd
	tOr
	tBetween
	tLike
	tIn
	tIs
	tNull
	tEscape
	tTrue
	tFalse
)

var keywords = map[string]tokKind{
	"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "LIKE": tLike,
	"IN": tIn, "IS": tIs, "NULL": tNull, "ESCAPE": tEscape, "TRUE": tTrue, "FALSE": tFalse,
}

type token struct {
	kind tokKind
	pos  int
	text string  // source text; for strings, the unquoted value
	u    uint64  // tInt: the magnitude
	f    float64 // tFloat
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "the end"
	case tString:
		return "string " + quoteSQL(t.text)
	}
	return "'" + t.text + "'"
}

// lexSQL splits a selector into tokens.
func lexSQL(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
			continue
		case c == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, &SyntaxError{start, "unterminated string"}
				}
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			toks = append(toks, token{kind: tString, pos: start, text: b.String()})
			continue
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			t, n, err := lexNumber(src[i:])
			if err != nil {
				return nil, &SyntaxError{start, err.Error()}
			}
			t.pos = start
			toks = append(toks, t)
			i += n
			continue
		case strings.IndexByte("=+-*/(),", c) >= 0:
			toks = append(toks, token{kind: tOp, pos: start, text: src[i : i+1]})
			i++
			continue
		case c == '<':
			n := 1
			if i+1 < len(src) && (src[i+1] == '>' || src[i+1] == '=') {
				n = 2
			}
			toks = append(toks, token{kind: tOp, pos: start, text: src[i : i+n]})
			i += n
			continue
		case c == '>':
			n := 1
			if i+1 < len(src) && src[i+1] == '=' {
				n = 2
			}
			toks = append(toks, token{kind: tOp, pos: start, text: src[i : i+n]})
			i += n
			continue
		}
		r, n := utf8.DecodeRuneInString(src[i:])
		if !identStart(r) {
			return nil, &SyntaxError{start, fmt.Sprintf("unexpected character %q", r)}
		}
		i += n
		for i < len(src) {
			r, n := utf8.DecodeRuneInString(src[i:])
			if !identPart(r) {
				break
			}
			i += n
		}
		word := src[start:i]
		if k, ok := keywords[strings.ToUpper(word)]; ok {
			toks = append(toks, token{kind: k, pos: start, text: word})
		} else {
			toks = append(toks, token{kind: tIdent, pos: start, text: word})
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

// validIdent reports whether name reads back as an identifier in the SQL
// syntax (the Erlang syntax can name any header).
func validIdent(name string) bool {
	if name == "" {
		return false
	}
	if _, kw := keywords[strings.ToUpper(name)]; kw {
		return false
	}
	for i, r := range name {
		if (i == 0 && !identStart(r)) || !identPart(r) {
			return false
		}
	}
	return true
}

func identStart(r rune) bool {
	return r == '_' || r == '$' || (r != utf8.RuneError && unicode.IsLetter(r))
}

func identPart(r rune) bool {
	return identStart(r) || r == '.' || unicode.IsDigit(r)
}

// lexNumber reads a numeric literal at the start of s: a decimal or
// hexadecimal integer with an optional L suffix, or a decimal with a
// fraction or an exponent and an optional F or D suffix.
func lexNumber(s string) (token, int, error) {
	digits := func(i int) int {
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		i := 2
		for i < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i]) >= 0 {
			i++
		}
		if i == 2 {
			return token{}, 0, errors.New("hexadecimal number without digits")
		}
		u, err := strconv.ParseUint(s[2:i], 16, 64)
		if err != nil {
			return token{}, 0, errors.New("number out of range")
		}
		end := i
		if i < len(s) && (s[i] == 'l' || s[i] == 'L') {
			end++
		}
		// Like Java's, a hexadecimal literal may spell a negative long.
		return token{kind: tInt, text: s[:end], u: u}, end, checkEnd(s, end)
	}
	i := digits(0)
	isFloat := false
	if i < len(s) && s[i] == '.' {
		isFloat = true
		i = digits(i + 1)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := digits(j)
		if k == j {
			return token{}, 0, errors.New("exponent without digits")
		}
		isFloat, i = true, k
	}
	num := s[:i]
	if i < len(s) && strings.IndexByte("fFdD", s[i]) >= 0 {
		isFloat = true
		i++
	} else if !isFloat && i < len(s) && (s[i] == 'l' || s[i] == 'L') {
		i++
	}
	if err := checkEnd(s, i); err != nil {
		return token{}, 0, err
	}
	if isFloat {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return token{}, 0, errors.New("number out of range")
		}
		return token{kind: tFloat, text: s[:i], f: f}, i, nil
	}
	u, err := strconv.ParseUint(num, 10, 64)
	if err != nil || u > 1<<63 {
		return token{}, 0, errors.New("integer out of range")
	}
	return token{kind: tInt, text: s[:i], u: u}, i, nil
}

// checkEnd refuses a number run into a name, like 12abc.
func checkEnd(s string, i int) error {
	if i < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[i:]); identPart(r) {
			return errors.New("malformed number")
		}
	}
	return nil
}

// ParseSQL parses a selector in the JMS SQL syntax.
func ParseSQL(src string) (*Selector, error) {
	toks, err := lexSQL(src)
	if err != nil {
		return nil, err
	}
	p := &sqlParser{toks: toks}
	if p.peek().kind == tEOF {
		return nil, &SyntaxError{0, "empty selector"}
	}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, &SyntaxError{t.pos, "unexpected " + t.describe()}
	}
	return newSelector(root, false), nil
}

type sqlParser struct {
	toks  []token
	i     int
	depth int
	nodes int
}

func (p *sqlParser) peek() token { return p.toks[p.i] }

func (p *sqlParser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *sqlParser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *sqlParser) node(t token, n *node) (*node, error) {
	p.nodes++
	if p.nodes > MaxNodes {
		return nil, &SyntaxError{t.pos, fmt.Sprintf("selector too long (more than %d operators and operands)", MaxNodes)}
	}
	return n, nil
}

func (p *sqlParser) enter(t token) error {
	p.depth++
	if p.depth > MaxDepth {
		return &SyntaxError{t.pos, fmt.Sprintf("selector nested too deeply (more than %d levels)", MaxDepth)}
	}
	return nil
}

func (p *sqlParser) expected(what string) error {
	t := p.peek()
	return &SyntaxError{t.pos, "expected " + what + ", found " + t.describe()}
}

func (p *sqlParser) or() (*node, error) {
	l, err := p.and()
	for err == nil && p.peek().kind == tOr {
		t := p.next()
		var r *node
		if r, err = p.and(); err == nil {
			l, err = p.node(t, &node{op: opOr, a: l, b: r})
		}
	}
	return l, err
}

func (p *sqlParser) and() (*node, error) {
	l, err := p.not()
	for err == nil && p.peek().kind == tAnd {
		t := p.next()
		var r *node
		if r, err = p.not(); err == nil {
			l, err = p.node(t, &node{op: opAnd, a: l, b: r})
		}
	}
	return l, err
}

func (p *sqlParser) not() (*node, error) {
	if p.peek().kind != tNot {
		return p.comparison()
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	a, err := p.not()
	p.depth--
	if err != nil {
		return nil, err
	}
	return p.node(t, &node{op: opNot, a: a})
}

var comparisons = map[string]op{"=": opEq, "<>": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

func (p *sqlParser) comparison() (*node, error) {
	l, err := p.sum()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if t.kind == tOp {
		o, ok := comparisons[t.text]
		if !ok {
			return l, nil
		}
		p.next()
		r, err := p.sum()
		if err != nil {
			return nil, err
		}
		return p.node(t, &node{op: o, a: l, b: r})
	}
	negated := false
	if t.kind == tNot {
		switch p.toks[p.i+1].kind {
		case tBetween, tIn, tLike:
			p.next()
			negated = true
		default:
			return l, nil
		}
	}
	kw := p.peek()
	switch kw.kind {
	case tBetween, tIn, tLike, tIs:
		p.next()
	default:
		return l, nil
	}
	switch kw.kind {
	case tBetween:
		lo, err := p.sum()
		if err != nil {
			return nil, err
		}
		if p.peek().kind != tAnd {
			return nil, p.expected("AND after BETWEEN's lower bound")
		}
		p.next()
		hi, err := p.sum()
		if err != nil {
			return nil, err
		}
		return p.node(kw, &node{op: pick(negated, opNotBetween, opBetween), a: l, b: lo, c: hi})
	case tIn:
		if !p.isOp("(") {
			return nil, p.expected("'(' after IN")
		}
		p.next()
		var list []Value
		for {
			v, err := p.literal()
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			if p.isOp(",") {
				p.next()
				continue
			}
			if p.isOp(")") {
				p.next()
				break
			}
			return nil, p.expected("',' or ')' in the IN list")
		}
		if len(list) > MaxNodes {
			return nil, &SyntaxError{kw.pos, fmt.Sprintf("IN list longer than %d values", MaxNodes)}
		}
		return p.node(kw, &node{op: pick(negated, opNotIn, opIn), a: l, list: list})
	case tLike:
		pat := p.next()
		if pat.kind != tString {
			return nil, &SyntaxError{pat.pos, "expected a string pattern after LIKE, found " + pat.describe()}
		}
		esc := ""
		if p.peek().kind == tEscape {
			p.next()
			e := p.next()
			if e.kind != tString || utf8.RuneCountInString(e.text) != 1 {
				return nil, &SyntaxError{e.pos, "expected a one-character string after ESCAPE, found " + e.describe()}
			}
			esc = e.text
		}
		lp, err := compileLike(pat.text, esc)
		if err != nil {
			return nil, &SyntaxError{pat.pos, err.Error()}
		}
		return p.node(kw, &node{op: pick(negated, opNotLike, opLike), a: l, like: lp})
	case tIs:
		o := opIsNull
		if p.peek().kind == tNot {
			p.next()
			o = opIsNotNull
		}
		if p.peek().kind != tNull {
			return nil, p.expected("NULL after IS")
		}
		p.next()
		return p.node(kw, &node{op: o, a: l})
	}
	return l, nil // not reached
}

func pick(cond bool, a, b op) op {
	if cond {
		return a
	}
	return b
}

// literal reads one value of an IN list: a string or a number with an
// optional sign.
func (p *sqlParser) literal() (Value, error) {
	t := p.peek()
	switch t.kind {
	case tString:
		p.next()
		return StringValue(t.text), nil
	case tInt, tFloat:
		p.next()
		return numberValue(t, false)
	case tOp:
		if n := p.toks[p.i+1]; (t.text == "-" || t.text == "+") && (n.kind == tInt || n.kind == tFloat) {
			p.next()
			p.next()
			return numberValue(n, t.text == "-")
		}
	}
	return Value{}, p.expected("a string or a number in the IN list")
}

func numberValue(t token, neg bool) (Value, error) {
	if t.kind == tFloat {
		if neg {
			return FloatValue(-t.f), nil
		}
		return FloatValue(t.f), nil
	}
	isHex := len(t.text) > 1 && (t.text[1] == 'x' || t.text[1] == 'X')
	switch {
	case isHex && neg:
		return IntValue(-int64(t.u)), nil
	case isHex:
		return IntValue(int64(t.u)), nil
	case neg:
		return IntValue(-int64(t.u)), nil // 1<<63 becomes the most negative
	case t.u > math.MaxInt64:
		return Value{}, &SyntaxError{t.pos, "integer out of range"}
	}
	return IntValue(int64(t.u)), nil
}

func (p *sqlParser) sum() (*node, error) {
	l, err := p.product()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		t := p.next()
		var r *node
		if r, err = p.product(); err == nil {
			l, err = p.node(t, &node{op: pick(t.text == "+", opAdd, opSub), a: l, b: r})
		}
	}
	return l, err
}

func (p *sqlParser) product() (*node, error) {
	l, err := p.unary()
	for err == nil && (p.isOp("*") || p.isOp("/")) {
		t := p.next()
		var r *node
		if r, err = p.unary(); err == nil {
			l, err = p.node(t, &node{op: pick(t.text == "*", opMul, opDiv), a: l, b: r})
		}
	}
	return l, err
}

func (p *sqlParser) unary() (*node, error) {
	if !p.isOp("-") && !p.isOp("+") {
		return p.primary()
	}
	t := p.next()
	// A sign before a number is part of the literal: -9223372036854775808
	// is a long, and the tree prints back as it was written.
	if n := p.peek(); n.kind == tInt || n.kind == tFloat {
		p.next()
		v, err := numberValue(n, t.text == "-")
		if err != nil {
			return nil, err
		}
		return p.node(n, &node{op: opLit, val: v})
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	a, err := p.unary()
	p.depth--
	if err != nil {
		return nil, err
	}
	return p.node(t, &node{op: pick(t.text == "-", opNeg, opPos), a: a})
}

func (p *sqlParser) primary() (*node, error) {
	t := p.peek()
	switch t.kind {
	case tIdent:
		p.next()
		return p.node(t, &node{op: opIdent, name: t.text, slot: -1})
	case tString:
		p.next()
		return p.node(t, &node{op: opLit, val: StringValue(t.text)})
	case tInt, tFloat:
		p.next()
		v, err := numberValue(t, false)
		if err != nil {
			return nil, err
		}
		return p.node(t, &node{op: opLit, val: v})
	case tTrue, tFalse:
		p.next()
		return p.node(t, &node{op: opLit, val: BoolValue(t.kind == tTrue)})
	case tNull:
		return nil, &SyntaxError{t.pos, "NULL is not a value (use IS NULL or IS NOT NULL)"}
	case tOp:
		if t.text != "(" {
			break
		}
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		n, err := p.or()
		p.depth--
		if err != nil {
			return nil, err
		}
		if !p.isOp(")") {
			return nil, p.expected("')'")
		}
		p.next()
		return n, nil
	}
	return nil, p.expected("an identifier, a literal or '('")
}

// SQL prints the selector in the SQL syntax, with the parentheses the
// precedence of its operators requires and no more. ParseSQL reads it back
// to the same tree.
func (s *Selector) SQL() string {
	var b strings.Builder
	writeSQL(&b, s.root, 0)
	return b.String()
}

var opText = map[op]string{
	opAnd: "AND", opOr: "OR", opEq: "=", opNe: "<>", opLt: "<", opLe: "<=", opGt: ">", opGe: ">=",
	opAdd: "+", opSub: "-", opMul: "*", opDiv: "/",
}

// Precedence levels of the grammar, loosest first.
const (
	precOr = 1 + iota
	precAnd
	precNot
	precComparison
	precSum
	precProduct
	precUnary
	precPrimary
)

func precedence(n *node) int {
	switch n.op {
	case opOr:
		return precOr
	case opAnd:
		return precAnd
	case opNot:
		return precNot
	case opAdd, opSub:
		return precSum
	case opMul, opDiv:
		return precProduct
	case opNeg, opPos:
		return precUnary
	case opLit, opIdent:
		return precPrimary
	}
	return precComparison
}

// writeSQL prints n where the grammar expects an operand of precedence
// min at least, in parentheses when n's is lower. Binary operators are
// left-associative, so a right operand of the same level needs them.
func writeSQL(b *strings.Builder, n *node, min int) {
	p := precedence(n)
	if p < min {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch n.op {
	case opLit:
		b.WriteString(n.val.String())
	case opIdent:
		b.WriteString(n.name)
	case opNot:
		b.WriteString("NOT ")
		writeSQL(b, n.a, precNot)
	case opNeg, opPos:
		b.WriteString(pickStr(n.op == opNeg, "-", "+"))
		if a := n.a; a.op == opLit && a.val.isNumber() && !(a.val.Kind == Int && a.val.Int < 0) &&
			!(a.val.Kind == Float && math.Signbit(a.val.Float)) {
			// A sign before a number would make one literal of both.
			b.WriteByte('(')
			writeSQL(b, a, 0)
			b.WriteByte(')')
			break
		}
		writeSQL(b, n.a, precUnary)
	case opBetween, opNotBetween:
		writeSQL(b, n.a, precSum)
		b.WriteString(pickStr(n.op == opNotBetween, " NOT BETWEEN ", " BETWEEN "))
		writeSQL(b, n.b, precSum)
		b.WriteString(" AND ")
		writeSQL(b, n.c, precSum)
	case opIn, opNotIn:
		writeSQL(b, n.a, precSum)
		b.WriteString(pickStr(n.op == opNotIn, " NOT IN (", " IN ("))
		for i, v := range n.list {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(v.String())
		}
		b.WriteString(")")
	case opLike, opNotLike:
		writeSQL(b, n.a, precSum)
		b.WriteString(pickStr(n.op == opNotLike, " NOT LIKE ", " LIKE "))
		b.WriteString(quoteSQL(n.like.src))
		if n.like.esc != "" {
			b.WriteString(" ESCAPE ")
			b.WriteString(quoteSQL(n.like.esc))
		}
	case opIsNull, opIsNotNull:
		writeSQL(b, n.a, precSum)
		b.WriteString(pickStr(n.op == opIsNotNull, " IS NOT NULL", " IS NULL"))
	default:
		left, right := p, p+1
		if p == precComparison { // not associative; operands are sums
			left, right = precSum, precSum
		}
		writeSQL(b, n.a, left)
		b.WriteString(" " + opText[n.op] + " ")
		writeSQL(b, n.b, right)
	}
}

func pickStr(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

func quoteSQL(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
