package tests

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TTL, queue expiry, length limits, priorities and dead-lettering.

func TestMessageTTL(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-message-ttl": int32(20)})
	publishConfirmed(t, ch, "", q, body("short-lived"))
	eventually(t, "the message to expire", func() bool { return count(t, ch, q) == 0 })
	empty(t, ch, q)

	// A consumer that is there takes it before it expires.
	d := consume(t, ch, q, true)
	publishConfirmed(t, ch, "", q, body("caught"))
	receive(t, d)
}

func TestPerMessageExpiration(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishConfirmed(t, ch, "", q, amqp.Publishing{Expiration: "20", Body: []byte("short")})
	publishConfirmed(t, ch, "", q, amqp.Publishing{Expiration: "60000", Body: []byte("long")})
	publishConfirmed(t, ch, "", q, body("forever"))
	eventually(t, "the short message to expire", func() bool { return count(t, ch, q) == 2 })
	m := get(t, ch, q)
	if string(m.Body) != "long" || m.Expiration != "60000" {
		t.Fatalf("got %q expiration %q", m.Body, m.Expiration)
	}
	get(t, ch, q)

	// The lower of the queue's TTL and the message's wins.
	q2 := declareQueue(t, s, ch, "q2", amqp.Table{"x-message-ttl": int32(60000)})
	publishConfirmed(t, ch, "", q2, amqp.Publishing{Expiration: "20", Body: []byte("short")})
	eventually(t, "the message to expire", func() bool { return count(t, ch, q2) == 0 })
}

func TestInvalidExpiration(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	for _, exp := range []string{"abc", "-1", "1.5", " 10"} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		closed := ch.NotifyClose(make(chan *amqp.Error, 1))
		publish(t, ch, "", q, amqp.Publishing{Expiration: exp, Body: []byte("bad")})
		select {
		case e := <-closed:
			if e == nil || e.Code != amqp.PreconditionFailed {
				t.Fatalf("expiration %q: closed with %v, expected 406", exp, e)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("expiration %q accepted", exp)
		}
	}
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages with bad expirations enqueued", n)
	}
}

// x-expires deletes a queue nobody uses, and does not dead-letter its
// messages.
func TestQueueExpires(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{
		"x-expires": int32(50), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq,
	})
	publishConfirmed(t, ch, "", q, body("goes with the queue"))
	// Watched by mandatory publishes, which do not count as use: once the
	// queue is gone they come back.
	awaitQueueGone(t, ch, q)
	if n := count(t, ch, dlq); n != 0 {
		t.Fatalf("queue expiry dead-lettered %d messages", n)
	}

	// A queue with a consumer is in use and does not expire: once a queue
	// declared after it with the same x-expires and no consumer is gone,
	// it is still there.
	q2 := declareQueue(t, s, ch, "q2", amqp.Table{"x-expires": int32(50)})
	consume(t, ch, q2, true)
	later := declareQueue(t, s, ch, "later", amqp.Table{"x-expires": int32(50)})
	awaitQueueGone(t, ch, later)
	count(t, ch, q2) // still there
}

// awaitQueueGone waits until a mandatory publish to queue through the
// default exchange comes back unroutable. ch must be in confirm mode.
func awaitQueueGone(t testing.TB, ch *amqp.Channel, queue string) {
	t.Helper()
	r := ch.NotifyReturn(make(chan amqp.Return, 1000))
	eventually(t, queue+" to be deleted", func() bool {
		confirmPublish(t, ch, "", queue, true, body("probe"))
		select {
		case <-r: // a return comes before its ack
			return true
		default:
			return false
		}
	})
}

// deadLetterSetup declares a direct source exchange, a queue with args
// bound to it by "src-key", and a fanout DLX with a queue.
func deadLetterSetup(t *testing.T, s *server, ch *amqp.Channel, args amqp.Table) (src, q, dlx, dlq string) {
	t.Helper()
	src = declareExchange(t, s, ch, "src", "direct", nil)
	dlx = declareExchange(t, s, ch, "dlx", "fanout", nil)
	dlq = declareQueue(t, s, ch, "dlq", nil)
	bind(t, ch, dlq, "", dlx, nil)
	if args == nil {
		args = amqp.Table{}
	}
	args["x-dead-letter-exchange"] = dlx
	q = declareQueue(t, s, ch, "q", args)
	bind(t, ch, q, "src-key", src, nil)
	return
}

// getWait waits for a message to arrive in a queue and takes it.
func getWait(t testing.TB, ch *amqp.Channel, q string) amqp.Delivery {
	t.Helper()
	var m amqp.Delivery
	eventually(t, "a message in "+q, func() bool {
		var ok bool
		var err error
		m, ok, err = ch.Get(q, true)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	return m
}

// checkDeath checks a dead-lettered message's x-death (most recent entry
// first) and x-first-death-* headers.
func checkDeath(t testing.TB, m amqp.Delivery, queue, reason, exchange string, keys []string, count int64) amqp.Table {
	t.Helper()
	deaths, ok := m.Headers["x-death"].([]interface{})
	if !ok || len(deaths) == 0 {
		t.Fatalf("no x-death: %v", m.Headers)
	}
	d, ok := deaths[0].(amqp.Table)
	if !ok {
		t.Fatalf("x-death entry is %T", deaths[0])
	}
	if d["queue"] != queue || d["reason"] != reason || d["exchange"] != exchange {
		t.Fatalf("x-death %v, expected queue %q reason %q exchange %q", d, queue, reason, exchange)
	}
	if n, _ := d["count"].(int64); n != count {
		t.Fatalf("x-death count %#v, expected %d", d["count"], count)
	}
	var gotKeys []string
	rks, _ := d["routing-keys"].([]interface{})
	for _, k := range rks {
		s, _ := k.(string)
		gotKeys = append(gotKeys, s)
	}
	if !reflect.DeepEqual(gotKeys, keys) {
		t.Fatalf("x-death routing-keys %#v, expected %q", d["routing-keys"], keys)
	}
	if _, ok := d["time"].(time.Time); !ok {
		t.Fatalf("x-death time %#v", d["time"])
	}
	return d
}

func checkFirstDeath(t testing.TB, m amqp.Delivery, queue, reason, exchange string) {
	t.Helper()
	if m.Headers["x-first-death-queue"] != queue || m.Headers["x-first-death-reason"] != reason ||
		m.Headers["x-first-death-exchange"] != exchange {
		t.Fatalf("x-first-death-*: %q %q %q, expected %q %q %q",
			m.Headers["x-first-death-queue"], m.Headers["x-first-death-reason"], m.Headers["x-first-death-exchange"],
			queue, reason, exchange)
	}
}

func TestDeadLetterRejected(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src, q, _, dlq := deadLetterSetup(t, s, ch, nil)
	publishConfirmed(t, ch, src, "src-key", amqp.Publishing{Headers: amqp.Table{"own": "kept"}, MessageId: "m1", Body: []byte("rejected")})
	publishConfirmed(t, ch, src, "src-key", body("nacked"))
	d := consume(t, ch, q, false)
	m := receive(t, d)
	if err := m.Reject(false); err != nil {
		t.Fatal(err)
	}
	dead := getWait(t, ch, dlq)
	if string(dead.Body) != "rejected" || dead.MessageId != "m1" || dead.Headers["own"] != "kept" {
		t.Fatalf("dead-lettered message changed: %q %q %v", dead.Body, dead.MessageId, dead.Headers)
	}
	// It keeps its routing key and exchange.
	if dead.RoutingKey != "src-key" {
		t.Fatalf("dead-lettered with key %q", dead.RoutingKey)
	}
	checkDeath(t, dead, q, "rejected", src, []string{"src-key"}, 1)
	checkFirstDeath(t, dead, q, "rejected", src)

	m = receive(t, d)
	if err := m.Nack(false, false); err != nil {
		t.Fatal(err)
	}
	dead = getWait(t, ch, dlq)
	checkDeath(t, dead, q, "rejected", src, []string{"src-key"}, 1)

	// Rejected with requeue, it is not dead-lettered.
	publishConfirmed(t, ch, src, "src-key", body("requeued"))
	m = receive(t, d)
	m.Reject(true)
	m = receive(t, d)
	m.Ack(false)
	if n := count(t, ch, dlq); n != 0 {
		t.Fatalf("%d messages dead-lettered by a requeue", n)
	}
}

func TestDeadLetterExpired(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src, q, _, dlq := deadLetterSetup(t, s, ch, amqp.Table{"x-message-ttl": int32(10)})
	publishConfirmed(t, ch, src, "src-key", body("expired"))
	dead := getWait(t, ch, dlq)
	checkDeath(t, dead, q, "expired", src, []string{"src-key"}, 1)
	checkFirstDeath(t, dead, q, "expired", src)
}

// A per-message expiration is recorded in x-death and removed from the
// dead-lettered message, so it does not expire again.
func TestDeadLetterPerMessageExpiration(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src, q, _, dlq := deadLetterSetup(t, s, ch, nil)
	publishConfirmed(t, ch, src, "src-key", amqp.Publishing{Expiration: "10", Body: []byte("expired")})
	dead := getWait(t, ch, dlq)
	d := checkDeath(t, dead, q, "expired", src, []string{"src-key"}, 1)
	if d["original-expiration"] != "10" {
		t.Fatalf("original-expiration %#v", d["original-expiration"])
	}
	if dead.Expiration != "" {
		t.Fatalf("dead-lettered message still has expiration %q", dead.Expiration)
	}
}

func TestDeadLetterMaxLength(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src, q, _, dlq := deadLetterSetup(t, s, ch, amqp.Table{"x-max-length": int32(1)})
	publishConfirmed(t, ch, src, "src-key", body("first"))
	publishConfirmed(t, ch, src, "src-key", body("second"))
	dead := getWait(t, ch, dlq)
	if string(dead.Body) != "first" {
		t.Fatalf("dead-lettered %q, expected the head", dead.Body)
	}
	checkDeath(t, dead, q, "maxlen", src, []string{"src-key"}, 1)
	checkFirstDeath(t, dead, q, "maxlen", src)
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"second"}) {
		t.Fatalf("queue kept %q", got)
	}
}

// x-overflow reject-publish-dlx dead-letters the refused message itself.
func TestDeadLetterRejectPublishDLX(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	src, q, _, dlq := deadLetterSetup(t, s, ch, amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish-dlx"})
	if !confirmPublish(t, ch, src, "src-key", false, body("kept")) {
		t.Fatal("nacked")
	}
	if confirmPublish(t, ch, src, "src-key", false, body("refused")) {
		t.Fatal("acked a publish to a full reject-publish-dlx queue")
	}
	dead := getWait(t, ch, dlq)
	if string(dead.Body) != "refused" {
		t.Fatalf("dead-lettered %q", dead.Body)
	}
	checkDeath(t, dead, q, "maxlen", src, []string{"src-key"}, 1)
}

func TestDeadLetterRoutingKey(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlx := declareExchange(t, s, ch, "dlx", "direct", nil)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	bind(t, ch, dlq, "dead", dlx, nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead"})
	publishConfirmed(t, ch, "", q, body("m"))
	m, _, err := ch.Get(q, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Reject(false)
	dead := getWait(t, ch, dlq)
	if dead.RoutingKey != "dead" || dead.Exchange != dlx {
		t.Fatalf("dead-lettered via %q/%q", dead.Exchange, dead.RoutingKey)
	}
	// x-death records the original routing keys and exchange.
	checkDeath(t, dead, q, "rejected", "", []string{q}, 1)
}

// Dead-lettering through the default exchange.
func TestDeadLetterDefaultExchange(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	publishConfirmed(t, ch, "", q, body("m"))
	m, _, err := ch.Get(q, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Nack(false, false)
	dead := getWait(t, ch, dlq)
	checkDeath(t, dead, q, "rejected", "", []string{q}, 1)
}

// RabbitMQ's sender-selected distribution: CC keys count among the
// original routing keys x-death records.
func TestDeadLetterCCRoutingKeys(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	publishConfirmed(t, ch, "", q, amqp.Publishing{Headers: amqp.Table{"CC": []interface{}{"cc-key"}}, Body: []byte("m")})
	m, _, err := ch.Get(q, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Nack(false, false)
	dead := getWait(t, ch, dlq)
	checkDeath(t, dead, q, "rejected", "", []string{q, "cc-key"}, 1)
}

// A message dead-lettered again from the same queue for the same reason
// has that x-death entry's count raised rather than a new entry.
func TestDeadLetterCount(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlq := declareQueue(t, s, ch, "dlq", nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
	publishConfirmed(t, ch, "", q, body("m"))
	for i := 1; i <= 3; i++ {
		m, ok, err := ch.Get(q, false)
		if err != nil || !ok {
			t.Fatalf("get: %v %v", ok, err)
		}
		m.Reject(false)
		dead := getWait(t, ch, dlq)
		checkDeath(t, dead, q, "rejected", "", []string{q}, int64(i))
		if deaths := dead.Headers["x-death"].([]interface{}); len(deaths) != 1 {
			t.Fatalf("%d x-death entries", len(deaths))
		}
		// Send it round again, x-death and all.
		publishConfirmed(t, ch, "", q, amqp.Publishing{Headers: dead.Headers, Body: dead.Body})
	}
}

// A message that would be dead-lettered back into a queue it already died
// in, with no rejection on the way, is dropped for that queue; other
// destinations still get it.
func TestDeadLetterCycleDropped(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	dlx := declareExchange(t, s, ch, "dlx", "fanout", nil)
	monitor := declareQueue(t, s, ch, "monitor", nil)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": dlx})
	bind(t, ch, monitor, "", dlx, nil)
	bind(t, ch, q, "", dlx, nil) // q dead-letters into itself
	publishConfirmed(t, ch, "", q, body("m"))
	d := consume(t, ch, monitor, true)
	m := receive(t, d)
	checkDeath(t, m, q, "expired", "", []string{q}, 1)
	// Had q taken it back, it would expire again within 10ms and reach the
	// monitor a second time.
	select {
	case m := <-d:
		t.Fatalf("the message went round the cycle: x-death %v", m.Headers["x-death"])
	case <-time.After(200 * time.Millisecond):
	}
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("q holds %d messages", n)
	}

	// A two-queue cycle through the default exchange is dropped as well:
	// a -> b -> a.
	a, b := uniq(t, "a"), uniq(t, "b")
	s.ownQueue(a)
	s.ownQueue(b)
	if _, err := ch.QueueDeclare(a, false, false, false, false, amqp.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": b}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(b, false, false, false, false, amqp.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": a}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", a, body("round"))
	eventually(t, "the cycle to end", func() bool { return count(t, ch, a) == 0 && count(t, ch, b) == 0 })
	// Had it gone on, the message would be back in a or b within 10ms. A
	// probe that takes four times that to dead-letter into a sink shows the
	// time has passed.
	probe, sink := uniq(t, "probe"), uniq(t, "sink")
	s.ownQueue(probe)
	s.ownQueue(sink)
	if _, err := ch.QueueDeclare(sink, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(probe, false, false, false, false, amqp.Table{"x-message-ttl": int32(40), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": sink}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", probe, body("probe"))
	receive(t, consume(t, ch, sink, true))
	for range 5 {
		if count(t, ch, a)+count(t, ch, b) != 0 {
			t.Fatal("the message is still going round")
		}
	}
}

// A rejection in the cycle lets the message go round.
func TestDeadLetterCycleWithRejection(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	a, b := uniq(t, "a"), uniq(t, "b")
	s.ownQueue(a)
	s.ownQueue(b)
	if _, err := ch.QueueDeclare(a, false, false, false, false, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": b}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(b, false, false, false, false, amqp.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": a}); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", a, body("round"))
	for i := 1; i <= 2; i++ {
		var m amqp.Delivery
		eventually(t, "the message back in a", func() bool {
			var ok bool
			var err error
			m, ok, err = ch.Get(a, false)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		})
		if i == 2 {
			d := checkDeath(t, m, b, "expired", "", []string{b}, 1)
			_ = d
			if deaths := m.Headers["x-death"].([]interface{}); len(deaths) != 2 {
				t.Fatalf("x-death %v", deaths)
			}
			checkFirstDeath(t, m, a, "rejected", "")
		}
		m.Reject(false)
	}
}

func TestMaxLengthDropHead(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-length": int32(2)})
	publishN(t, ch, q, 5)
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"3", "4"}) {
		t.Fatalf("kept %q", got)
	}
	// x-max-length 0 keeps nothing.
	q0 := declareQueue(t, s, ch, "zero", amqp.Table{"x-max-length": int32(0)})
	publishN(t, ch, q0, 2)
	if n := count(t, ch, q0); n != 0 {
		t.Fatalf("%d messages in a max-length 0 queue", n)
	}
}

func TestMaxLengthBytes(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-length-bytes": int32(10)})
	for _, b := range []string{"aaaaa", "bbbbb", "ccccc"} {
		publishConfirmed(t, ch, "", q, body(b))
	}
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"bbbbb", "ccccc"}) {
		t.Fatalf("kept %q", got)
	}
	// Only bodies count, not properties.
	publishConfirmed(t, ch, "", q, amqp.Publishing{Headers: amqp.Table{"big": string(make([]byte, 100))}, Body: []byte("0123456789")})
	if n := count(t, ch, q); n != 1 {
		t.Fatalf("%d messages", n)
	}
}

func TestMaxPriority(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-priority": int32(10)})
	for i, p := range []uint8{1, 5, 9, 5, 0, 20, 9} {
		publishConfirmed(t, ch, "", q, amqp.Publishing{Priority: p, Body: []byte(fmt.Sprintf("p%d-%d", p, i))})
	}
	// Highest first, FIFO within a level; above the maximum counts as the
	// maximum.
	want := []string{"p20-5", "p9-2", "p9-6", "p5-1", "p5-3", "p1-0", "p0-4"}
	if got := drain(t, ch, q); !reflect.DeepEqual(got, want) {
		t.Fatalf("order %q, expected %q", got, want)
	}

	// Without x-max-priority, priorities are ignored.
	plain := declareQueue(t, s, ch, "plain", nil)
	for i, p := range []uint8{1, 9, 5} {
		publishConfirmed(t, ch, "", plain, amqp.Publishing{Priority: p, Body: []byte(fmt.Sprint(i))})
	}
	if got := drain(t, ch, plain); !reflect.DeepEqual(got, []string{"0", "1", "2"}) {
		t.Fatalf("order %q", got)
	}
}

// A requeued message goes back in its priority level's order.
func TestPriorityRequeue(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-priority": int32(5)})
	publishConfirmed(t, ch, "", q, amqp.Publishing{Priority: 1, Body: []byte("low")})
	publishConfirmed(t, ch, "", q, amqp.Publishing{Priority: 5, Body: []byte("high")})
	m, _, err := ch.Get(q, false)
	if err != nil || string(m.Body) != "high" {
		t.Fatalf("got %q %v", m.Body, err)
	}
	m.Reject(true)
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"high", "low"}) {
		t.Fatalf("order %q", got)
	}
}
