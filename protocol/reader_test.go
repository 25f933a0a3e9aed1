package protocol

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// stream builds a byte stream of frames.
func stream(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

func rawFrame(typ uint8, channel uint16, payload []byte) []byte {
	b, start := BeginFrame(nil, typ, channel)
	b = append(b, payload...)
	return EndFrame(b, start)
}

// testFrames is a stream covering each frame type and sizes around the
// reader's initial buffer.
func testFrames() ([]Frame, []byte) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (initialBufferSize*3)/16)
	want := []Frame{
		{Type: FrameMethod, Channel: 1, Payload: (&BasicPublish{Exchange: "ex", RoutingKey: "rk"}).Append(nil)},
		{Type: FrameHeader, Channel: 1, Payload: AppendContentHeader(nil, ClassBasic, 5, 0, nil)},
		{Type: FrameBody, Channel: 1, Payload: []byte("hello")},
		{Type: FrameHeartbeat, Channel: 0, Payload: []byte{}},
		{Type: FrameBody, Channel: 65535, Payload: big},
		{Type: FrameBody, Channel: 2, Payload: big[:initialBufferSize-frameOverhead]},
		{Type: FrameBody, Channel: 3, Payload: big[:initialBufferSize-frameOverhead+1]},
		{Type: FrameMethod, Channel: 0, Payload: (&ConnectionCloseOk{}).Append(nil)},
	}
	var s []byte
	for _, f := range want {
		s = append(s, rawFrame(f.Type, f.Channel, f.Payload)...)
	}
	return want, s
}

func readAll(t *testing.T, r *FrameReader, want []Frame) {
	t.Helper()
	for i, w := range want {
		f, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.Type != w.Type || f.Channel != w.Channel || !bytes.Equal(f.Payload, w.Payload) {
			t.Fatalf("frame %d: got type %d channel %d %d bytes, want type %d channel %d %d bytes",
				i, f.Type, f.Channel, len(f.Payload), w.Type, w.Channel, len(w.Payload))
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestReadFrames(t *testing.T) {
	want, s := testFrames()
	r := NewFrameReader(bytes.NewReader(s))
	r.SetMaxFrameSize(1 << 20)
	readAll(t, r, want)
}

// TestReadFramesOneByteAtATime feeds the stream one byte per Read, so every
// frame boundary, header and payload is split.
func TestReadFramesOneByteAtATime(t *testing.T) {
	want, s := testFrames()
	r := NewFrameReader(&oneByteReader{b: s})
	r.SetMaxFrameSize(1 << 20)
	readAll(t, r, want)
}

// TestReadFramesEverySplit splits the stream at every position of the
// first frames into two reads.
func TestReadFramesEverySplit(t *testing.T) {
	want, s := testFrames()
	want = want[:4]
	n := 0
	for _, f := range want {
		n += len(f.Payload) + frameOverhead
	}
	s = s[:n]
	for i := range len(s) {
		r := NewFrameReader(io.MultiReader(bytes.NewReader(s[:i]), bytes.NewReader(s[i:])))
		readAll(t, r, want)
	}
}

func TestReadProtocolHeader(t *testing.T) {
	hb := AppendHeartbeatFrame(nil)
	r := NewFrameReader(&oneByteReader{b: append(ProtocolHeader[:], hb...)})
	h, err := r.ReadProtocolHeader()
	if err != nil || h != ProtocolHeader {
		t.Fatalf("header = %q, %v", h, err)
	}
	f, err := r.ReadFrame()
	if err != nil || f.Type != FrameHeartbeat || f.Channel != 0 || len(f.Payload) != 0 {
		t.Fatalf("heartbeat = %+v, %v", f, err)
	}

	r = NewFrameReader(strings.NewReader("AMQP\x00\x00\x09\x01"[:5]))
	if _, err := r.ReadProtocolHeader(); err != io.ErrUnexpectedEOF {
		t.Fatalf("short header: %v", err)
	}
	r = NewFrameReader(strings.NewReader("HTTP/1.1"))
	if h, err := r.ReadProtocolHeader(); err != nil || string(h[:]) != "HTTP/1.1" {
		t.Fatalf("other header = %q, %v", h, err)
	}
}

func TestHeartbeatBytes(t *testing.T) {
	if got := AppendHeartbeatFrame(nil); !bytes.Equal(got, mustHex(`08 0000 00000000 ce`)) {
		t.Fatalf("heartbeat = %x", got)
	}
}

func frameError(t *testing.T, err error, want string) {
	t.Helper()
	var fe *BadFrameError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want *BadFrameError", err)
	}
	if fe.Text != want || fe.Code() != FrameError {
		t.Fatalf("text %q, want %q", fe.Text, want)
	}
}

func TestReadFrameTooLarge(t *testing.T) {
	// Only the header is sent: the size must be refused before the reader
	// waits for (or buffers) the payload.
	hdr := mustHex(`03 0001 00030d38`) // 199992 bytes of payload: 200000 as frame_max counts
	r := NewFrameReader(bytes.NewReader(hdr))
	_, err := r.ReadFrame()
	frameError(t, err, "FRAME_ERROR - frame size 200000 exceeds frame_max 131072")
	if len(r.buf) > initialBufferSize {
		t.Errorf("buffer grew to %d for a refused frame", len(r.buf))
	}

	// The limit counts the whole frame: exactly frame_max passes.
	r = NewFrameReader(bytes.NewReader(rawFrame(FrameBody, 1, make([]byte, 4096-8))))
	r.SetMaxFrameSize(4096)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatalf("frame of exactly frame_max: %v", err)
	}
	r = NewFrameReader(bytes.NewReader(rawFrame(FrameBody, 1, make([]byte, 4096-7))))
	r.SetMaxFrameSize(4096)
	_, err = r.ReadFrame()
	frameError(t, err, "FRAME_ERROR - frame size 4097 exceeds frame_max 4096")
}

func TestSetMaxFrameSize(t *testing.T) {
	r := NewFrameReader(nil)
	if r.max != DefaultFrameMax {
		t.Fatalf("initial max %d", r.max)
	}
	r.SetMaxFrameSize(1 << 20)
	r.SetMaxFrameSize(0)
	if r.max != DefaultFrameMax {
		t.Fatalf("SetMaxFrameSize(0) gave %d", r.max)
	}
	r.SetMaxFrameSize(100)
	if r.max != FrameMinSize {
		t.Fatalf("SetMaxFrameSize(100) gave %d", r.max)
	}
}

func TestReadFrameBadEnd(t *testing.T) {
	f := rawFrame(FrameMethod, 1, []byte{0, 20, 0, 41})
	f[len(f)-1] = 'x'
	_, err := NewFrameReader(bytes.NewReader(f)).ReadFrame()
	frameError(t, err, "FRAME_ERROR - frame end octet 0x78, expected 0xce")
}

func TestReadFrameUnknownType(t *testing.T) {
	_, err := NewFrameReader(bytes.NewReader(rawFrame(4, 0, nil))).ReadFrame()
	frameError(t, err, "FRAME_ERROR - unknown frame type 4")
	// A client that sends a second protocol header ('A' = 65) mid-stream.
	_, err = NewFrameReader(bytes.NewReader(append(ProtocolHeader[:], 0, 0, 0, 0))).ReadFrame()
	frameError(t, err, "FRAME_ERROR - unknown frame type 65")
}

func TestReadFrameTruncated(t *testing.T) {
	f := rawFrame(FrameBody, 1, []byte("payload"))
	for n := 1; n < len(f); n++ {
		_, err := NewFrameReader(bytes.NewReader(f[:n])).ReadFrame()
		if err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
	if _, err := NewFrameReader(bytes.NewReader(nil)).ReadFrame(); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
}

type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	n := copy(p, r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 {
		return n, r.err
	}
	return n, nil
}

// TestReadFrameErrorWithData checks that data returned together with an
// error is used before the error is reported, and the error is kept.
func TestReadFrameErrorWithData(t *testing.T) {
	boom := errors.New("connection reset")
	hb := AppendHeartbeatFrame(nil)
	r := NewFrameReader(&errReader{data: append(hb, hb...), err: boom})
	for range 2 {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := r.ReadFrame(); err != boom {
			t.Fatalf("err = %v, want %v", err, boom)
		}
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestReadFrameNoProgress(t *testing.T) {
	if _, err := NewFrameReader(emptyReader{}).ReadFrame(); err != io.ErrNoProgress {
		t.Fatalf("err = %v", err)
	}
}

func TestBufferedAndHasBufferedFrame(t *testing.T) {
	hb := AppendHeartbeatFrame(nil)
	body := rawFrame(FrameBody, 1, []byte("abc"))
	r := NewFrameReader(bytes.NewReader(stream(hb, body, hb[:3])))
	if r.Buffered() != 0 || r.HasBufferedFrame() {
		t.Fatal("bytes buffered before the first read")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != len(body)+3 || !r.HasBufferedFrame() {
		t.Fatalf("Buffered() = %d, HasBufferedFrame() = %v", r.Buffered(), r.HasBufferedFrame())
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.Buffered() != 3 || r.HasBufferedFrame() {
		t.Fatalf("partial frame: Buffered() = %d, HasBufferedFrame() = %v", r.Buffered(), r.HasBufferedFrame())
	}
}

// TestPayloadValidUntilNextRead documents the aliasing contract: the
// payload is a window on the reader's buffer, capped so that appending to
// it cannot overwrite the next frame.
func TestPayloadValidUntilNextRead(t *testing.T) {
	a := rawFrame(FrameBody, 1, []byte("first"))
	b := rawFrame(FrameBody, 1, []byte("second"))
	r := NewFrameReader(bytes.NewReader(stream(a, b)))
	f, _ := r.ReadFrame()
	if cap(f.Payload) != len(f.Payload) {
		t.Fatalf("payload cap %d > len %d", cap(f.Payload), len(f.Payload))
	}
	_ = append(f.Payload, "XXXXXXXXXX"...)
	g, _ := r.ReadFrame()
	if string(g.Payload) != "second" {
		t.Fatalf("second payload = %q", g.Payload)
	}
}

func TestReadFrameAllocs(t *testing.T) {
	frame := rawFrame(FrameMethod, 1, (&BasicPublish{Exchange: "ex", RoutingKey: "rk"}).Append(nil))
	src := &loopReader{data: bytes.Repeat(frame, 100)}
	r := NewFrameReader(src)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("ReadFrame: %v allocs, want 0", allocs)
	}
}

// loopReader returns its data over and over, in reads of up to 4 KiB, like
// a socket with a steady supply.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	p = p[:min(len(p), 4096)]
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

// TestReaderBufferFollowsThePeer: an idle connection's reader keeps its
// small first buffer; one whose reads come back full (a busy publisher of
// small frames) moves to busyBufferSize, so a read takes many frames.
func TestReaderBufferFollowsThePeer(t *testing.T) {
	frame := rawFrame(FrameMethod, 1, make([]byte, 100))
	idle := NewFrameReader(iotest.OneByteReader(bytes.NewReader(bytes.Repeat(frame, 50))))
	for range 50 {
		if _, err := idle.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if len(idle.buf) != initialBufferSize {
		t.Errorf("a reader of one frame at a time has a %d-byte buffer, want %d", len(idle.buf), initialBufferSize)
	}
	busy := NewFrameReader(bytes.NewReader(bytes.Repeat(frame, 1000)))
	for range 1000 {
		if _, err := busy.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	if len(busy.buf) != busyBufferSize {
		t.Errorf("a reader of a busy stream has a %d-byte buffer, want %d", len(busy.buf), busyBufferSize)
	}
}
