package mqtt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Encoding helpers. Each appends one data type of section 1.5 to dst.

func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }

// appendString appends a UTF-8 Encoded String: a two-byte length and the
// bytes. A string the length cannot hold is a bug in the caller, not data
// to send cut short.
func appendString(dst []byte, s string) []byte {
	if len(s) > maxFieldLen {
		panic(fmt.Sprintf("mqtt: string of %d bytes exceeds the protocol's %d", len(s), maxFieldLen))
	}
	return append(appendU16(dst, uint16(len(s))), s...)
}

// appendBinary appends Binary Data: a two-byte length and the bytes.
func appendBinary(dst []byte, b []byte) []byte {
	if len(b) > maxFieldLen {
		panic(fmt.Sprintf("mqtt: binary data of %d bytes exceeds the protocol's %d", len(b), maxFieldLen))
	}
	return append(appendU16(dst, uint16(len(b))), b...)
}

// utf8Problem says what makes b not a UTF-8 Encoded String's data, or ""
// if nothing does: it must be well-formed UTF-8, which excludes the
// surrogates U+D800 to U+DFFF ([MQTT-1.5.4-1]), and hold no U+0000
// ([MQTT-1.5.4-2]). The control characters and non-characters the
// specification says SHOULD NOT be sent are accepted.
func utf8Problem[T string | []byte](b T) string {
	ascii := true
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == 0:
			return fmt.Sprintf("U+0000 at byte %d", i)
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if ascii {
		return ""
	}
	var valid bool
	switch v := any(b).(type) {
	case string:
		valid = utf8.ValidString(v)
	case []byte:
		valid = utf8.Valid(v)
	}
	if !valid {
		return "ill-formed UTF-8"
	}
	return ""
}

// reader decodes one packet. The first error sticks: later reads return
// zero values, so a decoder reads every field and checks r.err once.
type reader struct {
	b   []byte // the packet, fixed header included, or a property block's end
	off int    // the next byte to read
	typ PacketType
	ver Version
	err error // a *DecodeError, or for CONNECT an *UnsupportedVersionError
}

func (r *reader) left() int { return len(r.b) - r.off }

// fail records an error at byte at of the packet, if none is recorded.
func (r *reader) fail(at int, reason ReasonCode, kind error, format string, args ...any) {
	if r.err == nil {
		r.err = &DecodeError{Type: r.typ, Version: r.ver, Offset: at, Reason: reason, Err: kind, Detail: fmt.Sprintf(format, args...)}
	}
}

// malformed records a Malformed Packet error at byte at.
func (r *reader) malformed(at int, kind error, format string, args ...any) {
	r.fail(at, ReasonMalformedPacket, kind, format, args...)
}

// protocolError records a Protocol Error at byte at.
func (r *reader) protocolError(at int, kind error, format string, args ...any) {
	r.fail(at, ReasonProtocolError, kind, format, args...)
}

// take returns the next n bytes, or nil and an error if there are fewer.
// The slice aliases the packet.
func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > r.left() {
		r.malformed(r.off, ErrTruncated, "%s: %d bytes needed, %d left", what, n, r.left())
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8(what string) byte {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) uint16 {
	if b := r.take(2, what); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32(what string) uint32 {
	if b := r.take(4, what); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) varInt(what string) int {
	if r.err != nil {
		return 0
	}
	v, n, err := parseVarInt(r.b[r.off:])
	if err != nil {
		r.malformed(r.off, err.Err, "%s: %s", what, err.Detail)
		return 0
	}
	r.off += n
	return int(v)
}

// field reads a two-byte length and that many bytes, aliasing the packet.
func (r *reader) field(what string) []byte {
	n := r.u16(what)
	return r.take(int(n), what)
}

// str reads a UTF-8 Encoded String, checked and copied, so it outlives
// the packet.
func (r *reader) str(what string) string {
	at := r.off
	b := r.field(what)
	if r.err != nil {
		return ""
	}
	if p := utf8Problem(b); p != "" {
		r.malformed(at, ErrUTF8, "%s: %s", what, p)
		return ""
	}
	return string(b)
}

// binary reads Binary Data, aliasing the packet; empty reads as nil.
func (r *reader) binary(what string) []byte {
	return nonEmpty(r.field(what))
}

// nonEmpty gives nil for an empty slice, so that decoded values compare
// equal however the emptiness was sent.
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// packetID reads a Packet Identifier, which must not be 0
// ([MQTT-2.2.1-3]): a Protocol Error.
func (r *reader) packetID() uint16 {
	at := r.off
	id := r.u16("packet identifier")
	if r.err == nil && id == 0 {
		r.protocolError(at, ErrBadValue, "packet identifier 0")
	}
	return id
}

// reasonCode reads a reason code and checks that the packet may carry it.
func (r *reader) reasonCode() ReasonCode {
	at := r.off
	c := ReasonCode(r.u8("reason code"))
	if r.err == nil && !c.ValidFor(r.typ) {
		r.protocolError(at, ErrBadValue, "reason code 0x%02x in %v", byte(c), r.typ)
	}
	return c
}

// end checks that the whole packet was read and returns the first error.
func (r *reader) end() error {
	if r.err == nil && r.left() > 0 {
		r.malformed(r.off, ErrTrailingBytes, "%d bytes after the last field", r.left())
	}
	if r.err != nil {
		return r.err
	}
	return nil
}

// cut returns the first n bytes of s for an error message.
func cut(s []byte, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return string(bytes.ToValidUTF8(s, []byte("?")))
}
