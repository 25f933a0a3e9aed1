package mqtt

import "strings"

// Subscriptions: SUBSCRIBE, SUBACK, UNSUBSCRIBE and UNSUBACK.

// RetainHandling says when a 5.0 subscription receives retained messages.
type RetainHandling byte

const (
	RetainSendOnSubscribe RetainHandling = 0 // at every subscribe
	RetainSendIfNew       RetainHandling = 1 // only if the subscription did not exist
	RetainDoNotSend       RetainHandling = 2 // never
)

// Subscription is one topic filter of a SUBSCRIBE and its options
// (section 3.8.3.1).
type Subscription struct {
	Filter            string // may be a 5.0 shared subscription, $share/{ShareName}/{filter}
	QoS               QoS    // the maximum QoS granted to messages
	NoLocal           bool   // 5.0: not the client's own publications
	RetainAsPublished bool   // 5.0: keep the RETAIN flag of forwarded messages
	RetainHandling    RetainHandling
}

// Subscription options bits.
const (
	optionQoS               = 0x03
	optionNoLocal           = 0x04
	optionRetainAsPublished = 0x08
	optionRetainHandling    = 0x30
	optionReserved5         = 0xc0 // bits 7 and 6 in 5.0
	optionReserved3         = 0xfc // bits 7 to 2 before 5.0
)

// Subscribe asks for subscriptions (section 3.8). Its fixed header flags
// are 0b0010.
type Subscribe struct {
	PacketID      uint16
	Properties    Properties // 5.0: a Subscription Identifier, User Properties
	Subscriptions []Subscription
}

func (s *Subscribe) Type() PacketType { return TypeSubscribe }

// Append appends the SUBSCRIBE; before 5.0 the options byte holds the QoS
// alone.
func (s *Subscribe) Append(dst []byte, v Version) []byte {
	var scratch [64]byte
	props := propBlock(scratch[:0], &s.Properties, v)
	n := 2 + len(props)
	for i := range s.Subscriptions {
		n += stringLen(s.Subscriptions[i].Filter) + 1
	}
	dst = appendHeader(dst, TypeSubscribe, TypeSubscribe.requiredFlags(), n)
	start := len(dst)
	dst = append(appendU16(dst, s.PacketID), props...)
	for i := range s.Subscriptions {
		sub := &s.Subscriptions[i]
		o := qosBits(sub.QoS)
		if v >= V5 {
			if sub.NoLocal {
				o |= optionNoLocal
			}
			if sub.RetainAsPublished {
				o |= optionRetainAsPublished
			}
			o |= byte(sub.RetainHandling) << 4 & optionRetainHandling
		}
		dst = append(appendString(dst, sub.Filter), o)
	}
	return endPacket(dst, start, n, TypeSubscribe)
}

// decodeSubscribe reads a SUBSCRIBE. Reserved option bits
// ([MQTT-3.8.3-5] in 5.0, [MQTT-3-8.3-4] in 3.1.1) are Malformed Packets,
// as is QoS 3 in 3.1.1; in 5.0 a Maximum QoS of 3 and a Retain Handling
// of 3 are Protocol Errors (section 3.8.3.1). No Local on a shared
// subscription ([MQTT-3.8.3-4] in 5.0) and a SUBSCRIBE without a filter
// are Protocol Errors too; a filter that is not one is Topic Filter
// invalid.
func decodeSubscribe(r *reader) Packet {
	s := &Subscribe{PacketID: r.packetID()}
	if r.ver >= V5 {
		r.properties(&s.Properties, TypeSubscribe)
	}
	reserved := byte(optionReserved3)
	if r.ver >= V5 {
		reserved = optionReserved5
	}
	for r.err == nil && r.left() > 0 {
		at := r.off
		sub := Subscription{Filter: r.str("topic filter")}
		optAt := r.off
		o := r.u8("subscription options")
		if r.err != nil {
			break
		}
		sub.QoS = QoS(o & optionQoS)
		sub.NoLocal = o&optionNoLocal != 0
		sub.RetainAsPublished = o&optionRetainAsPublished != 0
		sub.RetainHandling = RetainHandling(o & optionRetainHandling >> 4)
		shared := r.topicFilter(sub.Filter, at)
		switch {
		case o&reserved != 0:
			r.malformed(optAt, ErrFlags, "subscription options %08b: reserved bits set", o)
		case sub.QoS == 3 && r.ver < V5:
			r.malformed(optAt, ErrBadValue, "subscription options %08b: QoS 3", o)
		case sub.QoS == 3:
			r.protocolError(optAt, ErrBadValue, "subscription options %08b: Maximum QoS 3", o)
		case sub.RetainHandling == 3:
			r.protocolError(optAt, ErrBadValue, "subscription options %08b: Retain Handling 3", o)
		case shared && sub.NoLocal:
			r.protocolError(optAt, ErrBadValue, "No Local on shared subscription %q", sub.Filter)
		}
		s.Subscriptions = append(s.Subscriptions, sub)
	}
	if r.err == nil && len(s.Subscriptions) == 0 {
		r.protocolError(r.off, ErrEmptyPayload, "SUBSCRIBE without a topic filter")
	}
	return s
}

// topicFilter checks a filter read at byte at, in 5.0 as a shared
// subscription if it starts with $share/, and reports whether it is one.
func (r *reader) topicFilter(f string, at int) (shared bool) {
	if r.err != nil {
		return false
	}
	var problem string
	if r.ver >= V5 && strings.HasPrefix(f, sharePrefix) {
		shared = true
		_, _, problem = splitShared(f)
	} else {
		problem = topicFilterProblem(f)
	}
	if problem != "" {
		r.fail(at, ReasonTopicFilterInvalid, ErrTopicFilter, "%q: %s", f, problem)
	}
	return shared
}

// Suback answers a SUBSCRIBE with a reason code per filter, in order
// (section 3.9): the QoS granted (ReasonGrantedQoS0 to 2) or a failure.
type Suback struct {
	PacketID    uint16
	Properties  Properties // 5.0
	ReasonCodes []ReasonCode
}

func (s *Suback) Type() PacketType { return TypeSuback }

// Append appends the SUBACK. Before 5.0 a failure is written as 0x80,
// the one failure return code 3.1.1 has.
func (s *Suback) Append(dst []byte, v Version) []byte {
	var scratch [64]byte
	props := propBlock(scratch[:0], &s.Properties, v)
	n := 2 + len(props) + len(s.ReasonCodes)
	dst = appendHeader(dst, TypeSuback, 0, n)
	start := len(dst)
	dst = append(appendU16(dst, s.PacketID), props...)
	for _, c := range s.ReasonCodes {
		if v < V5 && c.IsError() {
			c = ReasonUnspecifiedError
		}
		dst = append(dst, byte(c))
	}
	return endPacket(dst, start, n, TypeSuback)
}

// decodeSuback reads a SUBACK. A code SUBACK may not carry (before 5.0,
// other than 0, 1, 2 and 0x80) and a SUBACK without codes are Protocol
// Errors. MQTT 3.1 has no 0x80; it is accepted there too.
func decodeSuback(r *reader) Packet {
	s := &Suback{PacketID: r.packetID()}
	if r.ver >= V5 {
		r.properties(&s.Properties, TypeSuback)
	}
	s.ReasonCodes = r.reasonCodes(func(c ReasonCode) bool {
		if r.ver < V5 {
			return c <= ReasonGrantedQoS2 || c == ReasonUnspecifiedError
		}
		return c.ValidFor(TypeSuback)
	})
	return s
}

// reasonCodes reads the rest of the packet as reason codes, each of which
// valid must accept, and at least one.
func (r *reader) reasonCodes(valid func(ReasonCode) bool) []ReasonCode {
	if r.err != nil {
		return nil
	}
	if r.left() == 0 {
		r.protocolError(r.off, ErrEmptyPayload, "%v without a reason code", r.typ)
		return nil
	}
	codes := make([]ReasonCode, r.left())
	for i, b := range r.b[r.off:] {
		codes[i] = ReasonCode(b)
		if !valid(codes[i]) {
			r.protocolError(r.off+i, ErrBadValue, "reason code 0x%02x in %v", b, r.typ)
			return nil
		}
	}
	r.off = len(r.b)
	return codes
}

// Unsubscribe asks to remove subscriptions (section 3.10). Its fixed
// header flags are 0b0010.
type Unsubscribe struct {
	PacketID   uint16
	Properties Properties // 5.0: User Properties
	Filters    []string
}

func (u *Unsubscribe) Type() PacketType { return TypeUnsubscribe }

func (u *Unsubscribe) Append(dst []byte, v Version) []byte {
	var scratch [64]byte
	props := propBlock(scratch[:0], &u.Properties, v)
	n := 2 + len(props)
	for _, f := range u.Filters {
		n += stringLen(f)
	}
	dst = appendHeader(dst, TypeUnsubscribe, TypeUnsubscribe.requiredFlags(), n)
	start := len(dst)
	dst = append(appendU16(dst, u.PacketID), props...)
	for _, f := range u.Filters {
		dst = appendString(dst, f)
	}
	return endPacket(dst, start, n, TypeUnsubscribe)
}

// decodeUnsubscribe reads an UNSUBSCRIBE: filters are checked as
// SUBSCRIBE's are, and there must be one at least (a Protocol Error).
func decodeUnsubscribe(r *reader) Packet {
	u := &Unsubscribe{PacketID: r.packetID()}
	if r.ver >= V5 {
		r.properties(&u.Properties, TypeUnsubscribe)
	}
	for r.err == nil && r.left() > 0 {
		at := r.off
		f := r.str("topic filter")
		r.topicFilter(f, at)
		u.Filters = append(u.Filters, f)
	}
	if r.err == nil && len(u.Filters) == 0 {
		r.protocolError(r.off, ErrEmptyPayload, "UNSUBSCRIBE without a topic filter")
	}
	return u
}

// Unsuback answers an UNSUBSCRIBE (section 3.11); in 5.0 with a reason
// code per filter, in order.
type Unsuback struct {
	PacketID    uint16
	Properties  Properties   // 5.0
	ReasonCodes []ReasonCode // 5.0
}

func (u *Unsuback) Type() PacketType { return TypeUnsuback }

func (u *Unsuback) Append(dst []byte, v Version) []byte {
	if v < V5 {
		return appendU16(appendHeader(dst, TypeUnsuback, 0, 2), u.PacketID)
	}
	var scratch [64]byte
	props := propBlock(scratch[:0], &u.Properties, v)
	n := 2 + len(props) + len(u.ReasonCodes)
	dst = appendHeader(dst, TypeUnsuback, 0, n)
	start := len(dst)
	dst = append(appendU16(dst, u.PacketID), props...)
	for _, c := range u.ReasonCodes {
		dst = append(dst, byte(c))
	}
	return endPacket(dst, start, n, TypeUnsuback)
}

// decodeUnsuback reads an UNSUBACK: before 5.0 a packet identifier
// alone; in 5.0 at least one reason code, each one UNSUBACK may carry.
func decodeUnsuback(r *reader) Packet {
	u := &Unsuback{PacketID: r.packetID()}
	if r.ver >= V5 {
		r.properties(&u.Properties, TypeUnsuback)
		u.ReasonCodes = r.reasonCodes(func(c ReasonCode) bool { return c.ValidFor(TypeUnsuback) })
	}
	return u
}
