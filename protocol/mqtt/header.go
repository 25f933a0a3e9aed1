package mqtt

import "fmt"

// Version is a protocol version, as CONNECT's protocol level gives it.
// The zero Version means no CONNECT has been read yet: Decode then
// accepts only CONNECT.
type Version byte

const (
	V31  Version = 3 // MQTT 3.1, protocol name "MQIsdp"
	V311 Version = 4 // MQTT 3.1.1, protocol name "MQTT"
	V5   Version = 5 // MQTT 5.0, protocol name "MQTT"
)

// String gives the version's usual name: "3.1", "3.1.1" or "5.0".
func (v Version) String() string {
	switch v {
	case V31:
		return "3.1"
	case V311:
		return "3.1.1"
	case V5:
		return "5.0"
	case 0:
		return "none"
	}
	return fmt.Sprintf("unknown version (%d)", byte(v))
}

// protocolName is the name CONNECT carries before the level.
func (v Version) protocolName() string {
	if v == V31 {
		return "MQIsdp"
	}
	return "MQTT"
}

func (v Version) known() bool { return v == V31 || v == V311 || v == V5 }

// PacketType is the control packet type, the high four bits of a packet's
// first byte.
type PacketType byte

const (
	TypeConnect     PacketType = 1
	TypeConnack     PacketType = 2
	TypePublish     PacketType = 3
	TypePuback      PacketType = 4
	TypePubrec      PacketType = 5
	TypePubrel      PacketType = 6
	TypePubcomp     PacketType = 7
	TypeSubscribe   PacketType = 8
	TypeSuback      PacketType = 9
	TypeUnsubscribe PacketType = 10
	TypeUnsuback    PacketType = 11
	TypePingreq     PacketType = 12
	TypePingresp    PacketType = 13
	TypeDisconnect  PacketType = 14
	TypeAuth        PacketType = 15 // MQTT 5.0 only; reserved before
)

var typeNames = [16]string{
	"Reserved", "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
	"SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP", "DISCONNECT", "AUTH",
}

// String gives the name the specification uses: "PUBLISH".
func (t PacketType) String() string {
	if t < 16 {
		return typeNames[t]
	}
	return fmt.Sprintf("PacketType(%d)", byte(t))
}

// requiredFlags gives the fixed header flags a packet type must carry
// (table 2-2): 0b0010 for PUBREL, SUBSCRIBE and UNSUBSCRIBE, 0 for the
// others but PUBLISH, whose flags are DUP, QoS and RETAIN.
func (t PacketType) requiredFlags() byte {
	switch t {
	case TypePubrel, TypeSubscribe, TypeUnsubscribe:
		return 0b0010
	}
	return 0
}

// QoS is a quality of service level: 0, 1 or 2. 3 is malformed wherever
// a QoS is sent.
type QoS byte

const (
	QoS0 QoS = 0 // at most once
	QoS1 QoS = 1 // at least once
	QoS2 QoS = 2 // exactly once
)

// Limits of the wire format.
const (
	// MaxVarInt is the largest Variable Byte Integer, and so the largest
	// remaining length: 268,435,455, four bytes of seven bits.
	MaxVarInt = 1<<28 - 1
	// MaxPacketSize is the largest packet the format can carry: a type
	// byte, a four-byte remaining length and MaxVarInt bytes.
	MaxPacketSize = 1 + 4 + MaxVarInt
	// maxFieldLen is the largest string or binary field: a two-byte
	// length prefix.
	maxFieldLen = 0xffff
)

// FixedHeader is the start of every packet: the type, the four flag bits
// and the remaining length, the number of bytes after the header.
type FixedHeader struct {
	Type            PacketType
	Flags           byte // the low four bits of the first byte
	RemainingLength int
}

// ParseFixedHeader reads the fixed header at the start of b and returns it
// with its length in bytes (2 to 5). It checks only the remaining length's
// encoding: at most four bytes, and no more than the value needs. The
// type and flags are Decode's to check, as they depend on the version. A
// b that ends inside the header is a *DecodeError wrapping ErrTruncated.
func ParseFixedHeader(b []byte) (FixedHeader, int, error) {
	if len(b) == 0 {
		return FixedHeader{}, 0, &DecodeError{Err: ErrTruncated, Reason: ReasonMalformedPacket, Detail: "no fixed header"}
	}
	h := FixedHeader{Type: PacketType(b[0] >> 4), Flags: b[0] & 0x0f}
	v, n, err := parseVarInt(b[1:])
	if err != nil {
		err.Type = h.Type
		err.Offset = 1
		err.Detail = "remaining length: " + err.Detail
		return h, 0, err
	}
	h.RemainingLength = int(v)
	return h, 1 + n, nil
}

// AppendVarInt appends v as a Variable Byte Integer (section 1.5.5): seven
// bits a byte, least significant first, the high bit set on every byte but
// the last, in as few bytes as v needs. It panics if v exceeds MaxVarInt.
func AppendVarInt(dst []byte, v int) []byte {
	if v < 0 || v > MaxVarInt {
		panic(fmt.Sprintf("mqtt: %d does not fit a variable byte integer", v))
	}
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// varIntLen is the number of bytes AppendVarInt writes for v.
func varIntLen(v int) int {
	switch {
	case v < 1<<7:
		return 1
	case v < 1<<14:
		return 2
	case v < 1<<21:
		return 3
	default:
		return 4
	}
}

// ParseVarInt reads a Variable Byte Integer at the start of b and returns
// it and its length. More than four bytes, or more bytes than the value
// needs ([MQTT-1.5.5-1]), is a *DecodeError wrapping ErrVarInt; b ending
// inside the integer, one wrapping ErrTruncated.
func ParseVarInt(b []byte) (int, int, error) {
	v, n, err := parseVarInt(b)
	if err != nil {
		return 0, 0, err
	}
	return int(v), n, nil
}

// parseVarInt returns the error with Type and Offset unset, for the
// caller to fill in.
func parseVarInt(b []byte) (uint32, int, *DecodeError) {
	var v uint32
	for i := range 4 {
		if i >= len(b) {
			return 0, 0, &DecodeError{Err: ErrTruncated, Reason: ReasonMalformedPacket,
				Detail: fmt.Sprintf("variable byte integer cut after %d bytes", i)}
		}
		c := b[i]
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, &DecodeError{Err: ErrVarInt, Reason: ReasonMalformedPacket,
					Detail: fmt.Sprintf("%d encoded in %d bytes, more than it needs", v, i+1)}
			}
			return v, i + 1, nil
		}
	}
	return 0, 0, &DecodeError{Err: ErrVarInt, Reason: ReasonMalformedPacket, Detail: "longer than four bytes"}
}
