package tests

import (
	"testing"
)

func TestPublishConsumeRoundTrip(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q, err := ch.QueueDeclare("", false, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ch.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q.Name, body("hello"))
	m := receive(t, d)
	if string(m.Body) != "hello" || m.RoutingKey != q.Name {
		t.Fatalf("got %q key %q", m.Body, m.RoutingKey)
	}
}
