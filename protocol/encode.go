package protocol

import "encoding/binary"

// Append-style encoders for the AMQP primitive types. All integers are
// big-endian (network order), as the spec requires.

// AppendOctet appends one octet.
func AppendOctet(b []byte, v uint8) []byte { return append(b, v) }

// AppendShort appends a 16-bit unsigned integer.
func AppendShort(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// AppendLong appends a 32-bit unsigned integer.
func AppendLong(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

// AppendLongLong appends a 64-bit unsigned integer.
func AppendLongLong(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// AppendShortStr appends a short string: a length octet and the bytes.
// A string over 255 bytes is truncated to 255: a shortstr cannot say more,
// and method arguments the broker sends (names, tags, reply texts) are
// limited by what it accepted from clients. Properties.Append reports long
// strings as errors instead, since property values come from users.
func AppendShortStr(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	b = append(b, byte(len(s)))
	return append(b, s...)
}

// AppendLongStr appends a long string: a 32-bit length and the bytes.
func AppendLongStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// appendMethodTable encodes a table argument of a method. Method.Append has
// no error result, so a table holding a Go type with no wire form panics:
// that is a bug in the code that built the table, never bad input, because
// every table decoded from the wire encodes again.
func appendMethodTable(b []byte, t Table, where string) []byte {
	b, err := AppendTable(b, t)
	if err != nil {
		panic("protocol: " + where + ": " + err.Error())
	}
	return b
}
