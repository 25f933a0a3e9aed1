package conn

import (
	"testing"

	"github.com/warrenmq/warren/protocol"
)

// A channel that deletes a queue it consumes from hears queue.delete-ok
// first, then basic.cancel, as RabbitMQ 3.10.8 sends them (its channel
// answers before the queue's word that the consumer is gone arrives).
func TestQueueDeleteOkComesBeforeTheCancel(t *testing.T) {
	c := connect(t, newTestServer(t, Limits{}))
	c.handshake()
	c.openChannel(1)
	c.send(1, &protocol.QueueDeclare{Queue: "q"})
	expect[*protocol.QueueDeclareOk](c)
	for _, tag := range []string{"a", "b"} {
		c.send(1, &protocol.BasicConsume{Queue: "q", ConsumerTag: tag})
		expect[*protocol.BasicConsumeOk](c)
	}
	c.send(1, &protocol.QueueDelete{Queue: "q"})
	expect[*protocol.QueueDeleteOk](c)
	got := map[string]bool{}
	for range 2 {
		got[expect[*protocol.BasicCancel](c).ConsumerTag] = true
	}
	if !got["a"] || !got["b"] {
		t.Fatalf("cancelled %v, want a and b", got)
	}
}
