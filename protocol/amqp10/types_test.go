package amqp10

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// canonical lists each type with the encoding the spec gives it and
// AppendValue chooses, byte for byte.
var canonical = []struct {
	name string
	v    any
	hex  string
}{
	{"null", nil, "40"},
	{"true", true, "41"},
	{"false", false, "42"},
	{"ubyte", uint8(0xfe), "50 fe"},
	{"ushort", uint16(0x1234), "60 1234"},
	{"uint0", uint32(0), "43"},
	{"smalluint", uint32(255), "52 ff"},
	{"uint", uint32(256), "70 00000100"},
	{"ulong0", uint64(0), "44"},
	{"smallulong", uint64(7), "53 07"},
	{"ulong", uint64(1) << 40, "80 0000010000000000"},
	{"byte", int8(-2), "51 fe"},
	{"short", int16(-2), "61 fffe"},
	{"smallint", int32(-128), "54 80"},
	{"int", int32(128), "71 00000080"},
	{"smalllong", int64(127), "55 7f"},
	{"long", int64(-129), "81 ffffffffffffff7f"},
	{"float", float32(1.5), "72 3fc00000"},
	{"double", float64(-2), "82 c000000000000000"},
	{"decimal32", Decimal32{1, 2, 3, 4}, "74 01020304"},
	{"decimal64", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}, "84 0102030405060708"},
	{"decimal128", Decimal128{15: 9}, "94 00000000000000000000000000000009"},
	{"char", Char('é'), "73 000000e9"},
	{"timestamp", Timestamp(1311704463521), "83 0000013167adb8a1"},
	{"uuid", UUID{0: 0xf8, 15: 0x01}, "98 f8000000000000000000000000000001"},
	{"vbin8", []byte("ab"), "a0 02 6162"},
	{"vbin8 empty", []byte{}, "a0 00"},
	{"str8", "hi", "a1 02 6869"},
	{"str8 empty", "", "a1 00"},
	{"sym8", Symbol("x-a"), "a3 03 782d61"},
	{"list0", []any{}, "45"},
	{"list8", []any{uint32(1), "a"}, "c0 06 02 52 01 a1 01 61"},
	{"map8", Map{{Symbol("k"), int64(1)}}, "c1 06 02 a3 01 6b 55 01"},
	{"map8 empty", Map{}, "c1 01 00"},
	{"array8 smalluint", Array{Code: 0x52, Values: []any{uint32(1), uint32(2)}}, "e0 04 02 52 01 02"},
	{"array8 sym8", Array{Code: 0xa3, Values: []any{Symbol("a"), Symbol("bc")}}, "e0 07 02 a3 01 61 02 6263"},
	{"array8 empty of ulong", Array{Code: 0x80}, "e0 02 00 80"},
	{"array8 bool", Array{Code: 0x56, Values: []any{true, false}}, "e0 04 02 56 01 00"},
	{"array8 described", Array{Descriptor: uint64(0x70), Code: 0x45, Values: []any{[]any{}}}, "e0 05 01 00 53 70 45"},
	{"array8 of list8", Array{Code: 0xc0, Values: []any{[]any{true}}}, "e0 05 01 c0 02 01 41"},
	{"described", Described{Symbol("d"), "v"}, "00 a3 01 64 a1 01 76"},
	{"described ulong", Described{uint64(0x75), []byte("x")}, "00 53 75 a0 01 78"},
}

func TestCanonicalEncodings(t *testing.T) {
	for _, c := range canonical {
		t.Run(c.name, func(t *testing.T) {
			want := mustHex(c.hex)
			got, err := AppendValue(nil, c.v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendValue(%#v) = % x, want % x", c.v, got, want)
			}
			v, n, err := Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(want) || !reflect.DeepEqual(v, c.v) {
				t.Fatalf("Decode(% x) = %#v, %d; want %#v, %d", want, v, n, c.v, len(want))
			}
		})
	}
}

// TestWideEncodings checks that the forms AppendValue does not choose
// decode to the same Go types as the narrow ones.
func TestWideEncodings(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		hex  string
		want any
	}{
		{"56 01", true},
		{"56 00", false},
		{"70 00000005", uint32(5)},
		{"80 0000000000000005", uint64(5)},
		{"71 00000005", int32(5)},
		{"81 0000000000000005", int64(5)},
		{"b0 00000002 6162", []byte("ab")},
		{"b1 00000002 6162", "ab"},
		{"b3 00000002 6162", Symbol("ab")},
		{"c0 01 00", []any{}},
		{"d0 00000004 00000000", []any{}},
		{"d0 00000006 00000001 52 07", []any{uint32(7)}},
		{"d1 00000004 00000000", Map{}},
		{"f0 00000009 00000001 70 00000009", Array{Code: 0x70, Values: []any{uint32(9)}}},
		{"b1 0000012c" + strings.Repeat("78", 300), long},
		{"e0 02 03 40", Array{Code: 0x40, Values: []any{nil, nil, nil}}},
		{"e0 02 02 43", Array{Code: 0x43, Values: []any{uint32(0), uint32(0)}}},
	} {
		b := mustHex(c.hex)
		v, n, err := Decode(b)
		if err != nil || n != len(b) || !reflect.DeepEqual(v, c.want) {
			t.Errorf("Decode(%s) = %#v, %d, %v; want %#v", c.hex[:min(len(c.hex), 40)], v, n, err, c.want)
			continue
		}
		// Encoding again gives a value of the same type.
		enc, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if v2, _, err := Decode(enc); err != nil || !reflect.DeepEqual(v2, v) {
			t.Errorf("%s re-encoded as % x decodes to %#v, %v", c.hex, enc, v2, err)
		}
	}
}

// TestNarrowing checks the size thresholds of the 8-bit forms.
func TestNarrowing(t *testing.T) {
	for _, c := range []struct {
		v    any
		code byte
	}{
		{strings.Repeat("a", 255), codeStr8},
		{strings.Repeat("a", 256), codeStr32},
		{[]byte(strings.Repeat("a", 256)), codeVbin32},
		{Symbol(strings.Repeat("a", 256)), codeSym32},
		{[]any{strings.Repeat("a", 251)}, codeList8},  // 1 + 2 + 251 = 254 bytes after the size
		{[]any{strings.Repeat("a", 252)}, codeList8},  // 255
		{[]any{strings.Repeat("a", 253)}, codeList32}, // 256
		{make([]any, 254), codeList8},                 // 254 nulls: 255 bytes with the count
		{make([]any, 255), codeList32},                // 256
		{Map{{"k", strings.Repeat("a", 300)}}, codeMap32},
		{Array{Code: codeUbyte, Values: bytesAsValues(253)}, codeArray8},
		{Array{Code: codeUbyte, Values: bytesAsValues(254)}, codeArray32},
	} {
		b, err := AppendValue(nil, c.v)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != c.code {
			t.Errorf("%T of %d bytes encoded with 0x%02x, want 0x%02x", c.v, len(b), b[0], c.code)
		}
		v, n, err := Decode(b)
		if err != nil || n != len(b) || !reflect.DeepEqual(v, c.v) {
			t.Errorf("0x%02x value does not round trip: %v", c.code, err)
		}
	}
}

func bytesAsValues(n int) []any {
	v := make([]any, n)
	for i := range v {
		v[i] = uint8(i)
	}
	return v
}

// TestArrayCodes checks how Append picks an array's element code: the
// decoded one when the values fit it, else the narrowest common one.
func TestArrayCodes(t *testing.T) {
	for _, c := range []struct {
		a    Array
		want string
	}{
		{Array{Values: []any{uint32(1), uint32(2)}}, "e0 04 02 52 01 02"},
		{Array{Values: []any{uint32(0), uint32(0)}}, "e0 02 02 43"},
		{Array{Values: []any{uint32(1), uint32(300)}}, "e0 0a 02 70 00000001 0000012c"},
		{Array{Code: 0x52, Values: []any{uint32(300)}}, "e0 06 01 70 0000012c"},
		{Array{Code: 0x70, Values: []any{uint32(1)}}, "e0 06 01 70 00000001"},
		{Array{Values: []any{true, true}}, "e0 04 02 56 01 01"},
		{Array{Code: 0x41, Values: []any{true, true}}, "e0 02 02 41"},
		{Array{Code: 0x41, Values: []any{true, false}}, "e0 04 02 56 01 00"},
		{Array{}, "e0 02 00 40"},
		{Array{Values: []any{[]any{}, []any{uint8(1)}}}, "e0 14 02 d0 00000004 00000000 00000006 00000001 50 01"},
		{Array{Values: []any{"a", strings.Repeat("b", 0)}}, "e0 05 02 a1 01 61 00"},
	} {
		got, err := AppendValue(nil, c.a)
		if err != nil {
			t.Errorf("%#v: %v", c.a, err)
			continue
		}
		if want := mustHex(c.want); !bytes.Equal(got, want) {
			t.Errorf("%#v encoded as % x, want % x", c.a, got, want)
		}
		if _, _, err := Decode(got); err != nil {
			t.Errorf("% x does not decode: %v", got, err)
		}
	}
	for _, a := range []Array{
		{Values: []any{uint32(1), "x"}},
		{Values: []any{Described{uint64(1), "x"}}},
	} {
		if b, err := AppendValue(nil, a); err == nil {
			t.Errorf("%#v encoded as % x, want an error", a, b)
		}
	}
}

func TestAppendValueErrors(t *testing.T) {
	deep := any(uint8(1))
	for range MaxDepth + 1 {
		deep = []any{deep}
	}
	for _, v := range []any{
		int(1), uint(1), time.Now(), map[string]any{}, []string{"a"},
		Described{nil, "x"}, deep, []any{struct{}{}},
	} {
		if b, err := AppendValue(nil, v); err == nil {
			t.Errorf("AppendValue(%T) = % x, want an error", v, b)
		}
	}
}

func TestFloatsKeepTheirBits(t *testing.T) {
	for _, bits := range []uint64{0x7ff8000000000001, 0xfff0000000000000, 0x8000000000000000} {
		enc, _ := AppendValue(nil, math.Float64frombits(bits))
		v, _, err := Decode(enc)
		if err != nil || math.Float64bits(v.(float64)) != bits {
			t.Errorf("double %016x came back as %v, %v", bits, v, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	deepDescribed := bytes.Repeat([]byte{codeDescribed}, MaxDepth+1)
	deepList := []byte{codeNull}
	for range MaxDepth + 1 {
		deepList = append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{codeList32}, uint32(4+len(deepList))), 1), deepList...)
	}
	for _, c := range []struct {
		name string
		hex  string
		err  error
		off  int
	}{
		{"empty", "", ErrTruncated, 0},
		{"unknown code", "ff", ErrUnknownCode, 0},
		{"reserved code", "99", ErrUnknownCode, 0},
		{"short uint", "70 0000", ErrTruncated, 1},
		{"bool 2", "56 02", ErrBadValue, 1},
		{"str8 past end", "a1 05 6162", ErrTruncated, 1},
		{"str32 huge", "b1 ffffffff 61", ErrTruncated, 1},
		{"list8 past end", "c0 05 01 41", ErrTruncated, 1},
		{"list8 size 0", "c0 00 00", ErrSizeMismatch, 1},
		{"list8 count > bytes", "c0 02 05 41", ErrCountTooLarge, 1},
		{"list32 huge count", "d0 00000005 ffffffff 41", ErrCountTooLarge, 1},
		{"list8 extra bytes", "c0 03 01 41 41", ErrSizeMismatch, 1},
		{"list8 element past size", "c0 02 01 52 07", ErrTruncated, 4},
		{"map odd", "c1 02 01 41", ErrBadValue, 1},
		{"array32 huge count", "f0 00000006 ffffffff 70 00", ErrCountTooLarge, 1},
		{"array of nulls too many", "f0 00000005 7fffffff 40", ErrCountTooLarge, 1},
		{"array no constructor", "e0 01 00", ErrTruncated, 3},
		{"array unknown element code", "e0 02 00 ff", ErrUnknownCode, 3},
		{"array described twice", "e0 05 00 00 53 01 00", ErrBadValue, 6},
		{"null descriptor", "00 40 41", ErrBadValue, 1},
		{"described truncated", "00 53", ErrTruncated, 2},
		{"deep described", hexOf(deepDescribed), ErrTooDeep, MaxDepth},
		{"deep list", hexOf(deepList), ErrTooDeep, 9 * MaxDepth},
	} {
		b := mustHex(c.hex)
		_, _, err := Decode(b)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, c.err) || de.Offset != c.off {
			t.Errorf("%s: Decode(% x) = %v, want %v at %d", c.name, b, err, c.err, c.off)
		}
	}
}

func hexOf(b []byte) string {
	var sb strings.Builder
	for _, x := range b {
		sb.WriteString(strings.ToLower(string("0123456789abcdef"[x>>4]) + string("0123456789abcdef"[x&15])))
	}
	return sb.String()
}

// TestDecodeTruncated decodes every proper prefix of every canonical
// encoding: each is an error, never a panic.
func TestDecodeTruncated(t *testing.T) {
	for _, c := range canonical {
		b := mustHex(c.hex)
		for n := range len(b) {
			if v, _, err := Decode(b[:n]); err == nil {
				t.Errorf("%s: %d of %d bytes decoded as %#v", c.name, n, len(b), v)
			} else {
				checkDecodeError(t, err, n)
			}
		}
	}
}

// TestHugeCountsNotAllocated checks that counts the bytes cannot hold
// are refused before anything is allocated for them.
func TestHugeCountsNotAllocated(t *testing.T) {
	for _, h := range []string{
		"d0 00000008 fffffff0 41414141",
		"d1 00000008 fffffff0 41414141",
		"f0 00000008 0fffffff 71 000000",
		"f0 00000005 ffffffff 40",
		"b0 fffffff0 00",
	} {
		b := mustHex(h)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, _, err := Decode(b); err == nil {
				t.Fatalf("% x decoded", b)
			}
		}
		runtime.ReadMemStats(&after)
		// The error and its detail take a few hundred bytes; one slot per
		// element claimed would take gigabytes.
		if n := after.TotalAlloc - before.TotalAlloc; n > 10*1024 {
			t.Errorf("% x: %d bytes allocated to refuse it 10 times", b, n)
		}
	}
}
