package mqtt

import (
	"io"

	"github.com/warrenmq/warren/protocol/internal/wirebuf"
)

// Packet size limits, counted as MQTT 5.0's Maximum Packet Size counts:
// the whole packet, fixed header included.
const (
	// DefaultMaxPacketSize is RabbitMQ's mqtt.max_packet_size_authenticated
	// default (16 MiB): the limit once a client is authenticated.
	DefaultMaxPacketSize = 16 << 20
	// InitialMaxPacketSize is RabbitMQ's
	// mqtt.max_packet_size_unauthenticated default (64 KiB): the limit
	// until CONNECT is accepted, so that an unauthenticated peer cannot
	// make the broker buffer much.
	InitialMaxPacketSize = 64 << 10
)

// initialBufferSize is a PacketReader's first buffer: enough for a
// CONNECT and the small packets of an idle session.
const initialBufferSize = 4 << 10

// PacketReader splits a byte stream into packets through its own buffer,
// as bufio would but without copying a packet out of it. A returned
// packet aliases the buffer and is valid until the next ReadPacket.
type PacketReader struct {
	in  *wirebuf.Buffer
	max int // the largest packet accepted, fixed header included
}

// NewPacketReader returns a PacketReader reading from rd that accepts
// packets up to maxPacket bytes (see SetMaxPacketSize).
func NewPacketReader(rd io.Reader, maxPacket int) *PacketReader {
	r := &PacketReader{in: wirebuf.New(rd, initialBufferSize)}
	r.SetMaxPacketSize(maxPacket)
	return r
}

// SetMaxPacketSize sets the largest packet accepted, fixed header
// included: InitialMaxPacketSize until CONNECT is accepted, then the
// Maximum Packet Size the server announces in CONNACK. 0 or less sets
// DefaultMaxPacketSize; more than MaxPacketSize sets MaxPacketSize.
func (r *PacketReader) SetMaxPacketSize(n int) {
	switch {
	case n <= 0:
		n = DefaultMaxPacketSize
	case n > MaxPacketSize:
		n = MaxPacketSize
	}
	r.max = n
}

// MaxPacketSize returns the limit SetMaxPacketSize set.
func (r *PacketReader) MaxPacketSize() int { return r.max }

// ReadPacket reads the next packet and returns it whole, fixed header
// included, ready for Decode. It checks the remaining length's encoding
// (a *DecodeError wrapping ErrVarInt) and refuses a packet over the limit
// (a *PacketTooLargeError) as soon as its fixed header is read, before
// any of its body is read or buffered; the stream cannot go on after
// either. A stream that ends between packets returns io.EOF, inside one
// io.ErrUnexpectedEOF; other read errors are returned as they are.
func (r *PacketReader) ReadPacket() ([]byte, error) {
	var h FixedHeader
	var hlen int
	for need := 2; ; need++ {
		if err := r.fill(need); err != nil {
			return nil, err
		}
		var err error
		h, hlen, err = ParseFixedHeader(r.in.Unread())
		if err == nil {
			break
		}
		if de := err.(*DecodeError); de.Err != ErrTruncated {
			return nil, err
		}
	}
	size := hlen + h.RemainingLength
	if size > r.max {
		return nil, &PacketTooLargeError{Type: h.Type, Size: size, Max: r.max}
	}
	if err := r.fill(size); err != nil {
		return nil, err
	}
	return r.in.Take(size), nil
}

// Buffered returns the number of bytes read from the stream but not yet
// returned.
func (r *PacketReader) Buffered() int { return len(r.in.Unread()) }

// PacketBuffered says whether a whole packet is buffered: the next
// ReadPacket returns without reading from the stream. When it is false a
// server flushes what it owes before reading on.
func (r *PacketReader) PacketBuffered() bool {
	unread := r.in.Unread()
	h, n, err := ParseFixedHeader(unread)
	return err == nil && len(unread) >= n+h.RemainingLength
}

// fill buffers n bytes: at most the packet limit, so the buffer never
// grows beyond about twice that.
func (r *PacketReader) fill(n int) error { return r.in.Fill(n, r.max) }
