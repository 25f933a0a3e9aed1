package tests

import (
	"bytes"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/core/conn"
)

// TestSlowConsumerOfLargeMessages: a no-ack consumer that never reads its
// socket pins at most the congestion mark and one more message in the
// broker, not the queue's 48 MiB; the rest waits in the queue, and the
// connection's send_pend says how much is waiting for the socket.
func TestSlowConsumerOfLargeMessages(t *testing.T) {
	s := startWarren(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	slow := rawDial(t, s)
	slow.handshake(defaultHandshake())
	slow.openChannel(1)
	slow.consume(1, q, true)
	slow.expect(60, 21)

	const n, size = 48, 1 << 20
	big := bytes.Repeat([]byte("x"), size)
	for range n {
		publishConfirmed(t, ch, "", q, amqp.Publishing{Body: big})
	}
	// The socket's buffers take a few MiB; the broker keeps the rest
	// queued once its outbound bytes pass the mark.
	eventually(t, "messages kept in the queue", func() bool { return count(t, ch, q) > 0 })
	most := 0
	for _, ci := range s.b.Server().Connections() {
		most = max(most, ci.SendPend)
	}
	if limit := conn.HighWater + size + 1<<10; most > limit || most == 0 {
		t.Fatalf("send_pend %d bytes for the slow consumer, want between 1 and %d", most, limit)
	}
	t.Logf("send_pend %d bytes; %d of %d messages still queued", most, count(t, ch, q), n)
}
