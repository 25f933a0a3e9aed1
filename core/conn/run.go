package conn

import (
	"github.com/warrenmq/warren/protocol"
)

// A run is what the reader handles from one read: frames already buffered
// are handled before the socket is read again. During a run of quick frames
// (publishes and their content, acks, rejects, nacks, heartbeats) the
// replies to this client and the deliveries to other clients' consumers
// are held back, and written when the run ends. After a short run they
// are written from the reader's own goroutine when those sockets' writers
// are idle (outbound): a message that arrives alone then costs one write
// and no goroutine handoff. After a long run (a busy client) the writers
// are woken instead, once each, and write on another core while the
// reader reads on.
//
// Any frame that may wait (a declare waiting for the cluster, a
// transaction's sync, basic.get on a quorum queue) ends the run before it
// is handled, and so does a resource alarm's wait: nothing is held back
// while the reader could block on anything but reading the socket.

// quick reports whether f is handled without waiting on anything, so a
// run may go on through it.
func quick(f protocol.Frame) bool {
	switch f.Type {
	case protocol.FrameHeader, protocol.FrameBody, protocol.FrameHeartbeat:
		return true
	case protocol.FrameMethod:
		if len(f.Payload) < 4 {
			return false
		}
		class := uint16(f.Payload[0])<<8 | uint16(f.Payload[1])
		method := uint16(f.Payload[2])<<8 | uint16(f.Payload[3])
		if class != protocol.ClassBasic {
			return false
		}
		switch method {
		case 40, 80, 90, 120: // publish, ack, reject, nack
			return true
		}
	}
	return false
}

// shortRun is the most frames a run may hold and still write directly:
// a few publishes (three frames each) or acks.
const shortRun = 16

// beginRun holds this connection's writes back until endRun, counting the
// run's frames: a run is going on while runFrames > 0.
func (c *Conn) beginRun() {
	if c.runFrames == 0 {
		c.out.hold()
	}
	c.runFrames++
}

// endRun flushes what the run held back: its stored publishes' sync
// callbacks, the other connections its deliveries wrote to, then this one.
func (c *Conn) endRun() {
	if len(c.syncWait) > 0 {
		c.registerSyncs()
	}
	inRun, direct := c.runFrames > 0, c.runFrames <= shortRun
	c.runFrames = 0
	if c.writes.Len() > 0 {
		c.writes.Flush(direct)
	}
	if inRun {
		if n := c.out.release(direct); n > 0 {
			c.io.sent(n)
		}
	}
}

// Flush writes what another connection's run held back for this one
// (queue.Flusher).
func (c *Conn) Flush(direct bool) {
	if n := c.out.flushQueued(direct); n > 0 {
		c.io.sent(n)
	}
}
