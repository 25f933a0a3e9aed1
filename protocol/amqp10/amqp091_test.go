package amqp10

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

// viaBytes encodes m and parses it again, as a message goes through a
// stream: the mapping tests check what a consumer reads, not what
// FromAMQP091 built in memory.
func viaBytes(t *testing.T, m *Message) *Message {
	t.Helper()
	got, err := Parse(m.Append(nil))
	if err != nil {
		t.Fatalf("FromAMQP091's message does not parse: %v", err)
	}
	return got
}

var when = time.Date(2026, 11, 5, 10, 30, 0, 0, time.UTC)

// fromRows has one row per 0-9-1 property and per header type: what
// FromAMQP091 makes of it, and whether ToAMQP091 gives it back.
var fromRows = []struct {
	name  string
	props protocol.Properties
	want  *Message // the sections beyond the data section
	lost  bool     // ToAMQP091 does not give props back
}{
	{"none", protocol.Properties{}, &Message{}, false},
	{"content-type", protocol.Properties{Flags: protocol.FlagContentType, ContentType: "text/plain"},
		&Message{Properties: &Properties{ContentType: ptr(Symbol("text/plain"))}}, false},
	{"content-encoding", protocol.Properties{Flags: protocol.FlagContentEncoding, ContentEncoding: "gzip"},
		&Message{Properties: &Properties{ContentEncoding: ptr(Symbol("gzip"))}}, false},
	{"delivery-mode", protocol.Properties{Flags: protocol.FlagDeliveryMode, DeliveryMode: 2},
		&Message{MessageAnnotations: Map{{Symbol("x-basic-delivery-mode"), uint8(2)}}}, false},
	{"priority", protocol.Properties{Flags: protocol.FlagPriority, Priority: 9},
		&Message{MessageAnnotations: Map{{Symbol("x-basic-priority"), uint8(9)}}}, false},
	{"correlation-id", protocol.Properties{Flags: protocol.FlagCorrelationID, CorrelationID: "c1"},
		&Message{Properties: &Properties{CorrelationID: "c1"}}, false},
	{"reply-to", protocol.Properties{Flags: protocol.FlagReplyTo, ReplyTo: "amq.rabbitmq.reply-to"},
		&Message{Properties: &Properties{ReplyTo: ptr("amq.rabbitmq.reply-to")}}, false},
	{"expiration", protocol.Properties{Flags: protocol.FlagExpiration, Expiration: "60000"},
		&Message{MessageAnnotations: Map{{Symbol("x-basic-expiration"), "60000"}}}, false},
	{"message-id", protocol.Properties{Flags: protocol.FlagMessageID, MessageID: "m1"},
		&Message{Properties: &Properties{MessageID: "m1"}}, false},
	{"message-id empty", protocol.Properties{Flags: protocol.FlagMessageID},
		&Message{Properties: &Properties{MessageID: ""}}, false},
	{"timestamp", protocol.Properties{Flags: protocol.FlagTimestamp, Timestamp: 1700000000},
		&Message{Properties: &Properties{CreationTime: ptr(Timestamp(1700000000000))}}, false},
	{"type", protocol.Properties{Flags: protocol.FlagType, Type: "order.created"},
		&Message{ApplicationProperties: Map{{"x-basic-type", "order.created"}}}, false},
	{"user-id", protocol.Properties{Flags: protocol.FlagUserID, UserID: "guest"},
		&Message{Properties: &Properties{UserID: []byte("guest")}}, false},
	{"app-id", protocol.Properties{Flags: protocol.FlagAppID, AppID: "billing"},
		&Message{ApplicationProperties: Map{{"x-basic-app-id", "billing"}}}, false},
	{"cluster-id", protocol.Properties{Flags: protocol.FlagClusterID, ClusterID: "c"},
		&Message{}, true},
	{"header longstr", headers("s", "text"), &Message{ApplicationProperties: Map{{"s", "text"}}}, false},
	{"header bytes", headers("x", []byte{0, 1}), &Message{ApplicationProperties: Map{{"x", []byte{0, 1}}}}, false},
	{"header empty bytes", headers("x", []byte(nil)), &Message{ApplicationProperties: Map{{"x", []byte{}}}}, false},
	{"header bool", headers("t", true), &Message{ApplicationProperties: Map{{"t", true}}}, false},
	{"header int8", headers("b", int8(-1)), &Message{ApplicationProperties: Map{{"b", int8(-1)}}}, false},
	{"header uint8", headers("B", uint8(1)), &Message{ApplicationProperties: Map{{"B", uint8(1)}}}, false},
	{"header int16", headers("s", int16(-2)), &Message{ApplicationProperties: Map{{"s", int16(-2)}}}, false},
	{"header uint16", headers("u", uint16(2)), &Message{ApplicationProperties: Map{{"u", uint16(2)}}}, false},
	{"header int32", headers("I", int32(-3)), &Message{ApplicationProperties: Map{{"I", int32(-3)}}}, false},
	{"header uint32", headers("i", uint32(3)), &Message{ApplicationProperties: Map{{"i", uint32(3)}}}, false},
	{"header int64", headers("l", int64(-4)), &Message{ApplicationProperties: Map{{"l", int64(-4)}}}, false},
	{"header float32", headers("f", float32(1.5)), &Message{ApplicationProperties: Map{{"f", float32(1.5)}}}, false},
	{"header float64", headers("d", 2.5), &Message{ApplicationProperties: Map{{"d", 2.5}}}, false},
	{"header timestamp", headers("T", when), &Message{ApplicationProperties: Map{{"T", TimestampOf(when)}}}, false},
	{"header void", headers("V", nil), &Message{ApplicationProperties: Map{{"V", nil}}}, false},
	{"header x- is an ordinary header", headers("x-stream-offset", int64(99)),
		&Message{ApplicationProperties: Map{{"x-stream-offset", int64(99)}}}, false},
	{"header table dropped", headers("F", protocol.Table{"a": "b"}), &Message{}, true},
	{"header array dropped", headers("A", []any{"a"}), &Message{}, true},
	{"header decimal dropped", headers("D", protocol.Decimal{Scale: 2, Value: 5}), &Message{}, true},
	{"headers empty", protocol.Properties{Flags: protocol.FlagHeaders}, &Message{}, true},
	{"headers sorted after type and app-id",
		protocol.Properties{Flags: protocol.FlagHeaders | protocol.FlagType | protocol.FlagAppID,
			Type: "t", AppID: "a", Headers: protocol.Table{"z": "1", "a": "2", "gone": []any{}}},
		&Message{ApplicationProperties: Map{{"x-basic-type", "t"}, {"x-basic-app-id", "a"}, {"a", "2"}, {"z", "1"}}}, true},
	{"header named x-basic-type beside the type property",
		protocol.Properties{Flags: protocol.FlagHeaders | protocol.FlagType, Type: "t",
			Headers: protocol.Table{"x-basic-type": "h"}},
		&Message{ApplicationProperties: Map{{"x-basic-type", "t"}, {"x-basic-type", "h"}}}, false},
	{"annotations in RabbitMQ's order",
		protocol.Properties{Flags: protocol.FlagExpiration | protocol.FlagDeliveryMode | protocol.FlagPriority,
			Expiration: "1", DeliveryMode: 1, Priority: 0},
		&Message{MessageAnnotations: Map{{Symbol("x-basic-priority"), uint8(0)},
			{Symbol("x-basic-delivery-mode"), uint8(1)}, {Symbol("x-basic-expiration"), "1"}}}, false},
}

func headers(k string, v any) protocol.Properties {
	return protocol.Properties{Flags: protocol.FlagHeaders, Headers: protocol.Table{k: v}}
}

func TestFromAMQP091(t *testing.T) {
	for _, r := range fromRows {
		t.Run(r.name, func(t *testing.T) {
			body := []byte("body")
			m := viaBytes(t, FromAMQP091(r.props, body))
			want := *r.want
			want.Data = [][]byte{body}
			if !reflect.DeepEqual(m, &want) {
				t.Fatalf("FromAMQP091\n got %#v\nwant %#v", m, &want)
			}
			p, gotBody := m.ToAMQP091()
			if string(gotBody) != "body" {
				t.Fatalf("body %q came back as %q", body, gotBody)
			}
			if back := reflect.DeepEqual(p, r.props); back == r.lost {
				t.Fatalf("round trip: got back %#v from %#v, lost = %v", p, r.props, r.lost)
			}
		})
	}
}

// TestAMQP091RoundTripAll checks the round trip with every property and
// header set at once, as RabbitMQ's rabbit_msg_record_SUITE does.
func TestAMQP091RoundTripAll(t *testing.T) {
	p := protocol.Properties{
		Flags: protocol.FlagContentType | protocol.FlagContentEncoding | protocol.FlagHeaders |
			protocol.FlagDeliveryMode | protocol.FlagPriority | protocol.FlagCorrelationID |
			protocol.FlagReplyTo | protocol.FlagExpiration | protocol.FlagMessageID | protocol.FlagTimestamp |
			protocol.FlagType | protocol.FlagUserID | protocol.FlagAppID,
		ContentType: "text/plain", ContentEncoding: "gzip",
		Headers: protocol.Table{"x-stream-offset": int64(99), "x-string": "a string", "x-bool": false,
			"x-unsignedbyte": uint8(1), "x-unsignedshort": uint16(1), "x-unsignedint": uint32(1),
			"x-signedint": int32(1), "x-timestamp": time.Unix(1, 0).UTC(), "x-double": 1.0,
			"x-float": float32(1), "x-void": nil, "x-binary": []byte("data"), "x-byte": int8(1), "x-short": int16(1)},
		DeliveryMode: 2, Priority: 99, CorrelationID: "corr", ReplyTo: "reply-to", Expiration: "1",
		MessageID: "msg-id", Timestamp: 99, Type: "45", UserID: "banana", AppID: "rmq",
	}
	for _, body := range [][]byte{[]byte("data"), {}} {
		m := viaBytes(t, FromAMQP091(p, body))
		got, gotBody := m.ToAMQP091()
		if !reflect.DeepEqual(got, p) || string(gotBody) != string(body) {
			t.Fatalf("round trip\n got %#v %q\nwant %#v %q", got, gotBody, p, body)
		}
		// And through Warren's 0-9-1 property codec.
		raw, err := got.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		if dec, err := protocol.DecodeProperties(got.Flags, raw); err != nil || !reflect.DeepEqual(dec, p) {
			t.Fatalf("0-9-1 codec: %#v, %v", dec, err)
		}
	}
}

var uuidText = "123e4567-e89b-12d3-a456-426614174000"

// toRows has one row per AMQP 1.0 property, application property type,
// annotation and body kind: what a 0-9-1 consumer sees.
var toRows = []struct {
	name string
	msg  *Message
	want protocol.Properties
	body string
}{
	{"nothing", &Message{}, protocol.Properties{}, ""},
	{"message-id string", &Message{Properties: &Properties{MessageID: "m1"}},
		protocol.Properties{Flags: protocol.FlagMessageID, MessageID: "m1"}, ""},
	{"message-id ulong", &Message{Properties: &Properties{MessageID: uint64(9876789)}},
		protocol.Properties{Flags: protocol.FlagMessageID | protocol.FlagHeaders, MessageID: "9876789",
			Headers: protocol.Table{"x-message-id-type": "ulong"}}, ""},
	{"message-id uuid", &Message{Properties: &Properties{MessageID: testUUID}},
		protocol.Properties{Flags: protocol.FlagMessageID | protocol.FlagHeaders, MessageID: uuidText,
			Headers: protocol.Table{"x-message-id-type": "uuid"}}, ""},
	{"message-id binary", &Message{Properties: &Properties{MessageID: []byte("asdfasdf")}},
		protocol.Properties{Flags: protocol.FlagMessageID | protocol.FlagHeaders, MessageID: "YXNkZmFzZGY=",
			Headers: protocol.Table{"x-message-id-type": "binary"}}, ""},
	{"message-id long binary", &Message{Properties: &Properties{MessageID: []byte(strings.Repeat("b", 190))}},
		protocol.Properties{Flags: protocol.FlagHeaders,
			Headers: protocol.Table{"x-message-id": strings.Repeat("b", 190)}}, ""},
	{"message-id binary at the limit", &Message{Properties: &Properties{MessageID: []byte(strings.Repeat("b", 189))}},
		protocol.Properties{Flags: protocol.FlagMessageID | protocol.FlagHeaders,
			MessageID: base64.StdEncoding.EncodeToString([]byte(strings.Repeat("b", 189))),
			Headers:   protocol.Table{"x-message-id-type": "binary"}}, ""},
	{"message-id long string", &Message{Properties: &Properties{MessageID: strings.Repeat("s", 256)}},
		protocol.Properties{Flags: protocol.FlagHeaders,
			Headers: protocol.Table{"x-message-id": strings.Repeat("s", 256)}}, ""},
	{"correlation-id ulong", &Message{Properties: &Properties{CorrelationID: uint64(1)}},
		protocol.Properties{Flags: protocol.FlagCorrelationID | protocol.FlagHeaders, CorrelationID: "1",
			Headers: protocol.Table{"x-correlation-id-type": "ulong"}}, ""},
	{"correlation-id long string", &Message{Properties: &Properties{CorrelationID: strings.Repeat("s", 300)}},
		protocol.Properties{Flags: protocol.FlagHeaders,
			Headers: protocol.Table{"x-correlation-id": strings.Repeat("s", 300)}}, ""},
	{"user-id", &Message{Properties: &Properties{UserID: []byte("u")}},
		protocol.Properties{Flags: protocol.FlagUserID, UserID: "u"}, ""},
	{"user-id too long dropped", &Message{Properties: &Properties{UserID: make([]byte, 256)}},
		protocol.Properties{}, ""},
	{"reply-to", &Message{Properties: &Properties{ReplyTo: ptr("r")}},
		protocol.Properties{Flags: protocol.FlagReplyTo, ReplyTo: "r"}, ""},
	{"content-type and encoding", &Message{Properties: &Properties{ContentType: ptr(Symbol("a/b")), ContentEncoding: ptr(Symbol("gzip"))}},
		protocol.Properties{Flags: protocol.FlagContentType | protocol.FlagContentEncoding, ContentType: "a/b", ContentEncoding: "gzip"}, ""},
	{"creation-time truncated to seconds", &Message{Properties: &Properties{CreationTime: ptr(Timestamp(1999))}},
		protocol.Properties{Flags: protocol.FlagTimestamp, Timestamp: 1}, ""},
	{"properties 0-9-1 has no field for dropped", &Message{Properties: &Properties{To: ptr("t"), Subject: ptr("s"),
		AbsoluteExpiryTime: ptr(Timestamp(1)), GroupID: ptr("g"), GroupSequence: ptr(uint32(1)), ReplyToGroupID: ptr("r")}},
		protocol.Properties{}, ""},
	{"x-basic annotations", &Message{MessageAnnotations: Map{{Symbol("x-basic-priority"), uint8(3)},
		{Symbol("x-basic-delivery-mode"), uint8(2)}, {Symbol("x-basic-expiration"), "10"},
		{Symbol("x-opt-other"), "dropped"}, {Symbol("x-exchange"), "dropped"}}},
		protocol.Properties{Flags: protocol.FlagPriority | protocol.FlagDeliveryMode | protocol.FlagExpiration,
			Priority: 3, DeliveryMode: 2, Expiration: "10"}, ""},
	{"x-basic-priority as a long", &Message{MessageAnnotations: Map{{Symbol("x-basic-priority"), int64(5)}}},
		protocol.Properties{Flags: protocol.FlagPriority, Priority: 5}, ""},
	{"x-basic-priority out of range dropped", &Message{MessageAnnotations: Map{{Symbol("x-basic-priority"), int64(256)}}},
		protocol.Properties{}, ""},
	{"x-basic-type and app-id", &Message{ApplicationProperties: Map{{"x-basic-type", "t"}, {"x-basic-app-id", "a"}}},
		protocol.Properties{Flags: protocol.FlagType | protocol.FlagAppID, Type: "t", AppID: "a"}, ""},
	{"x-basic-type not a string dropped", &Message{ApplicationProperties: Map{{"x-basic-type", int64(1)}}},
		protocol.Properties{}, ""},
	{"ap string", ap("k", "v"), hdr("k", "v"), ""},
	{"ap binary", ap("k", []byte("v")), hdr("k", []byte("v")), ""},
	{"ap empty binary", ap("k", []byte{}), hdr("k", []byte(nil)), ""},
	{"ap boolean", ap("k", true), hdr("k", true), ""},
	{"ap byte", ap("k", int8(-1)), hdr("k", int8(-1)), ""},
	{"ap ubyte", ap("k", uint8(1)), hdr("k", uint8(1)), ""},
	{"ap short", ap("k", int16(-1)), hdr("k", int16(-1)), ""},
	{"ap ushort", ap("k", uint16(1)), hdr("k", uint16(1)), ""},
	{"ap int", ap("k", int32(-1)), hdr("k", int32(-1)), ""},
	{"ap uint", ap("k", uint32(1)), hdr("k", uint32(1)), ""},
	{"ap long", ap("k", int64(-1)), hdr("k", int64(-1)), ""},
	{"ap float", ap("k", float32(1)), hdr("k", float32(1)), ""},
	{"ap double", ap("k", 1.0), hdr("k", 1.0), ""},
	{"ap timestamp", ap("k", Timestamp(1500)), hdr("k", time.Unix(1, 0).UTC()), ""},
	{"ap null", ap("k", nil), hdr("k", nil), ""},
	{"ap ulong dropped", ap("k", uint64(1)), protocol.Properties{}, ""},
	{"ap symbol dropped", ap("k", Symbol("s")), protocol.Properties{}, ""},
	{"ap uuid dropped", ap("k", testUUID), protocol.Properties{}, ""},
	{"ap char dropped", ap("k", Char('c')), protocol.Properties{}, ""},
	{"ap decimal dropped", ap("k", Decimal64{}), protocol.Properties{}, ""},
	{"ap list dropped", ap("k", []any{}), protocol.Properties{}, ""},
	{"ap map dropped", ap("k", Map{}), protocol.Properties{}, ""},
	{"ap described dropped", ap("k", Described{uint64(1), "x"}), protocol.Properties{}, ""},
	{"ap symbol key dropped", &Message{ApplicationProperties: Map{{Symbol("k"), "v"}}}, protocol.Properties{}, ""},
	{"ap long key dropped", ap(strings.Repeat("k", 256), "v"), protocol.Properties{}, ""},
	{"ap first of a key wins", &Message{ApplicationProperties: Map{{"k", "1"}, {"k", "2"}}}, hdr("k", "1"), ""},
	{"one data section", &Message{Data: [][]byte{[]byte("hello")}}, protocol.Properties{}, "hello"},
	{"two data sections", &Message{Data: [][]byte{[]byte("a"), []byte("b")}},
		protocol.Properties{Flags: protocol.FlagType, Type: "amqp-1.0"}, "\x00\x53\x75\xa0\x01a\x00\x53\x75\xa0\x01b"},
	{"amqp-value", &Message{Value: "v", HasValue: true, ApplicationProperties: Map{{"x-basic-type", "t"}}},
		protocol.Properties{Flags: protocol.FlagType, Type: "amqp-1.0"}, "\x00\x53\x77\xa1\x01v"},
	{"amqp-sequence", &Message{Sequence: [][]any{{true}}},
		protocol.Properties{Flags: protocol.FlagType, Type: "amqp-1.0"}, "\x00\x53\x76\xc0\x02\x01\x41"},
	{"header, delivery annotations and footer ignored", &Message{Header: &Header{Durable: ptr(true)},
		DeliveryAnnotations: Map{{Symbol("x-d"), "d"}}, Footer: Map{{Symbol("x-f"), "f"}}, Data: [][]byte{[]byte("b")}},
		protocol.Properties{}, "b"},
}

func ap(k string, v any) *Message { return &Message{ApplicationProperties: Map{{k, v}}} }

func hdr(k string, v any) protocol.Properties {
	return protocol.Properties{Flags: protocol.FlagHeaders, Headers: protocol.Table{k: v}}
}

func TestToAMQP091(t *testing.T) {
	for _, r := range toRows {
		t.Run(r.name, func(t *testing.T) {
			p, body := viaBytes(t, r.msg).ToAMQP091()
			if !reflect.DeepEqual(p, r.want) || string(body) != r.body {
				t.Fatalf("ToAMQP091\n got %#v %q\nwant %#v %q", p, body, r.want, r.body)
			}
			// Whatever it gives, Warren's 0-9-1 codec can send.
			raw, err := p.Append(nil)
			if err != nil {
				t.Fatalf("properties do not encode: %v", err)
			}
			if _, err := protocol.DecodeProperties(p.Flags, raw); err != nil {
				t.Fatal(err)
			}
			// And 0-9-1 to 1.0 keeps what 0-9-1 holds: converting again
			// gives the same 0-9-1 view.
			p2, body2 := viaBytes(t, FromAMQP091(p, body)).ToAMQP091()
			if !reflect.DeepEqual(p2, p) || string(body2) != string(body) {
				t.Fatalf("second round\n got %#v\nwant %#v", p2, p)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	m := FromAMQP091(protocol.Properties{Flags: protocol.FlagPriority, Priority: 1}, []byte("b"))
	if x, k := m.Routing("s1"); x != "" || k != "s1" {
		t.Fatalf("defaults: %q %q", x, k)
	}
	m.SetRouting("amq.topic", "a.b")
	m.SetRouting("ex", "rk")
	m = viaBytes(t, m)
	if x, k := m.Routing("s1"); x != "ex" || k != "rk" {
		t.Fatalf("Routing = %q %q", x, k)
	}
	want := Map{{Symbol("x-routing-key"), "rk"}, {Symbol("x-exchange"), "ex"}, {Symbol("x-basic-priority"), uint8(1)}}
	if !reflect.DeepEqual(m.MessageAnnotations, want) {
		t.Fatalf("annotations %#v", m.MessageAnnotations)
	}
	if p, _ := m.ToAMQP091(); p.Flags != protocol.FlagPriority {
		t.Fatalf("routing annotations reached the 0-9-1 properties: %#v", p)
	}
}
