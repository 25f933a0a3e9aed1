package tests

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/protocol"
)

// Policies are set through the admin API (see cmd/warrenctl's tests); here
// the broker's own method is called and the effect observed over AMQP.

// Seed 001: rabbitmqctl set_policy DLX ".*" '{"dead-letter-exchange":"my-dlx"}' --apply-to queues
func TestPolicyDeadLetterExchange(t *testing.T) {
	s := startWarren(t)
	_, ch := confirmChannel(t, s)
	if err := ch.ExchangeDeclare("my-dlx", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	dead := declareQueue(t, s, ch, "dead", nil)
	bind(t, ch, dead, "", "my-dlx", nil)
	work := declareQueue(t, s, ch, "work", nil)
	if err := s.b.SetPolicy("/", "DLX", "work", policy.Queues, 0, protocol.Table{"dead-letter-exchange": "my-dlx"}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", work, body("rejected"))
	m, ok, err := ch.Get(work, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := m.Reject(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message to reach the policy's dead-letter exchange", func() bool { return count(t, ch, dead) == 1 })
	got := get(t, ch, dead)
	deaths, _ := got.Headers["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "rejected" {
		t.Fatalf("x-death %v", got.Headers["x-death"])
	}

	// The queue's own argument wins over the policy.
	if err := ch.ExchangeDeclare("own-dlx", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	own := declareQueue(t, s, ch, "own", nil)
	bind(t, ch, own, "", "own-dlx", nil)
	work2 := declareQueue(t, s, ch, "work2", amqp.Table{"x-dead-letter-exchange": "own-dlx"})
	if err := s.b.SetPolicy("/", "DLX2", "work2", policy.Queues, 0, protocol.Table{"dead-letter-exchange": "my-dlx"}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", work2, body("x"))
	m, ok, err = ch.Get(work2, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if err := m.Reject(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the argument's dead-letter exchange", func() bool { return count(t, ch, own) == 1 })
}

func TestPolicyLimitsTakeTheLowerValue(t *testing.T) {
	s := startWarren(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "limited", amqp.Table{"x-max-length": int32(5)})
	if err := s.b.SetPolicy("/", "cap", "limited", policy.Queues, 0, protocol.Table{"max-length": float64(2)}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c", "d"} {
		publishConfirmed(t, ch, "", q, body(b))
	}
	if got := drain(t, ch, q); len(got) != 2 || got[0] != "c" {
		t.Fatalf("got %v, want the last two (max-length 2 from the policy, drop-head)", got)
	}
	// Removing the policy restores the argument's limit.
	if err := s.b.ClearPolicy("/", "cap"); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"a", "b", "c", "d"} {
		publishConfirmed(t, ch, "", q, body(b))
	}
	if got := drain(t, ch, q); len(got) != 4 {
		t.Fatalf("got %v after the policy went", got)
	}
}

// An operator policy caps the user's: of a limit both set, the lower one
// is in force, whichever sets it (TestTopologySurvivesRestart has it
// outlive a restart).
func TestOperatorPolicyCapsTheUsersPolicy(t *testing.T) {
	s := startWarren(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "capped", nil)
	fill := func() []string {
		t.Helper()
		for _, b := range []string{"a", "b", "c", "d", "e", "f"} {
			publishConfirmed(t, ch, "", q, body(b))
		}
		return drain(t, ch, q)
	}
	if err := s.b.SetPolicy("/", "mine", "capped$", policy.Queues, 0, protocol.Table{"max-length": int64(4)}); err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetOperatorPolicy("/", "cap", "capped$", policy.Queues, 0, protocol.Table{"max-length": int64(2)}); err != nil {
		t.Fatal(err)
	}
	if got := fill(); len(got) != 2 || got[0] != "e" {
		t.Fatalf("got %v, want the last two (the operator's max-length 2 below the user's 4)", got)
	}
	if err := s.b.SetOperatorPolicy("/", "cap", "capped$", policy.Queues, 0, protocol.Table{"max-length": int64(5)}); err != nil {
		t.Fatal(err)
	}
	if got := fill(); len(got) != 4 {
		t.Fatalf("got %v, want four (the user's max-length 4 below the operator's 5)", got)
	}
	if err := s.b.SetOperatorPolicy("/", "cap", "capped$", policy.Queues, 0, protocol.Table{"dead-letter-exchange": "x"}); err == nil {
		t.Fatal("an operator policy took dead-letter-exchange")
	}
	if err := s.b.ClearPolicy("/", "mine"); err != nil {
		t.Fatal(err)
	}
	if got := fill(); len(got) != 5 {
		t.Fatalf("got %v, want five (the operator's max-length 5 alone)", got)
	}
	if err := s.b.ClearOperatorPolicy("/", "cap"); err != nil {
		t.Fatal(err)
	}
	if got := fill(); len(got) != 6 {
		t.Fatalf("got %v after both policies went", got)
	}
}

func TestPolicyPriorityPicksOne(t *testing.T) {
	s := startWarren(t)
	_, ch := confirmChannel(t, s)
	for _, x := range []string{"ae-low", "ae-high", "main"} {
		if err := ch.ExchangeDeclare(x, "fanout", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	// main is fanout with no bindings: everything is unroutable there.
	low := declareQueue(t, s, ch, "low", nil)
	high := declareQueue(t, s, ch, "high", nil)
	bind(t, ch, low, "", "ae-low", nil)
	bind(t, ch, high, "", "ae-high", nil)
	if err := s.b.SetPolicy("/", "low", ".*", policy.Exchanges, 1, protocol.Table{"alternate-exchange": "ae-low"}); err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetPolicy("/", "high", "^main$", policy.Exchanges, 10, protocol.Table{"alternate-exchange": "ae-high"}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "main", "", body("m"))
	if count(t, ch, high) != 1 || count(t, ch, low) != 0 {
		t.Fatal("the higher-priority policy did not win")
	}
}
