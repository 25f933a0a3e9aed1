package streamproto

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	streams "github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/stream"
)

// writeTimeout bounds one write to the socket: a client that reads
// nothing for this long is cut off rather than holding memory.
const writeTimeout = 30 * time.Second

// outbound is a connection's frames waiting to be written, and the
// confirms and publish errors gathered per publisher, which go as one
// frame each however many messages they name. Anything may add to it;
// the writer goroutine takes it all at once and writes it, in one
// writev. A frame built whole elsewhere (a Deliver's chunk) is queued as
// it is, not copied: segs holds it, and the small frames queued before
// it, in order; buf holds the small frames after the last of segs. A
// chunk sent from its file (sendFile) is in files, with the number of
// segs that go before it: the writer sends it with sendfile, and lets go
// of it once sent, or when the connection ends first.
type outbound struct {
	mu       lockorder.Mutex[lockorder.StreamprotoOutbound]
	segs     net.Buffers
	files    []filePart
	stopped  bool // the writer stopped: nothing more is sent
	buf      []byte
	confirms map[uint8][]uint64
	errors   map[uint8][]stream.PublishingError
	closing  bool // a Close was queued: nothing more is taken
	wake     chan struct{}
	gone     chan struct{} // closed when the writer stops
	sent     atomic.Uint64 // bytes written
}

func newOutbound() *outbound {
	return &outbound{confirms: map[uint8][]uint64{}, errors: map[uint8][]stream.PublishingError{}, wake: make(chan struct{}, 1), gone: make(chan struct{})}
}

func (o *outbound) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// closed is closed once the writer stopped: nothing queued goes out.
func (o *outbound) closed() <-chan struct{} { return o.gone }

// send queues one frame.
func (o *outbound) send(c stream.Command) {
	o.mu.Lock()
	if !o.closing {
		o.buf = stream.AppendFrame(o.buf, c)
	}
	o.mu.Unlock()
	o.signal()
}

// sendFrame queues a frame built elsewhere: a head of its own and a
// body in parts (a Deliver's chunk, which other connections may send
// too), which the writer writes as they are and never changes.
func (o *outbound) sendFrame(head []byte, parts [][]byte) {
	o.mu.Lock()
	if !o.closing {
		if len(o.buf) > 0 {
			o.segs = append(o.segs, o.buf)
			o.buf = nil
		}
		o.segs = append(append(o.segs, head), parts...)
	}
	o.mu.Unlock()
	o.signal()
}

// filePart is a chunk to send from its file after the first at segs.
type filePart struct {
	at int
	fc *streams.Formed
}

// sendFile queues a frame whose body is a formed chunk in its file (a
// Deliver's, head its head), sent as it lies there; the outbound lets go
// of fc once it is sent or will not be.
func (o *outbound) sendFile(head []byte, fc *streams.Formed) {
	o.mu.Lock()
	if o.closing || o.stopped {
		o.mu.Unlock()
		fc.Release()
		return
	}
	if len(o.buf) > 0 {
		o.segs = append(o.segs, o.buf)
		o.buf = nil
	}
	o.segs = append(o.segs, head)
	o.files = append(o.files, filePart{at: len(o.segs), fc: fc})
	o.mu.Unlock()
	o.signal()
}

// stop ends the outbound, the writer having stopped: the chunks still
// queued from their files are let go of.
func (o *outbound) stop() {
	o.mu.Lock()
	o.stopped = true
	files := o.files
	o.files = nil
	o.mu.Unlock()
	for _, f := range files {
		f.fc.Release()
	}
}

// sendClose queues a Close as the last frame.
func (o *outbound) sendClose(c *stream.Close) {
	o.mu.Lock()
	if !o.closing {
		o.buf = stream.AppendFrame(o.buf, c)
		o.closing = true
	}
	o.mu.Unlock()
	o.signal()
}

// confirm queues a publisher's confirm of a publishing id.
func (o *outbound) confirm(publisher uint8, id uint64) {
	o.mu.Lock()
	o.confirms[publisher] = append(o.confirms[publisher], id)
	o.mu.Unlock()
	o.signal()
}

// fail queues a publisher's error for a publishing id.
func (o *outbound) fail(publisher uint8, id uint64, code stream.ResponseCode) {
	o.mu.Lock()
	o.errors[publisher] = append(o.errors[publisher], stream.PublishingError{PublishingID: id, Code: code})
	o.mu.Unlock()
	o.signal()
}

// take returns everything queued, as buffers to write in order, the last
// of them small (the small frames, in spare's place: a buffer written
// before, no longer referenced, which becomes the next buffer); with
// nothing queued it returns nil and keeps spare out of it.
func (o *outbound) take(spare []byte) (net.Buffers, []filePart, []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.segs) == 0 && len(o.buf) == 0 && len(o.confirms) == 0 && len(o.errors) == 0 {
		return nil, nil, nil
	}
	segs, files := o.segs, o.files
	o.segs, o.files = nil, nil
	out := o.buf
	o.buf = spare[:0]
	for id, ids := range o.confirms {
		out = stream.AppendFrame(out, &stream.PublishConfirm{PublisherID: id, PublishingIDs: ids})
		delete(o.confirms, id)
	}
	for id, errs := range o.errors {
		out = stream.AppendFrame(out, &stream.PublishError{PublisherID: id, Errors: errs})
		delete(o.errors, id)
	}
	if len(out) > 0 {
		segs = append(segs, out)
	}
	return segs, files, out
}

// writeOut writes segs, with files among them where they go; it lets go
// of every file, sent or not.
func writeOut(nc net.Conn, segs net.Buffers, files []filePart) (int64, error) {
	var n int64
	var err error
	prev := 0
	for i, f := range files {
		if err == nil && f.at > prev {
			part := segs[prev:f.at:f.at]
			var k int64
			k, err = part.WriteTo(nc)
			n += k
		}
		prev = f.at
		if err == nil {
			var k int
			k, err = sendChunkFile(nc, f.fc)
			n += int64(k)
		}
		f.fc.Release()
		files[i].fc = nil
	}
	if err == nil && prev < len(segs) {
		rest := segs[prev:]
		var k int64
		k, err = rest.WriteTo(nc)
		n += k
	}
	return n, err
}

// sendChunkFile sends fc: with sendfile from its file to a TCP socket,
// else (TLS, or a file with no descriptor) read and written.
func sendChunkFile(nc net.Conn, fc *streams.Formed) (int, error) {
	if tc, ok := nc.(*net.TCPConn); ok {
		if fd, off, ok := fc.Fd(); ok {
			if n, err := sendfile(tc, fd, off, fc.Len); n > 0 || !errors.Is(err, errors.ErrUnsupported) {
				return n, err
			}
		}
	}
	b := make([]byte, fc.Len)
	if err := fc.ReadAt(b); err != nil {
		return 0, err
	}
	return nc.Write(b)
}

// write runs the writer: it writes what is queued when woken, a
// heartbeat after a quiet interval, and ends when done closes or a write
// fails (the socket is then closed, which ends the reader too).
func (o *outbound) write(nc net.Conn, heartbeat <-chan time.Duration, done <-chan struct{}) {
	defer close(o.gone)
	defer o.stop()
	var spare []byte
	var tick <-chan time.Time
	wrote := false
	for {
		select {
		case <-done:
			// Write what is left (a Close, say) before going.
			if bufs, files, _ := o.take(spare); len(bufs) > 0 {
				_ = nc.SetWriteDeadline(time.Now().Add(time.Second))
				_, _ = writeOut(nc, bufs, files)
			}
			return
		case d := <-heartbeat:
			if d > 0 {
				t := time.NewTicker(d)
				defer t.Stop()
				tick = t.C
			}
			continue
		case <-tick:
			if !wrote {
				o.send(&stream.Heartbeat{})
			}
			wrote = false
			continue
		case <-o.wake:
		}
		bufs, files, b := o.take(spare)
		if len(bufs) == 0 {
			continue
		}
		_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		n, err := writeOut(nc, bufs, files)
		o.sent.Add(uint64(n))
		if err != nil {
			nc.Close()
			return
		}
		wrote = true
		o.mu.Lock()
		closing := o.closing && len(o.buf) == 0 && len(o.segs) == 0 && len(o.files) == 0
		o.mu.Unlock()
		if closing {
			// The Close went: give the client a moment to answer, then
			// hang up (the reader ends on the closed socket).
			time.AfterFunc(time.Second, func() { nc.Close() })
		}
		if cap(b) <= 1<<20 {
			spare = b
		} else {
			spare = nil
		}
	}
}
