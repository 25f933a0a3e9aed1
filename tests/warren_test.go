package tests

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/internal/poll"
)

// Warren's own behaviour, configured in ways the reference broker cannot
// be from a test: resource alarms and shutdown. These skip against
// RabbitMQ.

func expectBlocking(t testing.TB, b <-chan amqp.Blocking, active bool) amqp.Blocking {
	t.Helper()
	select {
	case got := <-b:
		if got.Active != active {
			t.Fatalf("connection.blocked active=%v, expected %v", got.Active, active)
		}
		return got
	case <-time.After(5 * time.Second):
		t.Fatalf("no connection.blocked active=%v within 5s", active)
	}
	return amqp.Blocking{}
}

// heldByAlarm checks, in the broker's own state, that the one publish a
// blocked connection sent has not reached queue q, whose consumers had
// delivered messages before it. Warren's reader stops at that publish
// before routing it, and marks its connection blocked while it waits
// there: once the mark is seen, the message either reached q before (q's
// ready count or its deliveries show it) or is still held. Waiting a while
// for no delivery instead would pass whenever the broker is slow.
func heldByAlarm(t testing.TB, s *server, q string, delivered uint64) {
	t.Helper()
	poll.Until(t, 5*time.Second, "the publisher's reader held by the alarm", func() bool {
		for _, ci := range s.b.Server().Connections() {
			if ci.Blocked {
				return true
			}
		}
		return false
	})
	v, _ := s.b.VHost("/")
	qi, ok := v.QueueInfo(q)
	if !ok {
		t.Fatalf("no queue %s", q)
	}
	if got := qi.Counters[stats.Deliver] + qi.Counters[stats.DeliverNoAck]; qi.Ready != 0 || qi.Unacked != 0 || got != delivered {
		t.Fatalf("%s: %d ready, %d unacked, %d delivered: want none ready and %d delivered, the held message not among them",
			q, qi.Ready, qi.Unacked, got, delivered)
	}
}

// With memory_high_watermark below what the process uses, the resource
// watcher (which samples once a second) raises the alarm and a publisher
// gets connection.blocked; its message waits until the alarm clears.
func TestMemoryAlarmBlocksPublishers(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.Resources.MemoryHighWatermark = 1e-9 })
	eventually(t, "the memory alarm", func() bool {
		raised, _, _ := s.b.Alarm().State()
		return raised
	})

	// A consumer on its own connection is not blocked.
	_, cch := channel(t, s)
	q := declareQueue(t, s, cch, "", nil)
	d := consume(t, cch, q, true)

	pc, pch := channel(t, s)
	blocked := pc.NotifyBlocked(make(chan amqp.Blocking, 4))
	publish(t, pch, "", q, body("held"))
	if b := expectBlocking(t, blocked, true); b.Reason == "" {
		t.Fatal("connection.blocked without a reason")
	}
	heldByAlarm(t, s, q, 0)

	// Cleared (until the watcher's next sample raises it again), the
	// publisher is unblocked and its message goes through.
	s.b.Alarm().Set(false, "")
	expectBlocking(t, blocked, false)
	if m := receive(t, d); string(m.Body) != "held" {
		t.Fatalf("got %q", m.Body)
	}
}

// The same, driving the alarm by hand: only publishing connections are
// held, and everyone else carries on.
func TestAlarmHoldsOnlyPublishers(t *testing.T) {
	s := startWarren(t, func(c *config.Config) {
		c.Resources.MemoryHighWatermark = 0
		c.Resources.DiskFreeLimit = 0
	})
	_, cch := confirmChannel(t, s)
	q := declareQueue(t, s, cch, "", nil)
	publishN(t, cch, q, 3)

	s.b.Alarm().Set(true, "test alarm")
	pc, pch := channel(t, s)
	blocked := pc.NotifyBlocked(make(chan amqp.Blocking, 4))
	publish(t, pch, "", q, body("held"))
	if b := expectBlocking(t, blocked, true); b.Reason != "test alarm" {
		t.Fatalf("reason %q", b.Reason)
	}

	// Consuming and declaring on a connection that does not publish work.
	d := consume(t, cch, q, true)
	if got := bodies(t, d, 3); got[0] != "0" || got[2] != "2" {
		t.Fatalf("got %q", got)
	}
	declareQueue(t, s, cch, "other", nil)
	heldByAlarm(t, s, q, 3)

	s.b.Alarm().Set(false, "")
	expectBlocking(t, blocked, false)
	if m := receive(t, d); string(m.Body) != "held" {
		t.Fatalf("got %q", m.Body)
	}
}

// Shutting the broker down closes every connection with 320
// CONNECTION_FORCED.
func TestShutdownForcesConnectionsClosed(t *testing.T) {
	if reference() != "" {
		t.Skip("needs Warren")
	}
	b := newBroker(t)
	s := &server{b: b, url: url(b), t: t}
	c1, ch := channel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	consume(t, ch, q, false)
	c2 := dial(t, s)
	closed1 := c1.NotifyClose(make(chan *amqp.Error, 1))
	closed2 := c2.NotifyClose(make(chan *amqp.Error, 1))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	expectClose(t, closed1, amqp.ConnectionForced)
	expectClose(t, closed2, amqp.ConnectionForced)
	if _, err := amqp.Dial(s.url); err == nil {
		t.Fatal("dial succeeded after shutdown")
	}
}
