package protocol

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestTableRoundTripAllTypes(t *testing.T) {
	want := allTypesTable()
	b, err := AppendTable(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b) {
		t.Errorf("consumed %d of %d bytes", n, len(b))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip\n got %#v\nwant %#v", got, want)
	}
	again, _ := AppendTable(nil, got)
	if !bytes.Equal(again, b) {
		t.Error("re-encoding differs")
	}
}

func TestTableRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		want := randomTable(r, 1)
		b, err := AppendTable(nil, want)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := DecodeTable(b)
		if err != nil {
			t.Fatal(err)
		}
		if !equalValue(got, want) {
			t.Fatalf("round trip\n got %#v\nwant %#v", got, want)
		}
	}
}

// TestTableBytes checks the encoding against bytes written out by hand:
// sorted keys, RabbitMQ's type octets, big-endian lengths.
func TestTableBytes(t *testing.T) {
	tab := Table{
		"b": true,
		"a": int32(-1),
		"c": []any{uint8(7), nil},
		"d": time.Unix(0x01020304, 0),
		"e": Decimal{Scale: 3, Value: 1000},
	}
	want := mustHex(`00000028
		01 61 49 ffffffff
		01 62 74 01
		01 63 41 00000003 42 07 56
		01 64 54 0000000001020304
		01 65 44 03 000003e8`)
	got, err := AppendTable(nil, tab)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("\n got %x\nwant %x", got, want)
	}
}

func TestTableEncodeConversions(t *testing.T) {
	b, err := AppendTable(nil, Table{"i": 5, "m": map[string]any{"x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{"i": int64(5), "m": Table{"x": "y"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	// Time keeps whole seconds only.
	b, _ = AppendFieldValue(nil, time.Unix(10, 999999999).In(time.FixedZone("X", 3600)))
	v, _, _ := DecodeFieldValue(b)
	if !reflect.DeepEqual(v, time.Unix(10, 0).UTC()) {
		t.Fatalf("time = %v", v)
	}
}

func TestTableEncodeErrors(t *testing.T) {
	_, err := AppendTable(nil, Table{"ok": 1, "outer": Table{"inner": []any{1, uint64(2)}}})
	if err == nil || err.Error() != `protocol: table key "outer": table key "inner": array index 1: unsupported value type uint64` {
		t.Errorf("err = %v", err)
	}
	_, err = AppendTable(nil, Table{strings.Repeat("k", 256): 1})
	if err == nil || !strings.Contains(err.Error(), "longer than 255 bytes") {
		t.Errorf("long key: %v", err)
	}
	cyclic := Table{}
	cyclic["self"] = cyclic
	if _, err := AppendTable(nil, cyclic); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("cyclic table: %v", err)
	}
}

func nestedTables(levels int) []byte {
	// Build from the inside out: a table holding "a" -> table ... -> empty.
	b := []byte{0, 0, 0, 0}
	for range levels - 1 {
		inner := b
		b = []byte{0, 0, 0, 0, 1, 'a', 'F'}
		b = append(b, inner...)
		b[3] = byte(len(b) - 4)
		b[2] = byte((len(b) - 4) >> 8)
	}
	return b
}

func TestTableDepthLimit(t *testing.T) {
	if _, _, err := DecodeTable(nestedTables(64)); err != nil {
		t.Fatalf("64 levels: %v", err)
	}
	_, _, err := DecodeTable(nestedTables(65))
	var se *BadSyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Text, "nested deeper than 64") {
		t.Fatalf("65 levels: %v", err)
	}
}

func TestTableDecodeErrors(t *testing.T) {
	for name, in := range map[string]string{
		"short length":     `000000`,
		"length past end":  `00000005 01 61 56`,
		"key past end":     `00000002 05 61`,
		"missing value":    `00000002 01 61`,
		"unknown type":     `00000003 01 61 5a`,
		"truncated long":   `00000006 01 61 6c 0000`,
		"string past end":  `00000008 01 61 53 00000010 78`,
		"huge string":      `00000008 01 61 53 ffffffff 78`,
		"huge array":       `00000007 01 61 41 ffffffff`,
		"array bad elem":   `00000009 01 61 41 00000002 74`,
		"bytes past end":   `00000007 01 61 78 00000001`,
		"decimal short":    `00000006 01 61 44 000000`,
		"nested bad table": `0000000a 01 61 46 00000003 00 56 00`,
	} {
		_, _, err := DecodeTable(mustHex(in))
		var se *BadSyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: err = %v, want *BadSyntaxError", name, err)
		}
	}
}

func TestDecodeTableEmptyAndConsumed(t *testing.T) {
	tab, n, err := DecodeTable(mustHex(`00000000 ffff`))
	if tab != nil || n != 4 || err != nil {
		t.Fatalf("empty table = %v, %d, %v", tab, n, err)
	}
	// A later duplicate key wins.
	tab, _, _ = DecodeTable(mustHex(`0000000a 01 61 42 01 01 61 42 02 00 56`))
	if !reflect.DeepEqual(tab, Table{"a": uint8(2), "": nil}) {
		t.Fatalf("duplicates: %#v", tab)
	}
}

func TestFieldValueFloatsKeepBits(t *testing.T) {
	nan := math.Float64frombits(0x7ff8000000000123)
	b, _ := AppendFieldValue(nil, nan)
	v, _, _ := DecodeFieldValue(b)
	if math.Float64bits(v.(float64)) != 0x7ff8000000000123 {
		t.Fatalf("NaN bits changed: %x", math.Float64bits(v.(float64)))
	}
}

// TestDecodedTableDoesNotAlias checks that a decoded table survives its
// input buffer being reused, as the reader's is.
func TestDecodedTableDoesNotAlias(t *testing.T) {
	b, _ := AppendTable(nil, Table{"s": "text", "x": []byte("bin")})
	tab, _, _ := DecodeTable(b)
	for i := range b {
		b[i] = 0
	}
	if tab["s"] != "text" || string(tab["x"].([]byte)) != "bin" {
		t.Fatalf("table changed with its input: %#v", tab)
	}
}
