// Package tablerec reads Warren's stored records and replicated commands
// out of the AMQP field tables they are encoded as, strictly.
//
// Each record is of a kind ("exchange record", "bind command") and has a
// version: the field "v", absent from what releases before versions wrote,
// which is version 1. A reader opened for a kind refuses a version above
// the one it knows, by kind and version, rather than misread it. A field
// that is required and missing, or present with another type, is an error
// naming the kind and the field and what was found, never a zero value:
// a misspelt key or a changed type shows up as an error on the first
// read, not as false on a restart or on another node.
//
// The encoders and decoders themselves stay with the package that owns
// the records, one file per package (core/topology's records.go, core/broker's
// records.go); this package holds only what they share.
package tablerec

import (
	"fmt"
	"reflect"

	"github.com/warrenmq/warren/protocol"
)

// VersionKey is the field that holds a record's version.
const VersionKey = "v"

// Reader reads one record's fields. The first problem sticks: later reads
// return zero values, and Err reports it.
type Reader struct {
	kind    string
	t       protocol.Table
	version int64
	err     error
}

// Open reads t as a record of kind, of a version from 1 up to known.
func Open(kind string, t protocol.Table, known int64) *Reader {
	// A nil table is an empty one (an empty table may decode as nil):
	// its required fields are missing.
	r := &Reader{kind: kind, t: t, version: 1}
	if x, ok := t[VersionKey]; ok {
		n, isInt := Integer(x)
		if !isInt {
			r.fail(VersionKey, "an integer", x)
			return r
		}
		r.version = n
	}
	if r.version < 1 || r.version > known {
		r.err = fmt.Errorf("%s of version %d: this node knows versions 1 to %d (written by a later release?)", kind, r.version, known)
	}
	return r
}

// Read opens t as a record of kind and reads it with read.
func Read[T any](kind string, t protocol.Table, known int64, read func(*Reader) T) (T, error) {
	r := Open(kind, t, known)
	v := read(r)
	return v, r.Err()
}

// Reencode is t as a store or a log gives it back: encoded, then decoded.
func Reencode(t protocol.Table) (protocol.Table, error) {
	b, err := protocol.AppendTable(nil, t)
	if err != nil {
		return nil, err
	}
	out, _, err := protocol.DecodeTable(b)
	return out, err
}

// Version is the record's version (1 for one written before versions).
func (r *Reader) Version() int64 { return r.version }

// Err is the first problem the reads met, or nil.
func (r *Reader) Err() error { return r.err }

// FieldError is a field that is missing or of another type.
type FieldError struct {
	Kind, Field, Want string
	Got               any // nil: missing
}

func (e *FieldError) Error() string {
	if e.Got == nil {
		return fmt.Sprintf("%s: field %q is missing (want %s)", e.Kind, e.Field, e.Want)
	}
	return fmt.Sprintf("%s: field %q is %T, want %s", e.Kind, e.Field, e.Got, e.Want)
}

// Fail records a problem with key's value the decoder found (a value
// outside the ones it knows), unless one came first.
func (r *Reader) Fail(key, want string, got any) { r.fail(key, want, got) }

func (r *Reader) fail(key, want string, got any) {
	if r.err == nil {
		r.err = &FieldError{Kind: r.kind, Field: key, Want: want, Got: got}
	}
}

// field is the value of key; ok false when it is absent or the reader
// has failed already.
func (r *Reader) field(key string) (any, bool) {
	if r.err != nil {
		return nil, false
	}
	x, ok := r.t[key]
	return x, ok
}

// String reads a required string.
func (r *Reader) String(key string) string { return value[string](r, key, "a string", true) }

// StringOr reads a string that may be absent.
func (r *Reader) StringOr(key, absent string) string {
	if !r.has(key) {
		return absent
	}
	return value[string](r, key, "a string", false)
}

// Bool reads a required boolean.
func (r *Reader) Bool(key string) bool { return value[bool](r, key, "a boolean", true) }

// BoolOr reads a boolean that may be absent.
func (r *Reader) BoolOr(key string, absent bool) bool {
	if !r.has(key) {
		return absent
	}
	return value[bool](r, key, "a boolean", false)
}

// Int reads a required integer, of any of AMQP's integer types.
func (r *Reader) Int(key string) int64 {
	x, ok := r.field(key)
	if !ok {
		r.fail(key, "an integer", nil)
		return 0
	}
	return r.asInt(key, x)
}

// IntOr reads an integer that may be absent.
func (r *Reader) IntOr(key string, absent int64) int64 {
	x, ok := r.field(key)
	if !ok {
		return absent
	}
	return r.asInt(key, x)
}

func (r *Reader) asInt(key string, x any) int64 {
	n, ok := Integer(x)
	if !ok {
		r.fail(key, "an integer", x)
	}
	return n
}

// has says whether key is there (and nothing failed before).
func (r *Reader) has(key string) bool {
	_, ok := r.field(key)
	return ok
}

// value reads key as a T; a required one must be there.
func value[T any](r *Reader, key, want string, required bool) T {
	var zero T
	x, ok := r.field(key)
	if !ok {
		if required {
			r.fail(key, want, nil)
		}
		return zero
	}
	v, ok := x.(T)
	if !ok {
		r.fail(key, want, x)
	}
	return v
}

// BytesOr reads a byte array that may be absent or void (nil).
func (r *Reader) BytesOr(key string) []byte {
	x, ok := r.field(key)
	if !ok || x == nil {
		return nil
	}
	b, isBytes := x.([]byte)
	if !isBytes {
		r.fail(key, "a byte array", x)
	}
	return b
}

// Table reads a table that may be absent; absent or empty, it is nil.
func (r *Reader) Table(key string) protocol.Table {
	x, ok := r.field(key)
	if !ok {
		return nil
	}
	t, isTable := x.(protocol.Table)
	if !isTable {
		r.fail(key, "a table", x)
		return nil
	}
	if len(t) == 0 {
		return nil
	}
	return t
}

// Strings reads a list of strings that may be absent (nil).
func (r *Reader) Strings(key string) []string {
	return listOf(r, key, "a list of strings", func(x any) (string, bool) { s, ok := x.(string); return s, ok })
}

// Uints reads a list of non-negative integers that may be absent (nil).
func (r *Reader) Uints(key string) []uint64 {
	return listOf(r, key, "a list of integers", func(x any) (uint64, bool) { n, ok := Integer(x); return uint64(n), ok })
}

// Tables reads a list of tables that may be absent (nil).
func (r *Reader) Tables(key string) []protocol.Table {
	return listOf(r, key, "a list of tables", func(x any) (protocol.Table, bool) { t, ok := x.(protocol.Table); return t, ok })
}

// listOf reads a list whose items each convert to a T.
func listOf[T any](r *Reader, key, want string, convert func(any) (T, bool)) []T {
	items := r.list(key)
	if items == nil {
		return nil
	}
	out := make([]T, len(items))
	for i, it := range items {
		x, ok := convert(it)
		if !ok {
			r.fail(key, want, it)
			return nil
		}
		out[i] = x
	}
	return out
}

func (r *Reader) list(key string) []any {
	x, ok := r.field(key)
	if !ok {
		return nil
	}
	items, isList := x.([]any)
	if !isList {
		r.fail(key, "a list", x)
		return nil
	}
	return items
}

// Integer reads any of AMQP's integer types as an int64 (not floats,
// which a record never holds for an integer).
func Integer(x any) (int64, bool) {
	switch x.(type) {
	case int8, int16, int32, int64:
		return reflect.ValueOf(x).Int(), true
	case uint8, uint16, uint32:
		return int64(reflect.ValueOf(x).Uint()), true
	}
	return 0, false
}

// StringList is a list of strings as a table holds one.
func StringList(ss []string) []any {
	if ss == nil {
		return nil
	}
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// UintList is a list of integers as a table holds one.
func UintList(ns []uint64) []any {
	if ns == nil {
		return nil
	}
	out := make([]any, len(ns))
	for i, n := range ns {
		out[i] = int64(n)
	}
	return out
}
