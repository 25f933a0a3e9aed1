package tests

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Exchanges: the default and predeclared ones, declare/delete and their
// errors, the internal and auto-delete flags.

func TestDefaultExchangeRoutesByQueueName(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	a := declareQueue(t, s, ch, "a", nil)
	b := declareQueue(t, s, ch, "b", nil)
	da := consume(t, ch, a, true)
	db := consume(t, ch, b, true)
	publish(t, ch, "", a, body("to a"))
	publish(t, ch, "", b, body("to b"))
	if m := receive(t, da); string(m.Body) != "to a" || m.Exchange != "" || m.RoutingKey != a {
		t.Fatalf("a got %q via %q/%q", m.Body, m.Exchange, m.RoutingKey)
	}
	if m := receive(t, db); string(m.Body) != "to b" {
		t.Fatalf("b got %q", m.Body)
	}
	fence(t, ch, "", a, da)
	fence(t, ch, "", b, db)
}

func TestDefaultExchangeRefusesChanges(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	x := declareExchange(t, s, ch, "x", "direct", nil)

	reopen := func() *amqp.Channel {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	expectCode(t, reopen().QueueBind(q, "key", "", false, nil), amqp.AccessRefused)
	expectCode(t, reopen().QueueUnbind(q, q, "", nil), amqp.AccessRefused)
	expectCode(t, reopen().ExchangeDelete("", false, false), amqp.AccessRefused)
	expectCode(t, reopen().ExchangeBind(x, "key", "", false, nil), amqp.AccessRefused)
	expectCode(t, reopen().ExchangeBind("", "key", x, false, nil), amqp.AccessRefused)

	// Even a passive declare of it is refused (RabbitMQ 3.10).
	expectCode(t, reopen().ExchangeDeclarePassive("", "direct", true, false, false, false, nil), amqp.AccessRefused)

	// It is still there and still routes.
	ch = reopen()
	d := consume(t, ch, q, true)
	publish(t, ch, "", q, body("still routes"))
	receive(t, d)
}

func TestPredeclaredExchanges(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	for name, kind := range map[string]string{
		"amq.direct": "direct", "amq.fanout": "fanout", "amq.topic": "topic",
		"amq.headers": "headers", "amq.match": "headers",
	} {
		if err := ch.ExchangeDeclarePassive(name, kind, true, false, false, false, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Redeclaring one with its own properties is a no-op (RabbitMQ
		// checks the reserved prefix only when creating); with others it
		// is 406 as for any exchange.
		if err := ch.ExchangeDeclare(name, kind, true, false, false, false, nil); err != nil {
			t.Fatalf("redeclare %s as it is: %v", name, err)
		}
		ch2, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		other := "fanout"
		if kind == "fanout" {
			other = "direct"
		}
		expectCode(t, ch2.ExchangeDeclare(name, other, true, false, false, false, nil), amqp.PreconditionFailed)
	}
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "k", "amq.direct", nil)
	bind(t, ch, q, "", "amq.fanout", nil)
	bind(t, ch, q, "a.*", "amq.topic", nil)
	bind(t, ch, q, "", "amq.headers", amqp.Table{"h": "v"})
	bind(t, ch, q, "", "amq.match", amqp.Table{"h": "w"})
	d := consume(t, ch, q, true)
	publish(t, ch, "amq.direct", "k", body("direct"))
	publish(t, ch, "amq.fanout", "whatever", body("fanout"))
	publish(t, ch, "amq.topic", "a.b", body("topic"))
	publish(t, ch, "amq.headers", "", amqp.Publishing{Headers: amqp.Table{"h": "v"}, Body: []byte("headers")})
	publish(t, ch, "amq.match", "", amqp.Publishing{Headers: amqp.Table{"h": "w"}, Body: []byte("match")})
	got := bodies(t, d, 5)
	want := []string{"direct", "fanout", "topic", "headers", "match"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, expected %q", got, want)
		}
	}
	ch.QueueUnbind(q, "k", "amq.direct", nil)
	ch.QueueUnbind(q, "", "amq.fanout", nil)
	ch.QueueUnbind(q, "a.*", "amq.topic", nil)
}

func TestReservedExchangePrefix(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	name := "amq." + uniq(t, "")
	s.ownExchange(name)
	expectCode(t, ch.ExchangeDeclare(name, "direct", false, false, false, false, nil), amqp.AccessRefused)
	_, ch = channel(t, s)
	expectCode(t, ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil), amqp.NotFound)
	_, ch = channel(t, s)
	expectCode(t, ch.ExchangeDelete("amq.direct", false, false), amqp.AccessRefused)
}

func TestExchangeDeclarePassive(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	missing := uniq(t, "missing")
	expectCode(t, ch.ExchangeDeclarePassive(missing, "direct", false, false, false, false, nil), amqp.NotFound)

	_, ch = channel(t, s)
	x := declareExchange(t, s, ch, "x", "topic", nil)
	// Passive checks existence only: type and flags are not compared.
	if err := ch.ExchangeDeclarePassive(x, "fanout", true, true, false, false, nil); err != nil {
		t.Fatalf("passive declare of an existing exchange: %v", err)
	}
}

func TestExchangeRedeclare(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	ae := declareExchange(t, s, ch, "ae", "fanout", nil)
	x := declareExchange(t, s, ch, "x", "direct", amqp.Table{"alternate-exchange": ae})

	// The same properties: a no-op.
	if err := ch.ExchangeDeclare(x, "direct", false, false, false, false, amqp.Table{"alternate-exchange": ae}); err != nil {
		t.Fatalf("identical redeclare: %v", err)
	}
	for _, tc := range []struct {
		name                          string
		kind                          string
		durable, autoDelete, internal bool
		args                          amqp.Table
	}{
		{"type", "topic", false, false, false, amqp.Table{"alternate-exchange": ae}},
		{"durable", "direct", true, false, false, amqp.Table{"alternate-exchange": ae}},
		{"auto-delete", "direct", false, true, false, amqp.Table{"alternate-exchange": ae}},
		{"internal", "direct", false, false, true, amqp.Table{"alternate-exchange": ae}},
		{"alternate-exchange", "direct", false, false, false, amqp.Table{"alternate-exchange": ae + ".other"}},
		{"no alternate-exchange", "direct", false, false, false, nil},
	} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		err = ch.ExchangeDeclare(x, tc.kind, tc.durable, tc.autoDelete, tc.internal, false, tc.args)
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Fatalf("redeclare with different %s: %v, expected 406", tc.name, err)
		}
	}
	// Still as first declared.
	ch, _ = c.Channel()
	if err := ch.ExchangeDeclare(x, "direct", false, false, false, false, amqp.Table{"alternate-exchange": ae}); err != nil {
		t.Fatalf("identical redeclare after the failures: %v", err)
	}
}

func TestExchangeUnknownType(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	name := uniq(t, "")
	s.ownExchange(name)
	err := ch.ExchangeDeclare(name, "x-no-such-type", false, false, false, false, nil)
	expectCode(t, err, amqp.CommandInvalid)
	// 503 is a connection error.
	expectClose(t, closed, amqp.CommandInvalid)
	_, ch = channel(t, s)
	expectCode(t, ch.ExchangeDeclarePassive(name, "direct", false, false, false, false, nil), amqp.NotFound)
}

func TestExchangeDeleteIfUnused(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	x := declareExchange(t, s, ch, "x", "fanout", nil)
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "", x, nil)
	expectCode(t, ch.ExchangeDelete(x, true, false), amqp.PreconditionFailed)

	// Bindings where it is the source count; one where it is only the
	// destination does not.
	ch, _ = c.Channel()
	src := declareExchange(t, s, ch, "src", "fanout", nil)
	dst := declareExchange(t, s, ch, "dst", "fanout", nil)
	if err := ch.ExchangeBind(dst, "", src, false, nil); err != nil {
		t.Fatal(err)
	}
	expectCode(t, ch.ExchangeDelete(src, true, false), amqp.PreconditionFailed)
	ch, _ = c.Channel()
	if err := ch.ExchangeDelete(dst, true, false); err != nil {
		t.Fatalf("if-unused delete of an exchange that is only a destination: %v", err)
	}

	// Unbound, it goes.
	if err := ch.QueueUnbind(q, "", x, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(x, true, false); err != nil {
		t.Fatalf("if-unused delete of an unused exchange: %v", err)
	}
	expectCode(t, ch.ExchangeDeclarePassive(x, "fanout", false, false, false, false, nil), amqp.NotFound)
}

// Deleting an exchange removes its bindings; publishing to it then closes
// the channel with 404.
func TestExchangeDelete(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	x := declareExchange(t, s, ch, "x", "fanout", nil)
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "", x, nil)
	if err := ch.ExchangeDelete(x, false, false); err != nil {
		t.Fatal(err)
	}
	// Redeclared, it has no bindings left.
	declareExchange(t, s, ch, "x", "fanout", nil)
	publishConfirmedOn(t, c, x, "", body("nowhere"))
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages routed by a binding of the deleted exchange", n)
	}
	if err := ch.ExchangeDelete(x, false, false); err != nil {
		t.Fatal(err)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	publish(t, ch, x, "", body("to a missing exchange"))
	expectClose(t, closed, amqp.NotFound)
}

// Deleting an exchange that does not exist is not an error (RabbitMQ 3.x).
func TestExchangeDeleteMissing(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	if err := ch.ExchangeDelete(uniq(t, "missing"), false, false); err != nil {
		t.Fatalf("delete of a missing exchange: %v", err)
	}
}

func TestInternalExchange(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	internal := uniq(t, "internal")
	s.ownExchange(internal)
	if err := ch.ExchangeDeclare(internal, "fanout", false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "", internal, nil)

	// Reached through an exchange-to-exchange binding, it routes.
	front := declareExchange(t, s, ch, "front", "fanout", nil)
	if err := ch.ExchangeBind(internal, "", front, false, nil); err != nil {
		t.Fatal(err)
	}
	publishConfirmedOn(t, c, front, "", body("via front"))
	if m := get(t, ch, q); string(m.Body) != "via front" {
		t.Fatalf("got %q", m.Body)
	}

	// Published to directly, it closes the channel with 403.
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	publish(t, ch, internal, "", body("direct"))
	expectClose(t, closed, amqp.AccessRefused)
	ch, _ = c.Channel()
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages reached the internal exchange's queue", n)
	}
}

func TestAutoDeleteExchange(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	declareAD := func(suffix string) string {
		name := uniq(t, suffix)
		s.ownExchange(name)
		if err := ch.ExchangeDeclare(name, "fanout", false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return name
	}
	exists := func(name string) bool {
		probe, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		err = probe.ExchangeDeclarePassive(name, "fanout", false, true, false, false, nil)
		if err == nil {
			probe.Close()
			return true
		}
		if amqpCode(err) != amqp.NotFound {
			t.Fatalf("passive declare %s: %v", name, err)
		}
		return false
	}

	// Never bound: it stays.
	never := declareAD("never")
	if !exists(never) {
		t.Fatal("an auto-delete exchange that never had a binding was deleted")
	}

	// Its last binding to a queue goes: so does it.
	x := declareAD("x")
	q1 := declareQueue(t, s, ch, "q1", nil)
	q2 := declareQueue(t, s, ch, "q2", nil)
	bind(t, ch, q1, "", x, nil)
	bind(t, ch, q2, "", x, nil)
	if err := ch.QueueUnbind(q1, "", x, nil); err != nil {
		t.Fatal(err)
	}
	if !exists(x) {
		t.Fatal("deleted while it still had a binding")
	}
	if err := ch.QueueUnbind(q2, "", x, nil); err != nil {
		t.Fatal(err)
	}
	if exists(x) {
		t.Fatal("auto-delete exchange survived its last binding")
	}

	// A binding goes with its queue, and takes the exchange with it.
	y := declareAD("y")
	bind(t, ch, q1, "", y, nil)
	if _, err := ch.QueueDelete(q1, false, false, false); err != nil {
		t.Fatal(err)
	}
	if exists(y) {
		t.Fatal("auto-delete exchange survived the deletion of its only queue")
	}

	// Bindings where it is the destination do not count; one where it is
	// the source, to another exchange, does.
	z := declareAD("z")
	src := declareExchange(t, s, ch, "src", "fanout", nil)
	dst := declareExchange(t, s, ch, "dst", "fanout", nil)
	if err := ch.ExchangeBind(z, "", src, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeBind(dst, "", z, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeUnbind(z, "", src, false, nil); err != nil {
		t.Fatal(err)
	}
	if !exists(z) {
		t.Fatal("deleted when a binding to it (as destination) went")
	}
	if err := ch.ExchangeUnbind(dst, "", z, false, nil); err != nil {
		t.Fatal(err)
	}
	if exists(z) {
		t.Fatal("auto-delete exchange survived its last exchange-to-exchange binding")
	}
}

// publishConfirmedOn publishes through a fresh confirm-mode channel on c
// and waits for the ack.
func publishConfirmedOn(t testing.TB, c *amqp.Connection, exchange, key string, msg amqp.Publishing) {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, exchange, key, msg)
}
