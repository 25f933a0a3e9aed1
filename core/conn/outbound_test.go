package conn

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
)

// TestOutboundReferencesLargeBodies: on a vectored connection a body of
// vectorMin or more is written from where it lies, between the buffer's
// parts, and counts toward the congestion mark; the bytes written are the
// frames a copying connection writes.
func TestOutboundReferencesLargeBodies(t *testing.T) {
	small, large := bytes.Repeat([]byte{'s'}, 10), bytes.Repeat([]byte{'L'}, 3*vectorMin+5)
	frames := func(o *outbound) []byte {
		b := o.begin()
		b = o.appendContent(b, 1, &message.Message{Body: small}, 4096)
		b = o.appendContent(b, 2, &message.Message{Body: large}, 4096)
		b = protocol.AppendHeartbeatFrame(b)
		o.end(b)
		if o.vectored && o.pending() < len(large) {
			t.Errorf("pending %d bytes, less than the referenced body's %d", o.pending(), len(large))
		}
		buf, segs, _, _, _ := o.take(nil, nil, nil)
		if !o.vectored {
			return buf
		}
		referenced := 0
		for _, s := range segs {
			if len(s) == 0 {
				continue
			}
			if p := uintptr(unsafe.Pointer(&s[0])); p >= uintptr(unsafe.Pointer(&large[0])) &&
				p <= uintptr(unsafe.Pointer(&large[len(large)-1])) {
				referenced += len(s)
			}
		}
		if referenced != len(large) {
			t.Errorf("%d of the large body's %d bytes referenced", referenced, len(large))
		}
		var out bytes.Buffer
		if _, err := segs.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	copied, vectored := frames(newOutbound(false)), frames(newOutbound(true))
	if !bytes.Equal(copied, vectored) {
		t.Fatalf("a vectored connection writes %d bytes, a copying one %d, and they differ", len(vectored), len(copied))
	}
	// And they are well-formed frames: two content headers, the bodies,
	// a heartbeat.
	r := protocol.NewFrameReader(bytes.NewReader(vectored))
	var body []byte
	n := 0
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if f.Type == protocol.FrameBody && f.Channel == 2 {
			body = append(body, f.Payload...)
		}
	}
	if !bytes.Equal(body, large) || n != 2+1+25+1 {
		t.Fatalf("%d frames, channel 2's body %d bytes", n, len(body))
	}
}

// socketPair is a loopback TCP connection: the broker's end and the
// client's.
func socketPair(t *testing.T) (broker, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return sc.(*net.TCPConn), cc.(*net.TCPConn)
}

// woken reports whether the writer was woken, and takes the wake.
func woken(o *outbound) bool {
	select {
	case <-o.wake:
		return true
	default:
		return false
	}
}

func readN(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

type flushFunc func()

func (f flushFunc) Flush(bool) { f() }

// TestRunsFlushFromTheirGoroutine: appends during a run leave the writer
// asleep, whoever holds the flush (the connection's reader, or another
// reader's Writes) writes them at the end, and a hold passes from one to
// the other without a write being lost or woken twice.
func TestRunsFlushFromTheirGoroutine(t *testing.T) {
	sc, cc := socketPair(t)
	o := newSocketOutbound(sc)
	if o.raw == nil {
		t.Fatal("a TCP connection has no raw writes")
	}
	appendBytes := func(p string) {
		b := o.begin()
		o.end(append(b, p...))
	}
	appendFor := func(p string, w *queue.Writes) {
		b := o.begin()
		o.endFor(append(b, p...), w, flushFunc(func() { o.flushQueued(true) }))
	}

	// The connection's own run.
	o.hold()
	appendBytes("one ")
	appendBytes("two ")
	if woken(o) {
		t.Fatal("an append during a run woke the writer")
	}
	if n := o.release(true); n != 8 {
		t.Fatalf("the run's end wrote %d bytes, want 8", n)
	}
	if woken(o) {
		t.Fatal("the run's end woke the writer although it wrote everything")
	}
	if got := string(readN(t, cc, 8)); got != "one two " {
		t.Fatalf("client read %q", got)
	}

	// Another reader's run: the connection joins its Writes once.
	var w queue.Writes
	appendFor("three ", &w)
	appendFor("four ", &w)
	if w.Len() != 1 || woken(o) {
		t.Fatalf("%d flushes queued, writer woken %v; want 1 and false", w.Len(), woken(o))
	}
	appendBytes("five ") // from a third goroutine: the queued flush covers it
	if woken(o) {
		t.Fatal("an append while a flush is queued woke the writer")
	}
	w.Flush(true)
	if got := string(readN(t, cc, 16)); got != "three four five " {
		t.Fatalf("client read %q", got)
	}

	// A queued flush that ends while the connection's own run holds the
	// wake leaves the writing to the run, and the other way round.
	appendFor("six ", &w)
	o.hold()
	appendFor("seven ", &w)
	w.Flush(true)
	if o.pending() == 0 {
		t.Fatal("the queued flush wrote during the connection's own run")
	}
	o.release(true)
	o.hold()
	appendFor("eight ", &w)
	if w.Len() != 0 {
		t.Fatal("a delivery during the connection's own run was queued elsewhere too")
	}
	o.release(true)
	if got := string(readN(t, cc, 16)); got != "six seven eight " {
		t.Fatalf("client read %q", got)
	}
	if woken(o) {
		t.Fatal("the writer was woken")
	}

	// After a long run the writer writes: woken once, nothing written here.
	o.hold()
	appendBytes("nine ")
	appendFor("ten ", &w)
	if n := o.release(false); n != 0 || !woken(o) {
		t.Fatalf("a long run's end wrote %d bytes itself, woke the writer %v; want 0 and true", n, !woken(o))
	}
}

// TestFlushLeavesTheRestToTheWriter: a flush writes once and never waits;
// what the socket did not take is the writer's, and goes out before
// anything appended after it.
func TestFlushLeavesTheRestToTheWriter(t *testing.T) {
	sc, cc := socketPair(t)
	_ = sc.SetWriteBuffer(4096)
	_ = cc.SetReadBuffer(4096)
	o := newSocketOutbound(sc)
	var want []byte
	appendRun := func(n int) {
		b := o.begin()
		for i := 0; i < n; i++ {
			b = append(b, byte(len(want)%251))
			want = append(want, byte(len(want)%251))
		}
		o.end(b)
	}
	// Fill the socket's buffers with flushes until one falls short.
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the socket never filled")
		}
		o.hold()
		appendRun(directMax)
		n := o.release(true)
		if n < directMax {
			break
		}
	}
	if !woken(o) {
		t.Fatal("a short flush did not wake the writer")
	}
	o.mu.Lock()
	carried := len(o.carry)
	o.mu.Unlock()
	if carried == 0 {
		t.Fatal("a short flush left no carry")
	}
	appendRun(1000) // after the carry: must follow it
	o.hold()
	appendRun(10)
	if o.release(true) != 0 {
		t.Fatal("a flush wrote ahead of the carry")
	}

	// The writer: what writeLoop does with a wake.
	done := make(chan error, 1)
	go func() {
		buf, segs, _, _, ok := o.take(nil, nil, nil)
		if !ok {
			done <- fmt.Errorf("take refused while nothing else writes")
			return
		}
		var err error
		if len(segs) > 0 {
			_, err = segs.WriteTo(sc)
		} else {
			_, err = sc.Write(buf)
		}
		o.relieved()
		done <- err
	}()
	got := readN(t, cc, len(want))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("byte %d of %d differs: the stream is out of order", i, len(want))
			}
		}
	}
}

// A connection without raw writes (TLS, or a pipe) never flushes from
// another goroutine: the end of a run wakes its writer. (A flush once
// called the missing raw writer, and the panic left the writer stuck.)
func TestRunsOnAConnectionWithoutRawWrites(t *testing.T) {
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	o := newSocketOutbound(sc)
	if o.raw != nil {
		t.Fatal("a pipe got raw writes")
	}
	o.hold()
	b := o.begin()
	o.end(append(b, "one"...))
	if !woken(o) {
		t.Fatal("an append on a connection without raw writes left the writer asleep")
	}
	b = o.begin()
	o.end(append(b, "two"...))
	woken(o)
	if n := o.release(true); n != 0 || !woken(o) {
		t.Fatalf("release wrote %d bytes itself; the writer must", n)
	}
	var w queue.Writes
	b = o.begin()
	o.endFor(append(b, "three"...), &w, flushFunc(func() { o.flushQueued(true) }))
	if w.Len() != 0 || !woken(o) {
		t.Fatal("a connection without raw writes joined a run's Writes")
	}
	if n := o.flushQueued(true); n != 0 || !woken(o) {
		t.Fatalf("a queued flush wrote %d bytes itself; the writer must", n)
	}
}
