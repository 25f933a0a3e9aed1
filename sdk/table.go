package sdk

import (
	"encoding/binary"
	"iter"
	"math"
	"unsafe"
)

// Table is an AMQP field table, read in place: it keeps the encoded bytes
// (with their 4-byte length) and decodes an entry only when asked. Binding
// arguments, declare arguments, policies, settings and message headers are
// all Tables.
//
// A Table from a Message is a view of the route input and is valid only
// until Route returns; Tables handed to ValidateDeclare, Create,
// ValidateBinding, AddBinding and PolicyChanged are copies the plugin may
// keep. The zero Table is absent: Valid reports false and Get finds nothing.
type Table struct {
	raw []byte
}

// Valid reports whether the table is present (it may still be empty).
func (t Table) Valid() bool { return len(t.raw) >= 4 }

// Raw returns the encoded table, length prefix included.
func (t Table) Raw() []byte { return t.raw }

func (t Table) body() []byte {
	if len(t.raw) < 4 {
		return nil
	}
	n := binary.BigEndian.Uint32(t.raw)
	if uint64(n) > uint64(len(t.raw)-4) {
		return nil
	}
	return t.raw[4 : 4+n]
}

// Get returns the value of the first entry named name.
func (t Table) Get(name string) (Value, bool) { return getEntry(t.body(), name) }

// getEntry finds the first entry named name in a table's body.
func getEntry(b []byte, name string) (Value, bool) {
	for len(b) > 0 {
		k := int(b[0])
		if 1+k > len(b) {
			return Value{}, false
		}
		key := b[1 : 1+k]
		v, n := readValue(b[1+k:])
		if n == 0 {
			return Value{}, false
		}
		if string(key) == name {
			return v, true
		}
		b = b[1+k+n:]
	}
	return Value{}, false
}

// All iterates over the entries in their encoded order. Names are views
// like the table's strings.
func (t Table) All() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		b := t.body()
		for len(b) > 0 {
			k := int(b[0])
			if 1+k > len(b) {
				return
			}
			key := b[1 : 1+k]
			v, n := readValue(b[1+k:])
			if n == 0 {
				return
			}
			if !yield(view(key), v) {
				return
			}
			b = b[1+k+n:]
		}
	}
}

// Len counts the entries.
func (t Table) Len() int {
	n := 0
	for range t.All() {
		n++
	}
	return n
}

// Array is an AMQP field array ('A'), read in place like a Table.
type Array struct {
	raw []byte // with the 4-byte length
}

// All iterates over the array's values.
func (a Array) All() iter.Seq[Value] {
	return func(yield func(Value) bool) {
		if len(a.raw) < 4 {
			return
		}
		n := binary.BigEndian.Uint32(a.raw)
		if uint64(n) > uint64(len(a.raw)-4) {
			return
		}
		b := a.raw[4 : 4+n]
		for len(b) > 0 {
			v, k := readValue(b)
			if k == 0 || !yield(v) {
				return
			}
			b = b[k:]
		}
	}
}

// Value is one field value: its AMQP type octet and its encoded bytes. The
// As methods convert it; each reports false when the value is of another
// kind. Strings it returns are views (see Table).
type Value struct {
	kind byte
	data []byte // strings and byte arrays: the content; 'F' and 'A': with the length
}

// Kind is the AMQP field type octet: 't' bool, 'b' 'B' 's' 'u' 'I' 'i' 'l'
// integers, 'f' 'd' floats, 'D' decimal, 'S' string, 'x' bytes, 'A' array,
// 'T' timestamp, 'F' table, 'V' void (the value of an argument given
// without one). Zero means no value.
func (v Value) Kind() byte { return v.kind }

// IsVoid reports a void value.
func (v Value) IsVoid() bool { return v.kind == 'V' }

// AsString returns a string value ('S'; properties that are short strings
// read as 'S' too).
func (v Value) AsString() (string, bool) {
	if v.kind != 'S' {
		return "", false
	}
	return view(v.data), true
}

// AsBytes returns the bytes of a string or byte-array value.
func (v Value) AsBytes() ([]byte, bool) {
	if v.kind != 'S' && v.kind != 'x' {
		return nil, false
	}
	return v.data, true
}

// AsBool returns a boolean value.
func (v Value) AsBool() (bool, bool) {
	if v.kind != 't' {
		return false, false
	}
	return v.data[0] != 0, true
}

// AsInt returns any integer value as int64, and a timestamp as its seconds.
func (v Value) AsInt() (int64, bool) {
	d := v.data
	switch v.kind {
	case 'b':
		return int64(int8(d[0])), true
	case 'B':
		return int64(d[0]), true
	case 's':
		return int64(int16(binary.BigEndian.Uint16(d))), true
	case 'u':
		return int64(binary.BigEndian.Uint16(d)), true
	case 'I':
		return int64(int32(binary.BigEndian.Uint32(d))), true
	case 'i':
		return int64(binary.BigEndian.Uint32(d)), true
	case 'l':
		return int64(binary.BigEndian.Uint64(d)), true
	case 'T':
		u := binary.BigEndian.Uint64(d)
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	}
	return 0, false
}

// AsFloat returns any numeric value as float64 (integers and decimals
// converted).
func (v Value) AsFloat() (float64, bool) {
	switch v.kind {
	case 'f':
		return float64(math.Float32frombits(binary.BigEndian.Uint32(v.data))), true
	case 'd':
		return math.Float64frombits(binary.BigEndian.Uint64(v.data)), true
	case 'D':
		return float64(int32(binary.BigEndian.Uint32(v.data[1:]))) / math.Pow10(int(v.data[0])), true
	case 'T':
		return 0, false
	}
	if i, ok := v.AsInt(); ok {
		return float64(i), true
	}
	return 0, false
}

// AsTable returns a nested table.
func (v Value) AsTable() (Table, bool) {
	if v.kind != 'F' {
		return Table{}, false
	}
	return Table{raw: v.data}, true
}

// AsArray returns an array.
func (v Value) AsArray() (Array, bool) {
	if v.kind != 'A' {
		return Array{}, false
	}
	return Array{raw: v.data}, true
}

// Raw returns the value's encoded bytes (without the type octet; strings
// without their length).
func (v Value) Raw() []byte { return v.data }

// Equal compares two values the way RabbitMQ's headers exchange does:
// numbers by value across integer and float types, strings and byte arrays
// by content, booleans, voids and nested values by their encoding. A string
// never equals a number.
func (v Value) Equal(w Value) bool {
	if v.isNumber() && w.isNumber() {
		a, aok := v.AsInt()
		b, bok := w.AsInt()
		if aok && bok {
			return a == b
		}
		x, _ := v.AsFloat()
		y, _ := w.AsFloat()
		return x == y
	}
	if v.kind != w.kind {
		return false
	}
	return string(v.data) == string(w.data)
}

func (v Value) isNumber() bool {
	switch v.kind {
	case 'b', 'B', 's', 'u', 'I', 'i', 'l', 'f', 'd', 'D':
		return true
	}
	return false
}

// readValue reads one value at b (its type octet first) and returns it with
// the bytes it took; 0 when b does not hold a whole value.
func readValue(b []byte) (Value, int) {
	if len(b) == 0 {
		return Value{}, 0
	}
	kind := b[0]
	fixed := 0
	switch kind {
	case 't', 'b', 'B':
		fixed = 1
	case 's', 'u':
		fixed = 2
	case 'I', 'i', 'f':
		fixed = 4
	case 'l', 'd', 'T':
		fixed = 8
	case 'D':
		fixed = 5
	case 'V':
		return Value{kind: 'V'}, 1
	case 'S', 'x', 'A', 'F':
		if len(b) < 5 {
			return Value{}, 0
		}
		n := binary.BigEndian.Uint32(b[1:])
		if uint64(n) > uint64(len(b)-5) {
			return Value{}, 0
		}
		if kind == 'A' || kind == 'F' {
			return Value{kind: kind, data: b[1 : 5+n : 5+n]}, 5 + int(n)
		}
		return Value{kind: kind, data: b[5 : 5+n : 5+n]}, 5 + int(n)
	default:
		return Value{}, 0
	}
	if len(b) < 1+fixed {
		return Value{}, 0
	}
	return Value{kind: kind, data: b[1 : 1+fixed : 1+fixed]}, 1 + fixed
}

// view returns b as a string without copying. The string is only as
// stable as b.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// owned copies b into a Table the plugin may keep.
func ownedTable(b []byte) Table {
	if len(b) == 0 {
		return Table{}
	}
	return Table{raw: append([]byte(nil), b...)}
}
