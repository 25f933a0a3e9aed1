package conn

import (
	"sync"
	"sync/atomic"
)

// Outbound buffering thresholds. Past highWater a connection counts as
// congested: queues stop delivering to its consumers (they keep the
// messages) until the writer has drained it below lowWater. This is the
// broker's only buffer between a fast queue and a slow socket, so it bounds
// the memory a slow consumer can pin.
const (
	highWater = 4 << 20
	lowWater  = 1 << 20
	// keepBuffer is the largest spare buffer the writer keeps between
	// flushes; a burst's bigger buffer is left to the GC.
	keepBuffer = 1 << 20
)

// outbound is a connection's write side. Any goroutine appends frames to
// buf under mu (the reader answering methods, queues delivering to
// consumers); one writer goroutine swaps buf for an empty spare and writes
// it to the socket. Under load many frames go out in one write; when idle
// each goes out at once.
type outbound struct {
	mu        sync.Mutex
	buf       []byte
	closing   bool // no more appends; the writer flushes and closes the socket
	sealed    bool // connection.close or close-ok went out: nothing may follow
	congested bool // a delivery was refused for want of room

	wake chan struct{} // capacity 1: "there is something to write"
	// writes counts socket writes, for the heartbeat monitor.
	writes atomic.Uint64
}

func newOutbound() *outbound {
	return &outbound{wake: make(chan struct{}, 1)}
}

// begin locks the buffer and returns it for appending; end stores the
// extended buffer, unlocks and wakes the writer. Between the two the caller
// may only append. begin returns nil, still locked, once the connection is
// closing; end then discards.
func (o *outbound) begin() []byte {
	o.mu.Lock()
	if o.closing || o.sealed {
		return nil
	}
	if o.buf == nil {
		o.buf = make([]byte, 0, 4096)
	}
	return o.buf
}

func (o *outbound) end(b []byte) {
	if b != nil {
		o.buf = b
	}
	o.mu.Unlock()
	o.signal()
}

func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// roomFor reports, with mu held, whether a delivery may be appended; when
// not, it marks the connection congested so the writer kicks the consumers
// once it drains.
func (o *outbound) roomFor() bool {
	if len(o.buf) < highWater {
		return true
	}
	o.congested = true
	return false
}

// take swaps the pending bytes out for the writer.
func (o *outbound) take(spare []byte) (pending []byte, closing bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	pending, o.buf = o.buf, spare[:0]
	return pending, o.closing
}

// relieved reports, after a write, that the buffer had been congested and
// has drained enough for consumers to be served again.
func (o *outbound) relieved() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.congested && len(o.buf) < lowWater {
		o.congested = false
		return true
	}
	return false
}

// appendFinal appends the connection's last frame (connection.close or
// close-ok) and seals the buffer: AMQP allows nothing after it.
func (o *outbound) appendFinal(frame []byte) {
	o.mu.Lock()
	if !o.closing {
		o.buf = append(o.buf, frame...)
		o.sealed = true
	}
	o.mu.Unlock()
	o.signal()
}

// close stops further appends; what is buffered is still written.
func (o *outbound) close() {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	o.signal()
}
