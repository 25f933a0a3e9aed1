package stream

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

// FuzzDecode checks that any bytes decode to a command or to one of the
// package's errors, never a panic, and that a command that decodes
// encodes to bytes that decode to an equal command and encode to
// themselves.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenFrames {
		f.Add(mustHex(g.frame)[4:])
	}
	for _, c := range allCommands() {
		f.Add(c.Append(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if d, ok := c.(*Deliver); ok {
			readChunk(d.Chunk)
		}
		enc := c.Append(nil)
		c2, err := Decode(enc)
		if err != nil {
			t.Fatalf("%v re-encoded as %x does not decode: %v", c.Key(), enc, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip\n got %#v\nwant %#v", c2, c)
		}
		if enc2 := c2.Append(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzFrameReader checks that any byte stream yields frames or a clean
// error, the same whether it arrives at once or a byte at a time.
func FuzzFrameReader(f *testing.F) {
	var stream []byte
	for _, g := range goldenFrames {
		stream = append(stream, mustHex(g.frame)...)
	}
	f.Add(stream)
	f.Add(mustHex("00002001 0017 0001"))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := readAll(t, bytes.NewReader(data))
		split := readAll(t, iotest.OneByteReader(bytes.NewReader(data)))
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("whole read %d frames, split %d", len(whole), len(split))
		}
	})
}

// readAll reads frames until an error, checking the error and the buffer
// bound, and returns copies of the frames.
func readAll(t *testing.T, rd io.Reader) [][]byte {
	r := NewFrameReader(rd, InitialFrameMax)
	var frames [][]byte
	for {
		frame, err := r.ReadFrame()
		if r.in.Size() > 2*(InitialFrameMax+sizePrefix) {
			t.Fatalf("buffer grew to %d", r.in.Size())
		}
		if err != nil {
			var fe *FrameTooLargeError
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &fe) {
				t.Fatalf("error %T: %v", err, err)
			}
			return frames
		}
		frames = append(frames, bytes.Clone(frame))
		Decode(frame)
	}
}

// checkDecodeError fails unless err is one of the package's decode errors.
func checkDecodeError(t *testing.T, err error) {
	var de *DecodeError
	var ue *UnknownCommandError
	var ve *UnsupportedVersionError
	if !errors.As(err, &de) && !errors.As(err, &ue) && !errors.As(err, &ve) {
		t.Fatalf("error %T: %v", err, err)
	}
}

// readChunk parses a Deliver's chunk and its entries, for panics only.
func readChunk(chunk []byte) {
	_, data, err := ParseChunk(chunk)
	if err != nil {
		return
	}
	for len(data) > 0 {
		_, n, err := ReadEntry(data)
		if err != nil {
			return
		}
		data = data[n:]
	}
}
