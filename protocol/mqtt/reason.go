package mqtt

import "fmt"

// ReasonCode is an MQTT 5.0 reason code (section 2.4): the result of an
// operation in CONNACK, the acknowledgements, DISCONNECT and AUTH. Values
// below 0x80 are successes, 0x80 and above failures. MQTT 3.1.1 SUBACK
// return codes are the same bytes as the first four SUBACK reason codes
// (0x00 to 0x02 granted QoS, 0x80 failure).
type ReasonCode byte

// Reason codes, named as the specification's table 2-6 names them. The
// names for 0x00 differ by packet; they are one value.
const (
	ReasonSuccess                             ReasonCode = 0x00
	ReasonNormalDisconnection                 ReasonCode = 0x00
	ReasonGrantedQoS0                         ReasonCode = 0x00
	ReasonGrantedQoS1                         ReasonCode = 0x01
	ReasonGrantedQoS2                         ReasonCode = 0x02
	ReasonDisconnectWithWillMessage           ReasonCode = 0x04
	ReasonNoMatchingSubscribers               ReasonCode = 0x10
	ReasonNoSubscriptionExisted               ReasonCode = 0x11
	ReasonContinueAuthentication              ReasonCode = 0x18
	ReasonReauthenticate                      ReasonCode = 0x19
	ReasonUnspecifiedError                    ReasonCode = 0x80
	ReasonMalformedPacket                     ReasonCode = 0x81
	ReasonProtocolError                       ReasonCode = 0x82
	ReasonImplementationSpecificError         ReasonCode = 0x83
	ReasonUnsupportedProtocolVersion          ReasonCode = 0x84
	ReasonClientIdentifierNotValid            ReasonCode = 0x85
	ReasonBadUserNameOrPassword               ReasonCode = 0x86
	ReasonNotAuthorized                       ReasonCode = 0x87
	ReasonServerUnavailable                   ReasonCode = 0x88
	ReasonServerBusy                          ReasonCode = 0x89
	ReasonBanned                              ReasonCode = 0x8a
	ReasonServerShuttingDown                  ReasonCode = 0x8b
	ReasonBadAuthenticationMethod             ReasonCode = 0x8c
	ReasonKeepAliveTimeout                    ReasonCode = 0x8d
	ReasonSessionTakenOver                    ReasonCode = 0x8e
	ReasonTopicFilterInvalid                  ReasonCode = 0x8f
	ReasonTopicNameInvalid                    ReasonCode = 0x90
	ReasonPacketIdentifierInUse               ReasonCode = 0x91
	ReasonPacketIdentifierNotFound            ReasonCode = 0x92
	ReasonReceiveMaximumExceeded              ReasonCode = 0x93
	ReasonTopicAliasInvalid                   ReasonCode = 0x94
	ReasonPacketTooLarge                      ReasonCode = 0x95
	ReasonMessageRateTooHigh                  ReasonCode = 0x96
	ReasonQuotaExceeded                       ReasonCode = 0x97
	ReasonAdministrativeAction                ReasonCode = 0x98
	ReasonPayloadFormatInvalid                ReasonCode = 0x99
	ReasonRetainNotSupported                  ReasonCode = 0x9a
	ReasonQoSNotSupported                     ReasonCode = 0x9b
	ReasonUseAnotherServer                    ReasonCode = 0x9c
	ReasonServerMoved                         ReasonCode = 0x9d
	ReasonSharedSubscriptionsNotSupported     ReasonCode = 0x9e
	ReasonConnectionRateExceeded              ReasonCode = 0x9f
	ReasonMaximumConnectTime                  ReasonCode = 0xa0
	ReasonSubscriptionIdentifiersNotSupported ReasonCode = 0xa1
	ReasonWildcardSubscriptionsNotSupported   ReasonCode = 0xa2
)

// reasonInfo gives each reason code its name and the packets that may
// carry it, as table 2-6 lists them (a bit per PacketType).
var reasonInfo = [256]struct {
	name    string
	packets uint16
}{
	0x00: {"Success", pk(TypeConnack, TypePuback, TypePubrec, TypePubrel, TypePubcomp, TypeSuback, TypeUnsuback, TypeDisconnect, TypeAuth)},
	0x01: {"Granted QoS 1", pk(TypeSuback)},
	0x02: {"Granted QoS 2", pk(TypeSuback)},
	0x04: {"Disconnect with Will Message", pk(TypeDisconnect)},
	0x10: {"No matching subscribers", pk(TypePuback, TypePubrec)},
	0x11: {"No subscription existed", pk(TypeUnsuback)},
	0x18: {"Continue authentication", pk(TypeAuth)},
	0x19: {"Re-authenticate", pk(TypeAuth)},
	0x80: {"Unspecified error", pk(TypeConnack, TypePuback, TypePubrec, TypeSuback, TypeUnsuback, TypeDisconnect)},
	0x81: {"Malformed Packet", pk(TypeConnack, TypeDisconnect)},
	0x82: {"Protocol Error", pk(TypeConnack, TypeDisconnect)},
	0x83: {"Implementation specific error", pk(TypeConnack, TypePuback, TypePubrec, TypeSuback, TypeUnsuback, TypeDisconnect)},
	0x84: {"Unsupported Protocol Version", pk(TypeConnack)},
	0x85: {"Client Identifier not valid", pk(TypeConnack)},
	0x86: {"Bad User Name or Password", pk(TypeConnack)},
	0x87: {"Not authorized", pk(TypeConnack, TypePuback, TypePubrec, TypeSuback, TypeUnsuback, TypeDisconnect)},
	0x88: {"Server unavailable", pk(TypeConnack)},
	0x89: {"Server busy", pk(TypeConnack, TypeDisconnect)},
	0x8a: {"Banned", pk(TypeConnack)},
	0x8b: {"Server shutting down", pk(TypeDisconnect)},
	0x8c: {"Bad authentication method", pk(TypeConnack, TypeDisconnect)},
	0x8d: {"Keep Alive timeout", pk(TypeDisconnect)},
	0x8e: {"Session taken over", pk(TypeDisconnect)},
	0x8f: {"Topic Filter invalid", pk(TypeSuback, TypeUnsuback, TypeDisconnect)},
	0x90: {"Topic Name invalid", pk(TypeConnack, TypePuback, TypePubrec, TypeDisconnect)},
	0x91: {"Packet Identifier in use", pk(TypePuback, TypePubrec, TypeSuback, TypeUnsuback)},
	0x92: {"Packet Identifier not found", pk(TypePubrel, TypePubcomp)},
	0x93: {"Receive Maximum exceeded", pk(TypeDisconnect)},
	0x94: {"Topic Alias invalid", pk(TypeDisconnect)},
	0x95: {"Packet too large", pk(TypeConnack, TypeDisconnect)},
	0x96: {"Message rate too high", pk(TypeDisconnect)},
	0x97: {"Quota exceeded", pk(TypeConnack, TypePuback, TypePubrec, TypeSuback, TypeDisconnect)},
	0x98: {"Administrative action", pk(TypeDisconnect)},
	0x99: {"Payload format invalid", pk(TypeConnack, TypePuback, TypePubrec, TypeDisconnect)},
	0x9a: {"Retain not supported", pk(TypeConnack, TypeDisconnect)},
	0x9b: {"QoS not supported", pk(TypeConnack, TypeDisconnect)},
	0x9c: {"Use another server", pk(TypeConnack, TypeDisconnect)},
	0x9d: {"Server moved", pk(TypeConnack, TypeDisconnect)},
	0x9e: {"Shared Subscriptions not supported", pk(TypeSuback, TypeDisconnect)},
	0x9f: {"Connection rate exceeded", pk(TypeConnack, TypeDisconnect)},
	0xa0: {"Maximum connect time", pk(TypeDisconnect)},
	0xa1: {"Subscription Identifiers not supported", pk(TypeSuback, TypeDisconnect)},
	0xa2: {"Wildcard Subscriptions not supported", pk(TypeSuback, TypeDisconnect)},
}

// pk makes a set of packet types, a bit per type.
func pk(types ...PacketType) uint16 {
	var s uint16
	for _, t := range types {
		s |= 1 << t
	}
	return s
}

// String gives the code's name and value: "Malformed Packet (0x81)".
// 0x00 is "Success" whatever the packet.
func (c ReasonCode) String() string {
	if info := reasonInfo[c]; info.name != "" {
		return fmt.Sprintf("%s (0x%02x)", info.name, byte(c))
	}
	return fmt.Sprintf("unknown reason code (0x%02x)", byte(c))
}

// IsError reports whether c is a failure: 0x80 or above.
func (c ReasonCode) IsError() bool { return c >= 0x80 }

// ValidFor reports whether the specification lets packets of type t carry
// c (table 2-6, and each packet's own table). Decode refuses a packet
// whose reason code is not valid for it, with ReasonProtocolError.
func (c ReasonCode) ValidFor(t PacketType) bool {
	return t < 16 && reasonInfo[c].packets&(1<<t) != 0
}

// ConnackReturnCode is the MQTT 3.1 and 3.1.1 CONNACK return code; 6 to
// 255 are reserved.
type ConnackReturnCode byte

const (
	ConnackAccepted                    ConnackReturnCode = 0
	ConnackUnacceptableProtocolVersion ConnackReturnCode = 1
	ConnackIdentifierRejected          ConnackReturnCode = 2
	ConnackServerUnavailable           ConnackReturnCode = 3
	ConnackBadUsernameOrPassword       ConnackReturnCode = 4
	ConnackNotAuthorized               ConnackReturnCode = 5
)

var returnCodeNames = [...]string{
	"Connection Accepted",
	"Connection Refused, unacceptable protocol version",
	"Connection Refused, identifier rejected",
	"Connection Refused, Server unavailable",
	"Connection Refused, bad user name or password",
	"Connection Refused, not authorized",
}

// String gives the code's name as MQTT 3.1.1 section 3.2.2.3 words it,
// and its value.
func (c ConnackReturnCode) String() string {
	if int(c) < len(returnCodeNames) {
		return fmt.Sprintf("%s (%d)", returnCodeNames[c], byte(c))
	}
	return fmt.Sprintf("reserved return code (%d)", byte(c))
}

// ReturnCodeFor gives the MQTT 3.1.1 CONNACK return code closest to an
// MQTT 5.0 CONNACK reason code, so that a server decides once and answers
// either version: Unsupported Protocol Version is 1, Client Identifier not
// valid 2, Bad User Name or Password 4, Not authorized, Banned and Bad
// authentication method 5, any other failure 3 (Server unavailable).
func ReturnCodeFor(c ReasonCode) ConnackReturnCode {
	switch c {
	case ReasonSuccess:
		return ConnackAccepted
	case ReasonUnsupportedProtocolVersion:
		return ConnackUnacceptableProtocolVersion
	case ReasonClientIdentifierNotValid:
		return ConnackIdentifierRejected
	case ReasonBadUserNameOrPassword:
		return ConnackBadUsernameOrPassword
	case ReasonNotAuthorized, ReasonBanned, ReasonBadAuthenticationMethod:
		return ConnackNotAuthorized
	default:
		return ConnackServerUnavailable
	}
}
