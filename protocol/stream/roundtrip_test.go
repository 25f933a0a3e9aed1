package stream

import (
	"reflect"
	"testing"
)

// TestRoundTrip encodes every command and decodes it back to an equal value.
func TestRoundTrip(t *testing.T) {
	for _, c := range allCommands() {
		t.Run(c.Key().String(), func(t *testing.T) {
			frame := AppendFrame([]byte("prefix"), c)
			body := frameBody(t, frame[len("prefix"):])
			got, err := Decode(body)
			if err != nil {
				t.Fatalf("decode %#v: %v", c, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, c)
			}
			if got.Key() != c.Key() {
				t.Fatalf("key %v, want %v", got.Key(), c.Key())
			}
		})
	}
}

// TestEveryKeyCovered checks that the round-trip table holds every
// command the decoder knows, and every version of it.
func TestEveryKeyCovered(t *testing.T) {
	type kv struct {
		k Key
		v uint16
	}
	seen := map[kv]bool{}
	for _, c := range allCommands() {
		body := c.Append(nil)
		seen[kv{c.Key(), uint16(body[2])<<8 | uint16(body[3])}] = true
	}
	for k, d := range decoders {
		for v := uint16(1); v <= d.maxVersion; v++ {
			if !seen[kv{k, v}] {
				t.Errorf("no round-trip case for %v version %d", k, v)
			}
		}
	}
	for c := KeyDeclarePublisher; c <= KeyResolveOffsetSpec; c++ {
		if _, ok := decoders[c]; !ok {
			t.Errorf("no decoder for %v", c)
		}
	}
}

// TestKeyString checks the names used in errors.
func TestKeyString(t *testing.T) {
	for k, want := range map[Key]string{
		KeySubscribe:               "Subscribe (0x0007)",
		KeySubscribe | ResponseBit: "SubscribeResponse (0x8007)",
		KeyResolveOffsetSpec:       "ResolveOffsetSpec (0x001f)",
		0x0020:                     "unknown (0x0020)",
		ResponseBit:                "unknown (0x8000)",
	} {
		if got := k.String(); got != want {
			t.Errorf("%#04x: %q, want %q", uint16(k), got, want)
		}
	}
}
