package amqp10

import (
	"encoding/binary"
	"fmt"
	"math"
)

// AppendValue appends v, one of the Go types Decode returns, with the
// narrowest encoding AMQP 1.0 has for it: uint 0 as uint0, small integers
// in one byte, strings, binaries and symbols under 256 bytes in the 8-bit
// forms, lists and maps under 256 bytes and elements in the 8-bit forms,
// an empty list as list0, booleans as true and false. Decoding what it
// appends gives a value equal to v. A value of another Go type, an array
// whose values do not share one AMQP type, or values nested deeper than
// MaxDepth is an error.
func AppendValue(buf []byte, v any) ([]byte, error) {
	return appendValue(buf, v, 0)
}

func appendValue(buf []byte, v any, depth int) ([]byte, error) {
	if d, ok := v.(Described); ok {
		if depth >= MaxDepth {
			return buf, fmt.Errorf("amqp10: values nested deeper than %d levels", MaxDepth)
		}
		if d.Descriptor == nil {
			return buf, fmt.Errorf("amqp10: described value with a nil descriptor")
		}
		buf = append(buf, codeDescribed)
		var err error
		if buf, err = appendValue(buf, d.Descriptor, depth+1); err != nil {
			return buf, err
		}
		return appendValue(buf, d.Value, depth+1)
	}
	code, err := codeOf(v)
	if err != nil {
		return buf, err
	}
	return appendBody(append(buf, code), code, v, depth, true)
}

// codeOf returns the narrowest format code for v.
func codeOf(v any) (byte, error) {
	switch v := v.(type) {
	case nil:
		return codeNull, nil
	case bool:
		if v {
			return codeTrue, nil
		}
		return codeFalse, nil
	case uint8:
		return codeUbyte, nil
	case uint16:
		return codeUshort, nil
	case uint32:
		switch {
		case v == 0:
			return codeUint0, nil
		case v < 256:
			return codeSmallUint, nil
		}
		return codeUint, nil
	case uint64:
		switch {
		case v == 0:
			return codeUlong0, nil
		case v < 256:
			return codeSmallUlong, nil
		}
		return codeUlong, nil
	case int8:
		return codeByte, nil
	case int16:
		return codeShort, nil
	case int32:
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			return codeSmallInt, nil
		}
		return codeInt, nil
	case int64:
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			return codeSmallLong, nil
		}
		return codeLong, nil
	case float32:
		return codeFloat, nil
	case float64:
		return codeDouble, nil
	case Decimal32:
		return codeDecimal32, nil
	case Decimal64:
		return codeDecimal64, nil
	case Decimal128:
		return codeDecimal128, nil
	case Char:
		return codeChar, nil
	case Timestamp:
		return codeTimestamp, nil
	case UUID:
		return codeUUID, nil
	case []byte:
		return short(len(v), codeVbin8, codeVbin32), nil
	case string:
		return short(len(v), codeStr8, codeStr32), nil
	case Symbol:
		return short(len(v), codeSym8, codeSym32), nil
	case []any:
		if len(v) == 0 {
			return codeList0, nil
		}
		return codeList32, nil // appendBody narrows it once the size is known
	case Map:
		return codeMap32, nil
	case Array:
		return codeArray32, nil
	}
	return 0, fmt.Errorf("amqp10: cannot encode a value of Go type %T", v)
}

func short(n int, code8, code32 byte) byte {
	if n < 256 {
		return code8
	}
	return code32
}

// wide returns the widest format code of code's type: the code an array
// falls back to when its values do not fit its own.
func wide(code byte) byte {
	switch code {
	case codeTrue, codeFalse:
		return codeBool
	case codeUint0, codeSmallUint:
		return codeUint
	case codeUlong0, codeSmallUlong:
		return codeUlong
	case codeSmallInt:
		return codeInt
	case codeSmallLong:
		return codeLong
	case codeVbin8:
		return codeVbin32
	case codeStr8:
		return codeStr32
	case codeSym8:
		return codeSym32
	case codeList0, codeList8:
		return codeList32
	case codeMap8:
		return codeMap32
	case codeArray8:
		return codeArray32
	}
	return code
}

// appendBody appends v's encoding after the format code code. v must be of
// code's type and fit it. With own set the code is v's own, just appended
// at buf[len(buf)-1], and the 32-bit list, map and array codes narrow
// there to their 8-bit forms when the value fits; an array element's code
// is shared and stays as it is.
func appendBody(buf []byte, code byte, v any, depth int, own bool) ([]byte, error) {
	bad := func() ([]byte, error) {
		return buf, fmt.Errorf("amqp10: a %T value does not fit format code 0x%02x", v, code)
	}
	switch code {
	case codeNull:
		if v != nil {
			return bad()
		}
		return buf, nil
	case codeTrue, codeFalse, codeBool:
		b, ok := v.(bool)
		switch {
		case !ok || code == codeTrue && !b || code == codeFalse && b:
			return bad()
		case code != codeBool:
			return buf, nil
		case b:
			return append(buf, 1), nil
		}
		return append(buf, 0), nil
	case codeUbyte:
		x, ok := v.(uint8)
		if !ok {
			return bad()
		}
		return append(buf, x), nil
	case codeByte:
		x, ok := v.(int8)
		if !ok {
			return bad()
		}
		return append(buf, byte(x)), nil
	case codeUshort:
		x, ok := v.(uint16)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint16(buf, x), nil
	case codeShort:
		x, ok := v.(int16)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint16(buf, uint16(x)), nil
	case codeUint0, codeSmallUint, codeUint:
		x, ok := v.(uint32)
		switch {
		case !ok || code == codeUint0 && x != 0 || code == codeSmallUint && x > 255:
			return bad()
		case code == codeUint0:
			return buf, nil
		case code == codeSmallUint:
			return append(buf, byte(x)), nil
		}
		return binary.BigEndian.AppendUint32(buf, x), nil
	case codeUlong0, codeSmallUlong, codeUlong:
		x, ok := v.(uint64)
		switch {
		case !ok || code == codeUlong0 && x != 0 || code == codeSmallUlong && x > 255:
			return bad()
		case code == codeUlong0:
			return buf, nil
		case code == codeSmallUlong:
			return append(buf, byte(x)), nil
		}
		return binary.BigEndian.AppendUint64(buf, x), nil
	case codeSmallInt, codeInt:
		x, ok := v.(int32)
		switch {
		case !ok || code == codeSmallInt && (x < math.MinInt8 || x > math.MaxInt8):
			return bad()
		case code == codeSmallInt:
			return append(buf, byte(int8(x))), nil
		}
		return binary.BigEndian.AppendUint32(buf, uint32(x)), nil
	case codeSmallLong, codeLong:
		x, ok := v.(int64)
		switch {
		case !ok || code == codeSmallLong && (x < math.MinInt8 || x > math.MaxInt8):
			return bad()
		case code == codeSmallLong:
			return append(buf, byte(int8(x))), nil
		}
		return binary.BigEndian.AppendUint64(buf, uint64(x)), nil
	case codeFloat:
		x, ok := v.(float32)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint32(buf, math.Float32bits(x)), nil
	case codeDouble:
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint64(buf, math.Float64bits(x)), nil
	case codeChar:
		x, ok := v.(Char)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint32(buf, uint32(x)), nil
	case codeTimestamp:
		x, ok := v.(Timestamp)
		if !ok {
			return bad()
		}
		return binary.BigEndian.AppendUint64(buf, uint64(x)), nil
	case codeDecimal32:
		x, ok := v.(Decimal32)
		if !ok {
			return bad()
		}
		return append(buf, x[:]...), nil
	case codeDecimal64:
		x, ok := v.(Decimal64)
		if !ok {
			return bad()
		}
		return append(buf, x[:]...), nil
	case codeDecimal128:
		x, ok := v.(Decimal128)
		if !ok {
			return bad()
		}
		return append(buf, x[:]...), nil
	case codeUUID:
		x, ok := v.(UUID)
		if !ok {
			return bad()
		}
		return append(buf, x[:]...), nil
	case codeVbin8, codeVbin32, codeStr8, codeStr32, codeSym8, codeSym32:
		var s string
		var ok bool
		switch code {
		case codeVbin8, codeVbin32:
			var b []byte
			b, ok = v.([]byte)
			s = string(b)
		case codeStr8, codeStr32:
			s, ok = v.(string)
		default:
			var y Symbol
			y, ok = v.(Symbol)
			s = string(y)
		}
		switch {
		case !ok || code&0xf0 == 0xa0 && len(s) > 255 || uint64(len(s)) > math.MaxUint32:
			return bad()
		case code&0xf0 == 0xa0:
			buf = append(buf, byte(len(s)))
		default:
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		}
		return append(buf, s...), nil
	case codeList0:
		if l, ok := v.([]any); !ok || len(l) != 0 {
			return bad()
		}
		return buf, nil
	case codeList8, codeList32, codeMap8, codeMap32, codeArray8, codeArray32:
		return appendCompound(buf, code, v, depth, own)
	}
	return bad()
}

// appendCompound appends a list, map or array after its format code. With
// own (see appendBody) a 32-bit code narrows to the 8-bit form when size
// and count fit a byte; an 8-bit code fails when they do not.
func appendCompound(buf []byte, code byte, v any, depth int, own bool) ([]byte, error) {
	if depth >= MaxDepth {
		return buf, fmt.Errorf("amqp10: values nested deeper than %d levels", MaxDepth)
	}
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0) // size and count, 32-bit
	var count int
	var err error
	switch code {
	case codeList8, codeList32:
		l, ok := v.([]any)
		if !ok {
			return buf[:start], fmt.Errorf("amqp10: a %T value does not fit format code 0x%02x", v, code)
		}
		count = len(l)
		for _, e := range l {
			if buf, err = appendValue(buf, e, depth+1); err != nil {
				return buf, err
			}
		}
	case codeMap8, codeMap32:
		m, ok := v.(Map)
		if !ok {
			return buf[:start], fmt.Errorf("amqp10: a %T value does not fit format code 0x%02x", v, code)
		}
		count = 2 * len(m)
		for _, e := range m {
			if buf, err = appendValue(buf, e.Key, depth+1); err != nil {
				return buf, err
			}
			if buf, err = appendValue(buf, e.Value, depth+1); err != nil {
				return buf, err
			}
		}
	default:
		a, ok := v.(Array)
		if !ok {
			return buf[:start], fmt.Errorf("amqp10: a %T value does not fit format code 0x%02x", v, code)
		}
		count = len(a.Values)
		if buf, err = appendArrayElements(buf, a, depth); err != nil {
			return buf, err
		}
	}
	n := len(buf) - start - 8 // element bytes
	narrow := code == codeList8 || code == codeMap8 || code == codeArray8
	fits8 := n+1 <= 255 && count <= 255
	if narrow && !fits8 {
		return buf[:start], fmt.Errorf("amqp10: %d elements in %d bytes do not fit format code 0x%02x", count, n, code)
	}
	if !narrow && fits8 && own {
		narrow = true
		buf[start-1] = code - 0x10 // 0xd0->0xc0, 0xd1->0xc1, 0xf0->0xe0
	}
	if narrow {
		buf[start], buf[start+1] = byte(n+1), byte(count)
		copy(buf[start+2:], buf[start+8:])
		return buf[:len(buf)-6], nil
	}
	if uint64(n)+4 > math.MaxUint32 {
		return buf, fmt.Errorf("amqp10: compound of %d bytes is too long", n)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n+4))
	binary.BigEndian.PutUint32(buf[start+4:], uint32(count))
	return buf, nil
}

// appendArrayElements appends an array's element constructor and values:
// with a.Code when every value fits it, else with the narrowest code that
// fits them all.
func appendArrayElements(buf []byte, a Array, depth int) ([]byte, error) {
	start := len(buf)
	if a.Descriptor != nil {
		buf = append(buf, codeDescribed)
		var err error
		if buf, err = appendValue(buf, a.Descriptor, depth+1); err != nil {
			return buf, err
		}
	}
	ctor := len(buf)
	var tried [3]byte
	cands := tried[:0]
	if a.Code != 0 {
		cands = append(cands, a.Code)
	}
	if c, err := commonCode(a.Values); err == nil {
		cands = append(cands, c, wide(c))
	} else if a.Code == 0 {
		return buf[:start], err
	}
	var err error
	for _, c := range cands {
		buf = append(buf[:ctor], c)
		err = nil
		for _, v := range a.Values {
			if buf, err = appendBody(buf, c, v, depth+1, false); err != nil {
				break
			}
		}
		if err == nil {
			return buf, nil
		}
	}
	return buf[:start], fmt.Errorf("amqp10: array values do not share a format code: %w", err)
}

// commonCode returns the narrowest code that holds every value: the
// values' own codes when they agree, else their wide form when that
// agrees. An empty array of no stated type is an array of nulls.
func commonCode(vals []any) (byte, error) {
	if len(vals) == 0 {
		return codeNull, nil
	}
	codes := make([]byte, len(vals))
	same := true
	for i, v := range vals {
		c, err := elementCode(v)
		if err != nil {
			return 0, err
		}
		codes[i] = c
		same = same && c == codes[0]
	}
	if same {
		return codes[0], nil
	}
	w := wide(codes[0])
	for _, c := range codes[1:] {
		if wide(c) != w {
			return 0, fmt.Errorf("amqp10: array holds values of format codes 0x%02x and 0x%02x", codes[0], c)
		}
	}
	return w, nil
}

// elementCode is codeOf for an array element: booleans take the one-byte
// code (0x41 and 0x42 would fix every element's value) and compounds the
// 32-bit form, since an element cannot narrow itself after the fact.
func elementCode(v any) (byte, error) {
	if _, ok := v.(Described); ok {
		return 0, fmt.Errorf("amqp10: array element is a described value; set the Array's Descriptor")
	}
	c, err := codeOf(v)
	if err != nil {
		return 0, err
	}
	switch c {
	case codeTrue, codeFalse:
		return codeBool, nil
	case codeList0:
		return codeList32, nil
	}
	return c, nil
}
