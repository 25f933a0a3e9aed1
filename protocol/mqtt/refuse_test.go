package mqtt

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// packetHex decodes a packet written in hex; "LL" in place of the
// remaining length stands for the right one.
func packetHex(s string) []byte {
	f := strings.Fields(s)
	if len(f) < 2 || f[1] != "LL" {
		return mustHex(s)
	}
	body := mustHex(strings.Join(f[2:], ""))
	return append(AppendVarInt(mustHex(f[0]), len(body)), body...)
}

// Bodies of CONNECT up to the connect flags, for the table below.
const (
	connect311 = "10 LL 0004 4d515454 04"
	connect5   = "10 LL 0004 4d515454 05"
)

// refusals is the table of malformed and forbidden packets: each must be
// refused with the error and the reason code given.
var refusals = []struct {
	name   string
	v      Version
	hex    string
	err    error
	reason ReasonCode
}{
	// The fixed header.
	{"reserved type 0", V311, "00 00", ErrPacketType, ReasonMalformedPacket},
	{"AUTH in 3.1.1", V311, "f0 00", ErrPacketType, ReasonMalformedPacket},
	{"AUTH in 3.1", V31, "f0 00", ErrPacketType, ReasonMalformedPacket},
	{"PUBLISH before CONNECT", 0, "30 03 0001 74", ErrPacketType, ReasonProtocolError},
	{"PINGREQ before CONNECT", 0, "c0 00", ErrPacketType, ReasonProtocolError},
	{"PUBREL flags 0000", V311, "60 02 0001", ErrFlags, ReasonMalformedPacket},
	{"PUBREL with DUP in 3.1.1", V311, "6a 02 0001", ErrFlags, ReasonMalformedPacket},
	{"SUBSCRIBE flags 0000", V5, "80 LL 000a 00 0001 74 00", ErrFlags, ReasonMalformedPacket},
	{"UNSUBSCRIBE flags 0011", V311, "a3 LL 000a 0001 74", ErrFlags, ReasonMalformedPacket},
	{"CONNACK flags 0001", V311, "21 02 00 00", ErrFlags, ReasonMalformedPacket},
	{"PINGREQ flags 1000", V311, "c8 00", ErrFlags, ReasonMalformedPacket},
	{"CONNECT flags 0010", 0, "12 LL 0004 4d515454 04 02 003c 0001 63", ErrFlags, ReasonMalformedPacket},
	{"AUTH flags 0001", V5, "f1 00", ErrFlags, ReasonMalformedPacket},
	{"PUBLISH QoS 3", V311, "36 03 0001 74", ErrFlags, ReasonMalformedPacket},
	{"PUBLISH DUP with QoS 0", V311, "38 03 0001 74", ErrFlags, ReasonMalformedPacket},
	{"remaining length not minimal", V311, "c0 80 00", ErrVarInt, ReasonMalformedPacket},
	{"remaining length 0 in four bytes", V311, "c0 80 80 80 00", ErrVarInt, ReasonMalformedPacket},
	{"remaining length of five bytes", V311, "30 80 80 80 80 01", ErrVarInt, ReasonMalformedPacket},
	{"remaining length past the end", V311, "40 03 0001", ErrTruncated, ReasonMalformedPacket},
	{"remaining length short of the end", V311, "40 02 0001 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"fixed header cut", V311, "30", ErrTruncated, ReasonMalformedPacket},
	{"remaining length cut", V311, "30 80", ErrTruncated, ReasonMalformedPacket},
	{"empty packet", V311, "", ErrTruncated, ReasonMalformedPacket},
	{"PINGREQ with a body", V311, "c0 01 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"PINGRESP with a body", V5, "d0 01 00", ErrTrailingBytes, ReasonMalformedPacket},

	// CONNECT.
	{"level 6", 0, "10 LL 0004 4d515454 06 02 003c 0000", ErrUnsupportedProtocol, ReasonUnsupportedProtocolVersion},
	{"MQTT level 3", 0, "10 LL 0004 4d515454 03 02 003c 0000", ErrUnsupportedProtocol, ReasonUnsupportedProtocolVersion},
	{"MQIsdp level 4", 0, "10 LL 0006 4d5149736470 04 02 003c 0000", ErrUnsupportedProtocol, ReasonUnsupportedProtocolVersion},
	{"bridge bit on level 4", 0, "10 LL 0004 4d515454 84 02 003c 0000", ErrUnsupportedProtocol, ReasonUnsupportedProtocolVersion},
	{"protocol name mqtt", 0, "10 LL 0004 6d717474 04 02 003c 0000", ErrUnsupportedProtocol, ReasonUnsupportedProtocolVersion},
	{"protocol name cut", 0, "10 LL 0004 4d51", ErrTruncated, ReasonMalformedPacket},
	{"no protocol level", 0, "10 LL 0004 4d515454", ErrTruncated, ReasonMalformedPacket},
	{"reserved connect flag", 0, connect311 + " 03 003c 0000", ErrFlags, ReasonMalformedPacket},
	{"reserved connect flag in 5.0", 0, connect5 + " 01 003c 00 0000", ErrFlags, ReasonMalformedPacket},
	{"Will QoS 3", 0, connect311 + " 1e 003c 0000 0001 74 0000", ErrFlags, ReasonMalformedPacket},
	{"Will QoS without the Will Flag", 0, connect311 + " 0a 003c 0000", ErrFlags, ReasonMalformedPacket},
	{"Will Retain without the Will Flag", 0, connect311 + " 22 003c 0000", ErrFlags, ReasonMalformedPacket},
	{"password without user name in 3.1.1", 0, connect311 + " 42 003c 0000 0001 70", ErrFlags, ReasonMalformedPacket},
	{"password without user name in 3.1", 0, "10 LL 0006 4d5149736470 03 42 003c 0001 63 0001 70", ErrFlags, ReasonMalformedPacket},
	{"user name flag without a user name", 0, connect311 + " 82 003c 0000", ErrTruncated, ReasonMalformedPacket},
	{"will flag without a will payload", 0, connect311 + " 06 003c 0000 0001 74", ErrTruncated, ReasonMalformedPacket},
	{"bytes after the password", 0, connect311 + " c2 003c 0000 0001 75 0001 70 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"will topic with a wildcard", 0, connect311 + " 06 003c 0000 0003 612f23 0000", ErrTopicName, ReasonTopicNameInvalid},
	{"empty will topic", 0, connect311 + " 06 003c 0000 0000 0000", ErrTopicName, ReasonTopicNameInvalid},
	{"client id of ill-formed UTF-8", 0, connect311 + " 02 003c 0002 c328", ErrUTF8, ReasonMalformedPacket},
	{"client id with U+0000", 0, connect311 + " 02 003c 0002 6100", ErrUTF8, ReasonMalformedPacket},
	{"client id with a surrogate", 0, connect311 + " 02 003c 0003 eda080", ErrUTF8, ReasonMalformedPacket},
	{"client id with an overlong encoding", 0, connect311 + " 02 003c 0002 c0af", ErrUTF8, ReasonMalformedPacket},
	{"user name of ill-formed UTF-8", 0, connect311 + " 82 003c 0000 0001 ff", ErrUTF8, ReasonMalformedPacket},
	{"Topic Alias in CONNECT", 0, connect5 + " 02 003c 03 23 0001 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Will Delay Interval in CONNECT's properties", 0, connect5 + " 02 003c 05 18 00000001 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Session Expiry Interval twice", 0, connect5 + " 02 003c 0a 11 00000001 11 00000002 0000", ErrDuplicateProperty, ReasonProtocolError},
	{"unknown property 0x05", 0, connect5 + " 02 003c 02 05 00 0000", ErrUnknownProperty, ReasonMalformedPacket},
	{"unknown property 0x80 0x01", 0, connect5 + " 02 003c 03 80 01 00 0000", ErrUnknownProperty, ReasonMalformedPacket},
	{"property identifier not minimal", 0, connect5 + " 02 003c 06 91 00 00000001 0000", ErrVarInt, ReasonMalformedPacket},
	{"Receive Maximum 0", 0, connect5 + " 02 003c 03 21 0000 0000", ErrBadValue, ReasonProtocolError},
	{"Maximum Packet Size 0", 0, connect5 + " 02 003c 05 27 00000000 0000", ErrBadValue, ReasonProtocolError},
	{"Request Problem Information 2", 0, connect5 + " 02 003c 02 17 02 0000", ErrBadValue, ReasonProtocolError},
	{"Request Response Information 2", 0, connect5 + " 02 003c 02 19 02 0000", ErrBadValue, ReasonProtocolError},
	{"Authentication Data without a method", 0, connect5 + " 02 003c 04 16 0001 78 0000", ErrMissingProperty, ReasonProtocolError},
	{"Authentication Method twice", 0, connect5 + " 02 003c 06 15 0000 15 0000 0000", ErrDuplicateProperty, ReasonProtocolError},
	{"property length past the end", 0, connect5 + " 02 003c 09 11 00000001", ErrTruncated, ReasonMalformedPacket},
	{"property value past the property length", 0, connect5 + " 02 003c 03 11 00000001 0000", ErrTruncated, ReasonMalformedPacket},
	{"property length not minimal", 0, connect5 + " 02 003c 80 00 0000", ErrVarInt, ReasonMalformedPacket},
	{"User Property of ill-formed UTF-8", 0, connect5 + " 02 003c 07 26 0001 6b 0001 fe 0000", ErrUTF8, ReasonMalformedPacket},
	{"User Property without its value", 0, connect5 + " 02 003c 04 26 0001 6b 0000", ErrTruncated, ReasonMalformedPacket},
	{"Session Expiry Interval in the will", 0, connect5 + " 06 003c 00 0000 05 11 00000001 0001 74 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Topic Alias in the will", 0, connect5 + " 06 003c 00 0000 03 23 0001 0001 74 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"will Payload Format Indicator 2", 0, connect5 + " 06 003c 00 0000 02 01 02 0001 74 0000", ErrBadValue, ReasonProtocolError},
	{"will Response Topic with a wildcard", 0, connect5 + " 06 003c 00 0000 04 08 0001 2b 0001 74 0000", ErrTopicName, ReasonProtocolError},
	{"will properties cut", 0, connect5 + " 06 003c 00 0000 05 18", ErrTruncated, ReasonMalformedPacket},

	// CONNACK.
	{"return code 6", V311, "20 02 00 06", ErrBadValue, ReasonProtocolError},
	{"session present with a refusal", V311, "20 02 01 05", ErrBadValue, ReasonProtocolError},
	{"reserved acknowledge flags", V311, "20 02 02 00", ErrFlags, ReasonMalformedPacket},
	{"3.1.1 CONNACK with properties", V311, "20 03 00 00 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"CONNACK cut", V311, "20 01 00", ErrTruncated, ReasonMalformedPacket},
	{"reason code 0x10 in CONNACK", V5, "20 03 00 10 00", ErrBadValue, ReasonProtocolError},
	{"reason code 0x8b in CONNACK", V5, "20 03 00 8b 00", ErrBadValue, ReasonProtocolError},
	{"session present with a 5.0 refusal", V5, "20 03 01 80 00", ErrBadValue, ReasonProtocolError},
	{"5.0 CONNACK without properties", V5, "20 02 00 00", ErrTruncated, ReasonMalformedPacket},
	{"Maximum QoS 2", V5, "20 05 00 00 02 24 02", ErrBadValue, ReasonProtocolError},
	{"Retain Available 2", V5, "20 05 00 00 02 25 02", ErrBadValue, ReasonProtocolError},
	{"Shared Subscription Available 9", V5, "20 05 00 00 02 2a 09", ErrBadValue, ReasonProtocolError},
	{"Request Problem Information in CONNACK", V5, "20 05 00 00 02 17 01", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Authentication Data without a method in CONNACK", V5, "20 LL 00 00 03 16 0000", ErrMissingProperty, ReasonProtocolError},

	// PUBLISH.
	{"topic name with '+'", V311, "30 LL 0003 612f2b", ErrTopicName, ReasonTopicNameInvalid},
	{"topic name with '#'", V5, "30 LL 0001 23 00", ErrTopicName, ReasonTopicNameInvalid},
	{"empty topic name in 3.1.1", V311, "30 02 0000", ErrTopicName, ReasonProtocolError},
	{"empty topic name without a Topic Alias", V5, "30 03 0000 00", ErrTopicName, ReasonProtocolError},
	{"topic name of ill-formed UTF-8", V311, "30 LL 0002 e282", ErrUTF8, ReasonMalformedPacket},
	{"topic name with U+0000", V5, "30 LL 0003 610062 00", ErrUTF8, ReasonMalformedPacket},
	{"topic name past the end", V311, "30 LL 0005 6162", ErrTruncated, ReasonMalformedPacket},
	{"packet identifier 0", V311, "32 05 0001 74 0000", ErrBadValue, ReasonProtocolError},
	{"packet identifier cut", V311, "32 04 0001 74 00", ErrTruncated, ReasonMalformedPacket},
	{"5.0 PUBLISH without properties", V5, "30 03 0001 74", ErrTruncated, ReasonMalformedPacket},
	{"Topic Alias 0", V5, "30 LL 0001 74 03 23 0000", ErrBadValue, ReasonTopicAliasInvalid},
	{"Topic Alias twice", V5, "30 LL 0001 74 06 23 0001 23 0002", ErrDuplicateProperty, ReasonProtocolError},
	{"Content Type twice", V5, "30 LL 0001 74 06 03 0000 03 0000", ErrDuplicateProperty, ReasonProtocolError},
	{"Subscription Identifier 0", V5, "30 LL 0001 74 02 0b 00", ErrBadValue, ReasonProtocolError},
	{"Subscription Identifier not minimal", V5, "30 LL 0001 74 03 0b 80 00", ErrVarInt, ReasonMalformedPacket},
	{"Subscription Identifier of five bytes", V5, "30 LL 0001 74 06 0b ff ff ff ff 01", ErrVarInt, ReasonMalformedPacket},
	{"Session Expiry Interval in PUBLISH", V5, "30 LL 0001 74 05 11 00000001", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Will Delay Interval in PUBLISH", V5, "30 LL 0001 74 05 18 00000001", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Reason String in PUBLISH", V5, "30 LL 0001 74 03 1f 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Response Topic with a wildcard", V5, "30 LL 0001 74 06 08 0003 612f23", ErrTopicName, ReasonProtocolError},
	{"empty Response Topic", V5, "30 LL 0001 74 03 08 0000", ErrTopicName, ReasonProtocolError},
	{"Payload Format Indicator 2", V5, "30 LL 0001 74 02 01 02", ErrBadValue, ReasonProtocolError},
	{"Content Type of ill-formed UTF-8", V5, "30 LL 0001 74 04 03 0001 80", ErrUTF8, ReasonMalformedPacket},
	{"Correlation Data past the property length", V5, "30 LL 0001 74 03 09 0005 6162636465", ErrTruncated, ReasonMalformedPacket},

	// PUBACK, PUBREC, PUBREL, PUBCOMP.
	{"PUBACK packet identifier 0", V311, "40 02 0000", ErrBadValue, ReasonProtocolError},
	{"PUBCOMP packet identifier 0", V5, "70 02 0000", ErrBadValue, ReasonProtocolError},
	{"3.1.1 PUBACK with a reason code", V311, "40 03 0001 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"PUBREC of one byte", V5, "50 01 00", ErrTruncated, ReasonMalformedPacket},
	{"reason code 0x92 in PUBACK", V5, "40 03 0001 92", ErrBadValue, ReasonProtocolError},
	{"reason code 0x10 in PUBREL", V5, "62 03 0001 10", ErrBadValue, ReasonProtocolError},
	{"reason code 0x87 in PUBCOMP", V5, "70 03 0001 87", ErrBadValue, ReasonProtocolError},
	{"reason code 0x05 in PUBREC", V5, "50 03 0001 05", ErrBadValue, ReasonProtocolError},
	{"Topic Alias in PUBACK", V5, "40 LL 0001 00 03 23 0001", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Reason String twice in PUBREL", V5, "62 LL 0001 00 06 1f 0000 1f 0000", ErrDuplicateProperty, ReasonProtocolError},
	{"PUBACK property length past the end", V5, "40 05 0001 00 05 1f", ErrTruncated, ReasonMalformedPacket},

	// SUBSCRIBE.
	{"SUBSCRIBE without filters", V311, "82 02 000a", ErrEmptyPayload, ReasonProtocolError},
	{"5.0 SUBSCRIBE without filters", V5, "82 03 000a 00", ErrEmptyPayload, ReasonProtocolError},
	{"SUBSCRIBE packet identifier 0", V311, "82 LL 0000 0001 74 00", ErrBadValue, ReasonProtocolError},
	{"No Local bit in 3.1.1", V311, "82 LL 000a 0001 74 04", ErrFlags, ReasonMalformedPacket},
	{"option bit 7 in 3.1", V31, "82 LL 000a 0001 74 80", ErrFlags, ReasonMalformedPacket},
	{"reserved option bit 6 in 5.0", V5, "82 LL 000a 00 0001 74 40", ErrFlags, ReasonMalformedPacket},
	{"subscription QoS 3", V311, "82 LL 000a 0001 74 03", ErrBadValue, ReasonMalformedPacket},
	{"subscription Maximum QoS 3 in 5.0", V5, "82 LL 000a 00 0001 74 03", ErrBadValue, ReasonProtocolError},
	{"Retain Handling 3", V5, "82 LL 000a 00 0001 74 30", ErrBadValue, ReasonProtocolError},
	{"filter without options", V311, "82 LL 000a 0001 74", ErrTruncated, ReasonMalformedPacket},
	{"filter '#' not last", V311, "82 LL 000a 0005 612f232f62 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"filter 'a#'", V311, "82 LL 000a 0002 6123 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"filter 'a+'", V5, "82 LL 000a 00 0002 612b 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"filter '+a'", V5, "82 LL 000a 00 0002 2b61 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"empty filter", V311, "82 LL 000a 0000 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"second filter bad", V311, "82 LL 000a 0001 74 00 0002 2323 01", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"filter of ill-formed UTF-8", V311, "82 LL 000a 0001 c3 00", ErrUTF8, ReasonMalformedPacket},
	{"shared subscription without a filter", V5, "82 LL 000a 00 0008 2473686172652f67 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"shared subscription with an empty filter", V5, "82 LL 000a 00 0009 2473686172652f672f 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"shared subscription without a share name", V5, "82 LL 000a 00 0009 2473686172652f2f61 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"shared subscription with '+' in the share name", V5, "82 LL 000a 00 000b 2473686172652f672b2f61 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"shared subscription with a bad filter", V5, "82 LL 000a 00 000b 2473686172652f672f6123 00", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"No Local on a shared subscription", V5, "82 LL 000a 00 000a 2473686172652f672f61 04", ErrBadValue, ReasonProtocolError},
	{"two Subscription Identifiers in SUBSCRIBE", V5, "82 LL 000a 04 0b 01 0b 02 0001 74 00", ErrDuplicateProperty, ReasonProtocolError},
	{"Subscription Identifier 0 in SUBSCRIBE", V5, "82 LL 000a 02 0b 00 0001 74 00", ErrBadValue, ReasonProtocolError},
	{"Topic Alias in SUBSCRIBE", V5, "82 LL 000a 03 23 0001 0001 74 00", ErrPropertyNotAllowed, ReasonProtocolError},

	// SUBACK.
	{"SUBACK return code 3", V311, "90 03 000a 03", ErrBadValue, ReasonProtocolError},
	{"SUBACK return code 0x87 in 3.1.1", V311, "90 03 000a 87", ErrBadValue, ReasonProtocolError},
	{"SUBACK reason code 0x04", V5, "90 04 000a 00 04", ErrBadValue, ReasonProtocolError},
	{"SUBACK reason code 0x90", V5, "90 05 000a 00 00 90", ErrBadValue, ReasonProtocolError},
	{"SUBACK without codes", V311, "90 02 000a", ErrEmptyPayload, ReasonProtocolError},
	{"5.0 SUBACK without codes", V5, "90 03 000a 00", ErrEmptyPayload, ReasonProtocolError},
	{"SUBACK packet identifier 0", V311, "90 03 0000 00", ErrBadValue, ReasonProtocolError},
	{"Subscription Identifier in SUBACK", V5, "90 LL 000a 02 0b 01 00", ErrPropertyNotAllowed, ReasonProtocolError},

	// UNSUBSCRIBE and UNSUBACK.
	{"UNSUBSCRIBE without filters", V311, "a2 02 000b", ErrEmptyPayload, ReasonProtocolError},
	{"5.0 UNSUBSCRIBE without filters", V5, "a2 03 000b 00", ErrEmptyPayload, ReasonProtocolError},
	{"UNSUBSCRIBE filter '#/a'", V311, "a2 LL 000b 0003 232f61", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"UNSUBSCRIBE bad shared subscription", V5, "a2 LL 000b 00 0007 2473686172652f", ErrTopicFilter, ReasonTopicFilterInvalid},
	{"UNSUBSCRIBE filter cut", V311, "a2 LL 000b 0003 23", ErrTruncated, ReasonMalformedPacket},
	{"Subscription Identifier in UNSUBSCRIBE", V5, "a2 LL 000b 02 0b 01 0001 74", ErrPropertyNotAllowed, ReasonProtocolError},
	{"3.1.1 UNSUBACK with a code", V311, "b0 03 000b 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"UNSUBACK reason code 0x10", V5, "b0 04 000b 00 10", ErrBadValue, ReasonProtocolError},
	{"5.0 UNSUBACK without codes", V5, "b0 03 000b 00", ErrEmptyPayload, ReasonProtocolError},

	// DISCONNECT.
	{"3.1.1 DISCONNECT with a reason code", V311, "e0 01 00", ErrTrailingBytes, ReasonMalformedPacket},
	{"DISCONNECT reason code 0x10", V5, "e0 01 10", ErrBadValue, ReasonProtocolError},
	{"DISCONNECT reason code 0x84", V5, "e0 01 84", ErrBadValue, ReasonProtocolError},
	{"Topic Alias in DISCONNECT", V5, "e0 LL 00 03 23 0001", ErrPropertyNotAllowed, ReasonProtocolError},
	{"Assigned Client Identifier in DISCONNECT", V5, "e0 LL 00 03 12 0000", ErrPropertyNotAllowed, ReasonProtocolError},
	{"DISCONNECT property length past the end", V5, "e0 02 00 01", ErrTruncated, ReasonMalformedPacket},

	// AUTH.
	{"AUTH of remaining length 1", V5, "f0 01 18", ErrMissingProperty, ReasonProtocolError},
	{"AUTH without an Authentication Method", V5, "f0 LL 18 03 1f 0000", ErrMissingProperty, ReasonProtocolError},
	{"AUTH with data and no method", V5, "f0 LL 18 03 16 0000", ErrMissingProperty, ReasonProtocolError},
	{"AUTH reason code 0x01", V5, "f0 LL 01 03 15 0000", ErrBadValue, ReasonProtocolError},
	{"AUTH reason code 0x87", V5, "f0 LL 87 03 15 0000", ErrBadValue, ReasonProtocolError},
	{"AUTH with two methods", V5, "f0 LL 18 06 15 0000 15 0000", ErrDuplicateProperty, ReasonProtocolError},
	{"Session Expiry Interval in AUTH", V5, "f0 LL 18 08 15 0000 11 00000001", ErrPropertyNotAllowed, ReasonProtocolError},
}

func TestRefusals(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			b := packetHex(tc.hex)
			p, err := Decode(tc.v, b)
			if err == nil {
				t.Fatalf("%x decoded to %#v", b, p)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("%v, want %v", err, tc.err)
			}
			if code, ok := CodeOf(err); !ok || code != tc.reason {
				t.Fatalf("%v: reason %v, want %v", err, code, tc.reason)
			}
			var de *DecodeError
			if errors.As(err, &de) {
				if len(b) > 0 && de.Type != PacketType(b[0]>>4) {
					t.Errorf("%v: type %v", err, de.Type)
				}
				if de.Offset < 0 || de.Offset > len(b) {
					t.Errorf("%v: offset %d in a packet of %d bytes", err, de.Offset, len(b))
				}
				if !strings.HasPrefix(err.Error(), "mqtt: ") || !strings.Contains(err.Error(), tc.reason.String()) {
					t.Errorf("message %q", err)
				}
			}
		})
	}
}

// accepted holds packets near the refusals that must decode: the edges of
// the rules above.
var accepted = []struct {
	name string
	v    Version
	hex  string
	want Packet
}{
	{"PUBREL with DUP in 3.1", V31, "6a 02 0001", &Pubrel{PacketID: 1}},
	{"SUBSCRIBE with DUP in 3.1", V31, "8a LL 000a 0001 74 01", &Subscribe{PacketID: 10, Subscriptions: []Subscription{{Filter: "t", QoS: 1}}}},
	{"password without user name in 5.0", 0, connect5 + " 42 003c 00 0000 0001 70",
		&Connect{Version: V5, CleanStart: true, KeepAlive: 60, HasPassword: true, Password: []byte("p")}},
	{"empty client id without Clean Session", 0, connect311 + " 00 0000 0000", &Connect{Version: V311}},
	{"will topic with a leading $", 0, connect311 + " 06 0000 0000 0004 24535953 0000",
		&Connect{Version: V311, CleanStart: true, Will: &Will{Topic: "$SYS"}}},
	{"control characters and non-characters", V311, "30 LL 0007 01 7f c29f efbfbf", &Publish{Topic: "\x01\x7f\u009f\uffff"}},
	{"BOM kept", V311, "30 LL 0004 efbbbf61", &Publish{Topic: "\ufeffa"}},
	{"$share/g without a filter is a plain filter in 3.1.1", V311, "82 LL 000a 0008 2473686172652f67 00",
		&Subscribe{PacketID: 10, Subscriptions: []Subscription{{Filter: "$share/g"}}}},
	{"$share alone is a plain filter in 5.0", V5, "82 LL 000a 00 0006 247368617265 04",
		&Subscribe{PacketID: 10, Subscriptions: []Subscription{{Filter: "$share", NoLocal: true}}}},
	{"User Properties repeat and keep their order", V5, "30 LL 0001 74 0c 26 0001 62 0000 26 0001 61 0000",
		&Publish{Topic: "t", Properties: Properties{UserProperties: []UserProperty{{"b", ""}, {"a", ""}}}}},
	{"empty Correlation Data is present", V5, "30 LL 0001 74 03 09 0000",
		&Publish{Topic: "t", Properties: Properties{Zeros: PropertySetOf(PropCorrelationData)}}},
	{"Maximum Packet Size at its largest", V5, "20 LL 00 00 05 27 ffffffff",
		&Connack{Properties: Properties{MaximumPacketSize: 0xffffffff}}},
	{"Subscription Identifier at its largest", V5, "82 LL 000a 05 0b ffffff7f 0001 74 00",
		&Subscribe{PacketID: 10, Properties: Properties{SubscriptionIdentifiers: []uint32{MaxVarInt}}, Subscriptions: []Subscription{{Filter: "t"}}}},
	{"DISCONNECT with a Session Expiry Interval", V5, "e0 LL 00 05 11 0000003c",
		&Disconnect{Properties: Properties{SessionExpiryInterval: 60}}},
	{"PUBACK of four bytes, no properties", V5, "40 04 0001 10 00", &Puback{PacketID: 1, ReasonCode: ReasonNoMatchingSubscribers}},
	{"CONNECT decodes after a CONNECT", V5, connect311 + " 02 0000 0000", &Connect{Version: V311, CleanStart: true}},
	{"3.1 CONNACK session present", V31, "20 02 01 00", &Connack{SessionPresent: true}},
}

func TestAccepted(t *testing.T) {
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeOK(t, tc.v, packetHex(tc.hex)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestUnsupportedVersionError(t *testing.T) {
	_, err := Decode(0, packetHex("10 LL 0004 4d515454 07 02 003c 0000"))
	var ue *UnsupportedVersionError
	if !errors.As(err, &ue) || ue.Name != "MQTT" || ue.Level != 7 || ue.ReturnCode() != ConnackUnacceptableProtocolVersion {
		t.Fatalf("%T %v", err, err)
	}
	if want := `mqtt: CONNECT: unsupported protocol "MQTT" level 7`; err.Error() != want {
		t.Fatalf("%q, want %q", err, want)
	}
}

func TestDecodeErrorMessage(t *testing.T) {
	_, err := Decode(V5, packetHex("82 LL 000a 00 0001 74 30"))
	want := "mqtt: SUBSCRIBE at byte 8: value not allowed: subscription options 00110000: Retain Handling 3 (Protocol Error (0x82))"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %q\nwant %q", err, want)
	}
	// A CONNECT's error carries the version it was read in, so the
	// server knows which CONNACK to answer with.
	_, err = Decode(0, packetHex(connect5+" 02 003c 03 21 0000 0000"))
	var de *DecodeError
	if !errors.As(err, &de) || de.Version != V5 {
		t.Fatalf("%#v", err)
	}
}

func TestCodeOf(t *testing.T) {
	if _, ok := CodeOf(errors.New("other")); ok {
		t.Error("CodeOf of a foreign error")
	}
	if c, ok := CodeOf(&PacketTooLargeError{}); !ok || c != ReasonPacketTooLarge {
		t.Errorf("PacketTooLargeError: %v", c)
	}
}

// TestTruncatedAtEveryLength cuts every packet short at each length, and
// adds a byte to it, with the remaining length fixed to match: none may
// panic. Most are errors; those that decode (a 5.0 acknowledgement
// without its properties, a PUBLISH with less payload, a SUBACK with one
// more code) must re-encode to a packet that decodes the same.
func TestTruncatedAtEveryLength(t *testing.T) {
	for _, v := range versions {
		for _, p := range allPackets(v) {
			full := p.Append(nil, v)
			_, n, _ := ParseFixedHeader(full)
			body := full[n:]
			check := func(body []byte) {
				b := append(AppendVarInt([]byte{full[0]}, len(body)), body...)
				got, err := Decode(v, b)
				if err != nil {
					if _, ok := CodeOf(err); !ok {
						t.Errorf("%v in %v, %d bytes: %T %v", p.Type(), v, len(body), err, err)
					}
					return
				}
				if again := decodeOK(t, v, got.Append(nil, v)); !reflect.DeepEqual(again, got) {
					t.Errorf("%v in %v, %d bytes: %#v re-encodes to %#v", p.Type(), v, len(body), got, again)
				}
			}
			for cut := range len(body) {
				check(body[:cut])
			}
			check(append(body[:len(body):len(body)], 0))
		}
	}
}
