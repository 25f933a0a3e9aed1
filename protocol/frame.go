package protocol

import (
	"encoding/binary"
	"math"
	"slices"
)

// ProtocolHeader is what an AMQP 0-9-1 client sends before its first frame.
var ProtocolHeader = [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// A frame on the wire is a 7-byte header (type, channel, payload size), the
// payload, and the frame-end octet. frame_max counts all of it.
const (
	frameHeaderSize = 7
	frameOverhead   = frameHeaderSize + 1
)

// Frame is one frame as read. Payload aliases the FrameReader's buffer and
// is valid only until the next ReadFrame: copy what must outlive it.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// BeginFrame appends a frame header with a placeholder size and returns the
// buffer and the offset of the frame, for EndFrame. Append the payload in
// between.
func BeginFrame(b []byte, typ uint8, channel uint16) (buf []byte, start int) {
	start = len(b)
	return append(b, typ, byte(channel>>8), byte(channel), 0, 0, 0, 0), start
}

// EndFrame writes the size of the frame begun at start and appends the
// frame-end octet.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start+3:], uint32(len(b)-start-frameHeaderSize))
	return append(b, FrameEnd)
}

// AppendMethodFrame appends a method frame carrying m.
//
// m is an interface, so a method value built per call escapes to the heap;
// on a hot path keep one value and reuse it, or call the concrete type's
// Append between BeginFrame and EndFrame.
func AppendMethodFrame(b []byte, channel uint16, m Method) []byte {
	b, start := BeginFrame(b, FrameMethod, channel)
	b = m.Append(b)
	return EndFrame(b, start)
}

// AppendHeartbeatFrame appends a heartbeat frame (channel 0, no payload).
func AppendHeartbeatFrame(b []byte) []byte {
	return append(b, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// AppendContentFrames appends the content header frame for body and as many
// body frames as frameMax requires; frameMax counts whole frames, as
// negotiated in connection.tune, and 0 means no limit. An empty body has no
// body frames. flags and raw are the property flags and the encoded
// property list (as received in a ContentHeader, or from Properties.Append).
func AppendContentFrames(b []byte, channel uint16, classID uint16, flags uint16, raw []byte, body []byte, frameMax uint32) []byte {
	chunk := BodyFrameSize(frameMax)
	frames := 2 + len(body)/chunk // at least enough, without overflow
	b = slices.Grow(b, frames*frameOverhead+contentHeaderSize+len(raw)+len(body))
	b = AppendContentHeaderFrame(b, channel, classID, uint64(len(body)), flags, raw)
	for len(body) > 0 {
		n := min(chunk, len(body))
		b = AppendFrameHeader(b, FrameBody, channel, n)
		b = append(b, body[:n]...)
		b = append(b, FrameEnd)
		body = body[n:]
	}
	return b
}

// AppendContentHeaderFrame appends the content header frame of a body of
// bodySize bytes.
func AppendContentHeaderFrame(b []byte, channel uint16, classID uint16, bodySize uint64, flags uint16, raw []byte) []byte {
	b, start := BeginFrame(b, FrameHeader, channel)
	b = AppendContentHeader(b, classID, bodySize, flags, raw)
	return EndFrame(b, start)
}

// BodyFrameSize is the most body a body frame carries under frameMax (0:
// no limit).
func BodyFrameSize(frameMax uint32) int {
	if frameMax == 0 {
		return math.MaxInt32 - frameOverhead // "no limit", yet portable to 32-bit ints
	}
	// The spec lets any peer send frames up to frame-min-size; a smaller
	// frameMax is a caller bug, and honouring it could mean a frame per
	// byte.
	return int(max(frameMax, FrameMinSize)) - frameOverhead
}

// AppendFrameHeader appends the header of a frame whose payload of size
// bytes the caller writes next (or sends from where it lies), then the
// frame-end octet.
func AppendFrameHeader(b []byte, typ uint8, channel uint16, size int) []byte {
	return append(b, typ, byte(channel>>8), byte(channel), byte(size>>24), byte(size>>16), byte(size>>8), byte(size))
}

// contentHeaderSize is the fixed part of a content header payload: class
// id, weight, body size, property flags.
const contentHeaderSize = 2 + 2 + 8 + 2

// ContentHeader is a decoded content header frame payload. The property
// list is left encoded: the broker passes it on to consumers untouched, and
// ScanProperties or DecodeProperties read it when needed.
type ContentHeader struct {
	ClassID  uint16
	Weight   uint16 // unused by the spec; always 0 when sent
	BodySize uint64
	Flags    uint16 // property flags word, bit 15 for the first property
	Raw      []byte // the property list after the flags word; aliases the payload
}

// ParseContentHeader decodes a content header frame payload. Raw aliases
// payload. A flags word with the continuation bit (bit 0) set is a
// *BadSyntaxError: no class has more than 15 properties, so a second flags
// word is never needed.
func ParseContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < contentHeaderSize {
		return ContentHeader{}, syntaxErrorf("content header of %d bytes is shorter than %d", len(payload), contentHeaderSize)
	}
	h := ContentHeader{
		ClassID:  binary.BigEndian.Uint16(payload[0:]),
		Weight:   binary.BigEndian.Uint16(payload[2:]),
		BodySize: binary.BigEndian.Uint64(payload[4:]),
		Flags:    binary.BigEndian.Uint16(payload[12:]),
		Raw:      payload[contentHeaderSize:len(payload):len(payload)],
	}
	if h.Flags&1 != 0 {
		return ContentHeader{}, syntaxErrorf("content header property flags 0x%04x continue into a second word", h.Flags)
	}
	return h, nil
}

// AppendContentHeader appends a content header payload (not the frame):
// class id, weight 0, body size, property flags and the raw property list.
func AppendContentHeader(buf []byte, classID uint16, bodySize uint64, flags uint16, raw []byte) []byte {
	buf = binary.BigEndian.AppendUint16(buf, classID)
	buf = append(buf, 0, 0)
	buf = binary.BigEndian.AppendUint64(buf, bodySize)
	buf = binary.BigEndian.AppendUint16(buf, flags)
	return append(buf, raw...)
}
