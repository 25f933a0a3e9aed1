package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedFileIsCurrent regenerates methods_gen.go from the spec and
// compares it with the committed file, so the two never drift. Run
// `go generate ./protocol` after changing the generator or the spec.
func TestGeneratedFileIsCurrent(t *testing.T) {
	spec, err := os.ReadFile("../../spec/amqp0-9-1.stripped.extended.xml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../methods_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("protocol/methods_gen.go is stale: run `go generate ./protocol`")
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"routing-key":    "RoutingKey",
		"reserved-1":     "Reserved1",
		"class-id":       "ClassID",
		"no-ack":         "NoAck",
		"update-secret":  "UpdateSecret",
		"frame-min-size": "FrameMinSize",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBitPacking(t *testing.T) {
	f := func(typ string) field { return field{Type: typ} }
	var groups []int
	forEachGroup([]field{
		f("bit"), f("bit"), f("short"),
		f("bit"), f("bit"), f("bit"), f("bit"), f("bit"), f("bit"), f("bit"), f("bit"), f("bit"),
	}, func(bits []field, _ field) { groups = append(groups, len(bits)) })
	want := []int{2, 0, 8, 1}
	if len(groups) != len(want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	for i := range want {
		if groups[i] != want[i] {
			t.Fatalf("groups %v, want %v", groups, want)
		}
	}
}
