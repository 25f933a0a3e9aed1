package mqtt

import (
	"bytes"
	"reflect"
	"testing"
)

// TestVarIntGolden checks the Variable Byte Integer against the
// specification's table 1-1 (5.0) / 2.4 (3.1.1): the edges of each size,
// and 321, the example 3.1.1 works through.
func TestVarIntGolden(t *testing.T) {
	for _, tc := range []struct {
		v   int
		hex string
	}{
		{0, "00"},
		{127, "7f"},
		{128, "80 01"},
		{321, "c1 02"},
		{16383, "ff 7f"},
		{16384, "80 80 01"},
		{2097151, "ff ff 7f"},
		{2097152, "80 80 80 01"},
		{268435455, "ff ff ff 7f"},
	} {
		want := mustHex(tc.hex)
		if got := AppendVarInt([]byte{0xaa}, tc.v); !bytes.Equal(got[1:], want) || got[0] != 0xaa {
			t.Errorf("%d encoded %x, want %x", tc.v, got, want)
		}
		if n := varIntLen(tc.v); n != len(want) {
			t.Errorf("%d: varIntLen %d, want %d", tc.v, n, len(want))
		}
		v, n, err := ParseVarInt(append(want, 0xff))
		if err != nil || v != tc.v || n != len(want) {
			t.Errorf("%x parsed to %d, %d bytes, %v", want, v, n, err)
		}
		// As a remaining length: the fixed header of a PUBLISH that long.
		h, n, err := ParseFixedHeader(append([]byte{0x30}, want...))
		if err != nil || h.RemainingLength != tc.v || n != 1+len(want) || h.Type != TypePublish {
			t.Errorf("fixed header 30 %x: %+v, %d bytes, %v", want, h, n, err)
		}
	}
}

// goldenPackets are packets written by hand from the specifications'
// figures, so that an encoder and decoder that agree with each other but
// not with the spec still fail.
var goldenPackets = []struct {
	name string
	v    Version
	p    Packet
	hex  string // the whole packet
}{
	{"CONNECT 3.1.1, will, user name and password (flags 0xce)", V311,
		&Connect{Version: V311, CleanStart: true, KeepAlive: 10, ClientID: "c",
			Will:        &Will{QoS: QoS1, Topic: "w", Payload: []byte("m")},
			HasUsername: true, Username: "u", HasPassword: true, Password: []byte("p")},
		`10 19 0004 4d515454 04 ce 000a 0001 63 0001 77 0001 6d 0001 75 0001 70`},
	{"CONNECT 3.1, MQIsdp", V31,
		&Connect{Version: V31, CleanStart: true, KeepAlive: 60, ClientID: "c"},
		`10 0f 0006 4d5149736470 03 02 003c 0001 63`},
	{"CONNECT 5.0, Session Expiry Interval 10, empty client id", V5,
		&Connect{Version: V5, CleanStart: true, KeepAlive: 10, Properties: Properties{SessionExpiryInterval: 10}},
		`10 12 0004 4d515454 05 02 000a 05 11 0000000a 0000`},
	{"CONNECT 5.0, retained QoS 1 will with a Will Delay Interval", V5,
		&Connect{Version: V5, ClientID: "c",
			Will: &Will{QoS: QoS1, Retain: true, Properties: Properties{WillDelayInterval: 30}, Topic: "w"}},
		`10 19 0004 4d515454 05 2c 0000 00 0001 63 05 18 0000001e 0001 77 0000`},
	{"CONNACK 3.1.1, session present", V311, &Connack{SessionPresent: true}, `20 02 01 00`},
	{"CONNACK 3.1.1, not authorized", V311, &Connack{ReturnCode: ConnackNotAuthorized}, `20 02 00 05`},
	{"CONNACK 5.0, Topic Alias Maximum and Maximum QoS", V5,
		&Connack{Properties: Properties{TopicAliasMaximum: 10, MaximumQoS: 1}},
		`20 08 00 00 05 22 000a 24 01`},
	{"CONNACK 5.0, bad user name or password", V5, &Connack{ReasonCode: ReasonBadUserNameOrPassword}, `20 03 00 86 00`},
	{"PUBLISH 3.1.1 QoS 1", V311,
		&Publish{QoS: QoS1, Topic: "a/b", PacketID: 10, Payload: []byte("hello")},
		`32 0c 0003 612f62 000a 68656c6c6f`},
	{"PUBLISH 3.1.1 QoS 2, DUP and RETAIN", V311,
		&Publish{Dup: true, QoS: QoS2, Retain: true, Topic: "t", PacketID: 1, Payload: []byte("x")},
		`3d 06 0001 74 0001 78`},
	{"PUBLISH 5.0, empty topic name with a Topic Alias", V5,
		&Publish{Properties: Properties{TopicAlias: 1}, Payload: []byte("data")},
		`30 0a 0000 03 23 0001 64617461`},
	{"PUBLISH 5.0, two Subscription Identifiers and a User Property", V5,
		&Publish{Topic: "t", Properties: Properties{SubscriptionIdentifiers: []uint32{1, 128},
			UserProperties: []UserProperty{{"k", "v"}}}},
		`30 10 0001 74 0c 0b 01 0b 80 01 26 0001 6b 0001 76`},
	{"PUBACK 3.1.1", V311, &Puback{PacketID: 1}, `40 02 0001`},
	{"PUBREC 5.0, reason code and Reason String", V5,
		&Pubrec{PacketID: 2, ReasonCode: ReasonNoMatchingSubscribers, Properties: Properties{ReasonString: "nop"}},
		`50 0a 0002 10 06 1f 0003 6e6f70`},
	{"PUBREL 3.1.1", V311, &Pubrel{PacketID: 3}, `62 02 0003`},
	{"PUBCOMP 5.0, reason code only", V5, &Pubcomp{PacketID: 4, ReasonCode: ReasonPacketIdentifierNotFound}, `70 03 0004 92`},
	{"SUBSCRIBE 3.1.1, two filters", V311,
		&Subscribe{PacketID: 10, Subscriptions: []Subscription{{Filter: "a/b", QoS: QoS1}, {Filter: "c/d", QoS: QoS2}}},
		`82 0e 000a 0003 612f62 01 0003 632f64 02`},
	{"SUBSCRIBE 5.0, Subscription Identifier and every option", V5,
		&Subscribe{PacketID: 10, Properties: Properties{SubscriptionIdentifiers: []uint32{5}},
			Subscriptions: []Subscription{{Filter: "a/+", QoS: QoS1, NoLocal: true, RetainAsPublished: true, RetainHandling: RetainDoNotSend}}},
		`82 0b 000a 02 0b 05 0003 612f2b 2d`},
	{"SUBACK 3.1.1", V311, &Suback{PacketID: 10, ReasonCodes: []ReasonCode{1, 2, 0x80}}, `90 05 000a 01 02 80`},
	{"SUBACK 5.0", V5, &Suback{PacketID: 10, ReasonCodes: []ReasonCode{0, ReasonWildcardSubscriptionsNotSupported}}, `90 05 000a 00 00 a2`},
	{"UNSUBSCRIBE 3.1.1, two filters", V311, &Unsubscribe{PacketID: 11, Filters: []string{"a/b", "c/d"}},
		`a2 0c 000b 0003 612f62 0003 632f64`},
	{"UNSUBACK 3.1.1", V311, &Unsuback{PacketID: 11}, `b0 02 000b`},
	{"UNSUBACK 5.0", V5, &Unsuback{PacketID: 11, ReasonCodes: []ReasonCode{0, ReasonNoSubscriptionExisted}}, `b0 05 000b 00 00 11`},
	{"PINGREQ", V311, &Pingreq{}, `c0 00`},
	{"PINGRESP", V5, &Pingresp{}, `d0 00`},
	{"DISCONNECT 3.1.1", V311, &Disconnect{}, `e0 00`},
	{"DISCONNECT 5.0, Session Expiry Interval 0", V5,
		&Disconnect{Properties: Properties{Zeros: PropertySetOf(PropSessionExpiryInterval)}},
		`e0 07 00 05 11 00000000`},
	{"AUTH 5.0, continue", V5,
		&Auth{ReasonCode: ReasonContinueAuthentication, Properties: Properties{AuthenticationMethod: "token"}},
		`f0 0a 18 08 15 0005 746f6b656e`},
}

func TestGoldenPackets(t *testing.T) {
	for _, g := range goldenPackets {
		t.Run(g.name, func(t *testing.T) {
			want := mustHex(g.hex)
			if got := g.p.Append(nil, g.v); !bytes.Equal(got, want) {
				t.Fatalf("encoded\n got %x\nwant %x", got, want)
			}
			if got := decodeOK(t, g.v, want); !reflect.DeepEqual(got, g.p) {
				t.Fatalf("decoded\n got %#v\nwant %#v", got, g.p)
			}
		})
	}
}

// TestLongRemainingLength encodes packets whose remaining length needs two
// and three bytes, the sizes a short body never reaches.
func TestLongRemainingLength(t *testing.T) {
	for _, tc := range []struct {
		payload int
		header  string
	}{
		{318, "30 c1 02"},      // 321 = 3 (topic) + 318, the 3.1.1 example
		{124, "30 7f"},         // 127, the largest one-byte length
		{125, "30 80 01"},      // 128
		{16381, "30 80 80 01"}, // 16384
	} {
		p := &Publish{Topic: "t", Payload: bytes.Repeat([]byte{'x'}, tc.payload)}
		b := p.Append(nil, V311)
		if h := mustHex(tc.header); !bytes.HasPrefix(b, append(h, 0x00, 0x01, 't')) || len(b) != len(h)+3+tc.payload {
			t.Errorf("payload %d: starts %x, %d bytes", tc.payload, b[:min(len(b), 8)], len(b))
		}
		if got := decodeOK(t, V311, b); !reflect.DeepEqual(got, p) {
			t.Errorf("payload %d: decoded %#v", tc.payload, got)
		}
	}
	// An acknowledgement whose properties push its length past 127 moves
	// its body behind a two-byte remaining length.
	ack := &Puback{PacketID: 1, ReasonCode: ReasonQuotaExceeded, Properties: Properties{ReasonString: string(bytes.Repeat([]byte{'r'}, 200))}}
	b := ack.Append([]byte{0xee}, V5)[1:]
	if !bytes.HasPrefix(b, mustHex("40 d0 01 0001 97 cb 01 1f 00c8 7272")) {
		t.Errorf("long PUBACK starts %x", b[:12])
	}
	if got := decodeOK(t, V5, b); !reflect.DeepEqual(got, ack) {
		t.Errorf("long PUBACK decoded %#v", got)
	}
}
