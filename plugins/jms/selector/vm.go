package selector

// The evaluator. A selector's tree is compiled, once, into a program for a
// stack machine, which Eval runs in one loop. Walking the tree by
// recursion costs a few calls per node, and in Go compiled to WebAssembly
// a call costs tens of nanoseconds (every function is a resumable state
// machine there): the loop does a selector like `weight > 10 AND color IN
// ('red', 'blue')` in a fraction of the time, and its only calls are the
// header lookups and the rarer operators. evalTree, in the tests, is the
// recursive definition the program is checked against.
//
// The program is postfix: operands are pushed, operators pop theirs and
// push the result. AND and OR short-circuit with a jump after their left
// operand, when it alone decides (FALSE for AND, TRUE for OR), leaving it
// as the result.

// Two operations exist only in programs.
const (
	opAndJump op = opIsNotNull + 1 + iota
	opOrJump
)

type instr struct {
	op  op
	arg int32 // opLit: constant; opIdent: identifier; opIn: list; opLike: pattern; jumps: target
}

type program struct {
	code   []instr
	consts []Value
	idents []*node // the identifier nodes, for their name and slot
	lists  [][]Value
	likes  []*likePattern
	depth  int
	max    int
	stack  []Value // scratch: Eval is not for concurrent use
}

func (p *program) compile(root *node) {
	p.emit(root)
	p.stack = make([]Value, p.max)
}

func (p *program) add(o op, arg int, push int) int {
	p.code = append(p.code, instr{op: o, arg: int32(arg)})
	p.depth += push
	p.max = max(p.max, p.depth)
	return len(p.code) - 1
}

func (p *program) emit(n *node) {
	switch n.op {
	case opLit:
		p.add(opLit, len(p.consts), 1)
		p.consts = append(p.consts, n.val)
	case opIdent:
		p.add(opIdent, len(p.idents), 1)
		p.idents = append(p.idents, n)
	case opNot, opNeg, opPos, opIsNull, opIsNotNull:
		p.emit(n.a)
		p.add(n.op, 0, 0)
	case opAnd, opOr:
		p.emit(n.a)
		jump := p.add(pick(n.op == opAnd, opAndJump, opOrJump), 0, 0)
		p.emit(n.b)
		p.add(n.op, 0, -1)
		p.code[jump].arg = int32(len(p.code))
	case opBetween, opNotBetween:
		p.emit(n.a)
		p.emit(n.b)
		p.emit(n.c)
		p.add(n.op, 0, -2)
	case opIn, opNotIn:
		p.emit(n.a)
		p.add(n.op, len(p.lists), 0)
		p.lists = append(p.lists, n.list)
	case opLike, opNotLike:
		p.emit(n.a)
		p.add(n.op, len(p.likes), 0)
		p.likes = append(p.likes, n.like)
	default: // comparisons and arithmetic
		p.emit(n.a)
		p.emit(n.b)
		p.add(n.op, 0, -1)
	}
}

// run executes the program; the result is the selector's value.
func (s *Selector) run(env Env) Value {
	p := &s.prog
	st := p.stack
	sp := 0
	code := p.code
	for pc := 0; pc < len(code); pc++ {
		in := &code[pc]
		switch in.op {
		case opLit:
			st[sp] = p.consts[in.arg]
			sp++
		case opIdent:
			n := p.idents[in.arg]
			st[sp] = env.Lookup(int(n.slot), n.name)
			sp++
		case opEq, opNe, opLt, opLe, opGt, opGe:
			sp--
			l, r := &st[sp-1], &st[sp]
			if l.Kind != Int || r.Kind != Int {
				*l = compare(in.op, *l, *r)
				continue
			}
			var b bool
			switch in.op {
			case opEq:
				b = l.Int == r.Int
			case opNe:
				b = l.Int != r.Int
			case opLt:
				b = l.Int < r.Int
			case opLe:
				b = l.Int <= r.Int
			case opGt:
				b = l.Int > r.Int
			default:
				b = l.Int >= r.Int
			}
			*l = Value{Kind: Bool, Bool: b}
		case opAndJump:
			if v := &st[sp-1]; v.Kind == Bool && !v.Bool {
				pc = int(in.arg) - 1
			}
		case opOrJump:
			if v := &st[sp-1]; v.Kind == Bool && v.Bool {
				pc = int(in.arg) - 1
			}
		case opAnd:
			// The left operand is not FALSE (opAndJump saw to that).
			sp--
			l, r := &st[sp-1], &st[sp]
			switch {
			case r.Kind == Bool && !r.Bool:
				*l = vFalse
			case l.Kind == Bool && r.Kind == Bool:
				*l = vTrue
			default:
				*l = null
			}
		case opOr:
			// The left operand is not TRUE (opOrJump saw to that).
			sp--
			l, r := &st[sp-1], &st[sp]
			switch {
			case r.Kind == Bool && r.Bool:
				*l = vTrue
			case l.Kind == Bool && r.Kind == Bool:
				*l = vFalse
			default:
				*l = null
			}
		case opNot:
			if v := &st[sp-1]; v.Kind == Bool {
				v.Bool = !v.Bool
			} else {
				*v = null
			}
		case opNeg, opPos:
			switch v := &st[sp-1]; {
			case in.op == opPos && v.isNumber():
			case v.Kind == Int:
				v.Int = -v.Int // wraps for the most negative, as in Java
			case v.Kind == Float:
				v.Float = -v.Float
			default:
				*v = null
			}
		case opIsNull:
			st[sp-1] = boolOf(st[sp-1].Kind == Null)
		case opIsNotNull:
			st[sp-1] = boolOf(st[sp-1].Kind != Null)
		case opAdd, opSub, opMul, opDiv:
			sp--
			st[sp-1] = s.arith(in.op, st[sp-1], st[sp])
		case opBetween, opNotBetween:
			sp -= 2
			x, lo, hi := st[sp-1], st[sp], st[sp+1]
			if in.op == opBetween {
				st[sp-1] = and3(compare(opLe, lo, x), compare(opLe, x, hi))
			} else {
				st[sp-1] = or3(compare(opLt, x, lo), compare(opGt, x, hi))
			}
		case opIn, opNotIn:
			x := &st[sp-1]
			if x.Kind == Null {
				continue
			}
			found, all := false, true // NOT IN: every value comparable and different
			for _, v := range p.lists[in.arg] {
				eq, ok := equal(*x, v)
				if eq {
					found = true
					break
				}
				all = all && ok
			}
			if in.op == opIn {
				*x = boolOf(found)
			} else {
				*x = boolOf(!found && all)
			}
		case opLike, opNotLike:
			switch x := &st[sp-1]; x.Kind {
			case Null:
			case String:
				*x = boolOf(p.likes[in.arg].match(x.Str) == (in.op == opLike))
			default:
				*x = vFalse
			}
		}
	}
	return st[0]
}
