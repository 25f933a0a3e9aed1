package mqtt

import (
	"errors"
	"fmt"
)

// What is wrong with a packet that does not decode; a *DecodeError wraps
// one of these, so errors.Is tells them apart. The validation helpers
// (ValidateString, ValidateTopicName, ValidateTopicFilter,
// ParseSharedSubscription) wrap them too.
var (
	ErrTruncated           = errors.New("truncated")
	ErrTrailingBytes       = errors.New("bytes left over")
	ErrPacketType          = errors.New("packet type not allowed")
	ErrFlags               = errors.New("bad flags")
	ErrVarInt              = errors.New("bad variable byte integer")
	ErrUTF8                = errors.New("bad UTF-8 string")
	ErrBadValue            = errors.New("value not allowed")
	ErrUnknownProperty     = errors.New("unknown property")
	ErrPropertyNotAllowed  = errors.New("property not allowed in this packet")
	ErrDuplicateProperty   = errors.New("property repeated")
	ErrMissingProperty     = errors.New("property missing")
	ErrTopicName           = errors.New("bad topic name")
	ErrTopicFilter         = errors.New("bad topic filter")
	ErrEmptyPayload        = errors.New("no topic filter or reason code")
	ErrUnsupportedProtocol = errors.New("unsupported protocol")
)

// DecodeError reports a packet that does not decode, and the reason code
// an MQTT 5.0 server answers it with: in a CONNACK if the packet was the
// CONNECT, else in a DISCONNECT, before closing the connection. An MQTT
// 3.1.1 server closes the connection without a word.
type DecodeError struct {
	Type    PacketType // the packet's type, from its first byte
	Version Version    // the version decoded in; for CONNECT, its own once read (else 0)
	Offset  int        // where in the packet (counted from its first byte) decoding stopped
	Reason  ReasonCode // ReasonMalformedPacket, ReasonProtocolError, ReasonTopicNameInvalid, ...
	Err     error      // one of the Err variables above
	Detail  string     // e.g. "2 bytes needed, 1 left"
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("mqtt: %v at byte %d: %v: %s (%v)", e.Type, e.Offset, e.Err, e.Detail, e.Reason)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Code returns the reason code to answer with.
func (e *DecodeError) Code() ReasonCode { return e.Reason }

// UnsupportedVersionError reports a CONNECT whose protocol name and level
// are none of "MQIsdp" 3, "MQTT" 4 and "MQTT" 5. A server answers with a
// CONNACK refusing it, in the 3.1.1 format (ReturnCode) unless the level
// was 5 (Code), and closes the connection ([MQTT-3.1.2-2]).
type UnsupportedVersionError struct {
	Name  string // the protocol name sent, cut to 64 bytes
	Level byte
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("mqtt: CONNECT: unsupported protocol %q level %d", e.Name, e.Level)
}

// Unwrap returns ErrUnsupportedProtocol.
func (e *UnsupportedVersionError) Unwrap() error { return ErrUnsupportedProtocol }

// Code returns ReasonUnsupportedProtocolVersion.
func (e *UnsupportedVersionError) Code() ReasonCode { return ReasonUnsupportedProtocolVersion }

// ReturnCode returns ConnackUnacceptableProtocolVersion.
func (e *UnsupportedVersionError) ReturnCode() ConnackReturnCode {
	return ConnackUnacceptableProtocolVersion
}

// PacketTooLargeError reports a packet longer than the PacketReader's
// limit. The packet is not read, so the stream cannot go on; an MQTT 5.0
// server sends DISCONNECT (or CONNACK, for the CONNECT) with
// ReasonPacketTooLarge and closes the connection.
type PacketTooLargeError struct {
	Type      PacketType
	Size, Max int // whole packets, fixed header included, as Maximum Packet Size counts
}

func (e *PacketTooLargeError) Error() string {
	return fmt.Sprintf("mqtt: %v of %d bytes exceeds the maximum packet size %d", e.Type, e.Size, e.Max)
}

// Code returns ReasonPacketTooLarge.
func (e *PacketTooLargeError) Code() ReasonCode { return ReasonPacketTooLarge }

// CodeOf returns the reason code an error of this package carries, and
// false for any other error (an I/O error, say).
func CodeOf(err error) (ReasonCode, bool) {
	var c interface{ Code() ReasonCode }
	if errors.As(err, &c) {
		return c.Code(), true
	}
	return 0, false
}
