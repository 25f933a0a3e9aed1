package vhost_test

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
)

// The dead-letter fan-out of issue 7: fanout dlx1 feeds queues A and B; A
// holds one message (drop-head) and dead-letters to fanout dlx2, which
// feeds B; S dead-letters to dlx1. Rejecting S's message moves it into A
// and B at once, and A, now over its limit, dead-letters its oldest
// message into B while the move still had B locked: the rejecting
// goroutine deadlocked on itself. RabbitMQ ends with A=1, B=2.
func TestDeadLetterFanOutIntoAQueueThatDeadLettersAgain(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			v := newTestVHost(t, durable)
			mustExchange(t, v, "dlx1", "fanout", nil)
			mustExchange(t, v, "dlx2", "fanout", nil)
			// A is declared before B, so the move locks A first.
			a := mustQueue(t, v, "A", protocol.Table{"x-max-length": int32(1), "x-dead-letter-exchange": "dlx2"})
			b := mustQueue(t, v, "B", nil)
			s := mustQueue(t, v, "S", protocol.Table{"x-dead-letter-exchange": "dlx1"})
			mustBind(t, v, "dlx1", "A", "")
			mustBind(t, v, "dlx1", "B", "")
			mustBind(t, v, "dlx2", "B", "")

			publish(t, v, "", "A", "first in A")
			publish(t, v, "", "S", "from S")
			within(t, "rejecting S's message", func() {
				d, _, ok := s.Get(false)
				if !ok {
					t.Error("S is empty")
					return
				}
				s.Reject([]queue.Entry{d.Entry})
			})
			within(t, "reading the queues", func() {
				if got := bodies(t, a); len(got) != 1 || got[0] != "from S" {
					t.Errorf("A holds %q, want [from S]", got)
				}
				// B got S's message from dlx1 and A's dropped one from dlx2;
				// the order between the two is the order of the moves.
				got := bodies(t, b)
				if len(got) != 2 {
					t.Errorf("B holds %q, want both messages", got)
				}
			})
			// Nothing else in the vhost is stuck behind it.
			within(t, "declaring and publishing elsewhere", func() {
				mustQueue(t, v, "unrelated", nil)
				publish(t, v, "", "unrelated", "x")
				_ = v.Queues()
			})
		})
	}
}
