package streamproto

import (
	"errors"
	"net"
	"os"
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
// frame each however many messages they name. Anything may add to it.
// One goroutine at a time writes it (writing): the writer goroutine,
// woken by what is added, or the connection's reader, which writes the
// chunks a Credit brought itself (hold, flush) rather than wake the
// writer for them. A write takes everything queued at once and writes it
// in one writev. A frame built whole elsewhere (a Deliver's chunk) is
// queued as it is, not copied: segs holds it, and the small frames
// queued before it, in order; buf holds the small frames after the last
// of segs. A chunk sent from its file (sendFile) is in files, with the
// number of segs that go before it: it is sent with sendfile, and let go
// of once sent, or when the connection ends first.
type outbound struct {
	mu       lockorder.Mutex[lockorder.StreamprotoOutbound]
	segs     net.Buffers
	files    []filePart
	stopped  bool // the writer stopped: nothing more is sent
	buf      []byte
	spare    []byte // a small-frame buffer written before, for buf's next
	confirms map[uint8][]uint64
	errors   map[uint8][]stream.PublishingError
	closing  bool // a Close was queued: nothing more is taken
	writing  bool // a goroutine is writing what it took
	// held: the reader will flush what is queued (hold), so nothing wakes
	// the writer meanwhile.
	held atomic.Bool
	wake chan struct{}
	gone chan struct{} // closed when the writer stops
	sent atomic.Uint64 // bytes written
}

func newOutbound() *outbound {
	return &outbound{confirms: map[uint8][]uint64{}, errors: map[uint8][]stream.PublishingError{}, wake: make(chan struct{}, 1), gone: make(chan struct{})}
}

func (o *outbound) signal() {
	if o.held.Load() {
		return // the reader flushes it (flush takes it after held is cleared)
	}
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

// filePart is a chunk to send from its file after the first at segs;
// the first done bytes of it went (a flush the socket stopped).
type filePart struct {
	at   int
	done int
	fc   *streams.Formed
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
	release(files)
}

// sendClose queues a Close as the last frame.
func (o *outbound) sendClose(c *stream.Close) {
	o.mu.Lock()
	if !o.closing {
		o.buf = stream.AppendFrame(o.buf, c)
		o.closing = true
	}
	o.mu.Unlock()
	o.wakeWriter()
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

// wakeWriter wakes the writer goroutine, held or not.
func (o *outbound) wakeWriter() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take claims the socket and returns everything queued, as buffers to
// write in order, the last of them small (the small frames, in spare's
// place) when there are any, the small frames' buffer, and the chunks to
// send from files among them. It returns ok false, taking nothing, when
// nothing is queued or another goroutine is writing; a taker calls
// release once it wrote.
func (o *outbound) take() (segs net.Buffers, files []filePart, small []byte, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.writing || len(o.segs) == 0 && len(o.buf) == 0 && len(o.confirms) == 0 && len(o.errors) == 0 {
		return nil, nil, nil, false
	}
	o.writing = true
	segs, files = o.segs, o.files
	o.segs, o.files = nil, nil
	out := o.buf
	o.buf, o.spare = o.spare[:0], nil
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
	return segs, files, out, true
}

// release ends a take's write. rest and restFiles are what the socket
// did not take (a flush that would have waited), put back before
// anything queued since (or let go of, the writer having stopped); small
// is the take's small-frame buffer, kept for the next when all went. The
// writer is woken when anything is left.
func (o *outbound) release(rest net.Buffers, restFiles []filePart, small []byte) {
	o.mu.Lock()
	o.writing = false
	if o.stopped {
		o.mu.Unlock()
		release(restFiles)
		return
	}
	if len(rest) > 0 || len(restFiles) > 0 {
		for i := range o.files {
			o.files[i].at += len(rest)
		}
		o.segs = append(rest, o.segs...)
		o.files = append(restFiles, o.files...)
	} else if cap(small) <= 1<<20 {
		o.spare = small
	}
	more := len(o.segs) > 0 || len(o.buf) > 0 || len(o.confirms) > 0 || len(o.errors) > 0
	o.mu.Unlock()
	if more {
		o.wakeWriter()
	}
}

// hold has what is queued from now on wait for the reader's flush: the
// reader holds the outbound while it serves a Credit, whose chunks it
// then writes itself.
func (o *outbound) hold() { o.held.Store(true) }

// flush ends a hold: the reader writes what is queued, as far as the
// socket takes it without waiting (sendfile_linux.go's writeNow), and
// leaves the rest to the writer. A reader that waited on the socket
// would stop reading, and a client that writes before it reads would
// then wait on it: so it never waits.
func (o *outbound) flush(nc net.Conn) {
	o.held.Store(false)
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		o.wakeWriter()
		return
	}
	o.mu.Lock()
	closing := o.closing || o.stopped
	o.mu.Unlock()
	if closing {
		o.wakeWriter()
		return
	}
	segs, files, small, ok := o.take()
	if !ok {
		return // nothing queued, or the writer is writing and will look again
	}
	n, rest, restFiles, err := writeNow(tc, segs, files)
	if errors.Is(err, os.ErrDeadlineExceeded) && n == 0 {
		// The writer's last deadline passed since: it bounds the writer's
		// waits, and this one does not wait.
		_ = tc.SetWriteDeadline(time.Time{})
		n, rest, restFiles, err = writeNow(tc, rest, restFiles)
	}
	o.sent.Add(uint64(n))
	if err != nil {
		// The writer meets the same error and ends the connection.
		release(restFiles)
		o.release(nil, nil, nil)
		nc.Close()
		return
	}
	o.release(rest, restFiles, small)
}

// release lets go of files not sent.
func release(files []filePart) {
	for _, f := range files {
		f.fc.Release()
	}
}

// writeOut writes segs, with files among them where they go, waiting on
// the socket; it lets go of every file, sent or not.
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
			k, err = sendChunkFile(nc, f.fc, f.done)
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

// sendChunkFile sends fc from its byte from: with sendfile from its file
// to a TCP socket, else (TLS, or a file with no descriptor) read and
// written.
func sendChunkFile(nc net.Conn, fc *streams.Formed, from int) (int, error) {
	if tc, ok := nc.(*net.TCPConn); ok {
		if fd, off, ok := fc.Fd(); ok {
			if n, err := sendfile(tc, fd, off+int64(from), fc.Len-from); n > 0 || !errors.Is(err, errors.ErrUnsupported) {
				return n, err
			}
		}
	}
	b := make([]byte, fc.Len)
	if err := fc.ReadAt(b); err != nil {
		return 0, err
	}
	return nc.Write(b[from:])
}

// write runs the writer: it writes what is queued when woken, a
// heartbeat after a quiet interval, and ends when done closes or a write
// fails (the socket is then closed, which ends the reader too).
func (o *outbound) write(nc net.Conn, heartbeat <-chan time.Duration, done <-chan struct{}) {
	defer close(o.gone)
	defer o.stop()
	var tick <-chan time.Time
	var sentAtTick uint64
	for {
		select {
		case <-done:
			// Write what is left (a Close, say) before going. The reader
			// has ended: nothing else writes.
			if bufs, files, _, ok := o.take(); ok {
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
			// Quiet since the last tick (whoever wrote): a heartbeat.
			if sent := o.sent.Load(); sent == sentAtTick {
				o.send(&stream.Heartbeat{})
				o.wakeWriter()
			} else {
				sentAtTick = sent
			}
			continue
		case <-o.wake:
		}
		bufs, files, small, ok := o.take()
		if !ok {
			continue
		}
		_ = nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		n, err := writeOut(nc, bufs, files)
		o.sent.Add(uint64(n))
		if err != nil {
			o.release(nil, nil, nil)
			nc.Close()
			return
		}
		o.mu.Lock()
		closing := o.closing && len(o.buf) == 0 && len(o.segs) == 0 && len(o.files) == 0
		o.mu.Unlock()
		o.release(nil, nil, small)
		if closing {
			// The Close went: give the client a moment to answer, then
			// hang up (the reader ends on the closed socket).
			time.AfterFunc(time.Second, func() { nc.Close() })
		}
	}
}
