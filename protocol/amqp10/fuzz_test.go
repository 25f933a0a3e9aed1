package amqp10

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that any input parses or fails with a *DecodeError,
// and that whatever parses encodes to bytes that parse to the same value
// and encode to the same bytes again. Values are compared through their
// encodings as well as with DeepEqual, which NaN floats defeat.
func FuzzParse(f *testing.F) {
	for _, g := range goldenMessages {
		f.Add(mustHex(strings.Join(g.sections, " ")))
	}
	for _, c := range canonical {
		f.Add(append([]byte{0x00, 0x53, 0x77}, mustHex(c.hex)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			checkDecodeError(t, err, len(data))
			return
		}
		enc := m.Append(nil)
		m2, err := Parse(enc)
		if err != nil {
			t.Fatalf("re-encoded as % x, which does not parse: %v", enc, err)
		}
		if enc2 := m2.Append(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ\n% x\n% x", enc, enc2)
		}
		if !hasNaN(enc) && !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip\n got %#v\nwant %#v", m2, m)
		}
		m.ToAMQP091() // must not panic
	})
}

// hasNaN reports whether a float or double code is in b: a crude test
// that may say yes for other bytes, which only skips a DeepEqual.
func hasNaN(b []byte) bool {
	return bytes.IndexByte(b, codeFloat) >= 0 || bytes.IndexByte(b, codeDouble) >= 0
}
