package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// Quorum queues on a node without a cluster (a Raft group of one), end to
// end. Each test but the restart also runs against RabbitMQ 3.10.8
// (WARREN_REFERENCE_URL).

var quorumArgs = amqp.Table{"x-queue-type": "quorum"}

func withQuorum(extra amqp.Table) amqp.Table {
	t := amqp.Table{"x-queue-type": "quorum"}
	for k, v := range extra {
		t[k] = v
	}
	return t
}

// declareQuorum declares a durable quorum queue named after the test.
func declareQuorum(t testing.TB, s *server, ch *amqp.Channel, suffix string, extra amqp.Table) string {
	t.Helper()
	name := uniq(t, suffix)
	s.ownQueue(name)
	if _, err := ch.QueueDeclare(name, true, false, false, false, withQuorum(extra)); err != nil {
		t.Fatalf("queue.declare %s: %v", name, err)
	}
	return name
}

// expectRefusal checks a channel error's code and that its text says
// what RabbitMQ's says.
func expectRefusal(t *testing.T, err error, code int, text string) {
	t.Helper()
	expectCode(t, err, code)
	if e := err.(*amqp.Error); !strings.Contains(e.Reason, text) {
		t.Fatalf("reply text %q does not say %q", e.Reason, text)
	}
}

func TestQuorumDeclareRules(t *testing.T) {
	s := start(t)
	c, _ := channel(t, s)
	name := uniq(t, "")
	cases := []struct {
		name                           string
		durable, autoDelete, exclusive bool
		args                           amqp.Table
		code                           int
		text                           string
	}{
		{name + ".nd", false, false, false, quorumArgs, amqp.PreconditionFailed, "invalid property 'non-durable' for queue '" + name + ".nd'"},
		{name + ".ad", true, true, false, quorumArgs, amqp.PreconditionFailed, "invalid property 'auto-delete'"},
		{name + ".ex", true, false, true, quorumArgs, amqp.PreconditionFailed, "invalid property 'exclusive-owner'"},
		{"", true, false, false, quorumArgs, amqp.PreconditionFailed, "Cannot declare a server-named queue for type rabbit_quorum_queue"},
		{name + ".prio", true, false, false, withQuorum(amqp.Table{"x-max-priority": int32(5)}), amqp.PreconditionFailed,
			"invalid arg 'x-max-priority' for queue '" + name + ".prio' in vhost '/' of queue type rabbit_quorum_queue"},
		{name + ".lazy", true, false, false, withQuorum(amqp.Table{"x-queue-mode": "lazy"}), amqp.PreconditionFailed, "invalid arg 'x-queue-mode'"},
		{name + ".size", true, false, false, withQuorum(amqp.Table{"x-quorum-initial-group-size": int32(0)}), amqp.PreconditionFailed, "{value_zero,0}"},
		{name + ".size2", true, false, false, withQuorum(amqp.Table{"x-quorum-initial-group-size": "x"}), amqp.PreconditionFailed, "expected integer, got longstr"},
		{name + ".dls", true, false, false, withQuorum(amqp.Table{"x-dead-letter-strategy": "foo"}), amqp.PreconditionFailed, "invalid_dlx_strategy"},
		{name + ".loc", true, false, false, withQuorum(amqp.Table{"x-queue-leader-locator": "foo"}), amqp.PreconditionFailed, "invalid_queue_locator_arg"},
		{name + ".type", true, false, false, amqp.Table{"x-queue-type": "foo"}, amqp.PreconditionFailed, "unsupported queue type 'foo'"},
	}
	for _, tc := range cases {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		s.ownQueue(tc.name)
		_, err = ch.QueueDeclare(tc.name, tc.durable, tc.autoDelete, tc.exclusive, false, tc.args)
		expectRefusal(t, err, tc.code, tc.text)
	}

	// Accepted: the arguments a quorum queue takes.
	ch, _ := c.Channel()
	declareQuorum(t, s, ch, "ok", amqp.Table{"x-quorum-initial-group-size": int32(3), "x-queue-leader-locator": "balanced",
		"x-dead-letter-strategy": "at-most-once", "x-delivery-limit": int32(5), "x-max-length": int32(100),
		"x-overflow": "reject-publish", "x-message-ttl": int32(60000), "x-single-active-consumer": true})

	// Redeclares with another type, or none, are inequivalent.
	q := declareQuorum(t, s, ch, "type", nil)
	_, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	expectRefusal(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type' for queue '"+q+"' in vhost '/'")
	ch, _ = c.Channel()
	_, err = ch.QueueDeclare(q, true, false, false, false, nil)
	expectRefusal(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type'")
	ch, _ = c.Channel()
	classic := uniq(t, "classic")
	s.ownQueue(classic)
	if _, err := ch.QueueDeclare(classic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDeclare(classic, true, false, false, false, quorumArgs)
	expectRefusal(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type'")

	// The same declare again is fine, and a passive one finds it.
	ch, _ = c.Channel()
	if _, err := ch.QueueDeclare(q, true, false, false, false, quorumArgs); err != nil {
		t.Fatalf("redeclare: %v", err)
	}
	if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
		t.Fatalf("passive: %v", err)
	}
}

// publishMany publishes n messages "0".."n-1" and waits for every
// confirm; it returns how many were nacked.
func publishMany(t testing.TB, ch *amqp.Channel, exchange, key string, n int, msg func(i int) amqp.Publishing) int {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := range n {
		p := amqp.Publishing{Body: []byte(fmt.Sprint(i))}
		if msg != nil {
			p = msg(i)
		}
		if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, p); err != nil {
			t.Fatal(err)
		}
	}
	nacked := 0
	for range n {
		select {
		case c := <-confirms:
			if !c.Ack {
				nacked++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a confirm did not come within 10s")
		}
	}
	return nacked
}

func TestQuorumPublishConsumeSettle(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 50, nil); nacked != 0 {
		t.Fatalf("%d publishes nacked", nacked)
	}
	ok, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil || ok.Messages != 50 {
		t.Fatalf("passive declare: %+v %v", ok, err)
	}

	// basic.get takes the head, with x-delivery-count 0 (RabbitMQ 3.10.8
	// puts it on every get, and on a consumer's delivery once the message
	// came back); a nack with requeue puts it at the back (RabbitMQ's
	// quorum queues do; classic queues put it back in its place), with
	// x-delivery-count.
	d, got, err := ch.Get(q, false)
	if err != nil || !got || string(d.Body) != "0" || d.MessageCount != 49 {
		t.Fatalf("get: %v %v %q count %d", got, err, d.Body, d.MessageCount)
	}
	if n, ok := d.Headers["x-delivery-count"]; !ok || n != int64(0) {
		t.Fatalf("a first get's x-delivery-count: %v", d.Headers)
	}
	if err := d.Nack(false, true); err != nil {
		t.Fatal(err)
	}
	// The nack is asynchronous: the consumer below, on another channel,
	// starts once the queue has the message back.
	waitReady(t, ch, q, 50)

	consumer, _ := c.Channel()
	if err := consumer.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := consumer.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 51; i++ {
		m := receive(t, deliveries)
		if i == 50 {
			if string(m.Body) != "0" || !m.Redelivered || m.Headers["x-delivery-count"] != int64(1) {
				t.Fatalf("the requeued message came back as %q redelivered=%v headers %v", m.Body, m.Redelivered, m.Headers)
			}
			break
		}
		if string(m.Body) != fmt.Sprint(i) || m.Redelivered {
			t.Fatalf("delivery %d: %q redelivered=%v", i, m.Body, m.Redelivered)
		}
		if _, has := m.Headers["x-delivery-count"]; has {
			t.Fatalf("first delivery %d carries x-delivery-count", i)
		}
		if i < 41 {
			m.Ack(false)
		}
	}
	// 10 unacked, within the prefetch; recover gives them back.
	if err := consumer.Cancel("", false); err != nil {
		t.Fatal(err)
	}
	consumer.Close()
	waitReady(t, ch, q, 10)
	n, err := ch.QueuePurge(q, false)
	if err != nil || n != 10 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if n, err := ch.QueueDelete(q, false, false, false); err != nil || n != 0 {
		t.Fatalf("delete: %d %v", n, err)
	}
	_, err = ch.QueueDeclarePassive(q, true, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
}

// waitReady waits until the queue has n messages ready.
func waitReady(t testing.TB, ch *amqp.Channel, q string, n int) {
	t.Helper()
	got := 0
	if !poll.Within(5*time.Second, func() bool {
		ok, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = ok.Messages
		return got == n
	}) {
		t.Fatalf("%s has %d messages ready, want %d", q, got, n)
	}
}

// A message given back more often than x-delivery-limit is dead-lettered
// with reason delivery_limit.
func TestQuorumDeliveryLimit(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQuorum(t, s, ch, "", amqp.Table{"x-delivery-limit": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	publish(t, ch, "", q, body("m"))
	for i := range 2 {
		d := getOne(t, ch, q)
		if i == 1 && d.Headers["x-delivery-count"] != int64(1) {
			t.Fatalf("second delivery's headers %v", d.Headers)
		}
		d.Reject(true)
	}
	d := getOne(t, ch, dlq)
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "delivery_limit" || deaths[0].(amqp.Table)["queue"] != q {
		t.Fatalf("dead letter's x-death %v", d.Headers["x-death"])
	}
}

// A basic.get right after a nack or reject with requeue on the same
// channel finds the message back: a channel's commands reach the queue's
// log in the order it sent them (RabbitMQ 3.10.8: 20 of 20 rounds).
func TestQuorumGetAfterRequeue(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 1, nil); nacked != 0 {
		t.Fatal("the publish was nacked")
	}
	d := getOne(t, ch, q)
	for round := range 20 {
		var err error
		if round%2 == 0 {
			err = d.Nack(false, true)
		} else {
			err = d.Reject(true)
		}
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if d, ok, err = ch.Get(q, false); err != nil || !ok {
			t.Fatalf("round %d: the get right after the requeue found nothing (%v)", round, err)
		}
		if !d.Redelivered || d.Headers["x-delivery-count"] != int64(round+1) {
			t.Fatalf("round %d: redelivered %v, headers %v", round, d.Redelivered, d.Headers)
		}
	}
}

// x-delivery-limit takes any value, as RabbitMQ 3.10.8's quorum queues
// take it: below 1 a message is dead-lettered at its first return, and
// a value that is not a number sets no limit.
func TestQuorumDeliveryLimitValues(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	for i, tc := range []struct {
		limit   any
		returns int // returns before it is dead-lettered; 0: never within 5
	}{{int32(-1), 1}, {int64(0), 1}, {1.5, 2}, {"abc", 0}, {true, 0}} {
		dlq := declareQueue(t, s, ch, fmt.Sprint("dlq", i), nil)
		q := declareQuorum(t, s, ch, fmt.Sprint(i), amqp.Table{"x-delivery-limit": tc.limit, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
		publish(t, ch, "", q, body("m"))
		returns := 0
		for returns < 5 && (tc.returns == 0 || returns < tc.returns) {
			if err := getOne(t, ch, q).Nack(false, true); err != nil {
				t.Fatal(err)
			}
			returns++
		}
		if tc.returns == 0 {
			waitReady(t, ch, q, 1)
			if n := count(t, ch, dlq); n != 0 {
				t.Fatalf("x-delivery-limit %v: dead-lettered after %d returns", tc.limit, returns)
			}
			continue
		}
		if d := getOne(t, ch, dlq); d.Headers["x-death"].([]any)[0].(amqp.Table)["reason"] != "delivery_limit" {
			t.Fatalf("x-delivery-limit %v: x-death %v", tc.limit, d.Headers["x-death"])
		}
		if n := count(t, ch, q); n != 0 {
			t.Fatalf("x-delivery-limit %v: %d left after %d returns", tc.limit, n, returns)
		}
	}
}

// getOne waits for a message to get.
func getOne(t testing.TB, ch *amqp.Channel, q string) amqp.Delivery {
	t.Helper()
	var d amqp.Delivery
	poll.Until(t, 5*time.Second, "a message to get from "+q, func() bool {
		var ok bool
		var err error
		if d, ok, err = ch.Get(q, false); err != nil {
			t.Fatal(err)
		}
		return ok
	})
	return d
}

// x-max-length with reject-publish nacks publishes once the queue is
// over its limit, until it is down to 80% of it; drop-head dead-letters
// the oldest with reason maxlen.
//
// RabbitMQ 3.10.8's quorum queues decide reject-publish after the fact:
// a publish that finds the queue at its limit still gets in, so serial
// publishes into a queue of 2 keep 3; then publishes are refused until 1
// is left (trunc(2 * 0.8)). The same with x-max-length-bytes.
func TestQuorumMaxLength(t *testing.T) {
	s := start(t)
	for _, limit := range []string{"x-max-length", "x-max-length-bytes"} {
		_, ch := channel(t, s)
		size := map[string]int32{"x-max-length": 2, "x-max-length-bytes": 20}[limit]
		q := declareQuorum(t, s, ch, limit, amqp.Table{limit: size, "x-overflow": "reject-publish"})
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
		acked := func() bool {
			publish(t, ch, "", q, body("0123456789")) // 10 bytes
			return (<-confirms).Ack
		}
		var got []bool
		for range 5 {
			got = append(got, acked())
		}
		if fmt.Sprint(got) != "[true true true false false]" {
			t.Fatalf("%v: serial publishes acked %v, want the first three", limit, got)
		}
		getOne(t, ch, q).Ack(false)
		if acked() {
			t.Fatalf("%v: a publish with 2 left was taken", limit)
		}
		getOne(t, ch, q).Ack(false)
		if !acked() || !acked() || acked() {
			t.Fatalf("%v: with 1 left, not two publishes taken then one refused", limit)
		}
	}
	_, ch2 := channel(t, s)
	dlq := declareQueue(t, s, ch2, "dlq", nil)
	q2 := declareQuorum(t, s, ch2, "drop", amqp.Table{"x-max-length": int32(2), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	if nacked := publishMany(t, ch2, "", q2, 3, nil); nacked != 0 {
		t.Fatalf("drop-head nacked %d", nacked)
	}
	d := getOne(t, ch2, dlq)
	deaths, _ := d.Headers["x-death"].([]any)
	if string(d.Body) != "0" || len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "maxlen" {
		t.Fatalf("dead letter %q x-death %v", d.Body, d.Headers["x-death"])
	}
	if got := getOne(t, ch2, q2); string(got.Body) != "1" {
		t.Fatalf("head after drop-head: %q", got.Body)
	}
}

// x-message-ttl expires messages at the head: dead-lettered, reason
// expired.
func TestQuorumMessageTTL(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQuorum(t, s, ch, "", amqp.Table{"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	publish(t, ch, "", q, body("soon gone"))
	d := getOne(t, ch, dlq)
	deaths, _ := d.Headers["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "expired" {
		t.Fatalf("x-death %v", d.Headers["x-death"])
	}
	if _, ok, _ := ch.Get(q, true); ok {
		t.Fatal("the expired message is still in the queue")
	}
}

// A quorum queue bound to an exchange gets what routes to it, mandatory
// publishes are not returned, and single active consumer serves one.
func TestQuorumRoutingAndSingleActiveConsumer(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	q := declareQuorum(t, s, ch, "", amqp.Table{"x-single-active-consumer": true})
	if err := ch.QueueBind(q, "k", x, false, nil); err != nil {
		t.Fatal(err)
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	a, _ := c.Channel()
	b, _ := c.Channel()
	da, err := a.Consume(q, "a", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.Consume(q, "b", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := ch.PublishWithContext(context.Background(), x, "k", true, false, body(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if m := receive(t, da); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("active consumer got %q", m.Body)
		}
	}
	// b has had nothing while a was active: once a leaves, b is the
	// active consumer, and anything the queue had sent it would arrive
	// before the fence.
	if err := a.Cancel("a", false); err != nil {
		t.Fatal(err)
	}
	fence(t, ch, x, "k", db)
	select {
	case r := <-returns:
		t.Fatalf("a routed mandatory publish was returned: %+v", r)
	default:
	}
}

// What a quorum queue confirmed is there after the broker restarts.
func TestQuorumSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	tweak := func(c *config.Config) { c.Storage.DataDir = dir }
	b := newBroker(t, tweak)
	s := &server{b: b, url: url(b), t: t}
	_, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 200, nil); nacked != 0 {
		t.Fatalf("%d nacked", nacked)
	}
	for i := range 5 {
		d := getOne(t, ch, q)
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("get %d: %q", i, d.Body)
		}
		d.Ack(false)
	}
	// A round trip after the acks: the channel has handled them before
	// the broker stops (an ack still in the socket may be lost with the
	// connection, and its message redelivered, as with any queue).
	if _, err := ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	b = startBroker(t, tweak)
	s = &server{b: b, url: url(b), t: t}
	_, ch = channel(t, s)
	ok, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil || ok.Messages != 195 {
		t.Fatalf("after a restart: %+v %v", ok, err)
	}
	for i := 5; i < 200; i++ {
		d := getOne(t, ch, q)
		if string(d.Body) != fmt.Sprint(i) {
			t.Fatalf("after a restart, get %d: %q", i, d.Body)
		}
		d.Ack(false)
	}
}

// A no-ack consumer's prefetch does not hold a quorum queue back: its
// deliveries are settled as they are sent.
func TestQuorumNoAckConsumer(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 20, nil); nacked != 0 {
		t.Fatalf("%d nacked", nacked)
	}
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if m := receive(t, deliveries); string(m.Body) != fmt.Sprint(i) {
			t.Fatalf("delivery %d: %q", i, m.Body)
		}
	}
}

// A policy applies to a quorum queue as it is set: a lower max-length
// drops the oldest, dead-lettering them where the policy says, and a
// deleted policy lifts the limit.
func TestQuorumPolicy(t *testing.T) {
	s := startWarren(t)
	_, ch := channel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 5, nil); nacked != 0 {
		t.Fatalf("%d nacked", nacked)
	}
	if err := s.b.SetPolicy("/", "qq-cap", "^"+q+"$", "queues", 1, protocol.Table{"max-length": int64(2),
		"dead-letter-exchange": "", "dead-letter-routing-key": dlq}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ch, q, 2)
	waitReady(t, ch, dlq, 3)
	if d := getOne(t, ch, q); string(d.Body) != "3" {
		t.Fatalf("head after the policy: %q", d.Body)
	}
	if err := s.b.ClearPolicy("/", "qq-cap"); err != nil {
		t.Fatal(err)
	}
	if nacked := publishMany(t, ch, "", q, 5, nil); nacked != 0 {
		t.Fatalf("%d nacked", nacked)
	}
	waitReady(t, ch, q, 6) // "4" and five more; "3" is held by the get
}

// x-expires deletes a quorum queue nobody used for that long; a consumer
// keeps it.
func TestQuorumExpires(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	kept := declareQuorum(t, s, ch, "kept", amqp.Table{"x-expires": int32(300)})
	gone := declareQuorum(t, s, ch, "gone", amqp.Table{"x-expires": int32(300)})
	consumer, _ := c.Channel()
	if _, err := consumer.Consume(kept, "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Asked every 400 ms, longer than x-expires: passive declares do not
	// keep it. 15 s: RabbitMQ expires a quorum queue on its 5 s tick, and
	// took 5.3 s here.
	if !poll.WithinEvery(15*time.Second, 400*time.Millisecond, func() bool {
		_, err := ch.QueueDeclarePassive(gone, true, false, false, false, nil)
		if err != nil {
			expectCode(t, err, amqp.NotFound)
		}
		return err != nil
	}) {
		t.Fatal("an unused quorum queue with x-expires 300 ms is still there after 15 s")
	}
	ch, _ = c.Channel()
	if _, err := ch.QueueDeclarePassive(kept, true, false, false, false, nil); err != nil {
		t.Fatalf("the consumed queue expired: %v", err)
	}
}

// x-dead-letter-strategy at-least-once (with reject-publish): a dead
// letter reaches the dead-letter exchange's queues and is then settled
// in its source. On Warren, with nothing bound, it stays in the source,
// counted toward its length, and is routed again every second until a
// queue takes it (RabbitMQ's worker retries after minutes, so that part
// runs on Warren only).
func TestQuorumDeadLetterAtLeastOnce(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	dlx := declareExchange(t, s, ch, "dlx", "fanout", nil)
	q := declareQuorum(t, s, ch, "", amqp.Table{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
		"x-max-length": int32(1), "x-dead-letter-exchange": dlx})
	dlq := declareQueue(t, s, ch, "dlq", nil)
	confirmer, _ := c.Channel()
	if err := confirmer.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := confirmer.NotifyPublish(make(chan amqp.Confirmation, 1))
	// accepted publishes one more and says whether it was confirmed; a
	// confirm that never comes fails the test rather than hanging it.
	accepted := func() bool {
		publish(t, confirmer, "", q, body("more"))
		select {
		case c := <-confirms:
			return c.Ack
		case <-time.After(10 * time.Second):
			t.Fatal("no confirm within 10 s")
			return false
		}
	}
	rejectOne := func(want string) {
		t.Helper()
		d := getOne(t, ch, q)
		if string(d.Body) != want {
			t.Fatalf("got %q from %s, want %q", d.Body, q, want)
		}
		if err := d.Reject(false); err != nil {
			t.Fatal(err)
		}
	}
	expectDead := func(want string) {
		t.Helper()
		got := getOne(t, ch, dlq)
		deaths, _ := got.Headers["x-death"].([]any)
		if string(got.Body) != want || len(deaths) != 1 || deaths[0].(amqp.Table)["reason"] != "rejected" {
			t.Fatalf("dead letter %q x-death %v", got.Body, got.Headers["x-death"])
		}
		got.Ack(false)
	}
	settled := func() {
		t.Helper()
		if !poll.Within(5*time.Second, accepted) {
			t.Fatal("the dead letter was never settled in its source")
		}
	}

	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q, body("m"))
	rejectOne("m")
	expectDead("m")
	settled() // q takes "more"

	if s.b == nil {
		return
	}
	if err := ch.QueueUnbind(dlq, "", dlx, nil); err != nil {
		t.Fatal(err)
	}
	rejectOne("more")
	// The reject is asynchronous: wait until q no longer holds it as
	// unacked (a checked-out message does not count toward max-length).
	v, _ := s.b.VHost("/")
	if !poll.Within(5*time.Second, func() bool { info, _ := v.QueueInfo(q); return info.Unacked == 0 }) {
		t.Fatal("the reject was not applied within 5s")
	}
	// The pending dead letter counts toward the limit: at it, one more
	// publish gets in, over it (reject-publish decides after the fact),
	// and the next is refused.
	if !accepted() {
		t.Fatal("a queue at its limit with a pending dead letter refused a publish")
	}
	if accepted() {
		t.Fatal("a queue over its limit with a pending dead letter took another message")
	}
	if err := ch.QueueBind(dlq, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	expectDead("more") // routed again once something is bound
	// Publishes are taken again once the queue is down to 80% of its
	// limit: empty, the dead letter settled.
	if err := getOne(t, ch, q).Ack(false); err != nil {
		t.Fatal(err)
	}
	settled()
}

// A channel with a global prefetch (basic.qos global=true) cannot consume
// from a quorum queue: RabbitMQ 3.10.8 closes the connection with 540.
func TestQuorumRefusesGlobalQoS(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	_, ch = channel(t, s)
	if err := ch.Qos(10, 0, true); err != nil {
		t.Fatal(err)
	}
	_, err := ch.Consume(q, "", false, false, false, false, nil)
	expectRefusal(t, err, amqp.NotImplemented, "queue '"+q+"' in vhost '/' does not support global qos")

	// A per-consumer prefetch after it lifts it, and the consume is taken.
	_, ch = channel(t, s)
	if err := ch.Qos(10, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(5, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(q, "", false, false, false, false, nil); err != nil {
		t.Fatalf("consume after qos global then per consumer: %v", err)
	}
}

// basic.recover gives a consumer's unacked messages back: they come again,
// redelivered, with x-delivery-count.
func TestQuorumRecover(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQuorum(t, s, ch, "", nil)
	if nacked := publishMany(t, ch, "", q, 2, nil); nacked != 0 {
		t.Fatalf("%d nacked", nacked)
	}
	deliveries, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, deliveries)
	receive(t, deliveries)
	if err := ch.Recover(true); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		m := receive(t, deliveries)
		if string(m.Body) != fmt.Sprint(i) || !m.Redelivered || m.Headers["x-delivery-count"] != int64(1) {
			t.Fatalf("after recover: %q redelivered=%v headers %v", m.Body, m.Redelivered, m.Headers)
		}
		m.Ack(false)
	}
}
