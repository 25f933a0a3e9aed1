package message

import (
	"testing"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

func withExpiration(t *testing.T, exp string) (uint16, []byte) {
	t.Helper()
	p := protocol.Properties{Flags: protocol.FlagExpiration, Expiration: exp}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Flags, raw
}

// The expirations a client may set, and RabbitMQ 3.10.8's words for the
// ones it refuses (checked against it: the limit is ten years in ms).
func TestExpirationFromClient(t *testing.T) {
	for _, tc := range []struct {
		exp  string
		ttl  int64
		text string // "" when accepted
	}{
		{"0", 0, ""},
		{"-0", 0, ""},
		{"+5", 5, ""},
		{"007", 7, ""},
		{"315360000000", MaxTTL, ""},
		{"315360000001", 0, "invalid expiration '315360000001': {value_too_large,315360000001}"},
		{"1000000000000", 0, "invalid expiration '1000000000000': {value_too_large,1000000000000}"},
		{"9223372036854775807", 0, "invalid expiration '9223372036854775807': {value_too_large,9223372036854775807}"},
		{"99999999999999999999", 0, "invalid expiration '99999999999999999999': {value_too_large,99999999999999999999}"},
		{"-1", 0, "invalid expiration '-1': {value_negative,-1}"},
		{"abc", 0, "invalid expiration 'abc': no_integer"},
		{" 12", 0, "invalid expiration ' 12': no_integer"},
		{"+", 0, "invalid expiration '+': no_integer"},
		{"12abc", 0, `invalid expiration '12abc': {leftover_string,"abc"}`},
		{"1.5", 0, `invalid expiration '1.5': {leftover_string,".5"}`},
	} {
		flags, raw := withExpiration(t, tc.exp)
		m, err := NewFromClient("x", "k", flags, raw, nil)
		if tc.text == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.exp, err)
			} else if m.TTL != tc.ttl {
				t.Errorf("%q: ttl %d, want %d", tc.exp, m.TTL, tc.ttl)
			}
			continue
		}
		want := "PRECONDITION_FAILED - " + tc.text
		e := reply.As(err)
		if err == nil || e.Code != protocol.PreconditionFailed || e.Text != want {
			t.Errorf("%q: got %v, want 406 %q", tc.exp, err, tc.text)
		}
		if _, perr := ParseExpiration(tc.exp); perr == nil || perr.Error() != want {
			t.Errorf("ParseExpiration(%q) = %v", tc.exp, perr)
		}
	}
}

// A message the broker already holds keeps working when its expiration is
// above the limit (an older Warren let it in): it counts as MaxTTL.
func TestHeldMessageExpirationIsCapped(t *testing.T) {
	flags, raw := withExpiration(t, "9223372036854775807")
	m, err := New("x", "k", flags, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.TTL != MaxTTL {
		t.Fatalf("ttl %d, want %d", m.TTL, MaxTTL)
	}
	flags, raw = withExpiration(t, "abc")
	if _, err := New("x", "k", flags, raw, nil); err == nil {
		t.Fatal("New accepted expiration 'abc'")
	}
}

func TestWithHeaders(t *testing.T) {
	p := protocol.Properties{Flags: protocol.FlagHeaders | protocol.FlagMessageID, Headers: protocol.Table{"a": "1", "b": int32(2)}, MessageID: "m"}
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New("x", "k", p.Flags, props, []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	m2, err := m.WithHeaders(protocol.Table{"a": nil, "c": int64(-5)})
	if err != nil {
		t.Fatal(err)
	}
	if h := m2.Headers(); len(h) != 2 || h["b"] != int32(2) || h["c"] != int64(-5) {
		t.Fatalf("headers %v", h)
	}
	if h := m.Headers(); len(h) != 2 || h["a"] != "1" {
		t.Fatalf("the original changed: %v", h)
	}
	q, _ := m2.Properties()
	if q.MessageID != "m" || string(m2.Body) != "body" {
		t.Fatalf("other properties lost: %+v", q)
	}
	m3, err := m2.WithHeaders(protocol.Table{"b": nil, "c": nil})
	if err != nil {
		t.Fatal(err)
	}
	if m3.Flags&protocol.FlagHeaders != 0 || len(m3.Headers()) != 0 {
		t.Fatalf("removing every header leaves flags %#x headers %v", m3.Flags, m3.Headers())
	}
}
