package tests

import (
	"bytes"
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
)

// Shutdown returns within limits.shutdown_timeout whatever its clients are
// doing, and tells those it can reach 320 CONNECTION_FORCED. Here: a
// publisher held by a resource alarm that never clears, a client stopped in
// the middle of a frame, a socket still in the handshake, and a consumer
// that stopped reading with megabytes on their way to it.
func TestShutdownInAnyClientState(t *testing.T) {
	if reference() != "" {
		t.Skip("needs Warren")
	}
	const timeout = 2 * time.Second
	b := newBroker(t, func(c *config.Config) {
		c.Limits.ShutdownTimeout = config.Duration(timeout)
		c.Resources.MemoryHighWatermark = 0
		c.Resources.DiskFreeLimit = 0
	})
	s := &server{b: b, url: url(b), t: t}

	// A consumer that never reads its socket, with 16 MiB queued for it.
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	big := bytes.Repeat([]byte("x"), 256<<10)
	for i := 0; i < 64; i++ {
		publishConfirmed(t, ch, "", q, amqp.Publishing{Body: big})
	}
	slow := rawDial(t, s)
	slow.handshake(defaultHandshake())
	slow.openChannel(1)
	slow.consume(1, q, true)
	eventually(t, "deliveries to the slow consumer", func() bool { return count(t, ch, q) < 64 })

	// A publisher held by an alarm nobody will clear.
	b.Alarm().Set(true, "test alarm")
	pc, pch := channel(t, s)
	blocked := pc.NotifyBlocked(make(chan amqp.Blocking, 1))
	publisherClosed := pc.NotifyClose(make(chan *amqp.Error, 1))
	publish(t, pch, "", q, body("held"))
	expectBlocking(t, blocked, true)

	// A client stopped in the middle of a frame, and one in the handshake.
	mid := rawDial(t, s)
	mid.handshake(defaultHandshake())
	mid.write(encodeFrame(frameMethod, 1, methodPayload(20, 10, appendShortStr(nil, "")), frameEnd)[:5])
	handshaking := rawDial(t, s)
	handshaking.write(amqpHeader)
	handshaking.expect(10, 10)

	returned := make(chan error, 1)
	go func() { returned <- b.Shutdown(context.Background()) }()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(timeout + 10*time.Second): // the bound, and then some for a loaded machine
		t.Fatalf("Shutdown did not return within its %v bound", timeout)
	}
	e := expectClose(t, publisherClosed, amqp.ConnectionForced)
	if e.Reason != "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'" {
		t.Fatalf("publisher closed with %q", e.Reason)
	}
	mid.expectConnectionClose(amqp.ConnectionForced)
	handshaking.expectConnectionClose(amqp.ConnectionForced)
}
