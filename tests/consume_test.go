package tests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Consumers: ordering, round-robin, prefetch, exclusive and no-ack
// consumers, basic.get, acknowledgements, recover, requeue on close and
// cancel notification.

// publishN publishes n messages "0".."n-1" and waits for their confirms.
func publishN(t testing.TB, ch *amqp.Channel, queue string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		publishConfirmed(t, ch, "", queue, body(fmt.Sprint(i)))
	}
}

func seq(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func TestFIFO(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 100)
	d := consume(t, ch, q, true)
	if got := bodies(t, d, 100); !reflect.DeepEqual(got, seq(0, 100)) {
		t.Fatalf("out of order: %q", got)
	}
	fence(t, ch, "", q, d)
}

// Messages published while a consumer is attached arrive in order too.
func TestFIFOLive(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d := consume(t, ch, q, true)
	for i := 0; i < 200; i++ {
		publish(t, ch, "", q, body(fmt.Sprint(i)))
	}
	if got := bodies(t, d, 200); !reflect.DeepEqual(got, seq(0, 200)) {
		t.Fatalf("out of order: %q", got)
	}
}

func TestRoundRobin(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	ch1, _ := c.Channel()
	ch2, _ := c.Channel()
	d1 := consume(t, ch1, q, true)
	d2 := consume(t, ch2, q, true)
	publishN(t, ch, q, 6)
	got1 := bodies(t, d1, 3)
	got2 := bodies(t, d2, 3)
	fence(t, ch, "", q, d1, d2)
	if !(reflect.DeepEqual(got1, []string{"0", "2", "4"}) && reflect.DeepEqual(got2, []string{"1", "3", "5"})) &&
		!(reflect.DeepEqual(got1, []string{"1", "3", "5"}) && reflect.DeepEqual(got2, []string{"0", "2", "4"})) {
		t.Fatalf("not round-robin: %q and %q", got1, got2)
	}
}

// basic.qos with global=false limits each consumer created afterwards.
func TestPrefetchPerConsumer(t *testing.T) {
	s := start(t)
	c, pub := confirmChannel(t, s)
	q1 := declareQueue(t, s, pub, "q1", nil)
	q2 := declareQueue(t, s, pub, "q2", nil)
	publishN(t, pub, q1, 5)
	publishN(t, pub, q2, 5)

	ch, _ := c.Channel()
	if err := ch.Qos(2, 0, false); err != nil {
		t.Fatal(err)
	}
	d1 := consume(t, ch, q1, false)
	d2 := consume(t, ch, q2, false)
	a := receive(t, d1)
	receive(t, d1)
	receive(t, d2)
	receive(t, d2)
	readyLeft(t, ch, map[string]int{q1: 3, q2: 3})
	// Acking frees one place for that consumer only.
	if err := ch.Ack(a.DeliveryTag, false); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, d1); string(m.Body) != "2" {
		t.Fatalf("got %q", m.Body)
	}
	readyLeft(t, ch, map[string]int{q1: 2, q2: 3})
}

// readyLeft checks, for consumers at their prefetch limit, that each queue
// has handed out no more than it should: its ready count is what the
// broker has not delivered. A queue delivers and counts under one lock (in
// RabbitMQ, in its one process) and does so only when something gives it
// cause (a consumer, a message, an ack on ch), and the passive declares go
// on ch after all of that: a delivery past the limit would already show.
// A fence cannot do here: the limit would hold the marker back too.
func readyLeft(t testing.TB, ch *amqp.Channel, want map[string]int) {
	t.Helper()
	for q, n := range want {
		if got := count(t, ch, q); got != n {
			t.Errorf("%s: %d ready, want %d (the rest delivered)", q, got, n)
		}
	}
}

// basic.qos with global=true limits the channel as a whole.
func TestPrefetchPerChannel(t *testing.T) {
	s := start(t)
	c, pub := confirmChannel(t, s)
	q1 := declareQueue(t, s, pub, "q1", nil)
	q2 := declareQueue(t, s, pub, "q2", nil)
	publishN(t, pub, q1, 3)
	publishN(t, pub, q2, 3)

	ch, _ := c.Channel()
	if err := ch.Qos(3, 0, true); err != nil {
		t.Fatal(err)
	}
	d1 := consume(t, ch, q1, false)
	d2 := consume(t, ch, q2, false)
	var tags []uint64
	for len(tags) < 3 {
		select {
		case m := <-d1:
			tags = append(tags, m.DeliveryTag)
		case m := <-d2:
			tags = append(tags, m.DeliveryTag)
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d deliveries", len(tags))
		}
	}
	readyTotal(t, ch, 3, q1, q2)
	if err := ch.Ack(tags[0], false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d1:
	case <-d2:
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery after an ack")
	}
	readyTotal(t, ch, 2, q1, q2)
}

// readyTotal is readyLeft for a limit shared by the consumers of qs: it
// cannot say which queue keeps what, only how many they keep together.
func readyTotal(t testing.TB, ch *amqp.Channel, want int, qs ...string) {
	t.Helper()
	got := 0
	for _, q := range qs {
		got += count(t, ch, q)
	}
	if got != want {
		t.Errorf("%d ready in %q, want %d (the rest delivered)", got, qs, want)
	}
}

// basic.qos global=false after a global one lifts the channel's limit, as
// RabbitMQ 3.10.8 does: two consumers get their own prefetch each.
func TestPrefetchPerConsumerLiftsPerChannel(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 20)
	for _, qos := range []struct {
		count  int
		global bool
	}{{2, true}, {5, false}} {
		if err := ch.Qos(qos.count, 0, qos.global); err != nil {
			t.Fatal(err)
		}
	}
	d1 := consume(t, ch, q, false)
	d2 := consume(t, ch, q, false)
	bodies(t, d1, 5)
	bodies(t, d2, 5)
	readyLeft(t, ch, map[string]int{q: 10})
}

// Prefetch does not limit no-ack consumers.
func TestPrefetchIgnoredByNoAck(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 5)
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	d := consume(t, ch, q, true)
	bodies(t, d, 5)
}

// A prefetch size limit is not implemented by RabbitMQ (540).
func TestPrefetchSizeRefused(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	expectCode(t, ch.Qos(0, 1000, false), amqp.NotImplemented)
	expectClose(t, closed, amqp.NotImplemented)
}

func TestExclusiveConsumer(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	if _, err := ch.Consume(q, "first", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	other, _ := c.Channel()
	_, err := other.Consume(q, "second", false, false, false, false, nil)
	expectCode(t, err, amqp.AccessRefused)

	// Nor can one be exclusive while another consumes.
	q2 := declareQueue(t, s, ch, "q2", nil)
	if _, err := ch.Consume(q2, "plain", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	other, _ = c.Channel()
	_, err = other.Consume(q2, "exclusive", false, true, false, false, nil)
	expectCode(t, err, amqp.AccessRefused)

	// Once the exclusive consumer cancels, others may consume.
	if err := ch.Cancel("first", false); err != nil {
		t.Fatal(err)
	}
	other, _ = c.Channel()
	if _, err := other.Consume(q, "third", false, false, false, false, nil); err != nil {
		t.Fatalf("consume after the exclusive consumer left: %v", err)
	}
}

// A refused basic.consume is answered by channel.close alone: no
// consume-ok goes out first.
func TestRefusedConsumeSendsNoConsumeOk(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	if _, err := ch.Consume(q, "holder", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r := rawDial(t, s)
	r.handshake(defaultHandshake())
	r.openChannel(1)
	args := []byte{0, 0}
	args = appendShortStr(args, q)
	args = appendShortStr(args, "raw")
	args = append(args, 0)
	args = appendTable(args, nil)
	r.method(1, 60, 20, args)
	f := r.next()
	if f.is(60, 21) {
		t.Fatal("basic.consume-ok sent for a consume that is then refused")
	}
	if !f.is(20, 40) {
		c, m := f.classMethod()
		t.Fatalf("expected channel.close, got %d.%d", c, m)
	}
	if code, text := closeReason(f); code != amqp.AccessRefused {
		t.Fatalf("channel.close %d %q, expected 403", code, text)
	}
}

func TestNoAck(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 3)
	cch, _ := c.Channel()
	d := consume(t, cch, q, true)
	bodies(t, d, 3)
	// Nothing was unacked, so closing the channel returns nothing.
	cch.Close()
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages back after closing a no-ack consumer's channel", n)
	}
}

func TestBasicGet(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	empty(t, ch, q)
	publishN(t, ch, q, 3)
	m, ok, err := ch.Get(q, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if string(m.Body) != "0" || m.MessageCount != 2 || m.Redelivered || m.RoutingKey != q || m.Exchange != "" {
		t.Fatalf("get-ok: %q count %d redelivered %v key %q", m.Body, m.MessageCount, m.Redelivered, m.RoutingKey)
	}
	if err := m.Ack(false); err != nil {
		t.Fatal(err)
	}
	m = get(t, ch, q)
	if string(m.Body) != "1" || m.MessageCount != 1 {
		t.Fatalf("get-ok: %q count %d", m.Body, m.MessageCount)
	}
	get(t, ch, q)
	empty(t, ch, q)
	_, _, err = ch.Get(uniq(t, "missing"), true)
	expectCode(t, err, amqp.NotFound)
}

func TestAckMultiple(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 5)
	cch, _ := c.Channel()
	d := consume(t, cch, q, false)
	var last amqp.Delivery
	for i := 0; i < 5; i++ {
		m := receive(t, d)
		if m.DeliveryTag != uint64(i+1) {
			t.Fatalf("delivery tag %d, expected %d", m.DeliveryTag, i+1)
		}
		last = m
		if i == 2 {
			if err := m.Ack(true); err != nil { // acks 1, 2, 3
				t.Fatal(err)
			}
		}
	}
	_ = last
	cch.Close() // 4 and 5 go back
	eventually(t, "two messages requeued", func() bool { return count(t, ch, q) == 2 })
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"3", "4"}) {
		t.Fatalf("requeued %q", got)
	}
}

func TestNackRequeue(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 4)
	d := consume(t, ch, q, false)
	var ms []amqp.Delivery
	for i := 0; i < 4; i++ {
		m := receive(t, d)
		if m.Redelivered {
			t.Fatal("first delivery marked redelivered")
		}
		ms = append(ms, m)
	}
	// Nack 1..3 with requeue: they come back in order, redelivered.
	if err := ch.Nack(ms[2].DeliveryTag, true, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0", "1", "2"} {
		m := receive(t, d)
		if string(m.Body) != want || !m.Redelivered {
			t.Fatalf("got %q redelivered=%v, expected %q redelivered", m.Body, m.Redelivered, want)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms[3].Ack(false); err != nil {
		t.Fatal(err)
	}
	fence(t, ch, "", q, d)
}

func TestNackDiscard(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 3)
	d := consume(t, ch, q, false)
	bodies(t, d, 2)
	if err := ch.Nack(2, true, false); err != nil { // drops 0 and 1
		t.Fatal(err)
	}
	m := receive(t, d)
	if string(m.Body) != "2" {
		t.Fatalf("got %q", m.Body)
	}
	m.Ack(false)
	fence(t, ch, "", q, d)
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

func TestReject(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 2)
	d := consume(t, ch, q, false)
	m0 := receive(t, d)
	m1 := receive(t, d)
	if err := m0.Reject(true); err != nil {
		t.Fatal(err)
	}
	again := receive(t, d)
	if string(again.Body) != "0" || !again.Redelivered {
		t.Fatalf("got %q redelivered=%v", again.Body, again.Redelivered)
	}
	if err := again.Reject(false); err != nil {
		t.Fatal(err)
	}
	if err := m1.Reject(false); err != nil {
		t.Fatal(err)
	}
	fence(t, ch, "", q, d)
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}

// basic.recover(requeue=true) puts every unacked message back, redelivered.
func TestRecover(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 3)
	d := consume(t, ch, q, false)
	first := bodies(t, d, 3)
	if err := ch.Recover(true); err != nil {
		t.Fatal(err)
	}
	var again []string
	for i := 0; i < 3; i++ {
		m := receive(t, d)
		if !m.Redelivered {
			t.Fatalf("%q not marked redelivered", m.Body)
		}
		again = append(again, string(m.Body))
		m.Ack(false)
	}
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("recovered %q, first %q", again, first)
	}
	fence(t, ch, "", q, d)
}

// Unacked messages go back in order, redelivered, when the channel closes.
func TestRequeueOnChannelClose(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 5)
	cch, _ := c.Channel()
	d := consume(t, cch, q, false)
	ms := make([]amqp.Delivery, 5)
	for i := range ms {
		ms[i] = receive(t, d)
	}
	ms[1].Ack(false)
	ms[3].Ack(false)
	cch.Close()
	d2 := consume(t, ch, q, false)
	for _, want := range []string{"0", "2", "4"} {
		m := receive(t, d2)
		if string(m.Body) != want || !m.Redelivered {
			t.Fatalf("got %q redelivered=%v, expected %q redelivered", m.Body, m.Redelivered, want)
		}
	}
	fence(t, ch, "", q, d2)
}

// ... and when the connection closes.
func TestRequeueOnConnectionClose(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 4)
	c2, cch := channel(t, s)
	d := consume(t, cch, q, false)
	bodies(t, d, 4)
	c2.Close()
	d2 := consume(t, ch, q, false)
	for _, want := range []string{"0", "1", "2", "3"} {
		m := receive(t, d2)
		if string(m.Body) != want || !m.Redelivered {
			t.Fatalf("got %q redelivered=%v, expected %q redelivered", m.Body, m.Redelivered, want)
		}
	}
}

// Requeued messages go before ones that were never delivered.
func TestRequeuedBeforeNew(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 4)
	cch, _ := c.Channel()
	cch.Qos(2, 0, false)
	d := consume(t, cch, q, false)
	bodies(t, d, 2)
	cch.Close()
	if got := drain(t, ch, q); !reflect.DeepEqual(got, []string{"0", "1", "2", "3"}) {
		t.Fatalf("queue order after requeue: %q", got)
	}
}

func TestBasicCancel(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d, err := ch.Consume(q, "ctag", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, ch, q, 1)
	receive(t, d)
	if err := ch.Cancel("ctag", false); err != nil {
		t.Fatal(err)
	}
	// The deliveries channel closes; new messages wait in the queue.
	select {
	case _, ok := <-d:
		if ok {
			t.Fatal("delivery after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deliveries channel not closed after cancel")
	}
	publishN(t, ch, q, 1)
	if n := count(t, ch, q); n != 1 {
		t.Fatalf("%d messages ready after cancel", n)
	}
}

// A consumer whose queue is deleted gets basic.cancel from the broker.
func TestConsumerCancelNotify(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	cancelled := ch.NotifyCancel(make(chan string, 1))
	d, err := ch.Consume(q, "watcher", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := c.Channel()
	if _, err := other.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case tag := <-cancelled:
		if tag != "watcher" {
			t.Fatalf("cancel for %q", tag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no basic.cancel after the queue was deleted")
	}
	select {
	case _, ok := <-d:
		if ok {
			t.Fatal("delivery after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("deliveries channel not closed")
	}
	// The channel is still usable.
	declareQueue(t, s, ch, "after", nil)
}

func TestUnknownDeliveryTag(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Ack(42, false); err != nil {
		t.Fatal(err)
	}
	e := expectClose(t, closed, amqp.PreconditionFailed)
	if !strings.Contains(e.Reason, "unknown delivery tag") {
		t.Fatalf("reason %q", e.Reason)
	}

	// Acking twice is acking an unknown tag.
	ch, _ = c.Channel()
	ch.Confirm(false)
	q := declareQueue(t, s, ch, "", nil)
	publishN(t, ch, q, 4) // one acked twice below, three for the multiple acks
	m, ok, err := ch.Get(q, false)
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	closed = ch.NotifyClose(make(chan *amqp.Error, 1))
	m.Ack(false)
	m.Ack(false)
	expectClose(t, closed, amqp.PreconditionFailed)

	// So is nack or reject of a tag never given.
	for _, settle := range []func(*amqp.Channel) error{
		func(ch *amqp.Channel) error { return ch.Nack(7, false, true) },
		func(ch *amqp.Channel) error { return ch.Reject(7, false) },
		func(ch *amqp.Channel) error { return ch.Ack(7, true) },
	} {
		ch, _ = c.Channel()
		closed = ch.NotifyClose(make(chan *amqp.Error, 1))
		settle(ch)
		expectClose(t, closed, amqp.PreconditionFailed)
	}

	// And multiple up to a tag never given, even with deliveries below
	// it: it settles none of them, and they go back to the queue with
	// the channel (RabbitMQ 3.10.8).
	for _, settle := range []func(*amqp.Channel) error{
		func(ch *amqp.Channel) error { return ch.Ack(10, true) },
		func(ch *amqp.Channel) error { return ch.Nack(10, true, false) },
	} {
		ch, _ = c.Channel()
		for range 3 {
			if _, ok, err := ch.Get(q, false); err != nil || !ok {
				t.Fatalf("get: %v %v", ok, err)
			}
		}
		closed = ch.NotifyClose(make(chan *amqp.Error, 1))
		settle(ch)
		e = expectClose(t, closed, amqp.PreconditionFailed)
		if !strings.Contains(e.Reason, "unknown delivery tag 10") {
			t.Fatalf("reason %q", e.Reason)
		}
		ch, _ = c.Channel()
		eventually(t, "the three messages back in the queue", func() bool { return count(t, ch, q) == 3 })
	}
}

// Reusing a consumer tag on a channel is 530 NOT_ALLOWED, a connection
// error.
func TestConsumerTagReuse(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	q := declareQueue(t, s, ch, "", nil)
	if _, err := ch.Consume(q, "same", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err := ch.Consume(q, "same", false, false, false, false, nil)
	expectCode(t, err, amqp.NotAllowed)
	expectClose(t, closed, amqp.NotAllowed)

	// On another channel the same tag is fine.
	c2, ch2 := channel(t, s)
	q2 := declareQueue(t, s, ch2, "q2", nil)
	if _, err := ch2.Consume(q2, "same", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ch3, _ := c2.Channel()
	if _, err := ch3.Consume(q2, "same", false, false, false, false, nil); err != nil {
		t.Fatalf("the same tag on another channel: %v", err)
	}
}

func TestConsumeMissingQueue(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	_, err := ch.Consume(uniq(t, "missing"), "", false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
}

// The user-id property must name the connection's user.
func TestUserIDProperty(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishConfirmed(t, ch, "", q, amqp.Publishing{UserId: "guest", Body: []byte("mine")})
	if m := get(t, ch, q); m.UserId != "guest" {
		t.Fatalf("user-id %q", m.UserId)
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	publish(t, ch, "", q, amqp.Publishing{UserId: "mallory", Body: []byte("forged")})
	expectClose(t, closed, amqp.PreconditionFailed)
	ch, _ = c.Channel()
	if n := count(t, ch, q); n != 0 {
		t.Fatalf("the forged message was enqueued")
	}
}

// Every basic property and every header type survives the trip.
func TestPropertiesRoundTrip(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	ts := time.Unix(1700000000, 0)
	headers := amqp.Table{
		"string": "s", "bool": true, "int8": int8(-8), "uint8": uint8(8), "int16": int16(-16),
		"int32": int32(-32), "int64": int64(-64), "float32": float32(1.5), "float64": float64(2.25),
		"decimal": amqp.Decimal{Scale: 2, Value: 12345}, "time": ts, "bytes": []byte{0, 1, 2},
		"array": []interface{}{"a", int32(1), true}, "table": amqp.Table{"nested": "yes"}, "void": nil,
	}
	msg := amqp.Publishing{
		Headers: headers, ContentType: "application/json", ContentEncoding: "gzip",
		DeliveryMode: amqp.Persistent, Priority: 3, CorrelationId: "corr", ReplyTo: "reply",
		Expiration: "60000", MessageId: "id-1", Timestamp: ts, Type: "kind", UserId: "guest",
		AppId: "app", Body: []byte("payload"),
	}
	publishConfirmed(t, ch, "", q, msg)
	m := get(t, ch, q)
	if m.ContentType != msg.ContentType || m.ContentEncoding != msg.ContentEncoding ||
		m.DeliveryMode != msg.DeliveryMode || m.Priority != msg.Priority ||
		m.CorrelationId != msg.CorrelationId || m.ReplyTo != msg.ReplyTo ||
		m.Expiration != msg.Expiration || m.MessageId != msg.MessageId ||
		!m.Timestamp.Equal(msg.Timestamp) || m.Type != msg.Type || m.UserId != msg.UserId ||
		m.AppId != msg.AppId || string(m.Body) != "payload" {
		t.Fatalf("properties changed:\n got %+v", m)
	}
	for k, want := range headers {
		got, ok := m.Headers[k]
		if !ok {
			t.Errorf("header %s lost", k)
			continue
		}
		if tw, isTime := want.(time.Time); isTime {
			if tg, _ := got.(time.Time); !tg.Equal(tw) {
				t.Errorf("header %s: %v, expected %v", k, got, want)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("header %s: %#v, expected %#v", k, got, want)
		}
	}
}

// An empty body and a large one both arrive intact.
func TestBodySizes(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	big := strings.Repeat("abcdefgh", 300000) // 2.4 MB, many frames
	publishConfirmed(t, ch, "", q, body(""))
	publishConfirmed(t, ch, "", q, body(big))
	if m := get(t, ch, q); len(m.Body) != 0 {
		t.Fatalf("empty body came back as %d bytes", len(m.Body))
	}
	if m := get(t, ch, q); string(m.Body) != big {
		t.Fatalf("large body came back as %d bytes", len(m.Body))
	}
}

// no-local is accepted; RabbitMQ does not implement it, so a connection's
// own messages still reach its consumer.
func TestNoLocalAccepted(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	d, err := ch.Consume(q, "", true, false, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q, body("own"))
	receive(t, d)
}

// basic.qos with global=false applies to consumers created after it; one
// already running keeps its limit.
func TestPrefetchAppliesToNewConsumers(t *testing.T) {
	s := start(t)
	c, pub := confirmChannel(t, s)
	q1 := declareQueue(t, s, pub, "q1", nil)
	q2 := declareQueue(t, s, pub, "q2", nil)
	publishN(t, pub, q1, 3)
	publishN(t, pub, q2, 3)
	ch, _ := c.Channel()
	if err := ch.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	d1 := consume(t, ch, q1, false)
	if err := ch.Qos(3, 0, false); err != nil {
		t.Fatal(err)
	}
	d2 := consume(t, ch, q2, false)
	receive(t, d1)
	bodies(t, d2, 3)
	readyLeft(t, ch, map[string]int{q1: 2})
}
