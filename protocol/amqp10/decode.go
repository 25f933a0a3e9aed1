package amqp10

import (
	"encoding/binary"
	"math"
)

// Format codes, AMQP 1.0 part 1 section 1.6.
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBool       = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// MaxDepth bounds how deeply lists, maps, arrays and described values may
// nest, so hostile input cannot exhaust the stack.
const MaxDepth = 64

// maxEmptyElements bounds the elements of zero-width types (null, true,
// false, uint0, ulong0, list0) that the arrays in one input may hold: they
// take no bytes, so their count cannot be checked against the bytes left.
const maxEmptyElements = 1 << 16

// Decode decodes one AMQP value from the start of b and returns it with
// the number of bytes it took. Values hold these Go types:
//
//	null nil          boolean bool      ubyte uint8      ushort uint16
//	uint uint32       ulong uint64      byte int8        short int16
//	int int32         long int64        float float32    double float64
//	decimal32 Decimal32   decimal64 Decimal64   decimal128 Decimal128
//	char Char         timestamp Timestamp   uuid UUID    binary []byte
//	string string     symbol Symbol     list []any       map Map
//	array Array       described Described
//
// Binaries, strings and symbols are copied: the value does not alias b.
// An empty list decodes as an empty, non-nil []any, an empty map as an
// empty, non-nil Map, an empty binary as an empty, non-nil []byte; an
// empty array's Values are nil.
func Decode(b []byte) (any, int, error) {
	var d decoder
	return d.value(b, 0, 0)
}

// decoder holds what one decode shares across values: the budget of
// zero-width array elements.
type decoder struct {
	empty int // zero-width array elements decoded so far
}

// value decodes a constructor and value from p, which starts at byte at of
// the input, inside containers nested depth deep.
func (d *decoder) value(p []byte, at, depth int) (any, int, error) {
	if len(p) == 0 {
		return nil, 0, errorf(at, ErrTruncated, "constructor: 1 byte needed, 0 left")
	}
	if p[0] != codeDescribed {
		v, n, err := d.body(p[0], p[1:], at+1, depth)
		return v, 1 + n, err
	}
	if depth >= MaxDepth {
		return nil, 0, errorf(at, ErrTooDeep, "described value deeper than %d levels", MaxDepth)
	}
	desc, n1, err := d.value(p[1:], at+1, depth+1)
	if err != nil {
		return nil, 0, err
	}
	if desc == nil {
		return nil, 0, errorf(at+1, ErrBadValue, "null descriptor")
	}
	v, n2, err := d.value(p[1+n1:], at+1+n1, depth+1)
	if err != nil {
		return nil, 0, err
	}
	return Described{Descriptor: desc, Value: v}, 1 + n1 + n2, nil
}

// fixedWidth returns the size of a value after a fixed-width code, and
// whether code is one.
func fixedWidth(code byte) (int, bool) {
	switch code {
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
		return 0, true
	case codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong, codeBool:
		return 1, true
	case codeUshort, codeShort:
		return 2, true
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		return 4, true
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		return 8, true
	case codeDecimal128, codeUUID:
		return 16, true
	}
	return 0, false
}

// minWidth returns the fewest bytes a value after code can take, for
// checking element counts against the bytes left; 0 for an unknown code.
func minWidth(code byte) int {
	if w, ok := fixedWidth(code); ok {
		return w
	}
	switch code {
	case codeVbin8, codeStr8, codeSym8:
		return 1
	case codeVbin32, codeStr32, codeSym32:
		return 4
	case codeList8, codeMap8:
		return 2
	case codeList32, codeMap32:
		return 8
	case codeArray8:
		return 3 // size, count, element constructor
	case codeArray32:
		return 9
	}
	return 0
}

// body decodes the value after format code code from p (starting at byte
// at of the input).
func (d *decoder) body(code byte, p []byte, at, depth int) (any, int, error) {
	if w, ok := fixedWidth(code); ok {
		if len(p) < w {
			return nil, 0, errorf(at, ErrTruncated, "format code 0x%02x: %d bytes needed, %d left", code, w, len(p))
		}
		v, err := fixedValue(code, p)
		if err != nil {
			return nil, 0, errorf(at, ErrBadValue, "%v", err)
		}
		return v, w, nil
	}
	switch code {
	case codeVbin8, codeStr8, codeSym8, codeVbin32, codeStr32, codeSym32:
		s, n, err := sized(code, p, at)
		if err != nil {
			return nil, 0, err
		}
		switch code {
		case codeStr8, codeStr32:
			return string(s), n, nil
		case codeSym8, codeSym32:
			return Symbol(s), n, nil
		}
		return append([]byte{}, s...), n, nil
	case codeList8, codeList32, codeMap8, codeMap32:
		return d.compound(code, p, at, depth)
	case codeArray8, codeArray32:
		return d.array(code, p, at, depth)
	}
	return nil, 0, errorf(at-1, ErrUnknownCode, "0x%02x", code)
}

// errString is a constant error; fixedValue's one error is a boolean
// byte other than 0 and 1, which would not encode back to the same bytes.
type errString string

func (e errString) Error() string { return string(e) }

// fixedValue decodes the value of fixed-width code code from p, which
// holds at least its width.
func fixedValue(code byte, p []byte) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeUint0:
		return uint32(0), nil
	case codeUlong0:
		return uint64(0), nil
	case codeList0:
		return []any{}, nil
	case codeBool:
		if p[0] > 1 {
			return nil, errString("boolean byte is neither 0 nor 1")
		}
		return p[0] == 1, nil
	case codeUbyte:
		return p[0], nil
	case codeByte:
		return int8(p[0]), nil
	case codeSmallUint:
		return uint32(p[0]), nil
	case codeSmallUlong:
		return uint64(p[0]), nil
	case codeSmallInt:
		return int32(int8(p[0])), nil
	case codeSmallLong:
		return int64(int8(p[0])), nil
	case codeUshort:
		return binary.BigEndian.Uint16(p), nil
	case codeShort:
		return int16(binary.BigEndian.Uint16(p)), nil
	case codeUint:
		return binary.BigEndian.Uint32(p), nil
	case codeInt:
		return int32(binary.BigEndian.Uint32(p)), nil
	case codeFloat:
		return math.Float32frombits(binary.BigEndian.Uint32(p)), nil
	case codeChar:
		return Char(binary.BigEndian.Uint32(p)), nil
	case codeDecimal32:
		return Decimal32(p[:4]), nil
	case codeUlong:
		return binary.BigEndian.Uint64(p), nil
	case codeLong:
		return int64(binary.BigEndian.Uint64(p)), nil
	case codeDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(p)), nil
	case codeTimestamp:
		return Timestamp(binary.BigEndian.Uint64(p)), nil
	case codeDecimal64:
		return Decimal64(p[:8]), nil
	case codeDecimal128:
		return Decimal128(p[:16]), nil
	case codeUUID:
		return UUID(p[:16]), nil
	}
	panic("amqp10: fixedValue called with a variable-width code")
}

// sized returns the bytes of a vbin, str or sym value (aliasing p) and
// the bytes the value took.
func sized(code byte, p []byte, at int) ([]byte, int, error) {
	hdr := 1
	if code&0xf0 == 0xb0 {
		hdr = 4
	}
	if len(p) < hdr {
		return nil, 0, errorf(at, ErrTruncated, "format code 0x%02x: %d length bytes needed, %d left", code, hdr, len(p))
	}
	var n uint64
	if hdr == 1 {
		n = uint64(p[0])
	} else {
		n = uint64(binary.BigEndian.Uint32(p))
	}
	if n > uint64(len(p)-hdr) {
		return nil, 0, errorf(at, ErrTruncated, "format code 0x%02x of %d bytes, %d left", code, n, len(p)-hdr)
	}
	return p[hdr : hdr+int(n)], hdr + int(n), nil
}

// header reads the size and count of a list, map or array: one byte each
// for the 8-bit forms, four for the 32-bit ones. It returns the count,
// the bytes after the count that the size covers, and the header's size.
func header(code byte, p []byte, at int) (count int, elems []byte, hdr int, err error) {
	w := 1
	if code == codeList32 || code == codeMap32 || code == codeArray32 {
		w = 4
	}
	if len(p) < 2*w {
		return 0, nil, 0, errorf(at, ErrTruncated, "format code 0x%02x: %d size and count bytes needed, %d left", code, 2*w, len(p))
	}
	var size, cnt uint64
	if w == 1 {
		size, cnt = uint64(p[0]), uint64(p[1])
	} else {
		size, cnt = uint64(binary.BigEndian.Uint32(p)), uint64(binary.BigEndian.Uint32(p[4:]))
	}
	if size < uint64(w) {
		return 0, nil, 0, errorf(at, ErrSizeMismatch, "format code 0x%02x: size %d cannot hold its %d-byte count", code, size, w)
	}
	if size > uint64(len(p)-w) {
		return 0, nil, 0, errorf(at, ErrTruncated, "format code 0x%02x of %d bytes, %d left", code, size, len(p)-w)
	}
	elems = p[2*w : w+int(size)]
	return int(cnt), elems, 2 * w, nil
}

// compound decodes a list or map.
func (d *decoder) compound(code byte, p []byte, at, depth int) (any, int, error) {
	if depth >= MaxDepth {
		return nil, 0, errorf(at-1, ErrTooDeep, "compound deeper than %d levels", MaxDepth)
	}
	count, elems, hdr, err := header(code, p, at)
	if err != nil {
		return nil, 0, err
	}
	isMap := code == codeMap8 || code == codeMap32
	if count > len(elems) { // every element takes at least its constructor byte
		return nil, 0, errorf(at, ErrCountTooLarge, "%d elements in %d bytes", count, len(elems))
	}
	if isMap && count%2 != 0 {
		return nil, 0, errorf(at, ErrBadValue, "map with an odd number (%d) of keys and values", count)
	}
	vals := make([]any, count)
	off := 0
	for i := range vals {
		v, n, err := d.value(elems[off:], at+hdr+off, depth+1)
		if err != nil {
			return nil, 0, err
		}
		vals[i] = v
		off += n
	}
	if off != len(elems) {
		return nil, 0, errorf(at, ErrSizeMismatch, "format code 0x%02x: %d elements take %d of its %d bytes", code, count, off, len(elems))
	}
	n := hdr + len(elems)
	if !isMap {
		return vals, n, nil
	}
	m := make(Map, count/2)
	for i := range m {
		m[i] = MapEntry{Key: vals[2*i], Value: vals[2*i+1]}
	}
	return m, n, nil
}

// array decodes an array: its size and count, one element constructor
// (maybe described), then count values without constructors.
func (d *decoder) array(code byte, p []byte, at, depth int) (any, int, error) {
	if depth >= MaxDepth {
		return nil, 0, errorf(at-1, ErrTooDeep, "array deeper than %d levels", MaxDepth)
	}
	count, elems, hdr, err := header(code, p, at)
	if err != nil {
		return nil, 0, err
	}
	var a Array
	off := 0
	if len(elems) < 1 {
		return nil, 0, errorf(at+hdr, ErrTruncated, "array element constructor: 1 byte needed, 0 left")
	}
	if elems[0] == codeDescribed {
		desc, n, err := d.value(elems[1:], at+hdr+1, depth+1)
		if err != nil {
			return nil, 0, err
		}
		if desc == nil {
			return nil, 0, errorf(at+hdr+1, ErrBadValue, "null descriptor")
		}
		a.Descriptor = desc
		off = 1 + n
		if off >= len(elems) {
			return nil, 0, errorf(at+hdr+off, ErrTruncated, "array element constructor: 1 byte needed, 0 left")
		}
	}
	a.Code = elems[off]
	if a.Code == codeDescribed {
		return nil, 0, errorf(at+hdr+off, ErrBadValue, "array element descriptor is itself described")
	}
	off++
	w := minWidth(a.Code)
	if w == 0 {
		if _, fixed := fixedWidth(a.Code); !fixed {
			return nil, 0, errorf(at+hdr+off-1, ErrUnknownCode, "array element code 0x%02x", a.Code)
		}
		if d.empty += count; d.empty > maxEmptyElements {
			return nil, 0, errorf(at, ErrCountTooLarge, "more than %d zero-width array elements", maxEmptyElements)
		}
	} else if uint64(count)*uint64(w) > uint64(len(elems)-off) {
		return nil, 0, errorf(at, ErrCountTooLarge, "%d elements of at least %d bytes in %d bytes", count, w, len(elems)-off)
	}
	if count > 0 {
		a.Values = make([]any, count)
	}
	for i := range a.Values {
		v, n, err := d.body(a.Code, elems[off:], at+hdr+off, depth+1)
		if err != nil {
			return nil, 0, err
		}
		a.Values[i] = v
		off += n
	}
	if off != len(elems) {
		return nil, 0, errorf(at, ErrSizeMismatch, "format code 0x%02x: %d elements take %d of its %d bytes", code, count, off, len(elems))
	}
	return a, hdr + len(elems), nil
}
