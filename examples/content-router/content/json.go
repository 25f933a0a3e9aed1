package content

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader that finds one field by path without decoding the
// document: it walks the bytes, skipping what is not on the path, and
// allocates nothing. It accepts what encoding/json accepts for the parts it
// walks; what lies after the field it looks for is not checked.

// lookup finds the value at path in doc and returns its bytes (a string with
// its quotes), or ok=false when the path is not there or doc is not JSON.
// Path segments name object members; a segment that is a decimal number
// also indexes arrays.
func lookup(doc []byte, path []string) (val []byte, ok bool) {
	i := skipSpace(doc, 0)
	for _, seg := range path {
		if i >= len(doc) {
			return nil, false
		}
		switch doc[i] {
		case '{':
			if i, ok = member(doc, i, seg); !ok {
				return nil, false
			}
		case '[':
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 {
				return nil, false
			}
			if i, ok = element(doc, i, n); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	end, ok := skipValue(doc, i, 0)
	if !ok {
		return nil, false
	}
	return doc[i:end], true
}

// member returns where the value of the member named name starts, in the
// object starting at i.
func member(doc []byte, i int, name string) (int, bool) {
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return 0, false
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return 0, false
		}
		end, ok := skipString(doc, i)
		if !ok {
			return 0, false
		}
		// Most keys have no escapes: compare the bytes directly, which
		// costs no function call (dear in WebAssembly).
		var match bool
		if key := doc[i+1 : end-1]; bytes.IndexByte(key, '\\') < 0 {
			match = string(key) == name
		} else {
			match = stringEquals(doc[i:end], name)
		}
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return 0, false
		}
		i = skipSpace(doc, i+1)
		if match {
			return i, true
		}
		if i, ok = skipValue(doc, i, 0); !ok {
			return 0, false
		}
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			return 0, false // '}' or garbage: not found
		}
		i = skipSpace(doc, i+1)
	}
	return 0, false
}

// element returns where element n of the array starting at i starts.
func element(doc []byte, i, n int) (int, bool) {
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return 0, false
	}
	for k := 0; i < len(doc); k++ {
		if k == n {
			return i, true
		}
		var ok bool
		if i, ok = skipValue(doc, i, 0); !ok {
			return 0, false
		}
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			return 0, false
		}
		i = skipSpace(doc, i+1)
	}
	return 0, false
}

// maxDepth bounds nesting so a hostile body cannot exhaust the stack.
const maxDepth = 256

// skipValue returns the end of the value starting at i.
func skipValue(doc []byte, i, depth int) (int, bool) {
	if i >= len(doc) || depth > maxDepth {
		return 0, false
	}
	switch c := doc[i]; {
	case c == '"':
		return skipString(doc, i)
	case c == '{' || c == '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == closing {
			return i + 1, true
		}
		for i < len(doc) {
			var ok bool
			if c == '{' {
				if doc[i] != '"' {
					return 0, false
				}
				if i, ok = skipString(doc, i); !ok {
					return 0, false
				}
				i = skipSpace(doc, i)
				if i >= len(doc) || doc[i] != ':' {
					return 0, false
				}
				i = skipSpace(doc, i+1)
			}
			if i, ok = skipValue(doc, i, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(doc, i)
			if i >= len(doc) {
				return 0, false
			}
			if doc[i] == closing {
				return i + 1, true
			}
			if doc[i] != ',' {
				return 0, false
			}
			i = skipSpace(doc, i+1)
		}
		return 0, false
	case c == 't':
		return literal(doc, i, "true")
	case c == 'f':
		return literal(doc, i, "false")
	case c == 'n':
		return literal(doc, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(doc, i)
	}
	return 0, false
}

// skipNumber returns the end of the number at i, checking JSON's grammar
// (-? int frac? exp?) without converting it.
func skipNumber(doc []byte, i int) (int, bool) {
	if doc[i] == '-' {
		i++
	}
	if i < len(doc) && doc[i] == '0' {
		i++
	} else {
		j := skipDigits(doc, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	if i < len(doc) && doc[i] == '.' {
		j := skipDigits(doc, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(doc) && (doc[i] == 'e' || doc[i] == 'E') {
		i++
		if i < len(doc) && (doc[i] == '+' || doc[i] == '-') {
			i++
		}
		j := skipDigits(doc, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func skipDigits(doc []byte, i int) int {
	for i < len(doc) && doc[i] >= '0' && doc[i] <= '9' {
		i++
	}
	return i
}

func literal(doc []byte, i int, lit string) (int, bool) {
	if len(doc)-i < len(lit) || string(doc[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// skipString returns the end of the string starting at the quote at i.
func skipString(doc []byte, i int) (int, bool) {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	return i
}

// stringEquals compares a JSON string literal (quotes included, escapes
// undecoded) with s, decoding escapes on the fly.
func stringEquals(lit []byte, s string) bool {
	lit = lit[1 : len(lit)-1]
	k := 0 // position in s
	var enc [4]byte
	for i := 0; i < len(lit); {
		c := lit[i]
		if c != '\\' {
			if k >= len(s) || s[k] != c {
				return false
			}
			i++
			k++
			continue
		}
		if i+1 >= len(lit) {
			return false
		}
		var r rune
		switch lit[i+1] {
		case '"', '\\', '/':
			r = rune(lit[i+1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var n int
			r, n = unicodeEscape(lit[i:])
			if n == 0 {
				return false
			}
			i += n
			goto compare
		default:
			return false
		}
		i += 2
	compare:
		n := utf8.EncodeRune(enc[:], r)
		if len(s)-k < n || s[k:k+n] != string(enc[:n]) {
			return false
		}
		k += n
	}
	return k == len(s)
}

// unicodeEscape decodes \uXXXX (and a following low surrogate) at b.
func unicodeEscape(b []byte) (rune, int) {
	r := hex4(b)
	if r < 0 {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if len(b) >= 12 {
			if r2 := hex4(b[6:]); r2 >= 0 {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}

func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}
