package amqp10

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	streamamqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
)

// These tests cross-check the codec against the encoder and decoder of
// RabbitMQ's Go stream client (v1.8.3), the bytes real publishers send.

var (
	clientExpiry   = time.UnixMilli(1700000000123).UTC()
	clientCreation = time.UnixMilli(1699999999456).UTC()
)

func clientMessage() *streamamqp.AMQP10 {
	m := streamamqp.NewMessage([]byte("hello"))
	m.Properties = &streamamqp.MessageProperties{
		MessageID:          "m1",
		UserID:             []byte("user"),
		To:                 "to",
		Subject:            "subject",
		ReplyTo:            "reply-to",
		CorrelationID:      uint64(42),
		ContentType:        "text/plain",
		ContentEncoding:    "gzip",
		AbsoluteExpiryTime: clientExpiry,
		CreationTime:       clientCreation,
		GroupID:            "group",
		GroupSequence:      7,
		ReplyToGroupID:     "reply-group",
	}
	// The client writes integer annotation keys as long, though the spec
	// asks for ulong; Parse takes any key type.
	m.Annotations = streamamqp.Annotations{"x-opt-a": "b", int64(9): int64(-1)}
	m.ApplicationProperties = map[string]any{"s": "v", "i": int32(5), "l": int64(-6), "b": true,
		"d": 1.5, "bin": []byte{1}, "u": uint64(1 << 40)}
	return m
}

func TestParseClientMessage(t *testing.T) {
	b, err := clientMessage().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(% x): %v", b, err)
	}
	wantProps := &Properties{
		MessageID:          "m1",
		UserID:             []byte("user"),
		To:                 ptr("to"),
		Subject:            ptr("subject"),
		ReplyTo:            ptr("reply-to"),
		CorrelationID:      uint64(42),
		ContentType:        ptr(Symbol("text/plain")),
		ContentEncoding:    ptr(Symbol("gzip")),
		AbsoluteExpiryTime: ptr(TimestampOf(clientExpiry)),
		CreationTime:       ptr(TimestampOf(clientCreation)),
		GroupID:            ptr("group"),
		GroupSequence:      ptr(uint32(7)),
		ReplyToGroupID:     ptr("reply-group"),
	}
	if !reflect.DeepEqual(m.Properties, wantProps) {
		t.Errorf("properties\n got %#v\nwant %#v", m.Properties, wantProps)
	}
	if !reflect.DeepEqual(m.Data, [][]byte{[]byte("hello")}) {
		t.Errorf("data %q", m.Data)
	}
	for k, want := range map[any]any{Symbol("x-opt-a"): "b", int64(9): int64(-1)} {
		if v, ok := m.MessageAnnotations.Get(k); !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("annotation %v = %#v, %v; want %#v", k, v, ok, want)
		}
	}
	for k, want := range map[string]any{"s": "v", "i": int32(5), "l": int64(-6), "b": true,
		"d": 1.5, "bin": []byte{1}, "u": uint64(1 << 40)} {
		if v, ok := m.ApplicationProperties.Get(k); !ok || !reflect.DeepEqual(v, want) {
			t.Errorf("application property %s = %#v, %v; want %#v", k, v, ok, want)
		}
	}
	// Append's encoding of what the client sent parses to the same message.
	if again, err := Parse(m.Append(nil)); err != nil || !reflect.DeepEqual(again, m) {
		t.Errorf("round trip: %v", err)
	}
}

// TestClientGoldenHello checks the simplest message a stream publisher
// sends, data "hello" and message-id "m1", byte for byte: the client
// always writes group-sequence, so the properties list has 12 fields, and
// writes it as a list32 where Append chooses list8.
func TestClientGoldenHello(t *testing.T) {
	cm := streamamqp.NewMessage([]byte("hello"))
	cm.Properties = &streamamqp.MessageProperties{MessageID: "m1"}
	b, err := cm.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := mustHex("00 53 73 d0 00000013 0000000c a1 02 6d31 40 40 40 40 40 40 40 40 40 40 43" +
		"00 53 75 a0 05 68656c6c6f")
	if !bytes.Equal(b, want) {
		t.Fatalf("client sent % x", b)
	}
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	wantMsg := &Message{Properties: &Properties{MessageID: "m1", GroupSequence: ptr(uint32(0))}, Data: [][]byte{[]byte("hello")}}
	if !reflect.DeepEqual(m, wantMsg) {
		t.Fatalf("Parse = %#v", m)
	}
	canonical := mustHex("00 53 73 c0 10 0c a1 02 6d31 40 40 40 40 40 40 40 40 40 40 43" +
		"00 53 75 a0 05 68656c6c6f")
	if got := m.Append(nil); !bytes.Equal(got, canonical) {
		t.Fatalf("re-encoded as % x", got)
	}
}

func TestClientReadsAppend(t *testing.T) {
	m := &Message{
		MessageAnnotations: Map{{Symbol("x-opt-a"), "b"}},
		Properties: &Properties{
			MessageID:          testUUID,
			UserID:             []byte("user"),
			To:                 ptr("to"),
			ReplyTo:            ptr("reply-to"),
			CorrelationID:      []byte("corr"),
			ContentType:        ptr(Symbol("application/json")),
			AbsoluteExpiryTime: ptr(TimestampOf(clientExpiry)),
			CreationTime:       ptr(TimestampOf(clientCreation)),
			GroupSequence:      ptr(uint32(3)),
		},
		ApplicationProperties: Map{{"s", "v"}, {"n", int64(7)}, {"f", float32(0.5)}},
		Data:                  [][]byte{[]byte("hello")},
	}
	var cm streamamqp.Message
	if err := cm.UnmarshalBinary(m.Append(nil)); err != nil {
		t.Fatal(err)
	}
	p := cm.Properties
	if p == nil {
		t.Fatal("no properties")
	}
	if p.MessageID != streamamqp.UUID(testUUID) || !bytes.Equal(p.UserID, []byte("user")) || p.To != "to" ||
		p.ReplyTo != "reply-to" || !reflect.DeepEqual(p.CorrelationID, []byte("corr")) ||
		p.ContentType != "application/json" || !p.AbsoluteExpiryTime.Equal(clientExpiry) ||
		!p.CreationTime.Equal(clientCreation) || p.GroupSequence != 3 {
		t.Errorf("client read properties %#v", p)
	}
	if !reflect.DeepEqual(cm.Data, [][]byte{[]byte("hello")}) {
		t.Errorf("client read data %q", cm.Data)
	}
	if v := cm.Annotations["x-opt-a"]; v != "b" {
		t.Errorf("client read annotations %#v", cm.Annotations)
	}
	want := map[string]any{"s": "v", "n": int64(7), "f": float32(0.5)}
	if got := cm.ApplicationProperties; !reflect.DeepEqual(got, want) {
		t.Errorf("client read application properties %#v", got)
	}
}
