package names

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error  // nil: taken
		text string // part of the refusal
	}{
		{"orders", nil, ""},
		{"/", nil, ""},
		{"répertoire/日本語", nil, ""},
		{"emoji 🐇", nil, ""},
		{"tab-free with spaces", nil, ""},
		{"\uFFFD written out", nil, ""},
		{"zero\u200bwidth", nil, ""}, // U+200B: a format character, not a control or bidi one
		{"mark\u200fhere", nil, ""},  // U+200F RLM: a mark, not an embedding
		{strings.Repeat("a", 255), nil, ""},
		{strings.Repeat("é", 127), nil, ""}, // 254 bytes
		{strings.Repeat("a", 256), ErrTooLong, "(256 bytes)"},
		{strings.Repeat("a", 70000), ErrTooLong, `"` + strings.Repeat("a", 64) + `"...`},
		{strings.Repeat("é", 128), ErrTooLong, "(256 bytes)"},
		{"a\x00b", ErrControl, `"a\x00b" holds a control character (U+0000 at byte 1)`},
		{"tab\there", ErrControl, "(U+0009 at byte 3)"},
		{"line\nbreak", ErrControl, "(U+000A at byte 4)"},
		{"cr\r", ErrControl, "(U+000D at byte 2)"},
		{"del\x7f", ErrControl, "(U+007F at byte 3)"},
		{"c1\u0085", ErrControl, "(U+0085 at byte 2)"},
		{"c1\u009f", ErrControl, "(U+009F at byte 2)"},
		{"admin\u202egnp.exe", ErrBidi, `"admin\u202egnp.exe" holds a bidirectional formatting character (U+202E at byte 5)`},
		{"\u202a", ErrBidi, "U+202A"},
		{"\u202d", ErrBidi, "U+202D"},
		{"x\u2066", ErrBidi, "U+2066"},
		{"x\u2069", ErrBidi, "U+2069"},
		{"bad\xff", ErrNotUTF8, `"bad\xff" is not valid UTF-8 (byte 3)`},
		{"cut\xe2\x80", ErrNotUTF8, "(byte 3)"},
		{"overlong\xc0\xaf", ErrNotUTF8, "(byte 8)"},
		{"surrogate\xed\xa0\x80", ErrNotUTF8, "(byte 9)"},
		{"\xef\x41\x41", ErrNotUTF8, "(byte 0)"},
	} {
		err := Check("vhost", tc.name)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%q: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || !strings.HasPrefix(err.Error(), "vhost name ") {
			t.Errorf("%q: %v, want %v saying %q", tc.name, err, tc.want, tc.text)
		}
	}
}
