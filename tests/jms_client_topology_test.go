package tests

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// startWithJMS is the broker under test with the jms plugin enabled: an
// in-process Warren running the shipped module (which TestReproducible
// keeps equal to the source), or the reference broker (which needs
// rabbitmq_jms_topic_exchange enabled).
func startWithJMS(t *testing.T) *server {
	t.Helper()
	if reference() != "" {
		return start(t)
	}
	s := startWarren(t)
	if err := s.b.EnablePlugin("jms"); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJMSClientTopology builds what RabbitMQ's JMS client builds for
// topic subscribers with selectors: a topic exchange, a per-session
// x-jms-topic exchange bound to it with the topic's key, and each
// subscriber's queue bound to the x-jms-topic exchange with the compiled
// selector. The x-jms-topic exchange routes on the selectors alone, so a
// queue binding's key (here a pattern that would not match, or another
// topic's) plays no part. Run against RabbitMQ 3.10.8 with
// WARREN_REFERENCE_URL, it passes the same.
func TestJMSClientTopology(t *testing.T) {
	s := startWithJMS(t)
	_, ch := confirmChannel(t, s)
	topics := declareExchange(t, s, ch, "topic", "topic", nil)
	selection := declareExchange(t, s, ch, "selection", "x-jms-topic", amqp.Table{"rjms_version": "3.4.0"})
	if err := ch.ExchangeBind(selection, "orders", topics, false, nil); err != nil {
		t.Fatalf("exchange.bind: %v", err)
	}
	selector := func(term string) amqp.Table {
		return amqp.Table{"rjms_erlang_selector": term, "rjms_version": "3.4.0"}
	}
	heavy := declareQueue(t, s, ch, "heavy", nil)
	heavyOtherKey := declareQueue(t, s, ch, "heavy-other-key", nil)
	light := declareQueue(t, s, ch, "light", nil)
	bind(t, ch, heavy, "orders", selection, selector(`{'>',{'ident',<<"weight">>},10}.`))
	bind(t, ch, heavyOtherKey, "invoices.*", selection, selector(`{'>',{'ident',<<"weight">>},10}.`))
	bind(t, ch, light, "orders", selection, selector(`{'not',{'>',{'ident',<<"weight">>},10}}.`))

	pub := func(exchange, key string, h amqp.Table) {
		publishConfirmed(t, ch, exchange, key, amqp.Publishing{Headers: h, Body: []byte(key)})
	}
	pub(topics, "orders", amqp.Table{"weight": int32(11)})
	pub(topics, "orders", amqp.Table{"weight": int32(5)})
	pub(topics, "orders", amqp.Table{"colour": "red"})         // no weight: unknown, nowhere
	pub(topics, "invoices.x", amqp.Table{"weight": int32(50)}) // not this topic
	pub(selection, "anything", amqp.Table{"weight": int32(99)})
	for q, want := range map[string]int{heavy: 2, heavyOtherKey: 2, light: 1} {
		if got := count(t, ch, q); got != want {
			t.Errorf("%s holds %d messages, want %d", q, got, want)
		}
	}
}
