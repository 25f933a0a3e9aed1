package mqtt

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// TestRoundTrip encodes every packet in each version, after bytes already
// in the buffer, and decodes it back to an equal value.
func TestRoundTrip(t *testing.T) {
	for _, v := range versions {
		for i, p := range allPackets(v) {
			t.Run(fmt.Sprintf("%v/%d-%v", v, i, p.Type()), func(t *testing.T) {
				b := p.Append([]byte("prefix"), v)
				if !bytes.HasPrefix(b, []byte("prefix")) {
					t.Fatalf("Append overwrote the buffer: %q", b)
				}
				b = b[len("prefix"):]
				h, n, err := ParseFixedHeader(b)
				if err != nil || n+h.RemainingLength != len(b) || h.Type != p.Type() {
					t.Fatalf("fixed header %+v, %d bytes, %v, for a packet of %d bytes", h, n, err, len(b))
				}
				got := decodeOK(t, v, b)
				if !reflect.DeepEqual(got, p) {
					t.Fatalf("round trip of %x\n got %#v\nwant %#v", b, got, p)
				}
				if again := got.Append(nil, v); !bytes.Equal(again, b) {
					t.Fatalf("re-encoded\n got %x\nwant %x", again, b)
				}
			})
		}
	}
}

// TestEveryTypeCovered checks that the round-trip table holds every
// packet type of each version.
func TestEveryTypeCovered(t *testing.T) {
	for _, v := range versions {
		seen := map[PacketType]bool{}
		for _, p := range allPackets(v) {
			seen[p.Type()] = true
		}
		last := TypeDisconnect
		if v == V5 {
			last = TypeAuth
		}
		for typ := TypeConnect; typ <= last; typ++ {
			if !seen[typ] {
				t.Errorf("%v: no round-trip case for %v", v, typ)
			}
		}
	}
}

// TestEveryPropertyCovered checks that the round trip carries every
// property.
func TestEveryPropertyCovered(t *testing.T) {
	var seen PropertySet
	collect := func(p *Properties) {
		for _, id := range allProperties {
			if p.Has(id) && !p.Zeros.Has(id) {
				seen |= 1 << id
			}
		}
	}
	for _, p := range allPackets(V5) {
		if f := reflect.ValueOf(p).Elem().FieldByName("Properties"); f.IsValid() {
			collect(f.Addr().Interface().(*Properties))
		}
		if c, ok := p.(*Connect); ok && c.Will != nil {
			collect(&c.Will.Properties)
		}
	}
	for _, id := range allProperties {
		if !seen.Has(id) {
			t.Errorf("no round-trip case with %v", id)
		}
	}
}

// TestShortForms checks the remaining lengths 5.0 lets acknowledgements,
// DISCONNECT and AUTH shorten to, and that the long forms decode the same.
func TestShortForms(t *testing.T) {
	for _, tc := range []struct {
		p         Packet
		short     string
		longForms []string
	}{
		{&Puback{PacketID: 1}, "40 02 0001", []string{"40 03 0001 00", "40 04 0001 00 00"}},
		{&Pubrec{PacketID: 1, ReasonCode: ReasonNoMatchingSubscribers}, "50 03 0001 10", []string{"50 04 0001 10 00"}},
		{&Pubrel{PacketID: 1}, "62 02 0001", []string{"62 03 0001 00", "62 04 0001 00 00"}},
		{&Pubcomp{PacketID: 1, ReasonCode: ReasonPacketIdentifierNotFound}, "70 03 0001 92", []string{"70 04 0001 92 00"}},
		{&Disconnect{}, "e0 00", []string{"e0 01 00", "e0 02 00 00"}},
		{&Disconnect{ReasonCode: ReasonServerShuttingDown}, "e0 01 8b", []string{"e0 02 8b 00"}},
		{&Auth{}, "f0 00", nil},
	} {
		want := mustHex(tc.short)
		if got := tc.p.Append(nil, V5); !bytes.Equal(got, want) {
			t.Errorf("%v: encoded %x, want %x", tc.p.Type(), got, want)
		}
		for _, long := range append(tc.longForms, tc.short) {
			if got := decodeOK(t, V5, mustHex(long)); !reflect.DeepEqual(got, tc.p) {
				t.Errorf("%s decoded to %#v, want %#v", long, got, tc.p)
			}
		}
	}
}

// TestOlderVersionsDropWhatTheyLack checks that encoding a 5.0 packet in
// 3.1.1 leaves out properties and reason codes, and maps refusals.
func TestOlderVersionsDropWhatTheyLack(t *testing.T) {
	props := Properties{ReasonString: "why", UserProperties: []UserProperty{{"a", "b"}}}
	for _, tc := range []struct {
		p    Packet
		want string
	}{
		{&Puback{PacketID: 1, ReasonCode: ReasonQuotaExceeded, Properties: props}, "40 02 0001"},
		{&Pubrel{PacketID: 1, ReasonCode: ReasonPacketIdentifierNotFound, Properties: props}, "62 02 0001"},
		{&Disconnect{ReasonCode: ReasonServerBusy, Properties: props}, "e0 00"},
		{&Suback{PacketID: 2, Properties: props, ReasonCodes: []ReasonCode{ReasonGrantedQoS2, ReasonQuotaExceeded, ReasonNotAuthorized}},
			"90 05 0002 02 80 80"},
		{&Unsuback{PacketID: 3, Properties: props, ReasonCodes: []ReasonCode{ReasonNoSubscriptionExisted}}, "b0 02 0003"},
		{&Connack{SessionPresent: true, ReasonCode: ReasonBadUserNameOrPassword, ReturnCode: ConnackBadUsernameOrPassword, Properties: props},
			"20 02 01 04"},
		{&Publish{QoS: QoS1, PacketID: 5, Topic: "t", Properties: props, Payload: []byte("x")}, "32 06 0001 74 0005 78"},
		{&Subscribe{PacketID: 6, Properties: props, Subscriptions: []Subscription{
			{Filter: "t", QoS: QoS1, NoLocal: true, RetainAsPublished: true, RetainHandling: RetainDoNotSend}}}, "82 06 0006 0001 74 01"},
	} {
		if got := tc.p.Append(nil, V311); !bytes.Equal(got, mustHex(tc.want)) {
			t.Errorf("%v: encoded %x, want %s", tc.p.Type(), got, tc.want)
		}
	}
}

func TestReturnCodeFor(t *testing.T) {
	for c, want := range map[ReasonCode]ConnackReturnCode{
		ReasonSuccess:                    ConnackAccepted,
		ReasonUnsupportedProtocolVersion: ConnackUnacceptableProtocolVersion,
		ReasonClientIdentifierNotValid:   ConnackIdentifierRejected,
		ReasonServerBusy:                 ConnackServerUnavailable,
		ReasonBadUserNameOrPassword:      ConnackBadUsernameOrPassword,
		ReasonNotAuthorized:              ConnackNotAuthorized,
		ReasonBanned:                     ConnackNotAuthorized,
		ReasonUnspecifiedError:           ConnackServerUnavailable,
	} {
		if got := ReturnCodeFor(c); got != want {
			t.Errorf("%v: %v, want %v", c, got, want)
		}
	}
}

// TestEncodePanics checks the values no packet can hold.
func TestEncodePanics(t *testing.T) {
	long := string(make([]byte, 65536))
	for name, f := range map[string]func(){
		"topic over 65535 bytes":    func() { (&Publish{Topic: long}).Append(nil, V5) },
		"password over 65535 bytes": func() { (&Connect{Version: V5, Password: []byte(long)}).Append(nil, V5) },
		"QoS 4":                     func() { (&Publish{Topic: "t", QoS: 4}).Append(nil, V5) },
		"subscription id over max": func() {
			(&Subscribe{Properties: Properties{SubscriptionIdentifiers: []uint32{MaxVarInt + 1}}}).Append(nil, V5)
		},
		"AUTH in 3.1.1":              func() { (&Auth{}).Append(nil, V311) },
		"CONNECT without a version":  func() { (&Connect{}).Append(nil, V5) },
		"remaining length over max":  func() { AppendVarInt(nil, MaxVarInt+1) },
		"negative variable byte int": func() { AppendVarInt(nil, -1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
