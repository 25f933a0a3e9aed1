package conn

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/protocol"
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
	// vectorMin is the smallest body sent from where it lies rather than
	// copied into the buffer: below it a copy costs less than the extra
	// iovecs and the bookkeeping.
	vectorMin = 32 << 10
)

// outbound is a connection's write side. Any goroutine appends frames to
// buf under mu (the reader answering methods, queues delivering to
// consumers); one writer goroutine swaps buf for an empty spare and writes
// it to the socket. Under load many frames go out in one write; when idle
// each goes out at once.
//
// On a TCP connection a large body is not copied: appendContent cuts buf
// there, and segs holds, in order, buf's parts and the bodies between
// them, which the writer hands to writev. A message's body is immutable
// (package message), so it may be read while it is written. Only the
// part of buf from cut on is still to be added to segs; the parts before
// are never written again, so a later append that moves buf leaves them
// valid.
type outbound struct {
	mu       sync.Mutex
	buf      []byte
	vectored bool        // bodies of vectorMin and more are referenced, not copied
	segs     net.Buffers // buf[:cut]'s parts and the referenced bodies
	cut      int
	refBytes int // bytes of the referenced bodies

	closing   bool // no more appends; the writer flushes and closes the socket
	sealed    bool // connection.close or close-ok went out: nothing may follow
	congested bool // a delivery was refused for want of room

	wake chan struct{} // capacity 1: "there is something to write"
	// writes counts socket writes, for the heartbeat monitor.
	writes atomic.Uint64
}

// newOutbound makes a connection's outbound buffer; vectored says the
// socket takes vectored writes (writev), so large bodies need no copy.
func newOutbound(vectored bool) *outbound {
	return &outbound{wake: make(chan struct{}, 1), vectored: vectored}
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

// appendContent appends a message's content frames to b, which begin
// returned: the body is copied, or on a vectored connection referenced
// where it lies when it is large. mu is held.
func (o *outbound) appendContent(b []byte, channel uint16, flags uint16, props, body []byte, frameMax uint32) []byte {
	if !o.vectored || len(body) < vectorMin {
		return protocol.AppendContentFrames(b, channel, protocol.ClassBasic, flags, props, body, frameMax)
	}
	b = protocol.AppendContentHeaderFrame(b, channel, protocol.ClassBasic, uint64(len(body)), flags, props)
	chunk := protocol.BodyFrameSize(frameMax)
	for len(body) > 0 {
		n := min(chunk, len(body))
		b = protocol.AppendFrameHeader(b, protocol.FrameBody, channel, n)
		o.segs = append(o.segs, b[o.cut:len(b):len(b)], body[:n:n])
		o.refBytes += n
		o.cut = len(b)
		b = append(b, protocol.FrameEnd)
		body = body[n:]
	}
	return b
}

// pending is how many bytes wait to be written; mu is held.
func (o *outbound) pending() int { return len(o.buf) + o.refBytes }

// pendingBytes is pending for a listing: what waits for the writer to take
// it (what it took is in the socket's hands).
func (o *outbound) pendingBytes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending()
}

// HighWater is the outbound bytes past which a connection's consumers get
// no more deliveries until the socket drains.
const HighWater = highWater

// roomFor reports, with mu held, whether a delivery may be appended; when
// not, it marks the connection congested so the writer kicks the consumers
// once it drains.
func (o *outbound) roomFor() bool {
	if o.pending() < highWater {
		return true
	}
	o.congested = true
	return false
}

// take swaps the pending bytes out for the writer: buf, and when bodies
// were referenced, segs, which then hold all of buf's bytes between them.
// The writer passes back the buffers it is done with as spare.
func (o *outbound) take(spare []byte, spareSegs net.Buffers) (buf []byte, segs net.Buffers, closing bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	buf, o.buf = o.buf, spare[:0]
	if len(o.segs) > 0 {
		segs = append(o.segs, buf[o.cut:])
		o.segs, o.cut, o.refBytes = spareSegs[:0], 0, 0
	}
	return buf, segs, o.closing
}

// relieved reports, after a write, that the buffer had been congested and
// has drained enough for consumers to be served again.
func (o *outbound) relieved() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.congested && o.pending() < lowWater {
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

// isTCP reports whether nc takes vectored writes: net.Buffers uses writev
// on a TCP socket only. On another connection (TLS) a vectored write
// would be one small write per part.
func isTCP(nc net.Conn) bool {
	_, ok := nc.(*net.TCPConn)
	return ok
}
