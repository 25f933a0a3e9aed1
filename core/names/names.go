// Package names says which strings may name a vhost, a user, a queue or
// an exchange: at most MaxLen (255) bytes of valid UTF-8 with no control
// character (Unicode's category Cc: U+0000–U+001F, U+007F and
// U+0080–U+009F) and none of the bidirectional formatting characters
// that make a name display as something it is not (the embeddings and
// overrides U+202A–U+202E, the isolates U+2066–U+2069): a user shown as
// "admin" may be "nimda" written backwards behind U+202E, and a NUL or a
// line break cuts or splits a name in logs, tables and shells.
//
// Check is asked when an entity is made, by every way in (AMQP, the
// management API and warrenctl, a definitions import, broker.toml's
// defaults), never when one is read back from the store or applied from
// the metadata log: an entity an older Warren let in keeps working, and
// can be used, listed and deleted.
//
// Warren refuses more than RabbitMQ 3.10.8, deliberately. Over HTTP,
// RabbitMQ stores a vhost or user whose name holds a NUL, invalid UTF-8,
// a line break or U+202E, and one longer than 255 bytes (which no AMQP
// client can then open: connection.open carries the vhost in a short
// string); it refuses only a request line longer than its HTTP server
// takes (414). Over AMQP it checks that a queue's or exchange's name is
// UTF-8 (501 "Malformed UTF-8 in shortstr", as Warren's protocol
// package does for every short string of a method without content),
// removes CR and LF from it, and takes every other character. Warren
// refuses each of these with 406 PRECONDITION_FAILED over AMQP and 400
// over HTTP, naming the character and where it is.
package names

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest name in bytes: an AMQP short string's.
const MaxLen = 255

// The reasons a name is refused; Check's errors wrap one of them.
var (
	ErrTooLong = errors.New("is longer than 255 bytes")
	ErrNotUTF8 = errors.New("is not valid UTF-8")
	ErrControl = errors.New("holds a control character")
	ErrBidi    = errors.New("holds a bidirectional formatting character")
)

// Check returns nil when s may name an entity of kind ("vhost", "user",
// "queue", "exchange"), else an error that names the kind, shows the name
// (escaped, and cut short when long) and says what is wrong and where:
//
//	vhost name "a\x00b" holds a control character (U+0000 at byte 1)
func Check(kind, s string) error {
	if len(s) > MaxLen {
		return fmt.Errorf("%s name %s %w (%d bytes)", kind, show(s), ErrTooLong, len(s))
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var why error
		switch {
		case r == utf8.RuneError && size == 1:
			// A byte that starts no character, or a sequence cut short,
			// overlong or encoding a surrogate (U+FFFD itself is 3 bytes).
			return fmt.Errorf("%s name %s %w (byte %d)", kind, show(s), ErrNotUTF8, i)
		case unicode.IsControl(r):
			why = ErrControl
		case bidi(r):
			why = ErrBidi
		default:
			i += size
			continue
		}
		return fmt.Errorf("%s name %s %w (U+%04X at byte %d)", kind, show(s), why, r, i)
	}
	return nil
}

// bidi says whether r is an explicit bidirectional embedding, override or
// isolate (Unicode's UAX #9, section 2).
func bidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// show quotes a name with every control, format and invalid byte escaped,
// at most 64 bytes of it.
func show(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.QuoteToASCII(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(s[:cut]) + "..."
}
