package mqtt

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"testing"

	paho5 "github.com/eclipse/paho.golang/packets"
	paho3 "github.com/eclipse/paho.mqtt.golang/packets"
)

// Interoperability with the Eclipse Paho Go clients' codecs, used as
// oracles: paho.mqtt.golang's packets for 3.1 and 3.1.1, paho.golang's
// for 5.0. What one side encodes, the other must read to the same value.
// Where Paho cannot express a value (an empty string property that is
// present, two Subscription Identifiers), or departs from the
// specification, the case is skipped with the reason.

func TestInterop311(t *testing.T) {
	for _, v := range []Version{V31, V311} {
		for i, p := range allPackets(v) {
			t.Run(fmt.Sprintf("%v/%d-%v", v, i, p.Type()), func(t *testing.T) {
				ours := p.Append(nil, v)

				// Ours, read by Paho.
				cp, err := paho3.ReadPacket(bytes.NewReader(ours))
				if err != nil {
					t.Fatalf("paho cannot read %x: %v", ours, err)
				}
				if got := fromPaho3(cp); !reflect.DeepEqual(got, p) {
					t.Fatalf("paho read %x as\n %#v\nwant %#v", ours, got, p)
				}

				// Paho's, read by us, and byte for byte ours.
				var theirs bytes.Buffer
				if err := toPaho3(p).Write(&theirs); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(theirs.Bytes(), ours) {
					t.Fatalf("paho wrote %x, we write %x", theirs.Bytes(), ours)
				}
				if got := decodeOK(t, v, theirs.Bytes()); !reflect.DeepEqual(got, p) {
					t.Fatalf("read paho's %x as\n %#v\nwant %#v", theirs.Bytes(), got, p)
				}
			})
		}
	}
}

func fromPaho3(cp paho3.ControlPacket) Packet {
	switch c := cp.(type) {
	case *paho3.ConnectPacket:
		p := &Connect{Version: Version(c.ProtocolVersion), CleanStart: c.CleanSession, KeepAlive: c.Keepalive,
			ClientID: c.ClientIdentifier, HasUsername: c.UsernameFlag, Username: c.Username,
			HasPassword: c.PasswordFlag, Password: nonEmpty(c.Password)}
		if c.WillFlag {
			p.Will = &Will{QoS: QoS(c.WillQos), Retain: c.WillRetain, Topic: c.WillTopic, Payload: nonEmpty(c.WillMessage)}
		}
		return p
	case *paho3.ConnackPacket:
		return &Connack{SessionPresent: c.SessionPresent, ReturnCode: ConnackReturnCode(c.ReturnCode)}
	case *paho3.PublishPacket:
		return &Publish{Dup: c.Dup, QoS: QoS(c.Qos), Retain: c.Retain, Topic: c.TopicName, PacketID: c.MessageID, Payload: nonEmpty(c.Payload)}
	case *paho3.PubackPacket:
		return &Puback{PacketID: c.MessageID}
	case *paho3.PubrecPacket:
		return &Pubrec{PacketID: c.MessageID}
	case *paho3.PubrelPacket:
		return &Pubrel{PacketID: c.MessageID}
	case *paho3.PubcompPacket:
		return &Pubcomp{PacketID: c.MessageID}
	case *paho3.SubscribePacket:
		s := &Subscribe{PacketID: c.MessageID}
		for i, f := range c.Topics {
			s.Subscriptions = append(s.Subscriptions, Subscription{Filter: f, QoS: QoS(c.Qoss[i])})
		}
		return s
	case *paho3.SubackPacket:
		s := &Suback{PacketID: c.MessageID}
		for _, b := range c.ReturnCodes {
			s.ReasonCodes = append(s.ReasonCodes, ReasonCode(b))
		}
		return s
	case *paho3.UnsubscribePacket:
		return &Unsubscribe{PacketID: c.MessageID, Filters: c.Topics}
	case *paho3.UnsubackPacket:
		return &Unsuback{PacketID: c.MessageID}
	case *paho3.PingreqPacket:
		return &Pingreq{}
	case *paho3.PingrespPacket:
		return &Pingresp{}
	case *paho3.DisconnectPacket:
		return &Disconnect{}
	}
	panic(fmt.Sprintf("paho packet %T", cp))
}

func toPaho3(p Packet) paho3.ControlPacket {
	cp := paho3.NewControlPacket(byte(p.Type()))
	switch p := p.(type) {
	case *Connect:
		c := cp.(*paho3.ConnectPacket)
		c.ProtocolName, c.ProtocolVersion = p.Version.protocolName(), byte(p.Version)
		c.CleanSession, c.Keepalive, c.ClientIdentifier = p.CleanStart, p.KeepAlive, p.ClientID
		if w := p.Will; w != nil {
			c.WillFlag, c.WillQos, c.WillRetain, c.WillTopic, c.WillMessage = true, byte(w.QoS), w.Retain, w.Topic, w.Payload
		}
		c.UsernameFlag, c.Username = p.HasUsername, p.Username
		c.PasswordFlag, c.Password = p.HasPassword, p.Password
	case *Connack:
		c := cp.(*paho3.ConnackPacket)
		c.SessionPresent, c.ReturnCode = p.SessionPresent, byte(p.ReturnCode)
	case *Publish:
		c := cp.(*paho3.PublishPacket)
		c.Dup, c.Qos, c.Retain = p.Dup, byte(p.QoS), p.Retain
		c.TopicName, c.MessageID, c.Payload = p.Topic, p.PacketID, p.Payload
	case *Puback:
		cp.(*paho3.PubackPacket).MessageID = p.PacketID
	case *Pubrec:
		cp.(*paho3.PubrecPacket).MessageID = p.PacketID
	case *Pubrel:
		cp.(*paho3.PubrelPacket).MessageID = p.PacketID
	case *Pubcomp:
		cp.(*paho3.PubcompPacket).MessageID = p.PacketID
	case *Subscribe:
		c := cp.(*paho3.SubscribePacket)
		c.MessageID = p.PacketID
		for _, s := range p.Subscriptions {
			c.Topics, c.Qoss = append(c.Topics, s.Filter), append(c.Qoss, byte(s.QoS))
		}
	case *Suback:
		c := cp.(*paho3.SubackPacket)
		c.MessageID = p.PacketID
		for _, r := range p.ReasonCodes {
			c.ReturnCodes = append(c.ReturnCodes, byte(r))
		}
	case *Unsubscribe:
		c := cp.(*paho3.UnsubscribePacket)
		c.MessageID, c.Topics = p.PacketID, p.Filters
	case *Unsuback:
		cp.(*paho3.UnsubackPacket).MessageID = p.PacketID
	}
	return cp
}

func TestInterop5(t *testing.T) {
	for i, p := range allPackets(V5) {
		t.Run(fmt.Sprintf("%d-%v", i, p.Type()), func(t *testing.T) {
			if why := pahoCannot5(p); why != "" {
				t.Skip(why)
			}
			ours := p.Append(nil, V5)

			// Ours, read by Paho.
			if why := pahoCannotRead5(p); why != "" {
				t.Log(why)
			} else {
				cp, err := paho5.ReadPacket(bytes.NewReader(ours))
				if err != nil {
					t.Fatalf("paho cannot read %x: %v", ours, err)
				}
				if got := fromPaho5(cp); !reflect.DeepEqual(got, p) {
					t.Fatalf("paho read %x as\n %#v\nwant %#v", ours, got, p)
				}
			}

			// Paho's, read by us.
			if why := pahoCannotWrite5(p); why != "" {
				t.Log(why)
				return
			}
			var theirs bytes.Buffer
			if _, err := toPaho5(p).WriteTo(&theirs); err != nil {
				t.Fatal(err)
			}
			if got := decodeOK(t, V5, theirs.Bytes()); !reflect.DeepEqual(got, p) {
				t.Fatalf("read paho's %x as\n %#v\nwant %#v", theirs.Bytes(), got, p)
			}
		})
	}
}

// pahoCannot5 says why Paho can express p in neither direction, or "".
func pahoCannot5(p Packet) string {
	props, will := packetProperties(p)
	for _, ps := range append(props, will...) {
		if len(ps.SubscriptionIdentifiers) > 1 {
			return "paho keeps one Subscription Identifier"
		}
		for _, id := range []PropertyID{PropContentType, PropResponseTopic, PropCorrelationData, PropAssignedClientIdentifier,
			PropAuthenticationMethod, PropAuthenticationData, PropResponseInformation, PropServerReference, PropReasonString} {
			if ps.Zeros.Has(id) {
				return fmt.Sprintf("paho takes an empty %v for none", id)
			}
		}
	}
	return ""
}

// pahoCannotRead5 says why Paho cannot read what we encode of p, or "".
func pahoCannotRead5(p Packet) string {
	if d, ok := p.(*Disconnect); ok && d.ReasonCode == 0 && d.Properties.IsEmpty() {
		return "paho fails on a DISCONNECT of remaining length 0, which 5.0 allows (section 3.14.2.1)"
	}
	return ""
}

// pahoCannotWrite5 says why Paho cannot write p so that we read it back
// the same, or "".
func pahoCannotWrite5(p Packet) string {
	if c, ok := p.(*Connect); ok && c.Will != nil {
		w := c.Will.Properties
		w.WillDelayInterval, w.UserProperties, w.Zeros = 0, nil, w.Zeros&PropertySetOf(PropWillDelayInterval)
		if !w.IsEmpty() {
			return "paho writes only the CONNECT properties among Will Properties"
		}
	}
	if a, ok := p.(*Auth); ok && a.Properties.IsEmpty() {
		return "paho writes an empty AUTH with a reason code and no Authentication Method, a Protocol Error"
	}
	return ""
}

// packetProperties returns p's property lists, and its will's.
func packetProperties(p Packet) (props, will []*Properties) {
	if f := reflect.ValueOf(p).Elem().FieldByName("Properties"); f.IsValid() {
		props = append(props, f.Addr().Interface().(*Properties))
	}
	if c, ok := p.(*Connect); ok && c.Will != nil {
		will = append(will, &c.Will.Properties)
	}
	return props, will
}

func fromPaho5(cp *paho5.ControlPacket) Packet {
	switch c := cp.Content.(type) {
	case *paho5.Connect:
		p := &Connect{Version: Version(c.ProtocolVersion), CleanStart: c.CleanStart, KeepAlive: c.KeepAlive,
			Properties: fromPahoProps(c.Properties), ClientID: c.ClientID,
			HasUsername: c.UsernameFlag, Username: c.Username, HasPassword: c.PasswordFlag, Password: nonEmpty(c.Password)}
		if c.WillFlag {
			p.Will = &Will{QoS: QoS(c.WillQOS), Retain: c.WillRetain, Properties: fromPahoProps(c.WillProperties),
				Topic: c.WillTopic, Payload: nonEmpty(c.WillMessage)}
		}
		return p
	case *paho5.Connack:
		return &Connack{SessionPresent: c.SessionPresent, ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Publish:
		return &Publish{Dup: c.Duplicate, QoS: QoS(c.QoS), Retain: c.Retain, Topic: c.Topic, PacketID: c.PacketID,
			Properties: fromPahoProps(c.Properties), Payload: nonEmpty(c.Payload)}
	case *paho5.Puback:
		return &Puback{PacketID: c.PacketID, ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Pubrec:
		return &Pubrec{PacketID: c.PacketID, ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Pubrel:
		return &Pubrel{PacketID: c.PacketID, ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Pubcomp:
		return &Pubcomp{PacketID: c.PacketID, ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Subscribe:
		s := &Subscribe{PacketID: c.PacketID, Properties: fromPahoProps(c.Properties)}
		for _, o := range c.Subscriptions {
			s.Subscriptions = append(s.Subscriptions, Subscription{Filter: o.Topic, QoS: QoS(o.QoS), NoLocal: o.NoLocal,
				RetainAsPublished: o.RetainAsPublished, RetainHandling: RetainHandling(o.RetainHandling)})
		}
		return s
	case *paho5.Suback:
		return &Suback{PacketID: c.PacketID, Properties: fromPahoProps(c.Properties), ReasonCodes: reasonCodes(c.Reasons)}
	case *paho5.Unsubscribe:
		return &Unsubscribe{PacketID: c.PacketID, Properties: fromPahoProps(c.Properties), Filters: c.Topics}
	case *paho5.Unsuback:
		return &Unsuback{PacketID: c.PacketID, Properties: fromPahoProps(c.Properties), ReasonCodes: reasonCodes(c.Reasons)}
	case *paho5.Pingreq:
		return &Pingreq{}
	case *paho5.Pingresp:
		return &Pingresp{}
	case *paho5.Disconnect:
		return &Disconnect{ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	case *paho5.Auth:
		return &Auth{ReasonCode: ReasonCode(c.ReasonCode), Properties: fromPahoProps(c.Properties)}
	}
	panic(fmt.Sprintf("paho packet %T", cp.Content))
}

func reasonCodes(b []byte) []ReasonCode {
	var codes []ReasonCode
	for _, c := range b {
		codes = append(codes, ReasonCode(c))
	}
	return codes
}

func toPaho5(p Packet) io.WriterTo {
	switch p := p.(type) {
	case *Connect:
		c := &paho5.Connect{ProtocolName: "MQTT", ProtocolVersion: 5, CleanStart: p.CleanStart, KeepAlive: p.KeepAlive,
			Properties: toPahoProps(&p.Properties), ClientID: p.ClientID,
			UsernameFlag: p.HasUsername, Username: p.Username, PasswordFlag: p.HasPassword, Password: p.Password}
		if w := p.Will; w != nil {
			c.WillFlag, c.WillQOS, c.WillRetain, c.WillTopic, c.WillMessage = true, byte(w.QoS), w.Retain, w.Topic, w.Payload
			c.WillProperties = toPahoProps(&w.Properties)
		}
		return c
	case *Connack:
		return &paho5.Connack{SessionPresent: p.SessionPresent, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Publish:
		return &paho5.Publish{Duplicate: p.Dup, QoS: byte(p.QoS), Retain: p.Retain, Topic: p.Topic, PacketID: p.PacketID,
			Properties: toPahoProps(&p.Properties), Payload: p.Payload}
	case *Puback:
		return &paho5.Puback{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubrec:
		return &paho5.Pubrec{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubrel:
		return &paho5.Pubrel{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Pubcomp:
		return &paho5.Pubcomp{PacketID: p.PacketID, ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Subscribe:
		s := &paho5.Subscribe{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties)}
		for _, o := range p.Subscriptions {
			s.Subscriptions = append(s.Subscriptions, paho5.SubOptions{Topic: o.Filter, QoS: byte(o.QoS), NoLocal: o.NoLocal,
				RetainAsPublished: o.RetainAsPublished, RetainHandling: byte(o.RetainHandling)})
		}
		return s
	case *Suback:
		s := &paho5.Suback{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties)}
		for _, c := range p.ReasonCodes {
			s.Reasons = append(s.Reasons, byte(c))
		}
		return s
	case *Unsubscribe:
		return &paho5.Unsubscribe{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties), Topics: p.Filters}
	case *Unsuback:
		u := &paho5.Unsuback{PacketID: p.PacketID, Properties: toPahoProps(&p.Properties)}
		for _, c := range p.ReasonCodes {
			u.Reasons = append(u.Reasons, byte(c))
		}
		return u
	case *Pingreq:
		return &paho5.Pingreq{}
	case *Pingresp:
		return &paho5.Pingresp{}
	case *Disconnect:
		return &paho5.Disconnect{ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	case *Auth:
		return &paho5.Auth{ReasonCode: byte(p.ReasonCode), Properties: toPahoProps(&p.Properties)}
	}
	panic(fmt.Sprintf("packet %T", p))
}

// fromPahoProps converts Paho's properties, where a nil pointer or an
// empty string or slice is absent.
func fromPahoProps(pp *paho5.Properties) Properties {
	var p Properties
	if pp == nil {
		return p
	}
	u8 := func(id PropertyID, v *byte) byte {
		if v == nil {
			return 0
		}
		if *v == 0 {
			p.Zeros |= 1 << id
		}
		return *v
	}
	u16 := func(id PropertyID, v *uint16) uint16 {
		if v == nil {
			return 0
		}
		if *v == 0 {
			p.Zeros |= 1 << id
		}
		return *v
	}
	u32 := func(id PropertyID, v *uint32) uint32 {
		if v == nil {
			return 0
		}
		if *v == 0 {
			p.Zeros |= 1 << id
		}
		return *v
	}
	p.PayloadFormatIndicator = u8(PropPayloadFormatIndicator, pp.PayloadFormat)
	p.MessageExpiryInterval = u32(PropMessageExpiryInterval, pp.MessageExpiry)
	p.ContentType = pp.ContentType
	p.ResponseTopic = pp.ResponseTopic
	p.CorrelationData = nonEmpty(pp.CorrelationData)
	if pp.SubscriptionIdentifier != nil {
		p.SubscriptionIdentifiers = []uint32{uint32(*pp.SubscriptionIdentifier)}
	}
	p.SessionExpiryInterval = u32(PropSessionExpiryInterval, pp.SessionExpiryInterval)
	p.AssignedClientIdentifier = pp.AssignedClientID
	p.ServerKeepAlive = u16(PropServerKeepAlive, pp.ServerKeepAlive)
	p.AuthenticationMethod = pp.AuthMethod
	p.AuthenticationData = nonEmpty(pp.AuthData)
	p.RequestProblemInformation = u8(PropRequestProblemInformation, pp.RequestProblemInfo)
	p.WillDelayInterval = u32(PropWillDelayInterval, pp.WillDelayInterval)
	p.RequestResponseInformation = u8(PropRequestResponseInformation, pp.RequestResponseInfo)
	p.ResponseInformation = pp.ResponseInfo
	p.ServerReference = pp.ServerReference
	p.ReasonString = pp.ReasonString
	p.ReceiveMaximum = u16(PropReceiveMaximum, pp.ReceiveMaximum)
	p.TopicAliasMaximum = u16(PropTopicAliasMaximum, pp.TopicAliasMaximum)
	p.TopicAlias = u16(PropTopicAlias, pp.TopicAlias)
	p.MaximumQoS = u8(PropMaximumQoS, pp.MaximumQOS)
	p.RetainAvailable = u8(PropRetainAvailable, pp.RetainAvailable)
	for _, u := range pp.User {
		p.UserProperties = append(p.UserProperties, UserProperty{u.Key, u.Value})
	}
	p.MaximumPacketSize = u32(PropMaximumPacketSize, pp.MaximumPacketSize)
	p.WildcardSubscriptionAvailable = u8(PropWildcardSubscriptionAvailable, pp.WildcardSubAvailable)
	p.SubscriptionIdentifierAvailable = u8(PropSubscriptionIdentifierAvailable, pp.SubIDAvailable)
	p.SharedSubscriptionAvailable = u8(PropSharedSubscriptionAvailable, pp.SharedSubAvailable)
	return p
}

func toPahoProps(p *Properties) *paho5.Properties {
	pp := &paho5.Properties{}
	u8 := func(id PropertyID, v byte) *byte {
		if !p.Has(id) {
			return nil
		}
		return &v
	}
	u16 := func(id PropertyID, v uint16) *uint16 {
		if !p.Has(id) {
			return nil
		}
		return &v
	}
	u32 := func(id PropertyID, v uint32) *uint32 {
		if !p.Has(id) {
			return nil
		}
		return &v
	}
	pp.PayloadFormat = u8(PropPayloadFormatIndicator, p.PayloadFormatIndicator)
	pp.MessageExpiry = u32(PropMessageExpiryInterval, p.MessageExpiryInterval)
	pp.ContentType = p.ContentType
	pp.ResponseTopic = p.ResponseTopic
	pp.CorrelationData = p.CorrelationData
	if len(p.SubscriptionIdentifiers) > 0 {
		id := int(p.SubscriptionIdentifiers[0])
		pp.SubscriptionIdentifier = &id
	}
	pp.SessionExpiryInterval = u32(PropSessionExpiryInterval, p.SessionExpiryInterval)
	pp.AssignedClientID = p.AssignedClientIdentifier
	pp.ServerKeepAlive = u16(PropServerKeepAlive, p.ServerKeepAlive)
	pp.AuthMethod = p.AuthenticationMethod
	pp.AuthData = p.AuthenticationData
	pp.RequestProblemInfo = u8(PropRequestProblemInformation, p.RequestProblemInformation)
	pp.WillDelayInterval = u32(PropWillDelayInterval, p.WillDelayInterval)
	pp.RequestResponseInfo = u8(PropRequestResponseInformation, p.RequestResponseInformation)
	pp.ResponseInfo = p.ResponseInformation
	pp.ServerReference = p.ServerReference
	pp.ReasonString = p.ReasonString
	pp.ReceiveMaximum = u16(PropReceiveMaximum, p.ReceiveMaximum)
	pp.TopicAliasMaximum = u16(PropTopicAliasMaximum, p.TopicAliasMaximum)
	pp.TopicAlias = u16(PropTopicAlias, p.TopicAlias)
	pp.MaximumQOS = u8(PropMaximumQoS, p.MaximumQoS)
	pp.RetainAvailable = u8(PropRetainAvailable, p.RetainAvailable)
	for _, u := range p.UserProperties {
		pp.User = append(pp.User, paho5.User{Key: u.Key, Value: u.Value})
	}
	pp.MaximumPacketSize = u32(PropMaximumPacketSize, p.MaximumPacketSize)
	pp.WildcardSubAvailable = u8(PropWildcardSubscriptionAvailable, p.WildcardSubscriptionAvailable)
	pp.SubIDAvailable = u8(PropSubscriptionIdentifierAvailable, p.SubscriptionIdentifierAvailable)
	pp.SharedSubAvailable = u8(PropSharedSubscriptionAvailable, p.SharedSubscriptionAvailable)
	return pp
}
