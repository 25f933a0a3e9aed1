package stream

import (
	"encoding/binary"
	"io"

	"github.com/warrenmq/warren/protocol/internal/wirebuf"
)

// Frame size limits, counted as frame_max is: the frame without its
// 4-byte size prefix.
const (
	// DefaultFrameMax is RabbitMQ's default stream frame_max (1 MiB).
	DefaultFrameMax = 1 << 20
	// InitialFrameMax is the limit RabbitMQ holds a connection to until
	// Open succeeds, whatever Tune says, so that an unauthenticated peer
	// cannot make it buffer much.
	InitialFrameMax = 8192
)

// initialBufferSize is a FrameReader's first buffer: enough for the
// handshake and the credits and heartbeats of an idle consumer.
const initialBufferSize = 4 << 10

// FrameReader splits a byte stream into frames through its own buffer.
// A returned frame aliases the buffer and is valid until the next
// ReadFrame.
type FrameReader struct {
	in  *wirebuf.Buffer
	max uint32 // the largest frame accepted, without its size prefix
}

// NewFrameReader returns a FrameReader reading from rd that accepts
// frames up to maxFrame bytes (see SetMaxFrameSize).
func NewFrameReader(rd io.Reader, maxFrame uint32) *FrameReader {
	r := &FrameReader{in: wirebuf.New(rd, initialBufferSize)}
	r.SetMaxFrameSize(maxFrame)
	return r
}

// SetMaxFrameSize sets the largest frame accepted, without the size
// prefix, as frame_max counts it: the negotiated frame_max after Open,
// InitialFrameMax before. 0, which in Tune means no limit, sets
// DefaultFrameMax: a peer must not make the broker buffer gigabytes.
func (r *FrameReader) SetMaxFrameSize(n uint32) {
	if n == 0 {
		n = DefaultFrameMax
	}
	r.max = n
}

// ReadFrame reads the next frame and returns it without its size prefix,
// ready for Decode. A frame over the limit is a *FrameTooLargeError,
// returned before any of it is read or buffered; the stream cannot go on
// after one. A stream that ends between frames returns io.EOF, inside a
// frame io.ErrUnexpectedEOF; other read errors are returned as they are.
func (r *FrameReader) ReadFrame() ([]byte, error) {
	if err := r.fill(sizePrefix); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(r.in.Unread())
	if size > r.max {
		return nil, &FrameTooLargeError{Size: size, Max: r.max}
	}
	n := sizePrefix + int(size)
	if err := r.fill(n); err != nil {
		return nil, err
	}
	return r.in.Take(n)[sizePrefix:], nil
}

// Buffered returns the number of bytes read from the stream but not yet
// returned, so a server knows when the next ReadFrame may block and it
// should flush first.
func (r *FrameReader) Buffered() int { return len(r.in.Unread()) }

// FrameBuffered says whether a whole frame is buffered: the next
// ReadFrame returns without reading from the stream. When it is false a
// server flushes what it owes before reading on.
func (r *FrameReader) FrameBuffered() bool {
	unread := r.in.Unread()
	if len(unread) < sizePrefix {
		return false
	}
	return uint64(len(unread)) >= sizePrefix+uint64(binary.BigEndian.Uint32(unread))
}

// fill buffers n bytes: at most the frame limit plus the prefix, so the
// buffer never grows beyond about twice that.
func (r *FrameReader) fill(n int) error { return r.in.Fill(n, sizePrefix+int(r.max)) }
