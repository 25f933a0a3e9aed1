package protocol

import (
	"bytes"
	"encoding/binary"
)

// RawTable reads an encoded field table where it lies, without decoding it:
// for the paths that look up a few entries of every message's headers (a
// headers exchange's routing), where a decoded Table would cost a map, a
// string per key and a boxed value per entry. Keys and values alias the
// encoded bytes.
//
// A RawTable holds only a table that DecodeTable accepts (ScanTable checks
// it with the same walk), and reads it as DecodeTable would: when a key
// appears more than once, its last entry is the one that counts.
type RawTable struct {
	body []byte // the entries, after the length prefix
}

// ScanTable checks the encoded table b (its length prefix first, as
// DecodeTable takes it) and returns a reader of it. A nil or empty b is the
// empty table. Bytes after the table are ignored, as DecodeTable ignores
// them.
func ScanTable(b []byte) (RawTable, error) {
	if len(b) == 0 {
		return RawTable{}, nil
	}
	_, n, err := decodeTable(b, 1, false)
	if err != nil {
		return RawTable{}, err
	}
	return RawTable{body: b[4:n]}, nil
}

// Fields returns an iterator over the table's entries in wire order.
func (t RawTable) Fields() RawFields { return RawFields{rest: t.body} }

// Lookup returns the value of key, its type octet first, aliasing the
// table: the last entry of that key, as a decoded table has it.
func (t RawTable) Lookup(key string) ([]byte, bool) {
	var found []byte
	for f := t.Fields(); ; {
		k, v, ok := f.Next()
		if !ok {
			return found, found != nil
		}
		if string(k) == key {
			found = v
		}
	}
}

// RawFields iterates a RawTable's entries.
type RawFields struct {
	rest []byte
}

// Next returns the next entry's key and value (type octet first), or false
// after the last.
func (f *RawFields) Next() (key, value []byte, ok bool) {
	if len(f.rest) == 0 {
		return nil, nil, false
	}
	klen := int(f.rest[0])
	key = f.rest[1 : 1+klen]
	n := checkedValueSize(f.rest[1+klen:])
	value = f.rest[1+klen : 1+klen+n]
	f.rest = f.rest[1+klen+n:]
	return key, value, true
}

// checkedValueSize is the size of the value at b, type octet first, which
// ScanTable has checked: a fixed size, or a length prefix after the type.
func checkedValueSize(b []byte) int {
	if n, fixed := fixedValueSize(b[0]); fixed {
		return 1 + n
	}
	return 5 + int(binary.BigEndian.Uint32(b[1:])) // 'S', 'x', 'A', 'F'
}

// Later reports whether an entry still ahead of the iterator has key: then
// the entry Next just returned with that key is not the one that counts.
func (f RawFields) Later(key []byte) bool {
	for {
		k, _, ok := f.Next()
		if !ok {
			return false
		}
		if bytes.Equal(k, key) {
			return true
		}
	}
}

// RawText returns the bytes of value (type octet first) when it is a long
// string or a byte array, aliasing value: RawTable's TextValue.
func RawText(value []byte) ([]byte, bool) {
	if len(value) < 5 || (value[0] != 'S' && value[0] != 'x') {
		return nil, false
	}
	n := binary.BigEndian.Uint32(value[1:])
	if uint64(n) > uint64(len(value)-5) {
		return nil, false
	}
	return value[5 : 5+int(n)], true
}
