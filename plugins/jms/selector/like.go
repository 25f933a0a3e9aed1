package selector

import (
	"fmt"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: literal runs, '_' (one
// character) and '%' (any run of characters). It keeps its source and
// escape character to print the selector back.
type likePattern struct {
	src  string
	esc  string // the escape character's bytes; "" when none
	toks []likeTok
}

type likeTok struct {
	kind uint8 // likeLit, likeOne, likeAny
	lit  string
}

const (
	likeLit = iota
	likeOne
	likeAny
)

// compileLike compiles a pattern. The escape character, when given, makes
// the character after it literal; a pattern may not end with it.
func compileLike(src, esc string) (*likePattern, error) {
	p := &likePattern{src: src, esc: esc}
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			p.toks = append(p.toks, likeTok{kind: likeLit, lit: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		switch {
		case esc != "" && src[i:i+n] == esc:
			if i+n >= len(src) {
				return nil, fmt.Errorf("LIKE pattern '%s' ends with its escape character", src)
			}
			_, m := utf8.DecodeRuneInString(src[i+n:])
			lit = append(lit, src[i+n:i+n+m]...)
			n += m
		case r == '_':
			flush()
			p.toks = append(p.toks, likeTok{kind: likeOne})
		case r == '%':
			flush()
			// Consecutive '%' are one.
			if len(p.toks) == 0 || p.toks[len(p.toks)-1].kind != likeAny {
				p.toks = append(p.toks, likeTok{kind: likeAny})
			}
		default:
			lit = append(lit, src[i:i+n]...)
		}
		i += n
	}
	flush()
	return p, nil
}

// match reports whether the whole of s matches. It is the usual wildcard
// match with one backtracking point, the last '%' seen: when what follows
// a '%' fails, the '%' takes one more character and the rest is tried
// again. Time is O(len(s) × tokens) at worst, without allocation.
func (p *likePattern) match(s string) bool {
	toks := p.toks
	ti, si := 0, 0
	starTok, starPos := -1, 0
	for {
		if ti < len(toks) {
			t := &toks[ti]
			switch t.kind {
			case likeAny:
				starTok, starPos = ti, si
				ti++
				continue
			case likeOne:
				if si < len(s) {
					_, n := utf8.DecodeRuneInString(s[si:])
					si += n
					ti++
					continue
				}
			case likeLit:
				if len(s)-si >= len(t.lit) && s[si:si+len(t.lit)] == t.lit {
					si += len(t.lit)
					ti++
					continue
				}
			}
		} else if si == len(s) {
			return true
		}
		// Mismatch: let the last '%' take one more character.
		if starTok < 0 || starPos >= len(s) {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starPos:])
		starPos += n
		ti, si = starTok+1, starPos
	}
}
