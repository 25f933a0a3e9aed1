package protocol

import (
	"bytes"
	"testing"
)

// checkRawTable checks that the in-place reader of data agrees with its
// decoding (tab, err): the same tables are refused, and every key reads the
// value the decoded table holds, its last entry.
func checkRawTable(t *testing.T, data []byte, tab Table, decodeErr error) {
	t.Helper()
	raw, err := ScanTable(data)
	if len(data) == 0 {
		return // DecodeTable refuses what ScanTable reads as the empty table
	}
	if (err != nil) != (decodeErr != nil) {
		t.Fatalf("ScanTable error %v, DecodeTable error %v", err, decodeErr)
	}
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for f := raw.Fields(); ; {
		key, value, ok := f.Next()
		if !ok {
			break
		}
		want, ok := tab[string(key)]
		if !ok {
			t.Fatalf("entry %q is not in the decoded table", key)
		}
		if f.Later(key) {
			continue
		}
		if seen[string(key)] {
			t.Fatalf("Later missed a repeat of %q", key)
		}
		seen[string(key)] = true
		got, _, err := DecodeFieldValue(value)
		if err != nil || !equalValue(got, want) {
			t.Fatalf("entry %q reads %#v (%v), decoded %#v", key, got, err, want)
		}
		looked, ok := raw.Lookup(string(key))
		if !ok || !bytes.Equal(looked, value) {
			t.Fatalf("Lookup(%q) = %x, %v; the last entry is %x", key, looked, ok, value)
		}
		if text, ok := RawText(value); ok {
			if s, isText := TextValue(want); !isText || s != string(text) {
				t.Fatalf("RawText of %q = %q, decoded %#v", key, text, want)
			}
		} else if _, isText := TextValue(want); isText {
			t.Fatalf("RawText of %q missed the text %#v", key, want)
		}
	}
	if len(seen) != len(tab) {
		t.Fatalf("%d keys read in place, %d decoded", len(seen), len(tab))
	}
}

func TestRawTableAgreesWithDecodeTable(t *testing.T) {
	all, err := AppendTable(nil, allTypesTable())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"all types":     all,
		"empty":         mustHex(`00000000`),
		"repeated keys": mustHex(`00000010 01 61 42 01 01 62 53 00000001 78 01 61 42 02`),
		"nested":        nestedTables(64),
		"too deep":      nestedTables(65),
		"unknown type":  mustHex(`00000003 01 61 5a`),
		"bad nested":    mustHex(`0000000a 01 61 46 00000003 00 56 00`),
		"short":         mustHex(`000000`),
		"bytes after":   mustHex(`00000003 01 61 56 ffff`),
	} {
		t.Run(name, func(t *testing.T) {
			tab, _, err := DecodeTable(data)
			checkRawTable(t, data, tab, err)
		})
	}
}

func TestRawTableLookup(t *testing.T) {
	raw, err := ScanTable(mustHex(`00000010 01 61 42 01 01 62 53 00000001 78 01 61 42 02`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := raw.Lookup("a"); !ok || !bytes.Equal(v, []byte{'B', 2}) {
		t.Fatalf(`Lookup("a") = %x, %v; want the last entry, 4202`, v, ok)
	}
	if v, ok := raw.Lookup("b"); !ok {
		t.Fatal(`Lookup("b") found nothing`)
	} else if text, ok := RawText(v); !ok || string(text) != "x" {
		t.Fatalf(`RawText of "b" = %q, %v`, text, ok)
	}
	if _, ok := raw.Lookup("c"); ok {
		t.Fatal(`Lookup("c") found an absent key`)
	}
	if _, ok := RawText([]byte{'S', 0, 0, 0, 9, 'x'}); ok {
		t.Fatal("RawText read past a value's end")
	}
}

func TestRawTableAllocatesNothing(t *testing.T) {
	data, err := AppendTable(nil, Table{"region": "emea", "key": "k42", "n": int32(7), "t": Table{"a": []any{"b"}}})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		raw, err := ScanTable(data)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := raw.Lookup("region")
		if text, _ := RawText(v); string(text) != "emea" {
			t.Fatal("region not found")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations reading a table in place", allocs)
	}
}
