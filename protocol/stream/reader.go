package stream

import (
	"encoding/binary"
	"io"
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
	rd   io.Reader
	buf  []byte
	r, w int    // buf[r:w] is read from rd but not yet returned
	max  uint32 // the largest frame accepted, without its size prefix
	err  error  // the error that ended the stream, kept for the next call
}

// NewFrameReader returns a FrameReader reading from rd that accepts
// frames up to maxFrame bytes (see SetMaxFrameSize).
func NewFrameReader(rd io.Reader, maxFrame uint32) *FrameReader {
	r := &FrameReader{rd: rd, buf: make([]byte, initialBufferSize)}
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
	size := binary.BigEndian.Uint32(r.buf[r.r:])
	if size > r.max {
		return nil, &FrameTooLargeError{Size: size, Max: r.max}
	}
	n := sizePrefix + int(size)
	if err := r.fill(n); err != nil {
		return nil, err
	}
	frame := r.buf[r.r+sizePrefix : r.r+n : r.r+n]
	r.r += n
	return frame, nil
}

// Buffered returns the number of bytes read from the stream but not yet
// returned, so a server knows when the next ReadFrame may block and it
// should flush first.
func (r *FrameReader) Buffered() int { return r.w - r.r }

// FrameBuffered says whether a whole frame is buffered: the next
// ReadFrame returns without reading from the stream. When it is false a
// server flushes what it owes before reading on.
func (r *FrameReader) FrameBuffered() bool {
	if r.w-r.r < sizePrefix {
		return false
	}
	return uint64(r.w-r.r) >= sizePrefix+uint64(binary.BigEndian.Uint32(r.buf[r.r:]))
}

// maxEmptyReads bounds how often a Read may return nothing before the
// reader gives up, as bufio does, so a broken io.Reader cannot spin us.
const maxEmptyReads = 100

// fill reads until at least n bytes are buffered from r.r on. n is at
// most the frame limit plus the prefix, so the buffer never grows beyond
// about twice that.
func (r *FrameReader) fill(n int) error {
	if r.w-r.r >= n {
		return nil
	}
	if len(r.buf)-r.r < n {
		// Not enough room behind the read position: move the unread
		// bytes to the front, into a larger buffer if need be.
		dst := r.buf
		if n > len(r.buf) {
			dst = make([]byte, max(n, 2*len(r.buf)))
		}
		r.w = copy(dst, r.buf[r.r:r.w])
		r.r = 0
		r.buf = dst
	}
	for empty := 0; r.w-r.r < n; {
		if r.err != nil {
			if r.err == io.EOF && r.w > r.r {
				return io.ErrUnexpectedEOF
			}
			return r.err
		}
		m, err := r.rd.Read(r.buf[r.w:])
		r.w += m
		if err != nil {
			r.err = err
			continue
		}
		if m == 0 {
			if empty++; empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}
