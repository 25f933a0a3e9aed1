package mqtt

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	for name, want := range map[string]error{
		"a":                        nil,
		"/":                        nil,
		"a/b/c":                    nil,
		"$SYS/broker":              nil,
		" ":                        nil,
		"a//b":                     nil,
		"日本/語":                     nil,
		"":                         ErrTopicName,
		"a/+":                      ErrTopicName,
		"#":                        ErrTopicName,
		"a/b#":                     ErrTopicName,
		"a\x00b":                   ErrUTF8,
		"\xff":                     ErrUTF8,
		"\xed\xa0\x80":             ErrUTF8, // U+D800, a surrogate
		strings.Repeat("x", 65535): nil,
		strings.Repeat("x", 65536): ErrUTF8,
	} {
		if err := ValidateTopicName(name); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%.20q: %v, want %v", name, err, want)
		}
	}
}

func TestValidateTopicFilter(t *testing.T) {
	for filter, want := range map[string]error{
		"#":                 nil,
		"+":                 nil,
		"/":                 nil,
		"a/#":               nil,
		"/#":                nil,
		"+/+":               nil,
		"+/a/#":             nil,
		"a/+/b":             nil,
		"//+//":             nil,
		"$SYS/#":            nil,
		"$share/g/a":        nil, // a plain filter to this function
		"$share/":           nil,
		"":                  ErrTopicFilter,
		"a#":                ErrTopicFilter,
		"#/a":               ErrTopicFilter,
		"a/#/b":             ErrTopicFilter,
		"##":                ErrTopicFilter,
		"a+":                ErrTopicFilter,
		"+a":                ErrTopicFilter,
		"a/+b/c":            ErrTopicFilter,
		"++":                ErrTopicFilter,
		"sport/tennis#":     ErrTopicFilter, // the specification's example
		"sport/tennis/#/ra": ErrTopicFilter, // likewise
		"sport+":            ErrTopicFilter, // likewise
		"a\x00":             ErrUTF8,
	} {
		if err := ValidateTopicFilter(filter); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%q: %v, want %v", filter, err, want)
		}
	}
	if !HasWildcards("a/+") || !HasWildcards("#") || HasWildcards("a/b") {
		t.Error("HasWildcards")
	}
}

func TestParseSharedSubscription(t *testing.T) {
	for _, tc := range []struct {
		filter, share, topic string
		shared               bool
		err                  error
	}{
		{"a/b", "", "a/b", false, nil},
		{"$share", "", "$share", false, nil},
		{"$sharex/g/a", "", "$sharex/g/a", false, nil},
		{"$share/g/a/b", "g", "a/b", true, nil},
		{"$share/consumer1/sport/tennis/+", "consumer1", "sport/tennis/+", true, nil},
		{"$share/g/#", "g", "#", true, nil},
		{"$share/g//", "g", "/", true, nil},
		{"$share/g", "", "", true, ErrTopicFilter},
		{"$share/", "", "", true, ErrTopicFilter},
		{"$share//a", "", "", true, ErrTopicFilter},
		{"$share/g/", "", "", true, ErrTopicFilter},
		{"$share/g+/a", "", "", true, ErrTopicFilter},
		{"$share/#/a", "", "", true, ErrTopicFilter},
		{"$share/g/a#", "", "", true, ErrTopicFilter},
		{"$share/g/\x00", "", "", true, ErrUTF8},
	} {
		share, topic, shared, err := ParseSharedSubscription(tc.filter)
		if share != tc.share || topic != tc.topic || shared != tc.shared || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%q: %q %q %v %v", tc.filter, share, topic, shared, err)
		}
	}
}

func TestValidateString(t *testing.T) {
	for s, ok := range map[string]bool{
		"":                   true,
		"plain":              true,
		"\u0001\u001f\u007f": true, // SHOULD NOT, accepted
		"\ufeffBOM":          true,
		"\U0001F600":         true,
		"\x00":               false,
		"\xc0\x80":           false, // overlong U+0000
		"\xf4\x90\x80\x80":   false, // past U+10FFFF
		"\xed\xbf\xbf":       false, // U+DFFF
	} {
		if err := ValidateString(s); (err == nil) != ok || (err != nil && !errors.Is(err, ErrUTF8)) {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		TypeUnsubscribe.String():                       "UNSUBSCRIBE",
		PacketType(0).String():                         "Reserved",
		V311.String():                                  "3.1.1",
		ReasonMalformedPacket.String():                 "Malformed Packet (0x81)",
		ReasonCode(0x03).String():                      "unknown reason code (0x03)",
		ConnackBadUsernameOrPassword.String():          "Connection Refused, bad user name or password (4)",
		ConnackReturnCode(9).String():                  "reserved return code (9)",
		PropTopicAlias.String():                        "Topic Alias (0x23)",
		PropertyID(0x04).String():                      "unknown property (0x04)",
		PropSubscriptionIdentifier.String():            "Subscription Identifier (0x0b)",
		ReasonSharedSubscriptionsNotSupported.String(): "Shared Subscriptions not supported (0x9e)",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// TestPropertyTable checks a few entries of table 2-4 and of the reason
// code table against the specification, from the other direction than
// the decoder uses them.
func TestPropertyTable(t *testing.T) {
	if n := len(allProperties); n != 27 {
		t.Errorf("%d properties, the specification has 27", n)
	}
	for _, tc := range []struct {
		id   PropertyID
		in   []PacketType
		will bool
	}{
		{PropPayloadFormatIndicator, []PacketType{TypePublish}, true},
		{PropSubscriptionIdentifier, []PacketType{TypePublish, TypeSubscribe}, false},
		{PropSessionExpiryInterval, []PacketType{TypeConnect, TypeConnack, TypeDisconnect}, false},
		{PropWillDelayInterval, nil, true},
		{PropServerReference, []PacketType{TypeConnack, TypeDisconnect}, false},
		{PropReasonString, []PacketType{TypeConnack, TypePuback, TypePubrec, TypePubrel, TypePubcomp, TypeSuback, TypeUnsuback, TypeDisconnect, TypeAuth}, false},
		{PropUserProperty, []PacketType{TypeConnect, TypeConnack, TypePublish, TypePuback, TypePubrec, TypePubrel, TypePubcomp,
			TypeSubscribe, TypeSuback, TypeUnsubscribe, TypeUnsuback, TypeDisconnect, TypeAuth}, true},
	} {
		for typ := TypeConnect; typ <= TypeAuth; typ++ {
			want := false
			for _, in := range tc.in {
				want = want || in == typ
			}
			if tc.id.AllowedIn(typ) != want {
				t.Errorf("%v in %v: %v", tc.id, typ, !want)
			}
		}
		if tc.id.AllowedInWill() != tc.will {
			t.Errorf("%v in the will: %v", tc.id, !tc.will)
		}
	}
	if !PropSubscriptionIdentifier.Repeatable(TypePublish) || PropSubscriptionIdentifier.Repeatable(TypeSubscribe) ||
		!PropUserProperty.Repeatable(TypeConnect) || PropTopicAlias.Repeatable(TypePublish) {
		t.Error("Repeatable")
	}
	for c, types := range map[ReasonCode][]PacketType{
		ReasonSuccess:               {TypeConnack, TypePuback, TypePubrec, TypePubrel, TypePubcomp, TypeSuback, TypeUnsuback, TypeDisconnect, TypeAuth},
		ReasonPacketIdentifierInUse: {TypePuback, TypePubrec, TypeSuback, TypeUnsuback},
		ReasonTopicAliasInvalid:     {TypeDisconnect},
		ReasonUnspecifiedError:      {TypeConnack, TypePuback, TypePubrec, TypeSuback, TypeUnsuback, TypeDisconnect},
	} {
		for typ := TypeConnect; typ <= TypeAuth; typ++ {
			want := false
			for _, in := range types {
				want = want || in == typ
			}
			if c.ValidFor(typ) != want {
				t.Errorf("%v in %v: %v", c, typ, !want)
			}
		}
	}
	if !ReasonMalformedPacket.IsError() || ReasonNoMatchingSubscribers.IsError() {
		t.Error("IsError")
	}
}
