package selector

// evalTree evaluates the tree directly, by recursion: the definition the
// compiled program (vm.go) must agree with. The fuzz targets and the
// data-driven tests compare the two on every selector they evaluate.
func (s *Selector) evalTree(n *node, env Env) Value {
	switch n.op {
	case opLit:
		return n.val
	case opIdent:
		return env.Lookup(int(n.slot), n.name)
	case opNot:
		if b, ok := s.evalTree(n.a, env).truth(); ok {
			return boolOf(!b)
		}
		return null
	case opAnd:
		l, lok := s.evalTree(n.a, env).truth()
		if lok && !l {
			return vFalse
		}
		r, rok := s.evalTree(n.b, env).truth()
		if rok && !r {
			return vFalse
		}
		if lok && rok {
			return vTrue
		}
		return null
	case opOr:
		l, lok := s.evalTree(n.a, env).truth()
		if lok && l {
			return vTrue
		}
		r, rok := s.evalTree(n.b, env).truth()
		if rok && r {
			return vTrue
		}
		if lok && rok {
			return vFalse
		}
		return null
	case opEq, opNe, opLt, opLe, opGt, opGe:
		// Operands are mostly identifiers and literals: read those here
		// rather than through a call (calls are dear in WebAssembly).
		var l, r Value
		switch a := n.a; a.op {
		case opIdent:
			l = env.Lookup(int(a.slot), a.name)
		case opLit:
			l = a.val
		default:
			l = s.evalTree(a, env)
		}
		switch b := n.b; b.op {
		case opIdent:
			r = env.Lookup(int(b.slot), b.name)
		case opLit:
			r = b.val
		default:
			r = s.evalTree(b, env)
		}
		return compare(n.op, l, r)
	case opAdd, opSub, opMul, opDiv:
		return s.arith(n.op, s.evalTree(n.a, env), s.evalTree(n.b, env))
	case opNeg, opPos:
		v := s.evalTree(n.a, env)
		switch {
		case n.op == opPos && v.isNumber():
			return v
		case v.Kind == Int:
			return IntValue(-v.Int) // wraps for the most negative, as in Java
		case v.Kind == Float:
			return FloatValue(-v.Float)
		}
		return null
	case opBetween, opNotBetween:
		x, lo, hi := s.evalTree(n.a, env), s.evalTree(n.b, env), s.evalTree(n.c, env)
		if n.op == opBetween {
			return and3(compare(opLe, lo, x), compare(opLe, x, hi))
		}
		return or3(compare(opLt, x, lo), compare(opGt, x, hi))
	case opIn, opNotIn:
		var x Value
		if a := n.a; a.op == opIdent {
			x = env.Lookup(int(a.slot), a.name)
		} else {
			x = s.evalTree(a, env)
		}
		if x.Kind == Null {
			return null
		}
		all := true // NOT IN: every value comparable and different
		for _, v := range n.list {
			eq, ok := equal(x, v)
			if eq {
				return boolOf(n.op == opIn)
			}
			all = all && ok
		}
		return boolOf(n.op == opNotIn && all)
	case opLike, opNotLike:
		var x Value
		if a := n.a; a.op == opIdent {
			x = env.Lookup(int(a.slot), a.name)
		} else {
			x = s.evalTree(a, env)
		}
		switch x.Kind {
		case Null:
			return null
		case String:
			return boolOf(n.like.match(x.Str) == (n.op == opLike))
		}
		return vFalse
	case opIsNull:
		return boolOf(s.evalTree(n.a, env).Kind == Null)
	case opIsNotNull:
		return boolOf(s.evalTree(n.a, env).Kind != Null)
	}
	return null
}
