package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/warrenmq/warren/protocol"
)

func TestOnePolicyAppliesByPriority(t *testing.T) {
	var s Set
	mk := func(name, pattern string, to ApplyTo, prio int) *Policy {
		p, err := New(name, pattern, to, prio, protocol.Table{"max-length": int64(1)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	s.Put(mk("all", ".*", All, 0))
	s.Put(mk("orders", "^orders", Queues, 5))
	s.Put(mk("b-tie", "^orders", Queues, 5))
	s.Put(mk("x", "^orders", Exchanges, 9))
	cases := []struct {
		kind ApplyTo
		name string
		want string
	}{
		{Queues, "orders.eu", "b-tie"}, // equal priority: the name that sorts first
		{Exchanges, "orders.eu", "x"},
		{Queues, "other", "all"},
		{Exchanges, "other", "all"},
	}
	for _, c := range cases {
		if got := s.For(c.kind, c.name); got == nil || got.Name != c.want {
			t.Errorf("%s %s: got %v, want %s", c.kind, c.name, got, c.want)
		}
	}
	if !s.Delete("b-tie") || s.Delete("b-tie") {
		t.Fatal("delete")
	}
	if got := s.For(Queues, "orders.eu"); got.Name != "orders" {
		t.Fatalf("after delete: %s", got.Name)
	}
}

func TestNewValidates(t *testing.T) {
	def := protocol.Table{"message-ttl": int64(1)}
	bad := []struct {
		name, pattern string
		to            ApplyTo
		def           protocol.Table
	}{
		{"", ".*", All, def},
		{"p", "(", All, def},
		{"p", ".*", "topics", def},
		{"p", ".*", All, nil},
		{"p", ".*", All, protocol.Table{"max-lenght": int64(1)}},
	}
	for _, b := range bad {
		if _, err := New(b.name, b.pattern, b.to, 0, b.def); err == nil {
			t.Errorf("accepted %+v", b)
		}
	}
	p, err := New("p", ".*", "", 0, def)
	if err != nil || p.ApplyTo != All {
		t.Fatalf("empty apply-to should mean all: %v %v", p, err)
	}
}

// Definition values are checked as RabbitMQ 3.10.8 checks them; the
// refusal names the key.
func TestNewChecksDefinitionValues(t *testing.T) {
	cases := []struct {
		def protocol.Table
		ok  bool
	}{
		{protocol.Table{"max-length": int64(10)}, true},
		{protocol.Table{"max-length": float64(10)}, true}, // JSON's 10
		{protocol.Table{"max-length": "abc"}, false},
		{protocol.Table{"max-length": 1.5}, false},
		{protocol.Table{"max-length-bytes": int64(-1)}, false},
		{protocol.Table{"message-ttl": int64(-1)}, false},
		{protocol.Table{"message-ttl": int64(0)}, true},
		{protocol.Table{"expires": int64(0)}, false},
		{protocol.Table{"expires": int64(1)}, true},
		{protocol.Table{"delivery-limit": int32(3)}, true},
		{protocol.Table{"overflow": "nope"}, false},
		{protocol.Table{"overflow": "reject-publish-dlx"}, true},
		{protocol.Table{"queue-mode": "lazy"}, true},
		{protocol.Table{"queue-mode": int64(1)}, false},
		{protocol.Table{"dead-letter-exchange": int64(1)}, false},
		{protocol.Table{"alternate-exchange": "ae"}, true},
		{protocol.Table{"max-age": "7D"}, true},
		{protocol.Table{"max-age": "7d"}, false},
		{protocol.Table{"max-age": int64(3600)}, false},
		{protocol.Table{"stream-max-segment-size-bytes": int64(1 << 20)}, true},
		{protocol.Table{"stream-max-segment-size-bytes": "big"}, false},
		// RabbitMQ 3.10.8: "<<\"0s\">> is not a valid max age",
		// "3000000001 is not a valid segment size".
		{protocol.Table{"max-age": "0s"}, false},
		{protocol.Table{"max-age": "0D"}, false},
		{protocol.Table{"max-age": "h"}, false}, // RabbitMQ: 500
		{protocol.Table{"max-age": "99999999999Y"}, true},
		{protocol.Table{"stream-max-segment-size-bytes": int64(3_000_000_001)}, false},
		{protocol.Table{"stream-max-segment-size-bytes": int64(3_000_000_000)}, true},
		{protocol.Table{"stream-max-segment-size-bytes": float64(1 << 62)}, false},
		// Federation's keys, as rabbit_federation_parameters checks them.
		{protocol.Table{"federation-upstream": "east"}, true},
		{protocol.Table{"federation-upstream": int64(1)}, false},
		{protocol.Table{"federation-upstream-set": "all"}, true},
		{protocol.Table{"federation-upstream-pattern": "^e"}, true},
		{protocol.Table{"federation-upstream-pattern": "(("}, false},
		{protocol.Table{"federation-upstream": "east", "federation-upstream-set": "all"}, false},
	}
	for _, c := range cases {
		_, err := New("p", ".*", All, 0, c.def)
		if (err == nil) != c.ok {
			t.Errorf("%v: err %v, want ok=%v", c.def, err, c.ok)
		}
		for k := range c.def {
			if err != nil && !strings.Contains(err.Error(), k) {
				t.Errorf("%v: %v does not name %s", c.def, err, k)
			}
		}
	}
}

// A stored policy comes back whatever a check made stricter since says of
// its values; its name, pattern and apply-to are still checked.
func TestRestoreKeepsWhatWasAccepted(t *testing.T) {
	def := protocol.Table{"max-age": "0s", "dead-letter-exchange": "dlx"}
	if _, err := New("p", ".*", Queues, 0, def); err == nil {
		t.Fatal("New took max-age 0s")
	}
	p, err := Restore("p", ".*", Queues, 0, def)
	if err != nil || p.Definition["dead-letter-exchange"] != "dlx" {
		t.Fatalf("Restore: %v, %v", p, err)
	}
	if _, err := Restore("p", "(", Queues, 0, def); err == nil {
		t.Fatal("Restore took a bad pattern")
	}
}

// An operator policy takes limits only; a queue under both kinds of
// policy gets their keys together, and the lower of two numbers.
func TestOperatorPolicies(t *testing.T) {
	for _, def := range []protocol.Table{
		{"dead-letter-exchange": "x"}, {"overflow": "reject-publish"}, {"max-length": "ten"}, {"expires": int64(0)},
	} {
		if _, err := NewOperator("op", ".*", Queues, 0, def); err == nil {
			t.Errorf("operator policy %v accepted", def)
		}
	}
	op, err := NewOperator("op", ".*", Queues, 0, protocol.Table{"max-length": int64(10), "message-ttl": int64(5000)})
	if err != nil || !op.Operator {
		t.Fatalf("%+v, %v", op, err)
	}
	user, err := New("p", ".*", Queues, 0, protocol.Table{"max-length": int64(20), "message-ttl": int32(1000), "dead-letter-exchange": "dlx"})
	if err != nil {
		t.Fatal(err)
	}
	got := Effective(user, op)
	want := protocol.Table{"max-length": int64(10), "message-ttl": int32(1000), "dead-letter-exchange": "dlx"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("effective %v, want %v", got, want)
	}
	if fmt.Sprint(Effective(nil, op)) != fmt.Sprint(op.Definition) || fmt.Sprint(Effective(user, nil)) != fmt.Sprint(user.Definition) || Effective(nil, nil) != nil {
		t.Fatal("effective of one policy is not its definition")
	}
	if len(user.Definition) != 3 || user.Definition["max-length"] != int64(20) {
		t.Fatalf("Effective changed the user's definition: %v", user.Definition)
	}
}
