package stream

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestFrameReader(t *testing.T) {
	var stream []byte
	cmds := allCommands()
	for _, c := range cmds {
		stream = AppendFrame(stream, c)
	}
	for _, rd := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream))} {
		r := NewFrameReader(rd, DefaultFrameMax)
		for _, c := range cmds {
			frame, err := r.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if want := c.Append(nil); !bytes.Equal(frame, want) {
				t.Fatalf("frame %x, want %x", frame, want)
			}
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("after the last frame: %v, want EOF", err)
		}
	}
}

// TestFrameReaderLargeFrame reads a frame much larger than the initial
// buffer.
func TestFrameReaderLargeFrame(t *testing.T) {
	big := &Publish{Version: 1, Messages: []PublishedMessage{{PublishingID: 1, Message: bytes.Repeat([]byte("x"), 100_000)}}}
	stream := AppendFrame(AppendFrame(AppendFrame(nil, &Heartbeat{}), big), &Heartbeat{})
	r := NewFrameReader(bytes.NewReader(stream), DefaultFrameMax)
	for i := range 3 {
		frame, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if _, err := Decode(frame); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if r.in.Size() > 2*(DefaultFrameMax+sizePrefix) {
		t.Fatalf("buffer grew to %d", r.in.Size())
	}
}

func TestFrameReaderTooLarge(t *testing.T) {
	stream := mustHex("00002001 0017 0001") // 8193 bytes announced
	r := NewFrameReader(bytes.NewReader(stream), InitialFrameMax)
	_, err := r.ReadFrame()
	var fe *FrameTooLargeError
	if !errors.As(err, &fe) || fe.Size != 8193 || fe.Max != InitialFrameMax || fe.Code() != CodeFrameTooLarge {
		t.Fatalf("%T %v", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "8193") || !strings.Contains(msg, "8192") {
		t.Fatalf("%q does not name the size and the limit", msg)
	}
	if r.in.Size() != initialBufferSize {
		t.Fatalf("buffer grew to %d for a refused frame", r.in.Size())
	}
	// The largest frame the limit allows is accepted.
	r = NewFrameReader(bytes.NewReader(append(mustHex("00002000"), make([]byte, 8192)...)), InitialFrameMax)
	if frame, err := r.ReadFrame(); err != nil || len(frame) != 8192 {
		t.Fatalf("frame at the limit: %d bytes, %v", len(frame), err)
	}
}

func TestFrameReaderSetMax(t *testing.T) {
	r := NewFrameReader(bytes.NewReader(nil), 0)
	if r.max != DefaultFrameMax {
		t.Fatalf("max %d for 0", r.max)
	}
	r.SetMaxFrameSize(100)
	if r.max != 100 {
		t.Fatalf("max %d", r.max)
	}
}

func TestFrameReaderEOF(t *testing.T) {
	frame := AppendFrame(nil, &Credit{SubscriptionID: 1, Credit: 1})
	for n := 1; n < len(frame); n++ {
		r := NewFrameReader(bytes.NewReader(frame[:n]), DefaultFrameMax)
		if _, err := r.ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	r := NewFrameReader(bytes.NewReader(nil), DefaultFrameMax)
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
}

// TestFrameReaderFrameBuffered: a frame counts as buffered only whole,
// its size prefix included.
func TestFrameReaderFrameBuffered(t *testing.T) {
	two := AppendFrame(AppendFrame(nil, &Credit{SubscriptionID: 1, Credit: 1}), &Credit{SubscriptionID: 1, Credit: 2})
	r := NewFrameReader(bytes.NewReader(two), DefaultFrameMax)
	if r.FrameBuffered() {
		t.Fatal("nothing read yet, and a frame buffered")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if !r.FrameBuffered() {
		t.Fatal("the second frame came with the first, and is not buffered")
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if r.FrameBuffered() {
		t.Fatal("both frames read, and a frame buffered")
	}

	// The first frame and part of the second's size prefix, then part of
	// its body: buffered bytes, but not a frame.
	first := len(two) / 2
	for _, cut := range []int{first + 2, first + 6} {
		r = NewFrameReader(io.MultiReader(bytes.NewReader(two[:cut]), bytes.NewReader(two[cut:])), DefaultFrameMax)
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
		if r.Buffered() == 0 || r.FrameBuffered() {
			t.Fatalf("cut at %d: %d bytes buffered, a frame buffered %v", cut, r.Buffered(), r.FrameBuffered())
		}
	}
}
