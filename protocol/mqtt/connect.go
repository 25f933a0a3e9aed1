package mqtt

// The connection's packets: CONNECT and CONNACK.

// Connect is the client's first packet (section 3.1). It carries its own
// protocol version, which the rest of the session is decoded in.
type Connect struct {
	Version     Version    // V31 ("MQIsdp" 3), V311 ("MQTT" 4) or V5 ("MQTT" 5)
	CleanStart  bool       // Clean Session in 3.1 and 3.1.1
	KeepAlive   uint16     // seconds; 0 turns keep alive off
	Properties  Properties // 5.0
	ClientID    string     // may be empty: the server assigns one, or refuses
	Will        *Will      // nil when the Will Flag is 0
	HasUsername bool       // the User Name Flag; encoding also sends a non-empty Username
	Username    string
	HasPassword bool   // the Password Flag; encoding also sends a non-empty Password
	Password    []byte // aliases the packet once decoded
}

// Will is the Will Message a CONNECT leaves, for the server to publish
// when the connection ends without a DISCONNECT (or, in 5.0, with reason
// 0x04).
type Will struct {
	QoS        QoS
	Retain     bool
	Properties Properties // 5.0 Will Properties
	Topic      string     // a topic name: no wildcards
	Payload    []byte     // aliases the packet once decoded
}

// Connect flag bits (section 3.1.2.3).
const (
	connectReserved   = 0x01
	connectCleanStart = 0x02
	connectWill       = 0x04
	connectWillQoS    = 0x18
	connectWillRetain = 0x20
	connectPassword   = 0x40
	connectUsername   = 0x80
)

func (c *Connect) Type() PacketType { return TypeConnect }

// Append appends the CONNECT in c.Version, which must be V31, V311 or
// V5; v is ignored.
func (c *Connect) Append(dst []byte, _ Version) []byte {
	v := c.Version
	if !v.known() {
		panic("mqtt: CONNECT without a known Version")
	}
	var flags byte
	if c.CleanStart {
		flags |= connectCleanStart
	}
	hasUser := c.HasUsername || c.Username != ""
	hasPass := c.HasPassword || len(c.Password) != 0
	if hasUser {
		flags |= connectUsername
	}
	if hasPass {
		flags |= connectPassword
	}
	var scratch, willScratch [64]byte
	props := propBlock(scratch[:0], &c.Properties, v)
	var willProps []byte
	n := stringLen(v.protocolName()) + 1 + 1 + 2 + len(props) + stringLen(c.ClientID)
	if w := c.Will; w != nil {
		flags |= connectWill | qosBits(w.QoS)<<3
		if w.Retain {
			flags |= connectWillRetain
		}
		willProps = propBlock(willScratch[:0], &w.Properties, v)
		n += len(willProps) + stringLen(w.Topic) + stringLen(w.Payload)
	}
	if hasUser {
		n += stringLen(c.Username)
	}
	if hasPass {
		n += stringLen(c.Password)
	}

	dst = appendHeader(dst, TypeConnect, 0, n)
	start := len(dst)
	dst = appendString(dst, v.protocolName())
	dst = append(dst, byte(v), flags)
	dst = appendU16(dst, c.KeepAlive)
	dst = append(dst, props...)
	dst = appendString(dst, c.ClientID)
	if w := c.Will; w != nil {
		dst = append(dst, willProps...)
		dst = appendString(dst, w.Topic)
		dst = appendBinary(dst, w.Payload)
	}
	if hasUser {
		dst = appendString(dst, c.Username)
	}
	if hasPass {
		dst = appendBinary(dst, c.Password)
	}
	return endPacket(dst, start, n, TypeConnect)
}

// decodeConnect reads a CONNECT. The protocol name and level come first:
// a pair other than "MQIsdp" 3, "MQTT" 4 and "MQTT" 5 is an
// *UnsupportedVersionError, and nothing after them is read.
//
// The connect flags' reserved bit, a Will QoS of 3, a Will QoS or Retain
// without the Will Flag and, before 5.0, a Password Flag without the User
// Name Flag ([MQTT-3.1.2-22] in 3.1.1) are Malformed Packets. A will
// topic that is not a topic name is Topic Name invalid.
func decodeConnect(r *reader) Packet {
	r.ver = 0 // until the level is read
	name := r.field("protocol name")
	level := r.u8("protocol level")
	if r.err != nil {
		return nil
	}
	v := Version(level)
	if !v.known() || string(name) != v.protocolName() {
		r.err = &UnsupportedVersionError{Name: cut(name, 64), Level: level}
		return nil
	}
	r.ver = v
	c := &Connect{Version: v}
	at := r.off
	flags := r.u8("connect flags")
	willQoS := QoS(flags & connectWillQoS >> 3)
	switch {
	case r.err != nil:
	case flags&connectReserved != 0:
		r.malformed(at, ErrFlags, "connect flags %08b: reserved bit set", flags)
	case willQoS == 3:
		r.malformed(at, ErrFlags, "connect flags %08b: Will QoS 3", flags)
	case flags&connectWill == 0 && flags&(connectWillQoS|connectWillRetain) != 0:
		r.malformed(at, ErrFlags, "connect flags %08b: Will QoS or Retain without the Will Flag", flags)
	case v < V5 && flags&connectPassword != 0 && flags&connectUsername == 0:
		r.malformed(at, ErrFlags, "connect flags %08b: Password Flag without the User Name Flag", flags)
	}
	c.CleanStart = flags&connectCleanStart != 0
	c.KeepAlive = r.u16("keep alive")
	if v >= V5 {
		r.properties(&c.Properties, TypeConnect)
	}
	c.ClientID = r.str("client identifier")
	if flags&connectWill != 0 {
		w := &Will{QoS: willQoS, Retain: flags&connectWillRetain != 0}
		if v >= V5 {
			r.properties(&w.Properties, inWill)
		}
		at := r.off
		w.Topic = r.str("will topic")
		if r.err == nil {
			if p := topicNameProblem(w.Topic); p != "" {
				r.fail(at, ReasonTopicNameInvalid, ErrTopicName, "will topic %q: %s", w.Topic, p)
			}
		}
		w.Payload = r.binary("will payload")
		c.Will = w
	}
	if flags&connectUsername != 0 {
		c.HasUsername = true
		c.Username = r.str("user name")
	}
	if flags&connectPassword != 0 {
		c.HasPassword = true
		c.Password = r.binary("password")
	}
	return c
}

// Connack answers a CONNECT (section 3.2).
type Connack struct {
	SessionPresent bool
	ReturnCode     ConnackReturnCode // 3.1 and 3.1.1
	ReasonCode     ReasonCode        // 5.0
	Properties     Properties        // 5.0
}

func (c *Connack) Type() PacketType { return TypeConnack }

// Append appends the CONNACK: the ReturnCode before 5.0, the ReasonCode
// and Properties in 5.0 (ReturnCodeFor maps one to the other).
func (c *Connack) Append(dst []byte, v Version) []byte {
	var scratch [64]byte
	props := propBlock(scratch[:0], &c.Properties, v)
	var flags byte
	if c.SessionPresent {
		flags = 1
	}
	dst = appendHeader(dst, TypeConnack, 0, 2+len(props))
	if v < V5 {
		return append(dst, flags, byte(c.ReturnCode))
	}
	return append(append(dst, flags, byte(c.ReasonCode)), props...)
}

// decodeConnack reads a CONNACK. Reserved acknowledge flags are a
// Malformed Packet; a return code above 5, a reason code CONNACK may not
// carry, and Session Present with a refusal ([MQTT-3.2.2-4],
// [MQTT-3.2.2-6]) are Protocol Errors. MQTT 3.1 reserves the whole
// acknowledge flags byte; the Session Present bit is read as in 3.1.1.
func decodeConnack(r *reader) Packet {
	c := &Connack{}
	at := r.off
	flags := r.u8("acknowledge flags")
	if r.err == nil && flags&^1 != 0 {
		r.malformed(at, ErrFlags, "acknowledge flags %08b: reserved bits set", flags)
	}
	c.SessionPresent = flags&1 != 0
	at = r.off
	refused := false
	if r.ver < V5 {
		c.ReturnCode = ConnackReturnCode(r.u8("return code"))
		if r.err == nil && c.ReturnCode > ConnackNotAuthorized {
			r.protocolError(at, ErrBadValue, "return code %d", c.ReturnCode)
		}
		refused = c.ReturnCode != ConnackAccepted
	} else {
		c.ReasonCode = r.reasonCode()
		r.properties(&c.Properties, TypeConnack)
		refused = c.ReasonCode.IsError()
	}
	if r.err == nil && refused && c.SessionPresent {
		r.protocolError(at, ErrBadValue, "Session Present with a refusal")
	}
	return c
}
