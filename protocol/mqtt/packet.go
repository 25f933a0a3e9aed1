package mqtt

import "fmt"

// Packet is one decoded control packet. Every packet type in this package
// is a pointer to a struct named after the packet: *Connect, *Publish,
// *Suback...
type Packet interface {
	// Type returns the control packet type.
	Type() PacketType
	// Append appends the whole packet, fixed header included, as protocol
	// version v writes it. What v lacks is left out: properties and
	// reason codes before 5.0. A Connect carries its own version and
	// ignores v.
	Append(dst []byte, v Version) []byte
}

// decodeBody decodes the body of a packet of type t. A switch rather than
// a table of functions: an indirect call would make r escape, costing an
// allocation per packet.
func decodeBody(r *reader, t PacketType, flags byte) Packet {
	switch t {
	case TypeConnect:
		return decodeConnect(r)
	case TypeConnack:
		return decodeConnack(r)
	case TypePublish:
		return decodePublish(r, flags)
	case TypePuback:
		p := Puback(r.ack())
		return &p
	case TypePubrec:
		p := Pubrec(r.ack())
		return &p
	case TypePubrel:
		p := Pubrel(r.ack())
		return &p
	case TypePubcomp:
		p := Pubcomp(r.ack())
		return &p
	case TypeSubscribe:
		return decodeSubscribe(r)
	case TypeSuback:
		return decodeSuback(r)
	case TypeUnsubscribe:
		return decodeUnsubscribe(r)
	case TypeUnsuback:
		return decodeUnsuback(r)
	case TypePingreq:
		return &Pingreq{}
	case TypePingresp:
		return &Pingresp{}
	case TypeDisconnect:
		return decodeDisconnect(r)
	case TypeAuth:
		return decodeAuth(r)
	}
	panic("mqtt: reserved packet type reached decodeBody")
}

// Decode decodes one whole packet, fixed header included, as PacketReader
// returns it, in protocol version v: the version the session's CONNECT
// gave. With v 0 (no CONNECT yet) only a CONNECT decodes; a CONNECT
// decodes whatever v is, in its own version (refusing a second CONNECT is
// the server's business, as are the rules that depend on the session:
// packet types that only the other side sends, Topic Alias ranges,
// Receive Maximum, a Subscription Identifier from a client, ...).
//
// Malformed input is an error, never a panic: an *UnsupportedVersionError
// for a CONNECT of an unknown protocol, else a *DecodeError naming what is
// wrong and the reason code to answer with.
//
// Byte slices in the result (payloads, passwords, Correlation and
// Authentication Data) alias packet; strings are copies. Empty byte
// slices decode as nil.
func Decode(v Version, packet []byte) (Packet, error) {
	if v != 0 && !v.known() {
		panic(fmt.Sprintf("mqtt: Decode in %v", v))
	}
	h, n, err := ParseFixedHeader(packet)
	if err != nil {
		if de, ok := err.(*DecodeError); ok {
			de.Version = v
		}
		return nil, err
	}
	r := &reader{b: packet, off: n, typ: h.Type, ver: v} // stays on the stack
	if left := len(packet) - n; h.RemainingLength != left {
		if h.RemainingLength > left {
			r.malformed(1, ErrTruncated, "remaining length %d, %d bytes follow", h.RemainingLength, left)
		} else {
			r.malformed(1, ErrTrailingBytes, "remaining length %d, %d bytes follow", h.RemainingLength, left)
		}
		return nil, r.err
	}
	switch {
	case h.Type == 0 || (h.Type == TypeAuth && v != V5 && v != 0):
		r.malformed(0, ErrPacketType, "reserved packet type %d in MQTT %v", byte(h.Type), v)
		return nil, r.err
	case v == 0 && h.Type != TypeConnect:
		r.protocolError(0, ErrPacketType, "%v before CONNECT", h.Type)
		return nil, r.err
	}
	if want := h.Type.requiredFlags(); h.Type != TypePublish && h.Flags != want {
		// MQTT 3.1 sets DUP on a PUBREL, SUBSCRIBE or UNSUBSCRIBE it
		// sends again; later versions reserve the bit.
		if !(v == V31 && want != 0 && h.Flags == want|0b1000) {
			r.malformed(0, ErrFlags, "%v flags %04b, want %04b", h.Type, h.Flags, want)
			return nil, r.err
		}
	}
	p := decodeBody(r, h.Type, h.Flags)
	if err := r.end(); err != nil {
		return nil, err
	}
	return p, nil
}

// appendHeader appends a fixed header.
func appendHeader(dst []byte, t PacketType, flags byte, remaining int) []byte {
	return AppendVarInt(append(dst, byte(t)<<4|flags), remaining)
}

// endPacket checks that a packet's body, appended from start on, is the n
// bytes its remaining length announced: the sizes an encoder computes and
// the bytes it writes cannot drift apart silently.
func endPacket(dst []byte, start, n int, t PacketType) []byte {
	if len(dst)-start != n {
		panic(fmt.Sprintf("mqtt: %v body of %d bytes, %d announced", t, len(dst)-start, n))
	}
	return dst
}

// propBlock returns p's property list as a packet carries it, in scratch
// if it fits, or nil before MQTT 5.0.
func propBlock(scratch []byte, p *Properties, v Version) []byte {
	if v < V5 {
		return nil
	}
	return p.appendBlock(scratch)
}

// stringLen is the length of a string or binary field on the wire.
func stringLen[T string | []byte](s T) int { return 2 + len(s) }
