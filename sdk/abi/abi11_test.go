package abi

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Version 1.1's additions and the errors that name what went wrong.

func TestTruncatedRecordsNameTheField(t *testing.T) {
	full := AppendDefinition(nil, 1, "/", "orders", "x-content", 0, nil)
	cases := []struct {
		cut   int
		field string
	}{
		{2, "field 'exchange id'"},
		{5, "field 'virtual host'"},
		{8, "field 'exchange name'"},
		{len(full) - 5, "field 'flags'"},
		{len(full) - 2, "field 'arguments'"},
	}
	for _, c := range cases {
		_, err := ReadDefinition(full[:c.cut])
		if !errors.Is(err, ErrShort) || !strings.Contains(err.Error(), "definition record truncated: "+c.field) {
			t.Errorf("cut at %d: %v, want it to name %s", c.cut, err, c.field)
		}
	}
	b := AppendBinding(nil, 1, 2, DestQueue, "q", "key", nil)
	if _, err := ReadBinding(b[:len(b)-6]); err == nil || !strings.Contains(err.Error(), "binding record truncated: field 'binding key'") {
		t.Errorf("binding: %v", err)
	}
	desc := AppendDescription(nil, &Description{Name: "p", Version: "1", Types: []string{"x-a", "x-b"}})
	if _, err := ReadDescription(desc[:len(desc)-3]); err == nil || !strings.Contains(err.Error(), "type 2 of 2") {
		t.Errorf("description: %v", err)
	}
}

func TestUnknownFeatureBitsAreNamed(t *testing.T) {
	desc := AppendDescription(nil, &Description{Name: "p", Version: "1", Features: FeatureBody | 0x30, Types: []string{"x-a"}})
	_, err := ReadDescription(desc)
	if err == nil || !strings.Contains(err.Error(), "unknown feature bits 0x30") || !strings.Contains(err.Error(), "0x4 body") {
		t.Fatalf("%v", err)
	}
}

func TestUnknownStatusAndActionAreNamed(t *testing.T) {
	if _, err := ReadOutput([]byte{7}); !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "7") {
		t.Errorf("status: %v", err)
	}
	if _, err := ReadRouteOutput(unhex(t, "00000000 09")); !errors.Is(err, ErrAction) || !strings.Contains(err.Error(), "9") {
		t.Errorf("action: %v", err)
	}
}

// ABI.md, "Checks (1.1)": a validate answer asking for a validate-as.
func TestValidateAsLayout(t *testing.T) {
	got := AppendValidateAs(AppendValidateAs([]byte{StatusOK}, "direct"), "x-jms-topic")
	want := unhex(t, "00 01 06 646972656374 01 0b 782d6a6d732d746f706963")
	if !slices.Equal(got, want) {
		t.Fatalf("got %x want %x", got, want)
	}
	o, err := ReadOutput(got)
	if err != nil {
		t.Fatal(err)
	}
	types, err := ReadChecks(o.Payload)
	if err != nil || !slices.Equal(types, []string{"direct", "x-jms-topic"}) {
		t.Fatalf("%v %v", types, err)
	}
	if types, err := ReadChecks(nil); err != nil || types != nil {
		t.Fatalf("empty: %v %v", types, err)
	}
	if _, err := ReadChecks([]byte{2, 0}); !errors.Is(err, ErrCheck) {
		t.Fatalf("unknown check: %v", err)
	}
	if _, err := ReadChecks([]byte{1, 9, 'a'}); !errors.Is(err, ErrShort) {
		t.Fatalf("truncated check: %v", err)
	}
}

// ABI.md, "Route": set-headers goes with a via that holds.
func TestSetHeadersAction(t *testing.T) {
	headers := unhex(t, "0000000d 07 782d64656c6179 49 fffffc18") // {x-delay: int32 -1000}
	out := AppendSetHeaders(AppendVia(AppendRouteIDs(nil, nil), 1000, "direct"), headers)
	o, err := ReadRouteOutput(out[1:])
	if err != nil || !o.HasVia || o.Hold != 1000 || !slices.Equal(o.SetHeaders, headers) {
		t.Fatalf("%+v %v", o, err)
	}
	for name, bad := range map[string][]byte{
		"alone":     AppendSetHeaders(AppendRouteIDs(nil, nil), headers),
		"no hold":   AppendSetHeaders(AppendVia(AppendRouteIDs(nil, nil), 0, "direct"), headers),
		"with ids":  AppendSetHeaders(AppendRouteIDs(nil, []uint32{1}), headers),
		"twice":     AppendSetHeaders(AppendSetHeaders(AppendVia(AppendRouteIDs(nil, nil), 5, "direct"), headers), headers),
		"truncated": AppendVia(AppendRouteIDs(nil, nil), 5, "direct")[:12],
	} {
		if _, err := ReadRouteOutput(bad[1:]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
