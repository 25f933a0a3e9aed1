package conn

import (
	"net"
	"sync/atomic"
	"syscall"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
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
	// directMax is the most a flush writes from the flushing goroutine;
	// more is the writer's, so a run does not spend long on one socket.
	directMax = 8 << 10
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
//
// Waking the writer costs more than the write itself when a message
// arrives alone, so a run of work that appends (a reader handling what it
// read in one go) may hold the wake back and flush at the run's end, from
// its own goroutine: one non-blocking write when the writer is idle, the
// writer woken otherwise. Whoever holds a flush back keeps a claim on it:
// deferred is the connection's own reader's, queued another reader's
// (through its queue.Writes). Invariant: while bytes are pending and the
// writer was not woken for them, deferred or queued is set, and its holder
// will flush. writing is set while the writer or a flush writes; only one
// writes at a time, and carry, the unwritten rest of a flush, goes first.
type outbound struct {
	mu       lockorder.Mutex[lockorder.ConnOutbound]
	buf      []byte
	vectored bool        // bodies of vectorMin and more are referenced, not copied
	segs     net.Buffers // buf[:cut]'s parts and the referenced bodies
	cut      int
	refBytes int // bytes of the referenced bodies
	// held are the messages whose bodies segs reference, each holding its
	// body (message.Bodies) until the writer has written it.
	held []*message.Message

	closing   bool // no more appends; the writer flushes and closes the socket
	sealed    bool // connection.close or close-ok went out: nothing may follow
	congested bool // a delivery was refused for want of room

	deferred bool   // the connection's reader flushes at the end of its run
	queued   bool   // another run's Writes holds this connection for a flush
	writing  bool   // the writer or a flush is writing
	carry    []byte // what a flush could not write; the writer writes it first

	// For flushes from other goroutines, on TCP only: raw writes without
	// waiting, through rawWrite (a method value made once, so a flush
	// allocates nothing), with rawBuf and rawN its argument and result.
	raw      syscall.RawConn
	rawWrite func(fd uintptr) bool
	rawBuf   []byte
	rawN     int
	spare    []byte // a flush's buffer, kept between flushes

	wake chan struct{} // capacity 1: "there is something to write"
	// writes counts socket writes, for the heartbeat monitor.
	writes atomic.Uint64
}

// newOutbound makes a connection's outbound buffer; vectored says the
// socket takes vectored writes (writev), so large bodies need no copy.
func newOutbound(vectored bool) *outbound {
	return &outbound{wake: make(chan struct{}, 1), vectored: vectored}
}

// newSocketOutbound makes nc's outbound buffer: on TCP with vectored
// writes and flushes from the goroutine that appended.
func newSocketOutbound(nc net.Conn) *outbound {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return newOutbound(false)
	}
	o := newOutbound(true)
	if raw, err := tc.SyscallConn(); err == nil {
		o.raw = raw
		o.rawWrite = o.writeNow
	}
	return o
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
	held := (o.deferred || o.queued) && o.pending() <= directMax
	o.mu.Unlock()
	if !held {
		o.signal()
	}
}

// endFor is end from a run that flushes w when it ends: unless a flush is
// already held back, f (the connection) joins w instead of the writer
// being woken. Past directMax pending, the writer is woken at once in
// either case, so a burst's writing overlaps the rest of the run.
func (o *outbound) endFor(b []byte, w *queue.Writes, f queue.Flusher) {
	if w == nil || o.raw == nil {
		o.end(b)
		return
	}
	if b != nil {
		o.buf = b
	}
	if o.pending() > directMax {
		// More than a flush would write itself: the writer may as well
		// start now, while the run goes on.
		o.mu.Unlock()
		o.signal()
		return
	}
	if !o.deferred && !o.queued {
		o.queued = true
		w.Add(f)
	}
	o.mu.Unlock()
}

// hold starts the connection's reader's run: appends leave the writer
// asleep until release.
func (o *outbound) hold() {
	o.mu.Lock()
	o.deferred = o.raw != nil
	o.mu.Unlock()
}

// release ends the reader's run and flushes (directly, if direct); it
// returns the bytes written from this goroutine.
func (o *outbound) release(direct bool) int {
	o.mu.Lock()
	o.deferred = false
	return o.flushLocked(direct)
}

// flushQueued is the flush a Writes asked for; it returns the bytes
// written from this goroutine.
func (o *outbound) flushQueued(direct bool) int {
	o.mu.Lock()
	o.queued = false
	return o.flushLocked(direct)
}

// flushLocked, when nobody else holds a flush, writes what is pending with
// one non-blocking write from the calling goroutine if direct is set, the
// writer is idle and it is small; otherwise it wakes the writer. mu is
// held, and released.
func (o *outbound) flushLocked(direct bool) int {
	if o.deferred || o.queued || o.pending() == 0 {
		o.mu.Unlock()
		return 0
	}
	if !direct || o.raw == nil || o.writing || o.closing || len(o.carry) > 0 || len(o.segs) > 0 || len(o.buf) > directMax {
		o.mu.Unlock()
		o.signal()
		return 0
	}
	b := o.buf
	o.buf, o.spare = o.spare[:0], nil
	o.writing = true
	o.mu.Unlock()

	o.rawBuf = b
	if err := o.raw.Write(o.rawWrite); err != nil {
		o.rawN = 0
	}
	n := o.rawN
	o.rawBuf = nil
	if n > 0 {
		o.writes.Add(1)
	}

	o.mu.Lock()
	o.writing = false
	if n < len(b) {
		o.carry = b[n:] // the writer's now, ahead of what followed
	} else if cap(b) <= keepBuffer {
		o.spare = b[:0]
	}
	wake := o.pending() > 0 || o.closing
	o.mu.Unlock()
	if wake {
		o.signal()
	}
	return n
}

// writeNow is rawWrite: one write, never a wait for the socket to drain.
func (o *outbound) writeNow(fd uintptr) bool {
	n, err := syscall.Write(int(fd), o.rawBuf)
	if err != nil || n < 0 {
		n = 0
	}
	o.rawN = n
	return true
}

func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// appendContent appends m's content frames to b, which begin returned: the
// body is copied, or on a vectored connection referenced where it lies when
// it is large, and then held until it is written. The caller must hold m.
// mu is held.
func (o *outbound) appendContent(b []byte, channel uint16, m *message.Message, frameMax uint32) []byte {
	body := m.Body
	if !o.vectored || len(body) < vectorMin {
		return protocol.AppendContentFrames(b, channel, protocol.ClassBasic, m.Flags, m.Props, body, frameMax)
	}
	m.Hold()
	o.held = append(o.held, m)
	b = protocol.AppendContentHeaderFrame(b, channel, protocol.ClassBasic, uint64(len(body)), m.Flags, m.Props)
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
func (o *outbound) pending() int { return len(o.buf) + o.refBytes + len(o.carry) }

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
// were referenced or a flush left a carry, segs, which then hold all of
// buf's bytes between them, and held, the messages whose bodies they
// are: the writer releases them once written. The writer passes back the
// buffers it is done with as spare. ok is false while a flush writes: the
// flush wakes the writer again when it is done.
func (o *outbound) take(spare []byte, spareSegs net.Buffers, spareHeld []*message.Message) (buf []byte, segs net.Buffers, held []*message.Message, closing, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writing {
		return nil, nil, nil, false, false
	}
	o.writing = true
	buf, o.buf = o.buf, spare[:0]
	if len(o.carry) > 0 {
		segs = append(append(net.Buffers{o.carry}, o.segs...), buf[o.cut:])
		clear(o.segs)
		o.carry = nil
		o.segs, o.cut, o.refBytes = o.segs[:0], 0, 0
	} else if len(o.segs) > 0 {
		segs = append(o.segs, buf[o.cut:])
		o.segs, o.cut, o.refBytes = spareSegs[:0], 0, 0
	}
	if len(o.held) > 0 {
		held, o.held = o.held, spareHeld[:0]
	}
	return buf, segs, held, o.closing, true
}

// relieved ends a write of the writer's and reports that the buffer had
// been congested and has drained enough for consumers to be served again.
func (o *outbound) relieved() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writing = false
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
