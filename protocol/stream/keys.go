package stream

import "strconv"

// Key identifies a command. The low 15 bits are the command; the high bit
// is set on the response to a request.
type Key uint16

// ResponseBit marks a response's key: the Subscribe response is 0x8007.
const ResponseBit Key = 0x8000

// Command keys, as PROTOCOL.adoc numbers them.
const (
	KeyDeclarePublisher        Key = 0x0001
	KeyPublish                 Key = 0x0002
	KeyPublishConfirm          Key = 0x0003
	KeyPublishError            Key = 0x0004
	KeyQueryPublisherSequence  Key = 0x0005
	KeyDeletePublisher         Key = 0x0006
	KeySubscribe               Key = 0x0007
	KeyDeliver                 Key = 0x0008
	KeyCredit                  Key = 0x0009
	KeyStoreOffset             Key = 0x000a
	KeyQueryOffset             Key = 0x000b
	KeyUnsubscribe             Key = 0x000c
	KeyCreate                  Key = 0x000d
	KeyDelete                  Key = 0x000e
	KeyMetadata                Key = 0x000f
	KeyMetadataUpdate          Key = 0x0010
	KeyPeerProperties          Key = 0x0011
	KeySaslHandshake           Key = 0x0012
	KeySaslAuthenticate        Key = 0x0013
	KeyTune                    Key = 0x0014
	KeyOpen                    Key = 0x0015
	KeyClose                   Key = 0x0016
	KeyHeartbeat               Key = 0x0017
	KeyRoute                   Key = 0x0018
	KeyPartitions              Key = 0x0019
	KeyConsumerUpdate          Key = 0x001a
	KeyExchangeCommandVersions Key = 0x001b
	KeyStreamStats             Key = 0x001c
	KeyCreateSuperStream       Key = 0x001d
	KeyDeleteSuperStream       Key = 0x001e
	KeyResolveOffsetSpec       Key = 0x001f
)

// keyNames names each command, indexed by key without the response bit.
var keyNames = [...]string{
	KeyDeclarePublisher:        "DeclarePublisher",
	KeyPublish:                 "Publish",
	KeyPublishConfirm:          "PublishConfirm",
	KeyPublishError:            "PublishError",
	KeyQueryPublisherSequence:  "QueryPublisherSequence",
	KeyDeletePublisher:         "DeletePublisher",
	KeySubscribe:               "Subscribe",
	KeyDeliver:                 "Deliver",
	KeyCredit:                  "Credit",
	KeyStoreOffset:             "StoreOffset",
	KeyQueryOffset:             "QueryOffset",
	KeyUnsubscribe:             "Unsubscribe",
	KeyCreate:                  "Create",
	KeyDelete:                  "Delete",
	KeyMetadata:                "Metadata",
	KeyMetadataUpdate:          "MetadataUpdate",
	KeyPeerProperties:          "PeerProperties",
	KeySaslHandshake:           "SaslHandshake",
	KeySaslAuthenticate:        "SaslAuthenticate",
	KeyTune:                    "Tune",
	KeyOpen:                    "Open",
	KeyClose:                   "Close",
	KeyHeartbeat:               "Heartbeat",
	KeyRoute:                   "Route",
	KeyPartitions:              "Partitions",
	KeyConsumerUpdate:          "ConsumerUpdate",
	KeyExchangeCommandVersions: "ExchangeCommandVersions",
	KeyStreamStats:             "StreamStats",
	KeyCreateSuperStream:       "CreateSuperStream",
	KeyDeleteSuperStream:       "DeleteSuperStream",
	KeyResolveOffsetSpec:       "ResolveOffsetSpec",
}

// IsResponse reports whether k has the response bit set.
func (k Key) IsResponse() bool { return k&ResponseBit != 0 }

// Command returns k without the response bit.
func (k Key) Command() Key { return k &^ ResponseBit }

// String gives the command's name and the key in hex, with "Response"
// after the name of a response: "SubscribeResponse (0x8007)".
func (k Key) String() string {
	hex := "0x" + leftPad(strconv.FormatUint(uint64(k), 16), 4)
	c := k.Command()
	if c == 0 || int(c) >= len(keyNames) {
		return "unknown (" + hex + ")"
	}
	name := keyNames[c]
	if k.IsResponse() {
		name += "Response"
	}
	return name + " (" + hex + ")"
}

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// ResponseCode is the status a response carries.
type ResponseCode uint16

// Response codes, as PROTOCOL.adoc lists them; the last two are in
// RabbitMQ's rabbit_stream.hrl but not yet in the document.
const (
	CodeOK                                ResponseCode = 0x01
	CodeStreamDoesNotExist                ResponseCode = 0x02
	CodeSubscriptionIDAlreadyExists       ResponseCode = 0x03
	CodeSubscriptionIDDoesNotExist        ResponseCode = 0x04
	CodeStreamAlreadyExists               ResponseCode = 0x05
	CodeStreamNotAvailable                ResponseCode = 0x06
	CodeSaslMechanismNotSupported         ResponseCode = 0x07
	CodeAuthenticationFailure             ResponseCode = 0x08
	CodeSaslError                         ResponseCode = 0x09
	CodeSaslChallenge                     ResponseCode = 0x0a
	CodeSaslAuthenticationFailureLoopback ResponseCode = 0x0b
	CodeVirtualHostAccessFailure          ResponseCode = 0x0c
	CodeUnknownFrame                      ResponseCode = 0x0d
	CodeFrameTooLarge                     ResponseCode = 0x0e
	CodeInternalError                     ResponseCode = 0x0f
	CodeAccessRefused                     ResponseCode = 0x10
	CodePreconditionFailed                ResponseCode = 0x11
	CodePublisherDoesNotExist             ResponseCode = 0x12
	CodeNoOffset                          ResponseCode = 0x13
	CodeSaslCannotChangeMechanism         ResponseCode = 0x14
	CodeSaslCannotChangeUsername          ResponseCode = 0x15
)

// OffsetType says where a subscription starts: the OffsetType field of an
// offset specification.
type OffsetType uint16

const (
	OffsetNone      OffsetType = 0 // only in a ConsumerUpdate response: keep the offset the server chose
	OffsetFirst     OffsetType = 1 // the first message in the stream
	OffsetLast      OffsetType = 2 // the last chunk in the stream
	OffsetNext      OffsetType = 3 // the next message published
	OffsetOffset    OffsetType = 4 // a given offset
	OffsetTimestamp OffsetType = 5 // the first chunk at or after a given time
)

// OffsetSpec is an offset specification: a type, and for OffsetOffset an
// offset, for OffsetTimestamp a timestamp (milliseconds since the epoch).
// The value the type does not use is neither sent nor set.
type OffsetSpec struct {
	Type      OffsetType
	Offset    uint64
	Timestamp int64
}
