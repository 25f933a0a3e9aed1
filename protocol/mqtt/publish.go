package mqtt

import "fmt"

// The publishing side: PUBLISH and its acknowledgements PUBACK (QoS 1),
// PUBREC, PUBREL and PUBCOMP (QoS 2).

// Publish carries an application message (section 3.3).
type Publish struct {
	Dup        bool // a redelivery; never with QoS 0
	QoS        QoS
	Retain     bool
	Topic      string     // empty only in 5.0, with a Topic Alias
	PacketID   uint16     // QoS 1 and 2 only; not 0
	Properties Properties // 5.0
	Payload    []byte     // aliases the packet once decoded
}

// PUBLISH fixed header flags (section 3.3.1).
const (
	publishRetain = 0x01
	publishQoS    = 0x06
	publishDup    = 0x08
)

func (p *Publish) Type() PacketType { return TypePublish }

func (p *Publish) Append(dst []byte, v Version) []byte {
	flags := qosBits(p.QoS) << 1
	if p.Dup {
		flags |= publishDup
	}
	if p.Retain {
		flags |= publishRetain
	}
	var scratch [64]byte
	props := propBlock(scratch[:0], &p.Properties, v)
	n := stringLen(p.Topic) + len(props) + len(p.Payload)
	if p.QoS > 0 {
		n += 2
	}
	dst = appendHeader(dst, TypePublish, flags, n)
	start := len(dst)
	dst = appendString(dst, p.Topic)
	if p.QoS > 0 {
		dst = appendU16(dst, p.PacketID)
	}
	dst = append(append(dst, props...), p.Payload...)
	return endPacket(dst, start, n, TypePublish)
}

// qosBits checks that q fits two bits. QoS 3 encodes, for tests that
// need a malformed packet; a larger value is a bug in the caller.
func qosBits(q QoS) byte {
	if q > 3 {
		panic(fmt.Sprintf("mqtt: QoS %d", q))
	}
	return byte(q)
}

// decodePublish reads a PUBLISH. QoS 3 and DUP with QoS 0
// ([MQTT-3.3.1-2]) are Malformed Packets, a packet identifier of 0 a
// Protocol Error. The topic name must have no wildcards (Topic Name
// invalid) and must not be empty (a Protocol Error), unless, in 5.0, a
// Topic Alias stands for it.
func decodePublish(r *reader, flags byte) Packet {
	p := &Publish{
		Dup:    flags&publishDup != 0,
		QoS:    QoS(flags & publishQoS >> 1),
		Retain: flags&publishRetain != 0,
	}
	switch {
	case p.QoS == 3:
		r.malformed(0, ErrFlags, "PUBLISH flags %04b: QoS 3", flags)
	case p.Dup && p.QoS == 0:
		r.malformed(0, ErrFlags, "PUBLISH flags %04b: DUP with QoS 0", flags)
	}
	topicAt := r.off
	p.Topic = r.str("topic name")
	if p.QoS > 0 {
		p.PacketID = r.packetID()
	}
	if r.ver >= V5 {
		r.properties(&p.Properties, TypePublish)
	}
	p.Payload = nonEmpty(r.b[r.off:])
	r.off = len(r.b)
	if r.err == nil {
		switch msg := topicNameProblem(p.Topic); {
		case p.Topic == "" && p.Properties.TopicAlias != 0:
		case p.Topic == "":
			r.protocolError(topicAt, ErrTopicName, "empty topic name without a Topic Alias")
		case msg != "":
			r.fail(topicAt, ReasonTopicNameInvalid, ErrTopicName, "%q: %s", p.Topic, msg)
		}
	}
	return p
}

// The four acknowledgements share a layout: a packet identifier, then in
// 5.0 a reason code and properties. A 5.0 acknowledgement leaves out the
// properties when it has none (remaining length 3), and the reason code
// too when it is Success (remaining length 2).

// Puback acknowledges a QoS 1 PUBLISH (section 3.4).
type Puback struct {
	PacketID   uint16
	ReasonCode ReasonCode // 5.0
	Properties Properties // 5.0
}

// Pubrec answers a QoS 2 PUBLISH (section 3.5).
type Pubrec Puback

// Pubrel answers a PUBREC (section 3.6). Its fixed header flags are
// 0b0010.
type Pubrel Puback

// Pubcomp answers a PUBREL, completing QoS 2 (section 3.7).
type Pubcomp Puback

func (p *Puback) Type() PacketType  { return TypePuback }
func (p *Pubrec) Type() PacketType  { return TypePubrec }
func (p *Pubrel) Type() PacketType  { return TypePubrel }
func (p *Pubcomp) Type() PacketType { return TypePubcomp }

func (p *Puback) Append(dst []byte, v Version) []byte { return p.appendAck(dst, v, TypePuback) }
func (p *Pubrec) Append(dst []byte, v Version) []byte {
	return (*Puback)(p).appendAck(dst, v, TypePubrec)
}
func (p *Pubrel) Append(dst []byte, v Version) []byte {
	return (*Puback)(p).appendAck(dst, v, TypePubrel)
}
func (p *Pubcomp) Append(dst []byte, v Version) []byte {
	return (*Puback)(p).appendAck(dst, v, TypePubcomp)
}

func (p *Puback) appendAck(dst []byte, v Version, t PacketType) []byte {
	dst = append(dst, byte(t)<<4|t.requiredFlags(), 0)
	start := len(dst)
	dst = appendU16(dst, p.PacketID)
	switch {
	case v < V5:
	case p.Properties.IsEmpty() && p.ReasonCode == ReasonSuccess:
	case p.Properties.IsEmpty():
		dst = append(dst, byte(p.ReasonCode))
	default:
		dst = p.Properties.appendBlock(append(dst, byte(p.ReasonCode)))
	}
	return fixRemainingLength(dst, start)
}

// fixRemainingLength sets the one-byte remaining length before start to
// the bytes after it, moving them if the length needs more than one byte.
// It serves packets whose body is short, and so cheap to move, and
// costly to measure beforehand: those whose size is all properties.
func fixRemainingLength(dst []byte, start int) []byte {
	n := len(dst) - start
	k := varIntLen(n)
	if k > 1 {
		dst = append(dst, make([]byte, k-1)...)
		copy(dst[start+k-1:], dst[start:start+n])
	}
	AppendVarInt(dst[start-1:start-1], n)
	return dst
}

// ack reads an acknowledgement's fields.
func (r *reader) ack() Puback {
	var p Puback
	p.PacketID = r.packetID()
	if r.ver < V5 || r.left() == 0 {
		return p
	}
	p.ReasonCode = r.reasonCode()
	if r.left() > 0 {
		r.properties(&p.Properties, r.typ)
	}
	return p
}
