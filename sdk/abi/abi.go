// Package abi holds the constants and the byte layouts of Warren's routing
// ABI (version 1.1), shared by the host (core/wasmhost) and the Go SDK (sdk/).
// sdk/ABI.md is the normative description; this package is its executable
// form and must agree with it byte for byte.
//
// The package is pure Go with no dependencies beyond the standard library's
// encoding/binary, so it compiles for the host and for GOOS=wasip1 alike,
// and it never allocates unless a function's doc says so.
//
// Layout conventions (ABI.md, "Encoding"):
//
//   - Integers of the ABI's own records are little-endian (u8, u16, u32, u64).
//   - str8 is a u8 length then that many bytes; str16 a u16 length; bytes32 a
//     u32 length.
//   - table is an AMQP 0-9-1 field table exactly as on the wire: a big-endian
//     u32 byte count, then the entries. An empty table is 00 00 00 00.
//   - A record may grow at its end in a later minor version: readers ignore
//     bytes after the fields they know.
package abi

import (
	"encoding/binary"
	"errors"
	"math"
)

// Version of the ABI this package describes: major 1, minor 1. A module's
// warren_abi_version export returns Major<<16 | Minor; a module may speak
// an older minor version, and the host holds it to that version.
const (
	Major   = 1
	Minor   = 1
	Version = Major<<16 | Minor
)

// ImportModule is the module name of the host functions.
const ImportModule = "warren_v1"

// Export names. Required: Memory, ExportVersion, ExportBuffer,
// ExportDescribe, ExportCreate, ExportAddBinding, ExportRemoveBindings,
// ExportRoute. The others may be left out; the host then behaves as if they
// answered OK with nothing to say.
const (
	ExportMemory          = "memory"
	ExportInitialize      = "_initialize"
	ExportVersion         = "warren_abi_version"
	ExportBuffer          = "warren_buffer"
	ExportDescribe        = "warren_describe"
	ExportValidateDeclare = "warren_validate_declare"
	ExportCreate          = "warren_create"
	ExportDelete          = "warren_delete"
	ExportValidateBinding = "warren_validate_binding"
	ExportAddBinding      = "warren_add_binding"
	ExportRemoveBindings  = "warren_remove_bindings"
	ExportPolicyChanged   = "warren_policy_changed"
	ExportRoute           = "warren_route"
	ExportInfo            = "warren_info"
	ExportIdle            = "warren_idle"
	// ExportSettingsChanged (1.1) hands the settings table in force after
	// an operator changed it.
	ExportSettingsChanged = "warren_settings_changed"
)

// Host function names in ImportModule.
const (
	HostLog            = "log"             // (level i32, ptr i32, len i32)
	HostClockMonotonic = "clock_monotonic" // () -> i64 nanoseconds
	HostClockWall      = "clock_wall"      // () -> i64 nanoseconds since the Unix epoch
	HostConfig         = "config"          // (ptr i32, cap i32) -> i32 size
	HostTypeExists     = "type_exists"     // (ptr i32, len i32) -> i32: 1 if the exchange type exists (1.1)
)

// Log levels of the log host function.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// Features a plugin declares in its description; they decide what route
// receives.
const (
	FeatureHeaders    = 1 << 0 // the property list (for its headers table)
	FeatureProperties = 1 << 1 // the property list
	FeatureBody       = 1 << 2 // the message body
	knownFeatures     = FeatureHeaders | FeatureProperties | FeatureBody
)

// FeatureNames names each feature bit, for messages and listings.
var FeatureNames = []struct {
	Bit  uint32
	Name string
}{{FeatureHeaders, "headers"}, {FeatureProperties, "properties"}, {FeatureBody, "body"}}

// Status is the first byte of every non-empty output.
const (
	StatusOK    = 0 // payload follows
	StatusError = 1 // u16 reply code, str16 text: the client sees this reply
	StatusFault = 2 // str16 text: the plugin found a bug in itself (a recovered panic)
)

// Route actions, after the binding list of a route output.
const (
	ActionVia        = 1 // u64 hold in ms, str8 exchange type: route with that type (after the hold)
	ActionSetHeaders = 2 // table: headers to set, void values remove (1.1; only with a held via)
)

// Checks a validate answer may ask the host to make (1.1), after the
// binding-free OK status.
const (
	CheckValidateAs = 1 // str8 exchange type: validate the same declare or binding as that type
)

// Destination kinds in a binding record.
const (
	DestQueue    = 0
	DestExchange = 1
)

// Exchange flags in a definition record.
const (
	FlagDurable    = 1 << 0
	FlagAutoDelete = 1 << 1
	FlagInternal   = 1 << 2
)

// None is the exchange or binding id in the records of validate calls, where
// nothing has an id yet.
const None = math.MaxUint32

// Setting kinds in a description, as AMQP field type octets; 0 accepts any.
const (
	SettingAny    = 0
	SettingBool   = 't'
	SettingInt    = 'l'
	SettingFloat  = 'd'
	SettingString = 'S'
	SettingArray  = 'A'
	SettingTable  = 'F'
)

// EmptyTable is the encoding of a table without entries.
var EmptyTable = []byte{0, 0, 0, 0}

// ErrShort reports a record that ends before its fields do.
var ErrShort = errors.New("abi: record truncated")

// ---- writing ----

func AppendU8(b []byte, v uint8) []byte   { return append(b, v) }
func AppendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func AppendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func AppendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// AppendStr8 appends s as str8, cutting it at 255 bytes.
func AppendStr8(b []byte, s string) []byte {
	if len(s) > math.MaxUint8 {
		s = s[:math.MaxUint8]
	}
	return append(append(b, uint8(len(s))), s...)
}

// AppendStr16 appends s as str16, cutting it at 65535 bytes.
func AppendStr16(b []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	return append(AppendU16(b, uint16(len(s))), s...)
}

// AppendBytes32 appends p as bytes32.
func AppendBytes32(b []byte, p []byte) []byte {
	return append(AppendU32(b, uint32(len(p))), p...)
}

// AppendTable appends an already encoded field table; nil or empty appends
// the empty table.
func AppendTable(b []byte, table []byte) []byte {
	if len(table) == 0 {
		return append(b, EmptyTable...)
	}
	return append(b, table...)
}

// ---- reading ----

// Reader walks a record. Its first failure sticks: later reads return zero
// values and Err reports ErrShort, so a decoder checks once at the end.
type Reader struct {
	b   []byte
	off int
	err error
	// reads counts the reads made; failed is the 1-based number of the
	// read that failed first (0 while none has), so a record's decoder
	// can name the field that did not fit.
	reads, failed int
}

// NewReader returns a Reader over b. It does not copy b; slices it returns
// alias b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// Err is the first failure, nil when every read fitted.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail() {
	if r.err == nil {
		r.err, r.failed = ErrShort, r.reads
	}
}

// FieldError is ErrShort naming the record and the field that did not
// fit, given the record's fields in the order they are read.
func (r *Reader) FieldError(record string, fields ...string) error {
	if r.err == nil {
		return nil
	}
	field := "a field past its end"
	if i := r.failed - 1; i >= 0 && i < len(fields) {
		field = "field '" + fields[i] + "'"
	}
	return &TruncatedError{Record: record, Field: field, Size: len(r.b)}
}

// TruncatedError is a record that ends before one of its fields does. It
// matches ErrShort with errors.Is.
type TruncatedError struct {
	Record string
	Field  string // "field 'name'"
	Size   int    // the record's bytes
}

func (e *TruncatedError) Error() string {
	return "abi: " + e.Record + " record truncated: " + e.Field + " does not fit in its " + itoa(e.Size) + " bytes"
}

func (e *TruncatedError) Is(target error) bool { return target == ErrShort }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Rest returns the bytes not read yet.
func (r *Reader) Rest() []byte { return r.b[r.off:] }

// Len is the number of bytes not read yet.
func (r *Reader) Len() int { return len(r.b) - r.off }

func (r *Reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		r.fail()
		return nil
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p
}

func (r *Reader) U8() uint8 {
	r.reads++
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *Reader) U16() uint16 {
	r.reads++
	if p := r.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (r *Reader) U32() uint32 {
	r.reads++
	if p := r.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *Reader) U64() uint64 {
	r.reads++
	if p := r.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// Str8 returns the bytes of a str8 field.
func (r *Reader) Str8() []byte {
	n := int(r.U8())
	return r.take(n)
}

// Str16 returns the bytes of a str16 field.
func (r *Reader) Str16() []byte {
	n := int(r.U16())
	return r.take(n)
}

// Bytes32 returns the bytes of a bytes32 field.
func (r *Reader) Bytes32() []byte {
	n := r.U32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(r.Len()) {
		r.fail()
		return nil
	}
	return r.take(int(n))
}

// Table returns a field table with its 4-byte length prefix.
func (r *Reader) Table() []byte {
	r.reads++
	if r.err != nil || r.Len() < 4 {
		r.fail()
		return nil
	}
	n := binary.BigEndian.Uint32(r.b[r.off:])
	if uint64(n) > uint64(r.Len()-4) {
		r.fail()
		return nil
	}
	return r.take(4 + int(n))
}

// PackResult is the i64 an export returns for output at ptr of n bytes.
func PackResult(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// UnpackResult splits an export's i64 result into pointer and length.
func UnpackResult(r uint64) (ptr, n uint32) { return uint32(r >> 32), uint32(r) }

var le = binary.LittleEndian
