package router

// Topic patterns, as AMQP's topic exchange reads them: words separated by
// '.', where '*' in a pattern stands for exactly one word and '#' for zero
// or more. The empty string has no words ("" matches only "", "#" matches
// everything); empty words between dots are words.

const (
	wordLit = iota
	wordOne // *
	wordAny // #
)

type patternWord struct {
	kind uint8
	lit  string
}

// pattern is a compiled binding key.
type pattern struct {
	key   string
	words []patternWord
	exact bool // no wildcard: the key must equal the pattern
}

func compilePattern(key string) pattern {
	p := pattern{key: key, exact: true}
	if key == "" {
		return p
	}
	start := 0
	for i := 0; i <= len(key); i++ {
		if i < len(key) && key[i] != '.' {
			continue
		}
		w := key[start:i]
		switch w {
		case "*":
			p.words = append(p.words, patternWord{kind: wordOne})
			p.exact = false
		case "#":
			// Adjacent '#' are one.
			if n := len(p.words); n == 0 || p.words[n-1].kind != wordAny {
				p.words = append(p.words, patternWord{kind: wordAny})
			}
			p.exact = false
		default:
			p.words = append(p.words, patternWord{kind: wordLit, lit: w})
		}
		start = i + 1
	}
	return p
}

// splitKey appends the [start, end) offsets of key's words to dst.
func splitKey(dst []int32, key string) []int32 {
	dst = dst[:0]
	if key == "" {
		return dst
	}
	start := 0
	for i := 0; i <= len(key); i++ {
		if i == len(key) || key[i] == '.' {
			dst = append(dst, int32(start), int32(i))
			start = i + 1
		}
	}
	return dst
}

// match reports whether the routing key, split into words by splitKey,
// matches. It is wildcard matching with one backtracking point, the last
// '#': when what follows a '#' fails, the '#' takes one more word and the
// rest is tried again, so the time is O(words × pattern words) at worst.
func (p *pattern) match(key string, words []int32) bool {
	if p.exact {
		return key == p.key
	}
	n := len(words) / 2
	pw := p.words
	pi, wi := 0, 0
	anyP, anyW := -1, 0
	for {
		if pi < len(pw) {
			switch w := &pw[pi]; w.kind {
			case wordAny:
				anyP, anyW = pi, wi
				pi++
				continue
			case wordOne:
				if wi < n {
					pi++
					wi++
					continue
				}
			default:
				if wi < n && key[words[2*wi]:words[2*wi+1]] == w.lit {
					pi++
					wi++
					continue
				}
			}
		} else if wi == n {
			return true
		}
		if anyP < 0 || anyW >= n {
			return false
		}
		anyW++
		pi, wi = anyP+1, anyW
	}
}
