package protocol

import (
	"encoding/binary"
	"unicode/utf8"
)

// argReader decodes method arguments in wire order. The first failure is
// kept and later reads return zero values, so generated Decode methods read
// straight through and check once at the end, in done.
type argReader struct {
	b      []byte
	off    int
	method string // for error texts, e.g. "basic.publish"
	err    error
}

// need reports whether n more bytes are available, recording an error
// naming the field if not.
func (d *argReader) need(n int, field string) bool {
	if d.err == nil && n <= len(d.b)-d.off {
		return true
	}
	return d.fail(n, field)
}

// fail is need's slow path, kept apart so need stays small enough to inline.
func (d *argReader) fail(n int, field string) bool {
	if d.err == nil {
		d.err = syntaxErrorf("%s %s: %d bytes needed, %d left", d.method, field, n, len(d.b)-d.off)
	}
	return false
}

func (d *argReader) octet(field string) uint8 {
	if !d.need(1, field) {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *argReader) short(field string) uint16 {
	if !d.need(2, field) {
		return 0
	}
	v := binary.BigEndian.Uint16(d.b[d.off:])
	d.off += 2
	return v
}

func (d *argReader) long(field string) uint32 {
	if !d.need(4, field) {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *argReader) longLong(field string) uint64 {
	if !d.need(8, field) {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// shortStr decodes a short string. old is the field's previous value: a
// publisher usually sends the same exchange and routing key again and
// again, and returning the old string then costs no allocation.
func (d *argReader) shortStr(field, old string) string {
	if !d.need(1, field) {
		return ""
	}
	n := int(d.b[d.off])
	if !d.need(1+n, field) {
		return ""
	}
	b := d.b[d.off+1 : d.off+1+n]
	d.off += 1 + n
	return reuseString(old, b)
}

// textShortStr is shortStr for a short string that must be UTF-8; one
// that is not is RabbitMQ's 501 "Malformed UTF-8 in shortstr", which
// closes the connection.
func (d *argReader) textShortStr(field, old string) string {
	s := d.shortStr(field, old)
	if d.err == nil && !utf8.ValidString(s) {
		d.err = malformedUTF8
	}
	return s
}

// malformedUTF8 is RabbitMQ's words for a short string that is not UTF-8.
var malformedUTF8 = &BadFrameError{Text: "FRAME_ERROR - Malformed UTF-8 in shortstr"}

// longStr decodes a long string, reusing old like shortStr.
func (d *argReader) longStr(field, old string) string {
	if !d.need(4, field) {
		return ""
	}
	n := binary.BigEndian.Uint32(d.b[d.off:])
	if left := len(d.b) - d.off - 4; uint64(n) > uint64(left) {
		d.err = syntaxErrorf("%s %s: long string of %d bytes, %d left", d.method, field, n, left)
		return ""
	}
	b := d.b[d.off+4 : d.off+4+int(n)]
	d.off += 4 + int(n)
	return reuseString(old, b)
}

func (d *argReader) table(field string) Table {
	if d.err != nil {
		return nil
	}
	t, n, err := DecodeTable(d.b[d.off:])
	if err != nil {
		d.err = inContext(d.method+" "+field, err)
		return nil
	}
	d.off += n
	return t
}

// done returns the first error, or an error if bytes are left over:
// RabbitMQ rejects a method whose arguments do not fill the payload
// exactly, and so does Warren.
func (d *argReader) done() error {
	if d.err != nil {
		return d.err
	}
	if left := len(d.b) - d.off; left != 0 {
		return syntaxErrorf("%s: %d bytes left after the last argument", d.method, left)
	}
	return nil
}

// reuseString returns old if it holds the bytes b, else a new string. The
// comparison does not allocate.
func reuseString(old string, b []byte) string {
	if string(b) == old {
		return old
	}
	return string(b)
}
