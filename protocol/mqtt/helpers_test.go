package mqtt

import (
	"encoding/hex"
	"strings"
	"testing"
)

// mustHex decodes hex written with spaces and newlines between fields.
func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

var versions = []Version{V31, V311, V5}

// allPackets holds at least one value of every packet version v has, with
// the variants the wire distinguishes (QoS levels, short and long forms,
// optional fields present and absent), each in the form Decode returns:
// empty slices nil, Zeros only for properties sent as zero, and nothing
// v cannot carry.
func allPackets(v Version) []Packet {
	v5 := v == V5
	// p returns props in 5.0 and nothing before.
	p := func(props Properties) Properties {
		if v5 {
			return props
		}
		return Properties{}
	}
	rc := func(c ReasonCode) ReasonCode {
		if v5 {
			return c
		}
		return 0
	}
	refused := &Connack{ReturnCode: ConnackNotAuthorized}
	if v5 {
		refused = &Connack{ReasonCode: ReasonNotAuthorized}
	}
	unsuback := &Unsuback{PacketID: 13}
	if v5 {
		unsuback.ReasonCodes = []ReasonCode{ReasonSuccess, ReasonSuccess}
	}
	users := []UserProperty{{"k", "v"}, {"k", "w"}, {"", ""}, {"ключ", "値"}}

	pkts := []Packet{
		&Connect{Version: v, CleanStart: true, KeepAlive: 60, ClientID: "client-1"},
		&Connect{Version: v, ClientID: "c", KeepAlive: 0xffff,
			HasUsername: true, Username: "guest", HasPassword: true, Password: []byte("\x00secret\xff")},
		&Connect{Version: v, ClientID: "c", HasUsername: true, HasPassword: true}, // both empty
		&Connect{Version: v, ClientID: "c", HasUsername: true, Username: "u"},
		&Connect{Version: v, ClientID: "will", CleanStart: true,
			Will: &Will{QoS: QoS2, Retain: true, Topic: "clients/will/gone", Payload: []byte("bye"),
				Properties: p(Properties{WillDelayInterval: 30, PayloadFormatIndicator: 1, MessageExpiryInterval: 3600,
					ContentType: "text/plain", ResponseTopic: "replies/x", CorrelationData: []byte{1, 2, 3}, UserProperties: users})}},
		&Connect{Version: v, ClientID: "will0", Will: &Will{Topic: "t"}}, // QoS 0, empty payload
		&Connect{Version: v, ClientID: "props", Properties: p(Properties{
			SessionExpiryInterval: 0xffffffff, ReceiveMaximum: 10, MaximumPacketSize: 1 << 20, TopicAliasMaximum: 5,
			RequestResponseInformation: 1, RequestProblemInformation: 1, UserProperties: users,
			AuthenticationMethod: "SCRAM-SHA-1", AuthenticationData: []byte("client-first")})},
		&Connect{Version: v, ClientID: "zeros", Properties: p(Properties{
			Zeros: PropertySetOf(PropSessionExpiryInterval, PropRequestProblemInformation, PropTopicAliasMaximum)})},

		&Connack{SessionPresent: true, Properties: p(Properties{})},
		refused,
		&Connack{Properties: p(Properties{SessionExpiryInterval: 10, ReceiveMaximum: 100, MaximumQoS: 1, RetainAvailable: 1,
			MaximumPacketSize: 65536, AssignedClientIdentifier: "auto-1", TopicAliasMaximum: 16, ReasonString: "welcome",
			UserProperties: users, WildcardSubscriptionAvailable: 1, SubscriptionIdentifierAvailable: 1,
			SharedSubscriptionAvailable: 1, ServerKeepAlive: 30, ResponseInformation: "resp/", ServerReference: "other:1883",
			AuthenticationMethod: "SCRAM-SHA-1", AuthenticationData: []byte("server-final")})},
		&Connack{Properties: p(Properties{Zeros: PropertySetOf(PropMaximumQoS, PropRetainAvailable,
			PropWildcardSubscriptionAvailable, PropSubscriptionIdentifierAvailable, PropSharedSubscriptionAvailable)})},

		&Publish{Topic: "a/b", Payload: []byte("hello")},
		&Publish{Topic: "a/b"}, // no payload
		&Publish{QoS: QoS1, PacketID: 1, Topic: "sensors/1/temp", Retain: true, Payload: []byte("21.5")},
		&Publish{QoS: QoS2, Dup: true, PacketID: 0xffff, Topic: "$SYS/x", Payload: make([]byte, 300)},
		&Publish{QoS: QoS1, PacketID: 7, Topic: "долг/日本", Payload: []byte{0}},
		&Puback{PacketID: 1},
		&Puback{PacketID: 2, ReasonCode: rc(ReasonNoMatchingSubscribers)},
		&Puback{PacketID: 3, ReasonCode: rc(ReasonQuotaExceeded), Properties: p(Properties{ReasonString: "queue full", UserProperties: users})},
		&Puback{PacketID: 4, Properties: p(Properties{ReasonString: strings.Repeat("r", 200)})}, // remaining length over 127
		&Pubrec{PacketID: 5},
		&Pubrec{PacketID: 6, ReasonCode: rc(ReasonPacketIdentifierInUse)},
		&Pubrel{PacketID: 7},
		&Pubrel{PacketID: 8, ReasonCode: rc(ReasonPacketIdentifierNotFound), Properties: p(Properties{ReasonString: "?"})},
		&Pubcomp{PacketID: 9},
		&Pubcomp{PacketID: 10, ReasonCode: rc(ReasonPacketIdentifierNotFound)},

		&Subscribe{PacketID: 11, Subscriptions: []Subscription{{Filter: "a/+/c", QoS: QoS1}}},
		&Subscribe{PacketID: 12, Subscriptions: []Subscription{
			{Filter: "#"}, {Filter: "a/#", QoS: QoS2}, {Filter: "+", QoS: QoS1}, {Filter: "/"}, {Filter: "$share/g/x"}}},
		&Suback{PacketID: 11, ReasonCodes: []ReasonCode{ReasonGrantedQoS1}},
		&Suback{PacketID: 12, ReasonCodes: []ReasonCode{ReasonGrantedQoS0, ReasonGrantedQoS2, ReasonGrantedQoS1, ReasonUnspecifiedError}},
		&Unsubscribe{PacketID: 13, Filters: []string{"a/+/c"}},
		&Unsubscribe{PacketID: 14, Filters: []string{"#", "a/b", "$share/g/x"}},
		unsuback,
		&Pingreq{},
		&Pingresp{},
		&Disconnect{},
	}
	if !v5 {
		return pkts
	}
	return append(pkts,
		&Publish{QoS: QoS1, PacketID: 3, Topic: "", Payload: []byte("aliased"), Properties: Properties{TopicAlias: 1}},
		&Publish{Topic: "req", Payload: []byte("{}"), Properties: Properties{PayloadFormatIndicator: 1, MessageExpiryInterval: 60,
			ContentType: "application/json", ResponseTopic: "resp/1", CorrelationData: []byte("id-1"), TopicAlias: 2,
			SubscriptionIdentifiers: []uint32{1, MaxVarInt, 128}, UserProperties: users}},
		&Publish{Topic: "z", Properties: Properties{Zeros: PropertySetOf(PropPayloadFormatIndicator, PropMessageExpiryInterval,
			PropContentType, PropCorrelationData)}},
		&Puback{PacketID: 20, Properties: Properties{UserProperties: users}}, // Success with properties
		&Subscribe{PacketID: 21, Properties: Properties{SubscriptionIdentifiers: []uint32{268435455}, UserProperties: users},
			Subscriptions: []Subscription{
				{Filter: "a/b", QoS: QoS1, NoLocal: true, RetainAsPublished: true, RetainHandling: RetainDoNotSend},
				{Filter: "$share/group/a/#", QoS: QoS2, RetainHandling: RetainSendIfNew},
				{Filter: "$share", RetainAsPublished: true},
			}},
		&Suback{PacketID: 21, Properties: Properties{ReasonString: "partly"}, ReasonCodes: []ReasonCode{
			ReasonGrantedQoS1, ReasonSharedSubscriptionsNotSupported, ReasonWildcardSubscriptionsNotSupported,
			ReasonSubscriptionIdentifiersNotSupported, ReasonTopicFilterInvalid, ReasonQuotaExceeded}},
		&Unsubscribe{PacketID: 22, Properties: Properties{UserProperties: users}, Filters: []string{"a/b"}},
		&Unsuback{PacketID: 22, ReasonCodes: []ReasonCode{ReasonSuccess}},
		&Unsuback{PacketID: 23, Properties: Properties{ReasonString: "no"}, ReasonCodes: []ReasonCode{ReasonNoSubscriptionExisted, ReasonNotAuthorized}},
		&Disconnect{ReasonCode: ReasonDisconnectWithWillMessage},
		&Disconnect{ReasonCode: ReasonSessionTakenOver, Properties: Properties{ReasonString: "another connection", ServerReference: "b:1883"}},
		&Disconnect{Properties: Properties{Zeros: PropertySetOf(PropSessionExpiryInterval)}},
		&Connect{Version: v, ClientID: "c", HasPassword: true, Password: []byte("token")}, // no user name: 5.0 only
		&Auth{},
		&Auth{ReasonCode: ReasonContinueAuthentication, Properties: Properties{AuthenticationMethod: "SCRAM-SHA-1",
			AuthenticationData: []byte("server-first"), ReasonString: "go on", UserProperties: users}},
		&Auth{ReasonCode: ReasonReauthenticate, Properties: Properties{AuthenticationMethod: "token"}},
		&Auth{Properties: Properties{AuthenticationMethod: "token"}}, // Success with properties
	)
}

// decodeOK decodes a packet that must decode.
func decodeOK(t *testing.T, v Version, b []byte) Packet {
	t.Helper()
	p, err := Decode(v, b)
	if err != nil {
		t.Fatalf("decode %x in %v: %v", b, v, err)
	}
	return p
}
