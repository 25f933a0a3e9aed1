package mqtt

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// writeTimeout bounds one write to the socket: a client that reads
// nothing for this long is cut off rather than holding memory.
const writeTimeout = 30 * time.Second

// outboundLimit is how many bytes may wait to be written before
// deliveries stop (a consumer's Deliver says no, and its queue waits for
// a Kick once they are written): a QoS 0 subscriber, which no prefetch
// holds back, cannot make the broker buffer its queue.
const outboundLimit = 1 << 20

// outbound is a connection's packets waiting to be written. Anyone may
// add to it (the reader its answers, a queue's dispatch its deliveries,
// the store's callback its PUBACKs); the writer goroutine writes what
// gathered in one write, then acknowledges the deliveries that wanted no
// PUBACK (settle) and kicks the queues whose consumers it turned away.
type outbound struct {
	mu      lockorder.Mutex[lockorder.MQTTOutbound]
	buf     []byte
	spare   []byte
	settle  []settlement       // acked once written
	kick    []queuetype.Source // kicked once written
	stopped bool               // the writer is gone: nothing more is taken
	wake    chan struct{}
	sent    atomic.Uint64 // bytes written
	version mqtt.Version  // the session's, set before anything is sent
}

// settlement is a delivery the client will not acknowledge (QoS 0 from
// a QoS 1 queue, or one too large for the client), acked once written.
type settlement struct {
	q     queuetype.Source
	entry queue.Entry
}

func newOutbound() *outbound {
	return &outbound{wake: make(chan struct{}, 1)}
}

func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// send queues one packet.
func (o *outbound) send(p mqtt.Packet) {
	o.mu.Lock()
	if !o.stopped {
		o.buf = p.Append(o.buf, o.version)
	}
	o.mu.Unlock()
	o.signal()
}

// write runs the writer until done is closed and everything queued by
// then is written, or a write fails.
func (o *outbound) write(nc net.Conn, done <-chan struct{}) {
	defer func() {
		o.mu.Lock()
		o.stopped = true
		o.buf, o.settle, o.kick = nil, nil, nil
		o.mu.Unlock()
	}()
	for {
		ending := false
		select {
		case <-o.wake:
		case <-done:
			ending = true
		}
		for {
			o.mu.Lock()
			buf, settle, kick := o.buf, o.settle, o.kick
			o.buf, o.settle, o.kick = o.spare[:0], nil, nil
			o.spare = nil
			o.mu.Unlock()
			if len(buf) == 0 && len(settle) == 0 && len(kick) == 0 {
				break
			}
			if len(buf) > 0 {
				_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
				n, err := nc.Write(buf)
				o.sent.Add(uint64(n))
				if err != nil {
					nc.Close() // the reader ends too
					requeueSettled(settle)
					return
				}
			}
			for _, s := range settle {
				s.q.Ack([]queue.Entry{s.entry})
			}
			kickEach(kick)
			if cap(buf) <= 4*outboundLimit {
				o.mu.Lock()
				o.spare = buf[:0]
				o.mu.Unlock()
			}
		}
		if ending {
			return
		}
	}
}

// requeueSettled gives back deliveries that were never written.
func requeueSettled(settle []settlement) {
	for _, s := range settle {
		s.q.Requeue([]queue.Entry{s.entry})
	}
}

// kickEach kicks each distinct queue once.
func kickEach(qs []queuetype.Source) {
	for i, q := range qs {
		dup := false
		for _, p := range qs[:i] {
			if p == q {
				dup = true
				break
			}
		}
		if !dup {
			q.Kick()
		}
	}
}
