package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Table is an AMQP field table. Values hold the Go types listed in the
// package doc; see DecodeFieldValue.
type Table map[string]any

// TextValue is v as a string when it is a long string or a byte array: the
// two field types clients send text in, interchangeably (an exchange name
// in an argument, a header a binding matches).
func TextValue(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	}
	return "", false
}

// Decimal is the 'D' field type: Value * 10^-Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// maxDepth bounds how deeply tables and arrays may nest, so a hostile
// payload cannot exhaust the stack, and a Table that contains itself cannot
// loop forever when encoded.
const maxDepth = 64

// DecodeTable decodes a field table starting at its 4-byte length prefix and
// returns the table and the number of bytes consumed (4 + length). An empty
// table decodes as nil. Strings and byte arrays are copied: the table does
// not alias b.
func DecodeTable(b []byte) (Table, int, error) {
	return decodeTable(b, 1, true)
}

// DecodeFieldValue decodes one field value, its type octet first, and
// returns it with the number of bytes consumed. Wire types map to Go types:
//
//	't' bool      'b' int8     'B' uint8    's' int16    'u' uint16
//	'I' int32     'i' uint32   'l' int64    'f' float32  'd' float64
//	'D' Decimal   'S' string   'x' []byte   'A' []any    'T' time.Time
//	'F' Table     'V' nil
//
// These are the types RabbitMQ reads and writes ('s' is a signed short, as
// in RabbitMQ, not the spec's short string). Timestamps are whole seconds
// and decode in UTC. An empty 'x', 'A' or 'F' decodes as a nil slice or map.
func DecodeFieldValue(b []byte) (any, int, error) {
	return decodeValue(b, 0, true)
}

// decodeTable decodes a table at nesting depth (1 for a top-level table).
// Every length is checked against the bytes present before anything is
// allocated, so the result is at most a small multiple of len(b). Without
// keep it only checks the table and measures it, allocating nothing but an
// error: the same walk serves the readers in place (rawtable.go), so the
// two cannot disagree on what a valid table is.
func decodeTable(b []byte, depth int, keep bool) (Table, int, error) {
	if depth > maxDepth {
		return nil, 0, syntaxErrorf("field tables nested deeper than %d levels", maxDepth)
	}
	if len(b) < 4 {
		return nil, 0, syntaxErrorf("table length: 4 bytes needed, %d left", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, syntaxErrorf("table of %d bytes, %d left", n, len(b)-4)
	}
	body := b[4 : 4+int(n)]
	var t Table
	for off := 0; off < len(body); {
		klen := int(body[off])
		off++
		if klen > len(body)-off {
			return nil, 0, syntaxErrorf("table key of %d bytes, %d left", klen, len(body)-off)
		}
		key := body[off : off+klen]
		off += klen
		v, vn, err := decodeValue(body[off:], depth, keep)
		if err != nil {
			return nil, 0, inContext(fmt.Sprintf("table key %q", key), err)
		}
		off += vn
		if !keep {
			continue
		}
		if t == nil {
			t = make(Table)
		}
		t[string(key)] = v
	}
	return t, 4 + int(n), nil
}

// decodeArray decodes the body of an 'A' value, after its type octet; see
// decodeTable for keep.
func decodeArray(b []byte, depth int, keep bool) ([]any, int, error) {
	if depth > maxDepth {
		return nil, 0, syntaxErrorf("field tables nested deeper than %d levels", maxDepth)
	}
	if len(b) < 4 {
		return nil, 0, syntaxErrorf("array length: 4 bytes needed, %d left", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, syntaxErrorf("array of %d bytes, %d left", n, len(b)-4)
	}
	body := b[4 : 4+int(n)]
	var a []any
	for i, off := 0, 0; off < len(body); i++ {
		v, vn, err := decodeValue(body[off:], depth, keep)
		if err != nil {
			return nil, 0, inContext(fmt.Sprintf("array index %d", i), err)
		}
		off += vn
		if keep {
			a = append(a, v)
		}
	}
	return a, 4 + int(n), nil
}

// decodeValue decodes a type octet and value held in a container at depth;
// without keep it returns only the value's size (see decodeTable).
func decodeValue(b []byte, depth int, keep bool) (any, int, error) {
	if len(b) < 1 {
		return nil, 0, syntaxErrorf("field value type: 1 byte needed, 0 left")
	}
	typ, v := b[0], b[1:]
	if n, fixed := fixedValueSize(typ); fixed {
		if n > len(v) {
			return nil, 0, syntaxErrorf("field value %q: %d bytes needed, %d left", typ, n, len(v))
		}
		if !keep {
			return nil, 1 + n, nil
		}
		return fixedValue(typ, v), 1 + n, nil
	}
	switch typ {
	case 'S', 'x':
		if len(v) < 4 {
			return nil, 0, syntaxErrorf("field value %q: 4 bytes needed, %d left", typ, len(v))
		}
		n := binary.BigEndian.Uint32(v)
		if uint64(n) > uint64(len(v)-4) {
			return nil, 0, syntaxErrorf("field value %q of %d bytes, %d left", typ, n, len(v)-4)
		}
		s := v[4 : 4+int(n)]
		switch {
		case !keep:
			return nil, 5 + int(n), nil
		case typ == 'S':
			return string(s), 5 + int(n), nil
		case n == 0:
			return []byte(nil), 5, nil
		}
		return slices.Clone(s), 5 + int(n), nil
	case 'A':
		a, n, err := decodeArray(v, depth+1, keep)
		if err != nil {
			return nil, 0, err
		}
		if !keep {
			return nil, 1 + n, nil
		}
		return a, 1 + n, nil
	case 'F':
		t, n, err := decodeTable(v, depth+1, keep)
		if err != nil {
			return nil, 0, err
		}
		if !keep {
			return nil, 1 + n, nil
		}
		return t, 1 + n, nil
	}
	return nil, 0, syntaxErrorf("unknown field value type %q", typ)
}

// fixedValueSize is the size of a value of type typ after its type octet,
// for the types whose size the type fixes.
func fixedValueSize(typ byte) (int, bool) {
	switch typ {
	case 'V':
		return 0, true
	case 't', 'b', 'B':
		return 1, true
	case 's', 'u':
		return 2, true
	case 'I', 'i', 'f':
		return 4, true
	case 'D':
		return 5, true
	case 'l', 'd', 'T':
		return 8, true
	}
	return 0, false
}

// fixedValue decodes a value of a type fixedValueSize knows from v, which
// holds at least its size.
func fixedValue(typ byte, v []byte) any {
	switch typ {
	case 't':
		return v[0] != 0
	case 'b':
		return int8(v[0])
	case 'B':
		return v[0]
	case 's':
		return int16(binary.BigEndian.Uint16(v))
	case 'u':
		return binary.BigEndian.Uint16(v)
	case 'I':
		return int32(binary.BigEndian.Uint32(v))
	case 'i':
		return binary.BigEndian.Uint32(v)
	case 'f':
		return math.Float32frombits(binary.BigEndian.Uint32(v))
	case 'D':
		return Decimal{Scale: v[0], Value: int32(binary.BigEndian.Uint32(v[1:]))}
	case 'l':
		return int64(binary.BigEndian.Uint64(v))
	case 'd':
		return math.Float64frombits(binary.BigEndian.Uint64(v))
	case 'T':
		return time.Unix(int64(binary.BigEndian.Uint64(v)), 0).UTC()
	}
	return nil // 'V'
}

// AppendTable appends t as a field table: a 4-byte length, then each entry
// as a short-string key and a typed value. Keys are sorted, so the same
// table always encodes to the same bytes. A key over 255 bytes or a value
// of an unsupported Go type is an error naming the key.
func AppendTable(buf []byte, t Table) ([]byte, error) {
	buf, err := appendTable(buf, t, 1)
	if err != nil {
		return buf, fmt.Errorf("protocol: %w", err)
	}
	return buf, nil
}

// AppendFieldValue appends one field value, its type octet first. It
// accepts the Go types DecodeFieldValue returns, and also int (as 'l') and
// map[string]any (as 'F').
func AppendFieldValue(buf []byte, v any) ([]byte, error) {
	buf, err := appendValue(buf, v, 0)
	if err != nil {
		return buf, fmt.Errorf("protocol: %w", err)
	}
	return buf, nil
}

func appendTable(buf []byte, t Table, depth int) ([]byte, error) {
	if depth > maxDepth {
		return buf, fmt.Errorf("field tables nested deeper than %d levels", maxDepth)
	}
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0)
	// Sort keys in a stack array when the table is small, as most are.
	var small [16]string
	keys := small[:0]
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(k) > 255 {
			return buf, fmt.Errorf("table key %q...: longer than 255 bytes", k[:32])
		}
		buf = append(buf, byte(len(k)))
		buf = append(buf, k...)
		var err error
		if buf, err = appendValue(buf, t[k], depth); err != nil {
			return buf, fmt.Errorf("table key %q: %w", k, err)
		}
	}
	return patchLength(buf, start)
}

// patchLength writes the length of what follows the 4 bytes at start.
func patchLength(buf []byte, start int) ([]byte, error) {
	n := len(buf) - start - 4
	if uint64(n) > math.MaxUint32 {
		return buf, fmt.Errorf("field of %d bytes is too long", n)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return buf, nil
}

// appendValue appends v, which sits in a container at depth.
func appendValue(buf []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return append(buf, 't', b), nil
	case int8:
		return append(buf, 'b', byte(v)), nil
	case uint8:
		return append(buf, 'B', v), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(buf, 's'), uint16(v)), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(buf, 'u'), v), nil
	case int32:
		return binary.BigEndian.AppendUint32(append(buf, 'I'), uint32(v)), nil
	case uint32:
		return binary.BigEndian.AppendUint32(append(buf, 'i'), v), nil
	case int64:
		return binary.BigEndian.AppendUint64(append(buf, 'l'), uint64(v)), nil
	case int:
		return binary.BigEndian.AppendUint64(append(buf, 'l'), uint64(v)), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(buf, 'f'), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(buf, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return binary.BigEndian.AppendUint32(append(buf, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		if uint64(len(v)) > math.MaxUint32 {
			return buf, fmt.Errorf("string of %d bytes is too long", len(v))
		}
		buf = binary.BigEndian.AppendUint32(append(buf, 'S'), uint32(len(v)))
		return append(buf, v...), nil
	case []byte:
		if uint64(len(v)) > math.MaxUint32 {
			return buf, fmt.Errorf("byte array of %d bytes is too long", len(v))
		}
		buf = binary.BigEndian.AppendUint32(append(buf, 'x'), uint32(len(v)))
		return append(buf, v...), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(append(buf, 'T'), uint64(v.Unix())), nil
	case Table:
		return appendTable(append(buf, 'F'), v, depth+1)
	case map[string]any:
		return appendTable(append(buf, 'F'), Table(v), depth+1)
	case []any:
		if depth+1 > maxDepth {
			return buf, fmt.Errorf("field tables nested deeper than %d levels", maxDepth)
		}
		buf = append(buf, 'A')
		start := len(buf)
		buf = append(buf, 0, 0, 0, 0)
		for i, e := range v {
			var err error
			if buf, err = appendValue(buf, e, depth+1); err != nil {
				return buf, fmt.Errorf("array index %d: %w", i, err)
			}
		}
		return patchLength(buf, start)
	case nil:
		return append(buf, 'V'), nil
	}
	return buf, fmt.Errorf("unsupported value type %T", v)
}
