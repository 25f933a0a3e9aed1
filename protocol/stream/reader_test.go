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
	if len(r.buf) > 2*(DefaultFrameMax+sizePrefix) {
		t.Fatalf("buffer grew to %d", len(r.buf))
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
	if len(r.buf) != initialBufferSize {
		t.Fatalf("buffer grew to %d for a refused frame", len(r.buf))
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
