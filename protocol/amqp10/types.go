package amqp10

import (
	"encoding/hex"
	"time"
)

// Go types for the AMQP 1.0 types that have no Go type of their own, or
// whose obvious Go type another AMQP type already uses. Decoded values hold
// exactly these types (see Decode), so a value decoded and encoded again
// keeps its AMQP type.

// Symbol is an AMQP symbol (sym8, sym32): ASCII text from a constrained
// domain, distinct from string.
type Symbol string

// Timestamp is an AMQP timestamp: milliseconds since the Unix epoch.
type Timestamp int64

// Time returns t as a time.Time in UTC.
func (t Timestamp) Time() time.Time { return time.UnixMilli(int64(t)).UTC() }

// TimestampOf returns t truncated to milliseconds.
func TimestampOf(t time.Time) Timestamp { return Timestamp(t.UnixMilli()) }

// UUID is an AMQP uuid, RFC 4122 section 4.1.2 byte order.
type UUID [16]byte

// String returns u in the 8-4-4-4-12 lower-case hex form.
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// Char is an AMQP char: one UTF-32BE code unit, kept as sent.
type Char rune

// Decimal32, Decimal64 and Decimal128 are the IEEE 754 decimal types,
// kept as their raw big-endian bytes: Warren never computes with them.
type (
	Decimal32  [4]byte
	Decimal64  [8]byte
	Decimal128 [16]byte
)

// Described is a described value: a descriptor (in practice a uint64 code
// or a Symbol name) and the value it describes.
type Described struct {
	Descriptor any
	Value      any
}

// Map is an AMQP map, kept as its entries in wire order: AMQP maps may
// have keys Go cannot compare (lists, binaries), and keeping the order
// keeps the encoding.
type Map []MapEntry

// MapEntry is one key and value of a Map.
type MapEntry struct {
	Key, Value any
}

// Get returns the value of the first entry whose key equals key (compared
// with ==, so only for comparable keys such as Symbol, string, uint64).
func (m Map) Get(key any) (any, bool) {
	for _, e := range m {
		if keyEqual(e.Key, key) {
			return e.Value, true
		}
	}
	return nil, false
}

// keyEqual compares a and b with ==, treating values of incomparable
// types as unequal rather than panicking.
func keyEqual(a, b any) bool {
	switch a.(type) {
	case []byte, []any, Map, Array, Described:
		return false
	}
	switch b.(type) {
	case []byte, []any, Map, Array, Described:
		return false
	}
	return a == b
}

// Array is an AMQP array: values of one type sharing one constructor.
//
// Code is the elements' format code as decoded (0x52 smalluint, 0x70 uint,
// 0xa1 str8, ...). Append uses it when every value fits, so a decoded
// array encodes to the same bytes; otherwise, or when Code is 0, it picks
// the narrowest code that holds them all. If Descriptor is not nil each
// element is described by it and Values hold the undescribed values.
type Array struct {
	Descriptor any
	Code       byte
	Values     []any
}
