package tests

import (
	"fmt"
	"math"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
)

// Expirations and queue TTLs above ten years (315360000000 ms) are refused
// with 406, in RabbitMQ's words; ten years itself is accepted.

func TestExpirationLimit(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishConfirmed(t, ch, "", q, amqp.Publishing{Expiration: "315360000000", Body: []byte("ten years")})
	for _, exp := range []string{"315360000001", "10000000000000", "9223372036854775807"} {
		pch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		closed := pch.NotifyClose(make(chan *amqp.Error, 1))
		publish(t, pch, "", q, amqp.Publishing{Expiration: exp, Body: []byte("too long")})
		e := expectClose(t, closed, amqp.PreconditionFailed)
		// RabbitMQ wraps very long reason terms over two lines; compare the
		// ones it writes on one.
		want := fmt.Sprintf("PRECONDITION_FAILED - invalid expiration '%s': {value_too_large,%s}", exp, exp)
		if len(exp) < 19 && e.Reason != want {
			t.Fatalf("expiration %s: %q, want %q", exp, e.Reason, want)
		}
	}
	if n := count(t, ch, q); n != 1 {
		t.Fatalf("%d messages in the queue, want the ten-year one alone", n)
	}
}

func TestQueueTTLArgumentLimits(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	for _, arg := range []string{"x-message-ttl", "x-expires"} {
		declareQueue(t, s, ch, arg+"-ten-years", amqp.Table{arg: int64(315360000000)})
		for _, v := range []int64{315360000001, 1e13, math.MaxInt64} {
			name := uniq(t, fmt.Sprintf("%s-%d", arg, v))
			s.ownQueue(name)
			_, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{arg: v})
			want := fmt.Sprintf("PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/': {value_too_large,%d}", arg, name, v)
			if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.PreconditionFailed || e.Reason != want {
				t.Fatalf("%s %d: got %v, want 406 %q", arg, v, err, want)
			}
			if ch, err = c.Channel(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// max_connections counts connections past connection.open. Sockets that
// never speak, however many, do not lock clients out; the connection over
// the limit is refused at connection.open with 530 NOT_ALLOWED, in the
// words RabbitMQ uses for its vhost and user connection limits.
func TestMaxConnectionsCountsOpenedConnections(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.Limits.MaxConnections = 2 })
	for i := 0; i < 3; i++ {
		rawDial(t, s) // connected, silent
	}
	dial(t, s)
	dial(t, s)

	r := rawDial(t, s)
	r.startHandshake(defaultHandshake())
	r.expect(10, 30)
	r.method(0, 10, 31, tuneOk(2047, 131072, 0))
	r.method(0, 10, 40, connectionOpen("/"))
	const want = "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (2) is reached"
	if text := r.expectConnectionClose(amqp.NotAllowed); text != want {
		t.Fatalf("got %q, want %q", text, want)
	}
	r.expectHangup(5 * time.Second)
}
