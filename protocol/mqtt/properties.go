package mqtt

import "fmt"

// PropertyID identifies an MQTT 5.0 property (section 2.2.2.2). The
// identifier is a Variable Byte Integer on the wire; every one defined
// fits in one byte.
type PropertyID byte

// Property identifiers, as table 2-4 numbers them.
const (
	PropPayloadFormatIndicator          PropertyID = 0x01
	PropMessageExpiryInterval           PropertyID = 0x02
	PropContentType                     PropertyID = 0x03
	PropResponseTopic                   PropertyID = 0x08
	PropCorrelationData                 PropertyID = 0x09
	PropSubscriptionIdentifier          PropertyID = 0x0b
	PropSessionExpiryInterval           PropertyID = 0x11
	PropAssignedClientIdentifier        PropertyID = 0x12
	PropServerKeepAlive                 PropertyID = 0x13
	PropAuthenticationMethod            PropertyID = 0x15
	PropAuthenticationData              PropertyID = 0x16
	PropRequestProblemInformation       PropertyID = 0x17
	PropWillDelayInterval               PropertyID = 0x18
	PropRequestResponseInformation      PropertyID = 0x19
	PropResponseInformation             PropertyID = 0x1a
	PropServerReference                 PropertyID = 0x1c
	PropReasonString                    PropertyID = 0x1f
	PropReceiveMaximum                  PropertyID = 0x21
	PropTopicAliasMaximum               PropertyID = 0x22
	PropTopicAlias                      PropertyID = 0x23
	PropMaximumQoS                      PropertyID = 0x24
	PropRetainAvailable                 PropertyID = 0x25
	PropUserProperty                    PropertyID = 0x26
	PropMaximumPacketSize               PropertyID = 0x27
	PropWildcardSubscriptionAvailable   PropertyID = 0x28
	PropSubscriptionIdentifierAvailable PropertyID = 0x29
	PropSharedSubscriptionAvailable     PropertyID = 0x2a
)

// propType is a property value's data type (section 1.5).
type propType byte

const (
	propByte       propType = iota + 1 // Byte
	propTwoByte                        // Two Byte Integer
	propFourByte                       // Four Byte Integer
	propVarInt                         // Variable Byte Integer
	propString                         // UTF-8 Encoded String
	propBinary                         // Binary Data
	propStringPair                     // UTF-8 String Pair
)

// inWill stands for the Will Properties in a set of packet types: no
// packet has type 0.
const inWill PacketType = 0

// propInfo describes each property: its name, type and where it may
// appear (a bit per PacketType, bit 0 for the Will Properties), as table
// 2-4 lists them.
var propInfo = [PropSharedSubscriptionAvailable + 1]struct {
	name string
	typ  propType
	in   uint16
}{
	PropPayloadFormatIndicator:          {"Payload Format Indicator", propByte, pk(TypePublish, inWill)},
	PropMessageExpiryInterval:           {"Message Expiry Interval", propFourByte, pk(TypePublish, inWill)},
	PropContentType:                     {"Content Type", propString, pk(TypePublish, inWill)},
	PropResponseTopic:                   {"Response Topic", propString, pk(TypePublish, inWill)},
	PropCorrelationData:                 {"Correlation Data", propBinary, pk(TypePublish, inWill)},
	PropSubscriptionIdentifier:          {"Subscription Identifier", propVarInt, pk(TypePublish, TypeSubscribe)},
	PropSessionExpiryInterval:           {"Session Expiry Interval", propFourByte, pk(TypeConnect, TypeConnack, TypeDisconnect)},
	PropAssignedClientIdentifier:        {"Assigned Client Identifier", propString, pk(TypeConnack)},
	PropServerKeepAlive:                 {"Server Keep Alive", propTwoByte, pk(TypeConnack)},
	PropAuthenticationMethod:            {"Authentication Method", propString, pk(TypeConnect, TypeConnack, TypeAuth)},
	PropAuthenticationData:              {"Authentication Data", propBinary, pk(TypeConnect, TypeConnack, TypeAuth)},
	PropRequestProblemInformation:       {"Request Problem Information", propByte, pk(TypeConnect)},
	PropWillDelayInterval:               {"Will Delay Interval", propFourByte, pk(inWill)},
	PropRequestResponseInformation:      {"Request Response Information", propByte, pk(TypeConnect)},
	PropResponseInformation:             {"Response Information", propString, pk(TypeConnack)},
	PropServerReference:                 {"Server Reference", propString, pk(TypeConnack, TypeDisconnect)},
	PropReasonString:                    {"Reason String", propString, pk(TypeConnack, TypePuback, TypePubrec, TypePubrel, TypePubcomp, TypeSuback, TypeUnsuback, TypeDisconnect, TypeAuth)},
	PropReceiveMaximum:                  {"Receive Maximum", propTwoByte, pk(TypeConnect, TypeConnack)},
	PropTopicAliasMaximum:               {"Topic Alias Maximum", propTwoByte, pk(TypeConnect, TypeConnack)},
	PropTopicAlias:                      {"Topic Alias", propTwoByte, pk(TypePublish)},
	PropMaximumQoS:                      {"Maximum QoS", propByte, pk(TypeConnack)},
	PropRetainAvailable:                 {"Retain Available", propByte, pk(TypeConnack)},
	PropUserProperty:                    {"User Property", propStringPair, pk(TypeConnect, TypeConnack, TypePublish, inWill, TypePuback, TypePubrec, TypePubrel, TypePubcomp, TypeSubscribe, TypeSuback, TypeUnsubscribe, TypeUnsuback, TypeDisconnect, TypeAuth)},
	PropMaximumPacketSize:               {"Maximum Packet Size", propFourByte, pk(TypeConnect, TypeConnack)},
	PropWildcardSubscriptionAvailable:   {"Wildcard Subscription Available", propByte, pk(TypeConnack)},
	PropSubscriptionIdentifierAvailable: {"Subscription Identifier Available", propByte, pk(TypeConnack)},
	PropSharedSubscriptionAvailable:     {"Shared Subscription Available", propByte, pk(TypeConnack)},
}

// String gives the property's name and identifier:
// "Topic Alias (0x23)".
func (id PropertyID) String() string {
	if id.known() {
		return fmt.Sprintf("%s (0x%02x)", propInfo[id].name, byte(id))
	}
	return fmt.Sprintf("unknown property (0x%02x)", byte(id))
}

func (id PropertyID) known() bool { return int(id) < len(propInfo) && propInfo[id].typ != 0 }

// AllowedIn reports whether the property may appear in packets of type t.
func (id PropertyID) AllowedIn(t PacketType) bool {
	return t != inWill && t < 16 && id.known() && propInfo[id].in&(1<<t) != 0
}

// AllowedInWill reports whether the property may appear among a CONNECT's
// Will Properties.
func (id PropertyID) AllowedInWill() bool { return id.known() && propInfo[id].in&1 != 0 }

// Repeatable reports whether the property may appear more than once in a
// packet of type t: User Property anywhere, Subscription Identifier in
// PUBLISH (one for each matching subscription). Any other repetition is a
// Protocol Error.
func (id PropertyID) Repeatable(t PacketType) bool {
	return id == PropUserProperty || (id == PropSubscriptionIdentifier && t == TypePublish)
}

// PropertySet is a set of property identifiers, a bit each.
type PropertySet uint64

// PropertySetOf makes a set of the given properties.
func PropertySetOf(ids ...PropertyID) PropertySet {
	var s PropertySet
	for _, id := range ids {
		s |= 1 << id
	}
	return s
}

// Has reports whether id is in the set.
func (s PropertySet) Has(id PropertyID) bool { return id < 64 && s&(1<<id) != 0 }

// UserProperty is a User Property: a name and value pair. Names may
// repeat; order is kept.
type UserProperty struct {
	Key, Value string
}

// Properties holds an MQTT 5.0 property list, one field per property. A
// property is present, and sent, when its field is not the zero value (0,
// "", nil, or an empty slice) or when Zeros has its bit: Zeros exists to
// send a property whose value is zero, such as a Session Expiry Interval
// of 0 or an empty Correlation Data. Decoding sets a Zeros bit only for
// a property received with the zero value, so that a decoded list equals
// the literal it was encoded from. Has tells whether a property is
// present either way.
//
// Byte-valued flags (Payload Format Indicator, Maximum QoS, Retain
// Available and the others) are kept as the byte sent, 0 or 1.
type Properties struct {
	// Zeros holds the properties present with their zero value.
	Zeros PropertySet

	PayloadFormatIndicator          byte     // PUBLISH, Will: 1 says the payload is UTF-8
	MessageExpiryInterval           uint32   // PUBLISH, Will: seconds
	ContentType                     string   // PUBLISH, Will
	ResponseTopic                   string   // PUBLISH, Will: a topic name, no wildcards
	CorrelationData                 []byte   // PUBLISH, Will
	SubscriptionIdentifiers         []uint32 // PUBLISH (any number), SUBSCRIBE (one): 1 to MaxVarInt
	SessionExpiryInterval           uint32   // CONNECT, CONNACK, DISCONNECT: seconds
	AssignedClientIdentifier        string   // CONNACK
	ServerKeepAlive                 uint16   // CONNACK: seconds
	AuthenticationMethod            string   // CONNECT, CONNACK, AUTH
	AuthenticationData              []byte   // CONNECT, CONNACK, AUTH: only with a method
	RequestProblemInformation       byte     // CONNECT
	WillDelayInterval               uint32   // Will: seconds
	RequestResponseInformation      byte     // CONNECT
	ResponseInformation             string   // CONNACK
	ServerReference                 string   // CONNACK, DISCONNECT
	ReasonString                    string   // acknowledgements, CONNACK, DISCONNECT, AUTH
	ReceiveMaximum                  uint16   // CONNECT, CONNACK: not 0
	TopicAliasMaximum               uint16   // CONNECT, CONNACK
	TopicAlias                      uint16   // PUBLISH: not 0
	MaximumQoS                      byte     // CONNACK: 0 or 1 (absent means 2)
	RetainAvailable                 byte     // CONNACK
	UserProperties                  []UserProperty
	MaximumPacketSize               uint32 // CONNECT, CONNACK: not 0
	WildcardSubscriptionAvailable   byte   // CONNACK
	SubscriptionIdentifierAvailable byte   // CONNACK
	SharedSubscriptionAvailable     byte   // CONNACK
}

// Has reports whether the property is present: its field is not zero, or
// its Zeros bit is set.
func (p *Properties) Has(id PropertyID) bool {
	var set bool
	switch id {
	case PropPayloadFormatIndicator:
		set = p.PayloadFormatIndicator != 0
	case PropMessageExpiryInterval:
		set = p.MessageExpiryInterval != 0
	case PropContentType:
		set = p.ContentType != ""
	case PropResponseTopic:
		set = p.ResponseTopic != ""
	case PropCorrelationData:
		set = len(p.CorrelationData) != 0
	case PropSubscriptionIdentifier:
		return len(p.SubscriptionIdentifiers) != 0
	case PropSessionExpiryInterval:
		set = p.SessionExpiryInterval != 0
	case PropAssignedClientIdentifier:
		set = p.AssignedClientIdentifier != ""
	case PropServerKeepAlive:
		set = p.ServerKeepAlive != 0
	case PropAuthenticationMethod:
		set = p.AuthenticationMethod != ""
	case PropAuthenticationData:
		set = len(p.AuthenticationData) != 0
	case PropRequestProblemInformation:
		set = p.RequestProblemInformation != 0
	case PropWillDelayInterval:
		set = p.WillDelayInterval != 0
	case PropRequestResponseInformation:
		set = p.RequestResponseInformation != 0
	case PropResponseInformation:
		set = p.ResponseInformation != ""
	case PropServerReference:
		set = p.ServerReference != ""
	case PropReasonString:
		set = p.ReasonString != ""
	case PropReceiveMaximum:
		set = p.ReceiveMaximum != 0
	case PropTopicAliasMaximum:
		set = p.TopicAliasMaximum != 0
	case PropTopicAlias:
		set = p.TopicAlias != 0
	case PropMaximumQoS:
		set = p.MaximumQoS != 0
	case PropRetainAvailable:
		set = p.RetainAvailable != 0
	case PropUserProperty:
		return len(p.UserProperties) != 0
	case PropMaximumPacketSize:
		set = p.MaximumPacketSize != 0
	case PropWildcardSubscriptionAvailable:
		set = p.WildcardSubscriptionAvailable != 0
	case PropSubscriptionIdentifierAvailable:
		set = p.SubscriptionIdentifierAvailable != 0
	case PropSharedSubscriptionAvailable:
		set = p.SharedSubscriptionAvailable != 0
	default:
		return false
	}
	return set || p.Zeros.Has(id)
}

// allProperties lists the identifiers in the order encoding writes them.
var allProperties = func() []PropertyID {
	var ids []PropertyID
	for id := range PropertyID(len(propInfo)) {
		if id.known() {
			ids = append(ids, id)
		}
	}
	return ids
}()

// IsEmpty reports whether no property is present.
func (p *Properties) IsEmpty() bool {
	for _, id := range allProperties {
		if p.Has(id) {
			return false
		}
	}
	return true
}

// appendBlock appends the property list as a packet carries it: the
// Property Length, then the properties in identifier order, User
// Properties in their order. Properties are written whatever the packet,
// as given: Decode is where the rules are.
func (p *Properties) appendBlock(dst []byte) []byte {
	start := len(dst)
	dst = p.appendList(dst)
	n := len(dst) - start
	k := varIntLen(n)
	dst = append(dst, make([]byte, k)...)
	copy(dst[start+k:], dst[start:start+n])
	AppendVarInt(dst[start:start], n)
	return dst
}

func (p *Properties) appendList(dst []byte) []byte {
	for _, id := range allProperties {
		if !p.Has(id) {
			continue
		}
		switch id {
		case PropPayloadFormatIndicator:
			dst = append(dst, byte(id), p.PayloadFormatIndicator)
		case PropMessageExpiryInterval:
			dst = appendU32(append(dst, byte(id)), p.MessageExpiryInterval)
		case PropContentType:
			dst = appendString(append(dst, byte(id)), p.ContentType)
		case PropResponseTopic:
			dst = appendString(append(dst, byte(id)), p.ResponseTopic)
		case PropCorrelationData:
			dst = appendBinary(append(dst, byte(id)), p.CorrelationData)
		case PropSubscriptionIdentifier:
			for _, s := range p.SubscriptionIdentifiers {
				dst = AppendVarInt(append(dst, byte(id)), int(s))
			}
		case PropSessionExpiryInterval:
			dst = appendU32(append(dst, byte(id)), p.SessionExpiryInterval)
		case PropAssignedClientIdentifier:
			dst = appendString(append(dst, byte(id)), p.AssignedClientIdentifier)
		case PropServerKeepAlive:
			dst = appendU16(append(dst, byte(id)), p.ServerKeepAlive)
		case PropAuthenticationMethod:
			dst = appendString(append(dst, byte(id)), p.AuthenticationMethod)
		case PropAuthenticationData:
			dst = appendBinary(append(dst, byte(id)), p.AuthenticationData)
		case PropRequestProblemInformation:
			dst = append(dst, byte(id), p.RequestProblemInformation)
		case PropWillDelayInterval:
			dst = appendU32(append(dst, byte(id)), p.WillDelayInterval)
		case PropRequestResponseInformation:
			dst = append(dst, byte(id), p.RequestResponseInformation)
		case PropResponseInformation:
			dst = appendString(append(dst, byte(id)), p.ResponseInformation)
		case PropServerReference:
			dst = appendString(append(dst, byte(id)), p.ServerReference)
		case PropReasonString:
			dst = appendString(append(dst, byte(id)), p.ReasonString)
		case PropReceiveMaximum:
			dst = appendU16(append(dst, byte(id)), p.ReceiveMaximum)
		case PropTopicAliasMaximum:
			dst = appendU16(append(dst, byte(id)), p.TopicAliasMaximum)
		case PropTopicAlias:
			dst = appendU16(append(dst, byte(id)), p.TopicAlias)
		case PropMaximumQoS:
			dst = append(dst, byte(id), p.MaximumQoS)
		case PropRetainAvailable:
			dst = append(dst, byte(id), p.RetainAvailable)
		case PropUserProperty:
			for _, u := range p.UserProperties {
				dst = appendString(appendString(append(dst, byte(id)), u.Key), u.Value)
			}
		case PropMaximumPacketSize:
			dst = appendU32(append(dst, byte(id)), p.MaximumPacketSize)
		case PropWildcardSubscriptionAvailable:
			dst = append(dst, byte(id), p.WildcardSubscriptionAvailable)
		case PropSubscriptionIdentifierAvailable:
			dst = append(dst, byte(id), p.SubscriptionIdentifierAvailable)
		case PropSharedSubscriptionAvailable:
			dst = append(dst, byte(id), p.SharedSubscriptionAvailable)
		}
	}
	return dst
}

// where names a set of properties' place for error messages.
func where(ctx PacketType) string {
	if ctx == inWill {
		return "Will Properties"
	}
	return ctx.String()
}

// properties reads a property list (Property Length, then properties) for
// packets of type ctx, or the Will Properties if ctx is inWill.
//
// An identifier no property has, or a value that overruns the Property
// Length, is a Malformed Packet. A property the packet may not carry, one
// repeated that may not be, and a value out of its range are Protocol
// Errors (the Topic Alias 0 is Topic Alias invalid), as are
// Authentication Data without an Authentication Method and a Response
// Topic that is not a topic name.
func (r *reader) properties(p *Properties, ctx PacketType) {
	at := r.off
	n := r.varInt("property length")
	if r.err != nil {
		return
	}
	if n > r.left() {
		r.malformed(at, ErrTruncated, "property length %d, %d bytes left", n, r.left())
		return
	}
	full := r.b
	r.b = r.b[:r.off+n]
	var seen PropertySet
	for r.err == nil && r.left() > 0 {
		at := r.off
		v := r.varInt("property identifier")
		if r.err != nil {
			break
		}
		id := PropertyID(v)
		if v >= len(propInfo) || !id.known() {
			r.malformed(at, ErrUnknownProperty, "identifier 0x%02x", v)
			break
		}
		if propInfo[id].in&(1<<ctx) == 0 {
			r.protocolError(at, ErrPropertyNotAllowed, "%v in %s", id, where(ctx))
			break
		}
		if seen.Has(id) && !id.Repeatable(ctx) {
			r.protocolError(at, ErrDuplicateProperty, "%v more than once in %s", id, where(ctx))
			break
		}
		seen |= 1 << id
		r.property(p, id, at)
	}
	r.b = full
	if r.err != nil {
		return
	}
	if seen.Has(PropAuthenticationData) && !seen.Has(PropAuthenticationMethod) {
		r.protocolError(at, ErrMissingProperty, "Authentication Data without an Authentication Method")
	}
}

// property reads one property's value into p; at is where its identifier
// starts.
func (r *reader) property(p *Properties, id PropertyID, at int) {
	name := propInfo[id].name
	var zero bool
	// flag reads a Byte that must be 0 or 1.
	flag := func() byte {
		b := r.u8(name)
		if b > 1 && r.err == nil {
			r.protocolError(at, ErrBadValue, "%s %d, not 0 or 1", name, b)
		}
		zero = b == 0
		return b
	}
	u16 := func() uint16 { v := r.u16(name); zero = v == 0; return v }
	u32 := func() uint32 { v := r.u32(name); zero = v == 0; return v }
	str := func() string { s := r.str(name); zero = s == ""; return s }
	bin := func() []byte { b := r.binary(name); zero = b == nil; return b }
	nonZero := func(zero bool, reason ReasonCode) {
		if zero && r.err == nil {
			r.fail(at, reason, ErrBadValue, "%s 0", name)
		}
	}

	switch id {
	case PropPayloadFormatIndicator:
		p.PayloadFormatIndicator = flag()
	case PropMessageExpiryInterval:
		p.MessageExpiryInterval = u32()
	case PropContentType:
		p.ContentType = str()
	case PropResponseTopic:
		p.ResponseTopic = str()
		if r.err == nil {
			if msg := topicNameProblem(p.ResponseTopic); msg != "" {
				r.protocolError(at, ErrTopicName, "Response Topic %q: %s", p.ResponseTopic, msg)
			}
		}
	case PropCorrelationData:
		p.CorrelationData = bin()
	case PropSubscriptionIdentifier:
		v := r.varInt(name)
		nonZero(v == 0, ReasonProtocolError)
		p.SubscriptionIdentifiers = append(p.SubscriptionIdentifiers, uint32(v))
	case PropSessionExpiryInterval:
		p.SessionExpiryInterval = u32()
	case PropAssignedClientIdentifier:
		p.AssignedClientIdentifier = str()
	case PropServerKeepAlive:
		p.ServerKeepAlive = u16()
	case PropAuthenticationMethod:
		p.AuthenticationMethod = str()
	case PropAuthenticationData:
		p.AuthenticationData = bin()
	case PropRequestProblemInformation:
		p.RequestProblemInformation = flag()
	case PropWillDelayInterval:
		p.WillDelayInterval = u32()
	case PropRequestResponseInformation:
		p.RequestResponseInformation = flag()
	case PropResponseInformation:
		p.ResponseInformation = str()
	case PropServerReference:
		p.ServerReference = str()
	case PropReasonString:
		p.ReasonString = str()
	case PropReceiveMaximum:
		p.ReceiveMaximum = u16()
		nonZero(zero, ReasonProtocolError)
	case PropTopicAliasMaximum:
		p.TopicAliasMaximum = u16()
	case PropTopicAlias:
		p.TopicAlias = u16()
		nonZero(zero, ReasonTopicAliasInvalid)
	case PropMaximumQoS:
		p.MaximumQoS = flag()
	case PropRetainAvailable:
		p.RetainAvailable = flag()
	case PropUserProperty:
		k := r.str(name + " name")
		v := r.str(name + " value")
		p.UserProperties = append(p.UserProperties, UserProperty{k, v})
	case PropMaximumPacketSize:
		p.MaximumPacketSize = u32()
		nonZero(zero, ReasonProtocolError)
	case PropWildcardSubscriptionAvailable:
		p.WildcardSubscriptionAvailable = flag()
	case PropSubscriptionIdentifierAvailable:
		p.SubscriptionIdentifierAvailable = flag()
	case PropSharedSubscriptionAvailable:
		p.SharedSubscriptionAvailable = flag()
	}
	if zero && r.err == nil && id != PropUserProperty && id != PropSubscriptionIdentifier {
		p.Zeros |= 1 << id
	}
}
