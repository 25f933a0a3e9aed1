package tests

import (
	"encoding/binary"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Publisher confirms and transactions.

func TestConfirmDeliveryTags(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 100))
	q := declareQueue(t, s, ch, "", nil)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	for i := 0; i < 50; i++ {
		// Routed or not, every publish is confirmed.
		if i%2 == 0 {
			publish(t, ch, "", q, body("m"))
		} else {
			publish(t, ch, x, "nowhere", body("m"))
		}
	}
	for i := 1; i <= 50; i++ {
		select {
		case c := <-confirms:
			if c.DeliveryTag != uint64(i) || !c.Ack {
				t.Fatalf("confirm %d: tag %d ack %v", i, c.DeliveryTag, c.Ack)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no confirm %d", i)
		}
	}
}

// On the wire: tags increase, and a multiple ack covers every publish up
// to its tag.
func TestConfirmMultipleOnTheWire(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)

	r := rawConfirmChannel(t, s)
	const n = 200
	var batch []byte
	for i := 0; i < n; i++ {
		batch = append(batch, encodeFrame(frameMethod, 1, methodPayload(60, 40, publishArgs("", q)), frameEnd)...)
		batch = append(batch, encodeFrame(frameHeader, 1, contentHeader(1), frameEnd)...)
		batch = append(batch, encodeFrame(frameBody, 1, []byte("x"), frameEnd)...)
	}
	r.write(batch)
	confirmed := uint64(0)
	for confirmed < n {
		f := r.next()
		if !f.is(60, 80) {
			c, m := f.classMethod()
			t.Fatalf("expected basic.ack, got %d.%d", c, m)
		}
		a := f.payload[4:]
		tag, multiple := binary.BigEndian.Uint64(a), a[8]&1 != 0
		switch {
		case tag <= confirmed:
			t.Fatalf("ack tag %d after %d was confirmed", tag, confirmed)
		case !multiple && tag != confirmed+1:
			t.Fatalf("single ack of %d skips %d", tag, confirmed+1)
		case tag > n:
			t.Fatalf("ack tag %d beyond the %d publishes", tag, n)
		}
		confirmed = tag
	}
	if c := count(t, ch, q); c != n {
		t.Fatalf("%d messages enqueued, expected %d", c, n)
	}
}

// With x-overflow reject-publish, a publish to a full queue is nacked.
func TestConfirmNackRejectPublish(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"})
	results := []bool{}
	for i := 0; i < 4; i++ {
		results = append(results, confirmPublish(t, ch, "", q, false, body("m")))
	}
	if !results[0] || !results[1] || results[2] || results[3] {
		t.Fatalf("acks %v, expected [true true false false]", results)
	}
	if n := count(t, ch, q); n != 2 {
		t.Fatalf("%d messages in the queue", n)
	}
	// Room again: acked again.
	get(t, ch, q)
	if !confirmPublish(t, ch, "", q, false, body("m")) {
		t.Fatal("nacked with room in the queue")
	}
	// A message routed to a full queue and to another that takes it is
	// nacked too (one queue refused it).
	x := declareExchange(t, s, ch, "x", "fanout", nil)
	other := declareQueue(t, s, ch, "other", nil)
	bind(t, ch, q, "", x, nil)
	bind(t, ch, other, "", x, nil)
	if confirmPublish(t, ch, x, "", false, body("both")) {
		t.Fatal("acked although a queue rejected it")
	}
}

// confirm.select twice is fine; the sequence carries on.
func TestConfirmSelectTwice(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	publishConfirmed(t, ch, "", q, body("1"))
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publishConfirmed(t, ch, "", q, body("2"))
}

func TestTxCommit(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	observer, _ := c.Channel()
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q, body("1"))
	publish(t, ch, "", q, body("2"))
	if n := count(t, observer, q); n != 0 {
		t.Fatalf("%d messages visible before commit", n)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, observer, q); len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("after commit: %q", got)
	}
	// The channel stays transactional: the next publishes wait for the
	// next commit.
	publish(t, ch, "", q, body("3"))
	if n := count(t, observer, q); n != 0 {
		t.Fatalf("%d messages visible before the second commit", n)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, observer, q); n != 1 {
		t.Fatalf("%d messages after the second commit", n)
	}
}

func TestTxRollback(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	observer, _ := c.Channel()
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q, body("dropped"))
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, observer, q); n != 0 {
		t.Fatalf("%d messages after rollback", n)
	}
	publish(t, ch, "", q, body("kept"))
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	if got := drain(t, observer, q); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("after commit: %q", got)
	}
}

// Acks in a transaction take effect at commit; a rollback forgets them and
// the messages stay unacked.
func TestTxAcks(t *testing.T) {
	s := start(t)
	c, pub := confirmChannel(t, s)
	q := declareQueue(t, s, pub, "", nil)
	publishN(t, pub, q, 2)

	ch, _ := c.Channel()
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	m1, _, err := ch.Get(q, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ch.Get(q, false); err != nil {
		t.Fatal(err)
	}
	if err := m1.Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxRollback(); err != nil {
		t.Fatal(err)
	}
	ch.Close() // both were still unacked: both come back
	eventually(t, "both messages requeued", func() bool { return count(t, pub, q) == 2 })

	ch, _ = c.Channel()
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	m1, _, err = ch.Get(q, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ch.Get(q, false); err != nil {
		t.Fatal(err)
	}
	if err := m1.Ack(false); err != nil {
		t.Fatal(err)
	}
	if err := ch.TxCommit(); err != nil {
		t.Fatal(err)
	}
	ch.Close() // only the second comes back
	eventually(t, "one message requeued", func() bool { return count(t, pub, q) == 1 })
	if got := drain(t, pub, q); len(got) != 1 || got[0] != "1" {
		t.Fatalf("left %q", got)
	}
}

func TestTxWithoutSelect(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	expectCode(t, ch.TxCommit(), amqp.PreconditionFailed)
	ch, _ = c.Channel()
	expectCode(t, ch.TxRollback(), amqp.PreconditionFailed)
}

func TestConfirmAndTxExclusive(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	expectCode(t, ch.Tx(), amqp.PreconditionFailed)

	ch, _ = c.Channel()
	if err := ch.Tx(); err != nil {
		t.Fatal(err)
	}
	expectCode(t, ch.Confirm(false), amqp.PreconditionFailed)
}

// Persistent publishes that arrive together share one sync callback, and
// their confirms go out together: 30 publishes in one write to a durable
// queue are confirmed by a basic.ack or two with multiple set, not one
// each. Warren's own batching: RabbitMQ's frames may differ.
func TestPersistentConfirmsShareASync(t *testing.T) {
	s := startWarren(t)
	_, ch := channel(t, s)
	q := uniq(t, "durable")
	s.ownQueue(q)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	r := rawConfirmChannel(t, s)
	const n = 30
	var batch []byte
	for range n {
		batch = append(batch, encodeFrame(frameMethod, 1, methodPayload(60, 40, publishArgs("", q)), frameEnd)...)
		batch = append(batch, encodeFrame(frameHeader, 1, persistentContentHeader(1), frameEnd)...)
		batch = append(batch, encodeFrame(frameBody, 1, []byte("x"), frameEnd)...)
	}
	r.write(batch)
	confirmed, frames := uint64(0), 0
	for confirmed < n {
		f := r.next()
		if !f.is(60, 80) {
			c, m := f.classMethod()
			t.Fatalf("expected basic.ack, got %d.%d", c, m)
		}
		frames++
		confirmed = binary.BigEndian.Uint64(f.payload[4:])
	}
	if frames > 3 {
		t.Fatalf("%d persistent publishes written at once were confirmed by %d basic.ack frames; want at most 3", n, frames)
	}
	if c := count(t, ch, q); c != n {
		t.Fatalf("%d messages in the durable queue, want %d", c, n)
	}
}
