package protocol

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"time"
	"unicode/utf8"
)

// allTypesTable holds one value of every field type, nested containers
// included, with values that only decode right if byte order and sign
// handling are right.
func allTypesTable() Table {
	return Table{
		"bool-true":  true,
		"bool-false": false,
		"int8":       int8(-2),
		"uint8":      uint8(250),
		"int16":      int16(-30000),
		"uint16":     uint16(60000),
		"int32":      int32(-2000000000),
		"uint32":     uint32(4000000000),
		"int64":      int64(-9000000000000000000),
		"float32":    float32(3.25),
		"float64":    float64(-1e300),
		"decimal":    Decimal{Scale: 2, Value: -12345},
		"string":     "héllo",
		"empty":      "",
		"bytes":      []byte{0, 1, 2, 0xff},
		"timestamp":  time.Unix(1700000000, 0).UTC(),
		"void":       nil,
		"array":      []any{int32(1), "two", []any{true, nil}, Table{"k": uint8(3)}},
		"table": Table{
			"nested": Table{"deeper": int64(42), "list": []any{float64(1.5)}},
		},
	}
}

// randomValue returns a random field value at nesting depth.
func randomValue(r *rand.Rand, depth int) any {
	n := 17
	if depth >= 4 {
		n = 15 // no more containers
	}
	switch r.IntN(n) {
	case 0:
		return r.IntN(2) == 0
	case 1:
		return int8(r.Uint32())
	case 2:
		return uint8(r.Uint32())
	case 3:
		return int16(r.Uint32())
	case 4:
		return uint16(r.Uint32())
	case 5:
		return int32(r.Uint32())
	case 6:
		return r.Uint32()
	case 7:
		return int64(r.Uint64())
	case 8:
		return float32(r.NormFloat64())
	case 9:
		return r.NormFloat64()
	case 10:
		return Decimal{Scale: uint8(r.Uint32()), Value: int32(r.Uint32())}
	case 11:
		return randomString(r, 40)
	case 12:
		b := []byte(randomString(r, 40))
		if len(b) == 0 {
			return []byte(nil)
		}
		return b
	case 13:
		return time.Unix(int64(r.Uint32()), 0).UTC()
	case 14:
		return nil
	case 15:
		var a []any
		for range r.IntN(4) {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	default:
		return randomTable(r, depth+1)
	}
}

// randomTable returns a random table, nil when empty (as decoding gives).
func randomTable(r *rand.Rand, depth int) Table {
	var t Table
	for range r.IntN(5) {
		if t == nil {
			t = Table{}
		}
		t[randomString(r, 12)] = randomValue(r, depth)
	}
	return t
}

func randomString(r *rand.Rand, max int) string {
	b := make([]byte, r.IntN(max+1))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

// randomText returns up to max bytes of UTF-8: runes of every length,
// controls and NUL among them.
func randomText(r *rand.Rand, max int) string {
	var b []byte
	for n := r.IntN(max + 1); ; {
		c := rune(r.IntN(0x110000))
		if r.IntN(2) == 0 {
			c = rune(r.IntN(0x80))
		}
		if !utf8.ValidRune(c) {
			continue
		}
		if len(b)+utf8.RuneLen(c) > n {
			return string(b)
		}
		b = utf8.AppendRune(b, c)
	}
}

// fillRandom sets every exported field of the struct v points to at random.
func fillRandom(r *rand.Rand, v any) {
	s := reflect.ValueOf(v).Elem()
	for i := range s.NumField() {
		f := s.Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(r.IntN(2) == 0)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(r.Uint64())
		case reflect.String:
			// Text, since the short strings of a method without content
			// must be UTF-8; TestShortStringsAreUTF8 sends the rest.
			f.SetString(randomText(r, 255))
		case reflect.Map:
			f.Set(reflect.ValueOf(randomTable(r, 1)))
		default:
			panic("fillRandom: unhandled kind " + f.Kind().String())
		}
	}
}

// equalValue is reflect.DeepEqual for field values, except that floats
// compare by bits, so NaN equals itself.
func equalValue(a, b any) bool {
	switch a := a.(type) {
	case float32:
		b, ok := b.(float32)
		return ok && math.Float32bits(a) == math.Float32bits(b)
	case float64:
		b, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(b)
	case []byte:
		b, ok := b.([]byte)
		return ok && bytes.Equal(a, b) && (a == nil) == (b == nil)
	case Table:
		b, ok := b.(Table)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !equalValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !equalValue(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// oneByteReader returns one byte per Read, the worst case for a parser
// that must handle frames split across reads.
type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}
