// Package wirebuf is the read buffer the protocol codecs' readers share
// (the stream protocol's frames, MQTT's packets): it reads from a stream
// into one buffer and hands out slices of it, so that a frame or packet
// is not copied out. A slice handed out is valid until the next Fill.
//
// Its buffer grows to hold what Fill is asked for and never beyond
// about twice the largest size a caller allows, which each reader bounds
// before asking (a frame's or packet's size is checked against its limit
// first).
package wirebuf

import "io"

// maxEmptyReads bounds how often a Read may return nothing before the
// buffer gives up, as bufio does, so a broken io.Reader cannot spin us.
const maxEmptyReads = 100

// Buffer is a stream's unread bytes.
type Buffer struct {
	rd   io.Reader
	buf  []byte
	r, w int   // buf[r:w] is read from rd but not yet taken
	err  error // the error that ended the stream, kept for the next call
}

// New returns a Buffer reading from rd, starting with size bytes.
func New(rd io.Reader, size int) *Buffer {
	return &Buffer{rd: rd, buf: make([]byte, size)}
}

// Fill reads until at least n bytes are buffered. A larger buffer, when
// one is needed, is twice the old one but at most limit (and at least
// n). A stream that ends before n bytes returns io.ErrUnexpectedEOF if
// some are buffered, io.EOF if none; other read errors as they are.
func (b *Buffer) Fill(n, limit int) error {
	if b.w-b.r >= n {
		return nil
	}
	if len(b.buf)-b.r < n {
		// Not enough room behind the read position: move the unread
		// bytes to the front, into a larger buffer if need be.
		dst := b.buf
		if n > len(b.buf) {
			dst = make([]byte, max(n, min(2*len(b.buf), limit)))
		}
		b.w = copy(dst, b.buf[b.r:b.w])
		b.r = 0
		b.buf = dst
	}
	for empty := 0; b.w-b.r < n; {
		if b.err != nil {
			if b.err == io.EOF && b.w > b.r {
				return io.ErrUnexpectedEOF
			}
			return b.err
		}
		m, err := b.rd.Read(b.buf[b.w:])
		b.w += m
		if err != nil {
			b.err = err
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

// Unread is what is buffered and not taken.
func (b *Buffer) Unread() []byte { return b.buf[b.r:b.w] }

// Take hands out the next n buffered bytes (Fill(n) made sure of them),
// with no capacity beyond them.
func (b *Buffer) Take(n int) []byte {
	p := b.buf[b.r : b.r+n : b.r+n]
	b.r += n
	return p
}

// Size is the buffer's size, for tests of its bound.
func (b *Buffer) Size() int { return len(b.buf) }
