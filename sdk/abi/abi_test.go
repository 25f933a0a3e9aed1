package abi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
)

// The byte layouts below are the examples of ABI.md; if one changes, the
// document must change with it.

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(string(bytes.ReplaceAll([]byte(s), []byte(" "), nil)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDefinitionLayout(t *testing.T) {
	args := unhex(t, "0000000c 03 666f6f 53 00000003 626172") // {foo: "bar"}
	got := AppendDefinition(nil, 7, "/", "orders", "x-content", FlagDurable, args)
	want := unhex(t, "07000000 01 2f 06 6f7264657273 09 782d636f6e74656e74 01 0000000c 03666f6f 5300000003626172")
	if !bytes.Equal(got, want) {
		t.Fatalf("definition\n got %x\nwant %x", got, want)
	}
	d, err := ReadDefinition(got)
	if err != nil || d.Exchange != 7 || string(d.VHost) != "/" || string(d.Name) != "orders" ||
		string(d.Type) != "x-content" || d.Flags != FlagDurable || !bytes.Equal(d.Args, args) {
		t.Fatalf("read back %+v, %v", d, err)
	}
	// Empty arguments are the empty table.
	if d, _ := ReadDefinition(AppendDefinition(nil, None, "v", "n", "t", 0, nil)); !bytes.Equal(d.Args, EmptyTable) || d.Exchange != None {
		t.Fatalf("no args: %+v", d)
	}
}

func TestBindingLayout(t *testing.T) {
	got := AppendBinding(nil, 1, 2, DestExchange, "dest", "a.b", nil)
	want := unhex(t, "01000000 02000000 01 04 64657374 03 612e62 00000000")
	if !bytes.Equal(got, want) {
		t.Fatalf("binding\n got %x\nwant %x", got, want)
	}
	b, err := ReadBinding(got)
	if err != nil || b.Exchange != 1 || b.Binding != 2 || b.DestKind != DestExchange || string(b.DestName) != "dest" || string(b.Key) != "a.b" {
		t.Fatalf("read back %+v, %v", b, err)
	}
}

func TestRemoveAndPolicy(t *testing.T) {
	in := AppendRemove(nil, 3, []uint32{5, 9})
	if !bytes.Equal(in, unhex(t, "03000000 02000000 05000000 09000000")) {
		t.Fatalf("remove %x", in)
	}
	x, ids, err := ReadRemove(in, nil)
	if err != nil || x != 3 || !slices.Equal(ids, []uint32{5, 9}) {
		t.Fatalf("read remove: %d %v %v", x, ids, err)
	}
	if _, _, err := ReadRemove(unhex(t, "03000000 ffffffff"), nil); err == nil {
		t.Fatal("a count past the record decoded")
	}
	if in := AppendPolicy(nil, 3, nil, false); !bytes.Equal(in, unhex(t, "03000000 00")) {
		t.Fatalf("no policy %x", in)
	}
	_, table, err := ReadPolicy(AppendPolicy(nil, 3, nil, true))
	if err != nil || !bytes.Equal(table, EmptyTable) {
		t.Fatalf("empty policy: %x %v", table, err)
	}
}

func TestRouteLayout(t *testing.T) {
	props := []byte{0x01, 0x02}
	body := []byte("{}")
	dst := make([]byte, RouteSize(3, len(props), len(body)))
	n := PutRoute(dst, 4, "k.1", 0x2000, props, body)
	want := unhex(t, "04000000 03 6b2e31 0020 02000000 0102 02000000 7b7d")
	if n != len(dst) || !bytes.Equal(dst, want) {
		t.Fatalf("route\n got %x\nwant %x", dst, want)
	}
	m, err := ReadRoute(dst)
	if err != nil || m.Exchange != 4 || string(m.Key) != "k.1" || m.Flags != 0x2000 || !bytes.Equal(m.Props, props) || !bytes.Equal(m.Body, body) {
		t.Fatalf("read back %+v, %v", m, err)
	}
	for cut := range len(dst) {
		if _, err := ReadRoute(dst[:cut]); err == nil {
			t.Errorf("route cut at %d decoded", cut)
		}
	}
}

func TestOutputs(t *testing.T) {
	o, err := ReadOutput(nil)
	if err != nil || o.Status != StatusOK || o.Payload != nil {
		t.Fatalf("empty output: %+v %v", o, err)
	}
	e := AppendError(nil, 406, "x-foo must be a string")
	if !bytes.Equal(e[:5], unhex(t, "01 9601 1600")) {
		t.Fatalf("error layout %x", e)
	}
	if ex := AppendError(nil, 406, `bad "order" !`); !bytes.Equal(ex, append(unhex(t, "01 9601 0d00"), `bad "order" !`...)) {
		t.Fatalf("ABI.md's error example: %x", ex)
	}
	o, err = ReadOutput(e)
	if err != nil || o.Status != StatusError || o.Code != 406 || string(o.Text) != "x-foo must be a string" {
		t.Fatalf("error: %+v %v", o, err)
	}
	o, err = ReadOutput(AppendFault(nil, "boom"))
	if err != nil || o.Status != StatusFault || string(o.Text) != "boom" {
		t.Fatalf("fault: %+v %v", o, err)
	}
	if _, err := ReadOutput([]byte{9}); !errors.Is(err, ErrStatus) {
		t.Fatalf("bad status: %v", err)
	}
	if _, err := ReadOutput([]byte{StatusError, 0x96}); err == nil {
		t.Fatal("truncated error decoded")
	}
}

func TestRouteOutput(t *testing.T) {
	out := AppendRouteIDs(nil, []uint32{3, 1})
	if !bytes.Equal(out, unhex(t, "00 02000000 03000000 01000000")) {
		t.Fatalf("ids %x", out)
	}
	ro, err := ReadRouteOutput(out[1:])
	if err != nil || ro.Count() != 2 || ro.ID(0) != 3 || ro.ID(1) != 1 || ro.HasVia {
		t.Fatalf("%+v %v", ro, err)
	}
	via := AppendVia(AppendRouteIDs(nil, nil), 1500, "direct")
	if !bytes.Equal(via, unhex(t, "00 00000000 01 dc05000000000000 06 646972656374")) {
		t.Fatalf("via %x", via)
	}
	ro, err = ReadRouteOutput(via[1:])
	if err != nil || !ro.HasVia || ro.Hold != 1500 || string(ro.Via) != "direct" || ro.Count() != 0 {
		t.Fatalf("%+v %v", ro, err)
	}
	for _, c := range []struct {
		p    []byte
		want error
	}{
		{unhex(t, "05000000 01000000"), ErrShort},
		{append(unhex(t, "00000000"), 7), ErrAction},
		{append(via[1:], via[5:]...), ErrViaTwice},
		{append(unhex(t, "01000000 00000000"), via[5:]...), ErrViaIDs},
		{unhex(t, "00000000 01 dc05"), ErrShort},
	} {
		if _, err := ReadRouteOutput(c.p); !errors.Is(err, c.want) {
			t.Errorf("%x: %v, want %v", c.p, err, c.want)
		}
	}
}

func TestDescription(t *testing.T) {
	d := Description{Name: "p", Version: "1.0", Features: FeatureBody, Types: []string{"x-a", "x-b"},
		Settings: []Setting{{Kind: SettingString, Name: "s", Doc: "doc"}}}
	b := AppendDescription(nil, &d)
	want := unhex(t, "01 70 03 312e30 04000000 02 03 782d61 03 782d62 01 53 01 73 0300 646f63")
	if !bytes.Equal(b, want) {
		t.Fatalf("description\n got %x\nwant %x", b, want)
	}
	got, err := ReadDescription(b)
	if err != nil || got.Name != "p" || !slices.Equal(got.Types, d.Types) || got.Settings[0] != d.Settings[0] {
		t.Fatalf("%+v %v", got, err)
	}
	// A later minor version may append fields: ignored.
	if _, err := ReadDescription(append(b, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	b[9] = 0x80 // an unknown feature bit
	if _, err := ReadDescription(b); err == nil {
		t.Fatal("unknown feature accepted")
	}
}

func TestPackResult(t *testing.T) {
	r := PackResult(0x10000, 24)
	if r != 0x0001000000000018 {
		t.Fatalf("%#x", r)
	}
	if p, n := UnpackResult(r); p != 0x10000 || n != 24 {
		t.Fatal(p, n)
	}
}

func FuzzReaders(f *testing.F) {
	f.Add(AppendDefinition(nil, 1, "/", "n", "t", 1, nil))
	f.Add(AppendBinding(nil, 1, 2, 0, "q", "k", EmptyTable))
	f.Add(AppendVia(AppendRouteIDs(nil, []uint32{1}), 5, "direct"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadDefinition(b)
		_, _ = ReadBinding(b)
		_, _, _ = ReadRemove(b, nil)
		_, _, _ = ReadPolicy(b)
		_, _ = ReadRoute(b)
		_, _ = ReadOutput(b)
		_, _ = ReadRouteOutput(b)
		_, _ = ReadDescription(b)
	})
}
