package conn

import (
	"sync/atomic"

	"github.com/warrenmq/warren/core/vhost"
)

// Flow control for publishes a log takes later. A quorum queue, a stream
// and a queue on another node take a message by committing it to a log,
// which a busy log does a round or more later. Without a bound, a
// publisher that does not wait for its confirms hands the log more than
// it commits in a round; every round grows, and everything else the log
// carries (a consumer's acks, which the README promises are on disk
// within a second) waits behind it. RabbitMQ bounds the same with credit
// flow: a channel with more commands pending at a quorum queue than
// quorum_commands_soft_limit blocks its connection's reader. Warren does
// the same: a channel with more than flowMessages such publishes, or
// more than flowBytes of their bodies, not answered yet stops its
// connection's reader until answers bring it under both. The client
// sees TCP's back-pressure; the admin API shows the connection in state
// "flow"; the heartbeat monitor does not count the wait against the
// client. One message always goes: the check is made after it.
const (
	flowMessages = 512
	flowBytes    = 1 << 20
)

// flowCount is what a channel has handed to logs and not heard back on.
// The reader adds; the logs' goroutines subtract.
type flowCount struct {
	messages, bytes atomic.Int64
}

func (f *flowCount) over() bool {
	return f.messages.Load() > flowMessages || f.bytes.Load() > flowBytes
}

// holdFlow counts a publish of size bytes until f answers it.
func (ch *channel) holdFlow(size int64, f *vhost.Forwarding) {
	ch.flow.messages.Add(1)
	ch.flow.bytes.Add(size)
	f.Then(func(error) {
		ch.flow.messages.Add(-1)
		ch.flow.bytes.Add(-size)
		select {
		case ch.c.flowWake <- struct{}{}:
		default: // a wake is pending already
		}
	})
}

// waitForFlow holds the reader while the channel is over its bound.
func (ch *channel) waitForFlow() error {
	if !ch.flow.over() {
		return nil
	}
	c := ch.c
	c.endRun() // what the run holds back goes out: confirms, deliveries
	c.flowing.Store(true)
	defer c.flowing.Store(false)
	for ch.flow.over() {
		select {
		case <-c.flowWake:
		case <-c.stop:
			return errForced
		}
	}
	return nil
}
