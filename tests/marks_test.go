package tests

import (
	"bytes"
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// TestDeliveryMarksAreSmall: consuming a persistent message writes a small
// delivery mark and the deletes, not the message again. Before marks, a
// first delivery rewrote the whole entry: a consumed 4 KiB message put
// twice its body into the store.
func TestDeliveryMarksAreSmall(t *testing.T) {
	s := startWarren(t)
	_, ch := channel(t, s)
	q, err := ch.QueueDeclare("marks", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const n, size = 200, 4096
	body := bytes.Repeat([]byte{'m'}, size)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range n {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q.Name, false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("confirm: %v %v", ok, err)
		}
	}
	before, _ := s.b.StoreFigures()
	if err := ch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case d := <-deliveries:
			if err := d.Ack(false); err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d delivered", i, n)
		}
	}
	// A passive declare answers once the acks before it are handled.
	if _, err := ch.QueueDeclarePassive(q.Name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Every message's mark put, mark delete and entry delete have keys of
	// 18 or 19 bytes: wait until that much is committed and the figure
	// holds still, then compare it with the body.
	var committed, last uint64
	if !poll.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		after, _ := s.b.StoreFigures()
		committed = after.CommittedBytes - before.CommittedBytes
		still := committed >= n*3*18 && committed == last
		last = committed
		return still
	}) {
		t.Fatalf("%d bytes committed for %d consumed messages: the acks never all landed", committed, n)
	}
	perMessage := float64(committed) / n
	t.Logf("%.0f bytes committed per consumed %d-byte message", perMessage, size)
	if perMessage > size/8 {
		t.Fatalf("%.0f bytes committed per consumed %d-byte message, want under %d", perMessage, size, size/8)
	}
}
