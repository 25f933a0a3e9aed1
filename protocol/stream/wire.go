package stream

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Encoding helpers. Each appends one protocol type to dst, big-endian.

func appendU8(dst []byte, v uint8) []byte   { return append(dst, v) }
func appendU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// appendHeader starts a frame body: key and version, and for a request or
// response with one, its correlation id.
func appendHeader(dst []byte, k Key, version uint16) []byte {
	return appendU16(appendU16(dst, uint16(k)), version)
}

func appendCorrelated(dst []byte, k Key, corr uint32) []byte {
	return appendU32(appendHeader(dst, k, 1), corr)
}

// appendString appends an int16 length and s. A string the length cannot
// hold is a bug in the caller, not data to send cut short.
func appendString(dst []byte, s string) []byte {
	if len(s) > math.MaxInt16 {
		panic(fmt.Sprintf("stream: string of %d bytes exceeds the protocol's %d", len(s), math.MaxInt16))
	}
	return append(appendU16(dst, uint16(len(s))), s...)
}

// appendNullString appends s, or the null string (-1) if s is empty.
func appendNullString(dst []byte, s string) []byte {
	if s == "" {
		return appendU16(dst, 0xffff)
	}
	return appendString(dst, s)
}

// appendBytes appends an int32 length and b; empty b goes as null (-1),
// as RabbitMQ sends it.
func appendBytes(dst []byte, b []byte) []byte {
	if len(b) == 0 {
		return appendU32(dst, 0xffffffff)
	}
	return append(appendU32(dst, uint32(len(b))), b...)
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = appendU32(dst, uint32(len(ss)))
	for _, s := range ss {
		dst = appendString(dst, s)
	}
	return dst
}

// appendMap appends a [Key Value] array of strings, keys sorted so that
// the same map always encodes to the same bytes.
func appendMap(dst []byte, m map[string]string) []byte {
	dst = appendU32(dst, uint32(len(m)))
	for _, k := range sortedKeys(m) {
		dst = appendString(appendString(dst, k), m[k])
	}
	return dst
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendOffsetSpec(dst []byte, o OffsetSpec) []byte {
	dst = appendU16(dst, uint16(o.Type))
	switch o.Type {
	case OffsetOffset:
		dst = appendU64(dst, o.Offset)
	case OffsetTimestamp:
		dst = appendU64(dst, uint64(o.Timestamp))
	}
	return dst
}

// reader decodes one frame. The first error sticks: later reads return
// zero values, so a decoder reads every field and checks r.err once.
type reader struct {
	b   []byte // the frame, from the key on
	off int    // the next byte to read
	key Key
	err error
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) fail(err error, format string, args ...any) {
	if r.err == nil {
		r.err = &DecodeError{Key: r.key, Offset: r.off, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
}

// take returns the next n bytes, or nil and an error if there are fewer.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail(ErrTruncated, "%d bytes needed, %d left", n, r.left())
		return nil
	}
	b := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// boolean reads a uint8 that must be 0 or 1.
func (r *reader) boolean() bool {
	switch v := r.u8(); v {
	case 0, 1:
		return v == 1
	default:
		r.off--
		r.fail(ErrBadValue, "boolean %d", v)
		return false
	}
}

// str reads a string; null (-1) reads as "". Strings are copied, so they
// outlive the frame.
func (r *reader) str() string {
	n := int16(r.u16())
	if n == -1 {
		return ""
	}
	if n < 0 {
		r.off -= 2
		r.fail(ErrNegativeLength, "string length %d", n)
		return ""
	}
	return string(r.take(int(n)))
}

// bytes reads bytes; null (-1) and empty read as nil. The slice aliases
// the frame.
func (r *reader) bytes() []byte {
	n := int32(r.u32())
	if n == -1 {
		return nil
	}
	if n < 0 {
		r.off -= 4
		r.fail(ErrNegativeLength, "bytes length %d", n)
		return nil
	}
	return nonEmpty(r.take(int(n)))
}

// nonEmpty gives nil for an empty slice, so that decoded values compare
// equal however the emptiness was sent.
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// count reads an array's int32 count and checks that the bytes left can
// hold that many elements of at least minSize bytes each, so that no
// count makes a decoder allocate more than the frame holds.
func (r *reader) count(minSize int) int {
	n := int32(r.u32())
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.off -= 4
		r.fail(ErrNegativeLength, "array count %d", n)
		return 0
	}
	if left := r.left(); int64(n)*int64(minSize) > int64(left) {
		r.off -= 4
		r.fail(ErrCountTooLarge, "%d elements of at least %d bytes, %d bytes left", n, minSize, left)
		return 0
	}
	return int(n)
}

func (r *reader) strings() []string {
	n := r.count(2)
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, r.str())
	}
	return ss
}

// stringMap reads a [Key Value] array of strings. An empty map reads as
// nil; a later duplicate key wins.
func (r *reader) stringMap() map[string]string {
	n := r.count(4)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

// optionalMap reads a map that a sender may leave out when it is empty, as
// RabbitMQ does in Subscribe, ResolveOffsetSpec and the Open response.
func (r *reader) optionalMap() map[string]string {
	if r.left() == 0 {
		return nil
	}
	return r.stringMap()
}

// offsetSpec reads an offset specification; allowNone admits OffsetNone,
// which only a ConsumerUpdate response may carry.
func (r *reader) offsetSpec(allowNone bool) OffsetSpec {
	o := OffsetSpec{Type: OffsetType(r.u16())}
	switch o.Type {
	case OffsetFirst, OffsetLast, OffsetNext:
	case OffsetOffset:
		o.Offset = r.u64()
	case OffsetTimestamp:
		o.Timestamp = int64(r.u64())
	case OffsetNone:
		if !allowNone {
			r.off -= 2
			r.fail(ErrBadValue, "offset type 0 (none) in a request")
		}
	default:
		r.off -= 2
		r.fail(ErrBadValue, "offset type %d", o.Type)
	}
	return o
}

// end checks that the whole frame was read and returns the first error.
func (r *reader) end() error {
	if r.err == nil && r.left() > 0 {
		r.fail(ErrTrailingBytes, "%d bytes after the last field", r.left())
	}
	return r.err
}
