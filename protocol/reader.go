package protocol

import (
	"encoding/binary"
	"io"
)

// DefaultFrameMax is the largest frame a FrameReader accepts until told
// otherwise: RabbitMQ's default frame_max.
const DefaultFrameMax = 131072

// initialBufferSize is what a FrameReader starts with: enough for the
// handshake and the heartbeats of an idle connection, which is most of a
// broker's connections' memory when it has thousands. A reader whose
// reads fill the buffer (a busy peer) moves to busyBufferSize, so that one
// read takes many small frames; a frame that does not fit grows the
// buffer, never beyond about twice the frame limit.
const (
	initialBufferSize = 4 << 10
	busyBufferSize    = 32 << 10
)

// FrameReader reads frames from a byte stream through its own buffer. A
// frame's payload is returned as a slice of that buffer rather than copied,
// so reading allocates nothing once the buffer is large enough for the
// biggest frame seen.
//
// The buffer holds a whole frame contiguously; the read position moves
// forward through it, and unread bytes are moved to the front only when the
// next frame would not fit behind them.
type FrameReader struct {
	rd   io.Reader
	buf  []byte
	r, w int    // buf[r:w] is read from rd but not yet returned
	max  uint32 // frame_max: the largest whole frame accepted
	err  error  // the error that ended the stream, kept for the next call
	full bool   // the last read filled the buffer: the peer sends more than it holds
}

// NewFrameReader returns a FrameReader reading from r with frame_max
// DefaultFrameMax.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{rd: r, buf: make([]byte, initialBufferSize), max: DefaultFrameMax}
}

// SetMaxFrameSize sets the largest frame accepted, counted as frame_max is:
// the whole frame, including the 7-byte header and the frame-end octet. 0
// restores DefaultFrameMax (the AMQP "no limit" is not offered: a peer must
// not make the broker buffer gigabytes). A value below FrameMinSize is
// raised to it, since the spec lets either peer send frames that large
// before tuning.
func (r *FrameReader) SetMaxFrameSize(n uint32) {
	if n == 0 {
		n = DefaultFrameMax
	}
	r.max = max(n, FrameMinSize)
}

// ReadProtocolHeader reads the 8 bytes a client sends before its first
// frame and returns them as read; compare them with ProtocolHeader.
func (r *FrameReader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	if err := r.fill(len(h)); err != nil {
		return h, err
	}
	copy(h[:], r.buf[r.r:])
	r.r += len(h)
	return h, nil
}

// ReadFrame reads the next frame. Its Payload aliases the reader's buffer
// and is valid until the next call.
//
// A malformed frame is a *BadFrameError. A stream that ends between frames
// returns io.EOF, inside a frame io.ErrUnexpectedEOF; other read errors are
// returned as they are.
func (r *FrameReader) ReadFrame() (Frame, error) {
	if err := r.fill(frameHeaderSize); err != nil {
		return Frame{}, err
	}
	h := r.buf[r.r : r.r+frameHeaderSize]
	typ := h[0]
	channel := binary.BigEndian.Uint16(h[1:])
	size := binary.BigEndian.Uint32(h[3:])
	switch typ {
	case FrameMethod, FrameHeader, FrameBody, FrameHeartbeat:
	default:
		return Frame{}, frameErrorf("unknown frame type %d", typ)
	}
	// Checked before reading on, so a peer cannot make the buffer grow by
	// announcing a huge frame.
	if total := uint64(size) + frameOverhead; total > uint64(r.max) {
		return Frame{}, frameErrorf("frame size %d exceeds frame_max %d", total, r.max)
	}
	n := int(size) + frameOverhead
	if err := r.fill(n); err != nil {
		return Frame{}, err
	}
	start := r.r
	if end := r.buf[start+n-1]; end != FrameEnd {
		return Frame{}, frameErrorf("frame end octet 0x%02x, expected 0x%02x", end, FrameEnd)
	}
	r.r += n
	payload := r.buf[start+frameHeaderSize : start+n-1 : start+n-1]
	return Frame{Type: typ, Channel: channel, Payload: payload}, nil
}

// Buffered returns the number of bytes read from the stream but not yet
// returned. When it is 0 the next ReadFrame blocks on the stream, so a
// broker flushes what it has written first.
func (r *FrameReader) Buffered() int { return r.w - r.r }

// HasBufferedFrame reports whether a whole frame is buffered, so that
// ReadFrame returns without reading from the stream. It is the exact form
// of the Buffered test: a partial frame is buffered but still blocks.
func (r *FrameReader) HasBufferedFrame() bool {
	if r.w-r.r < frameHeaderSize {
		return false
	}
	size := binary.BigEndian.Uint32(r.buf[r.r+3:])
	return uint64(r.w-r.r) >= uint64(size)+frameOverhead
}

// maxEmptyReads bounds how often a Read may return nothing before the
// reader gives up, as bufio does, so a broken io.Reader cannot spin us.
const maxEmptyReads = 100

// fill reads until at least n bytes are buffered from r.r on.
func (r *FrameReader) fill(n int) error {
	if r.w-r.r >= n {
		return nil
	}
	if r.r == r.w {
		r.r, r.w = 0, 0
	}
	if len(r.buf)-r.r < n {
		// Not enough room behind the read position: move the unread bytes
		// to the front, into a larger buffer if even that is too small.
		dst := r.buf
		if n > len(r.buf) {
			dst = make([]byte, max(n, 2*len(r.buf)))
		} else if r.full && len(r.buf) < busyBufferSize {
			dst = make([]byte, busyBufferSize)
		}
		r.w = copy(dst, r.buf[r.r:r.w])
		r.r = 0
		r.buf = dst
	}
	for empty := 0; r.w-r.r < n; {
		if r.err != nil {
			return r.streamError()
		}
		m, err := r.rd.Read(r.buf[r.w:])
		r.w += m
		r.full = r.w == len(r.buf)
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

// streamError translates the stream's final error for a caller that needs
// more bytes than are buffered.
func (r *FrameReader) streamError() error {
	if r.err == io.EOF && r.w > r.r {
		return io.ErrUnexpectedEOF
	}
	return r.err
}
