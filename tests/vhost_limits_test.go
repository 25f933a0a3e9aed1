package tests

import (
	"errors"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Vhost limits set through the management API: max-queues refuses the
// next new queue (a redeclare of one there still answers), max-connections
// the next connection, each in RabbitMQ 3.10.8's words; cleared, they
// allow again. Against the reference too (WARREN_REFERENCE_ADMIN_URL).
func TestVHostLimits(t *testing.T) {
	m := startMgmt(t)
	limit := "/api/vhost-limits/" + m.v()
	m.expectNotFound("GET", "/api/vhost-limits/"+esc(uniq(t, "no-such-vhost")))
	m.expect("PUT", limit+"/max-queues", `{"value":2}`, 204)
	m.expect("PUT", limit+"/max-connections", `{"value":1}`, 204)
	var list []struct {
		VHost string
		Value map[string]int64
	}
	m.expect("GET", limit, "", 200).json(t, &list)
	if len(list) != 1 || list[0].VHost != m.vhost || list[0].Value["max-queues"] != 2 || list[0].Value["max-connections"] != 1 {
		t.Fatalf("listed %+v", list)
	}
	m.expectError(m.call("PUT", limit+"/max-nothing", `{"value":3}`), 400, "bad_request",
		"Validation failed\n\nUnrecognised terms [{<<\"max-nothing\">>,3}] in limits\n")

	c, ch := m.channel()
	for i := range 2 {
		if _, err := ch.QueueDeclare(fmt.Sprintf("lim-q%d", i), false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare("lim-q0", false, true, false, false, nil); err != nil {
		t.Fatalf("a redeclare at the limit: %v", err)
	}
	_, err := ch.QueueDeclare("lim-q2", false, true, false, false, nil)
	var e *amqp.Error
	want := "PRECONDITION_FAILED - cannot declare queue 'lim-q2': queue limit in vhost '" + m.vhost + "' (2) is reached"
	if !errors.As(err, &e) || e.Code != 406 || e.Reason != want {
		t.Errorf("a queue over the limit: %v, want 406 %q", err, want)
	}
	r := rawDial(t, m.s)
	o := defaultHandshake()
	r.startHandshake(o)
	r.expect(10, 30)
	r.method(0, 10, 31, tuneOk(2047, 131072, 0))
	r.method(0, 10, 40, connectionOpen(m.vhost))
	want = "NOT_ALLOWED - access to vhost '" + m.vhost + "' refused for user 'guest': connection limit (1) is reached"
	if text := r.expectConnectionClose(amqp.NotAllowed); text != want {
		t.Errorf("a connection over the limit: %q, want %q", text, want)
	}
	c.Close()

	m.expect("DELETE", limit+"/max-connections", "", 204)
	m.expect("DELETE", limit+"/max-queues", "", 204)
	c2, err := amqp.Dial(m.amqpURL())
	if err != nil {
		t.Fatalf("a connection once the limit is cleared: %v", err)
	}
	defer c2.Close()
	ch2, err := c2.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := ch2.QueueDeclare(fmt.Sprintf("lim-q%d", i), false, true, false, false, nil); err != nil {
			t.Fatalf("a queue once the limit is cleared: %v", err)
		}
	}
}
