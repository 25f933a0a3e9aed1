package protocol

import (
	"bytes"
	"testing"
)

// publishStream is one small publish as a client sends it: method, header
// and a 100-byte body frame.
func publishStream() []byte {
	b := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created"})
	return AppendContentFrames(b, 1, ClassBasic, FlagDeliveryMode|FlagContentType,
		[]byte("\x10application/json\x02"), bytes.Repeat([]byte("x"), 100), DefaultFrameMax)
}

// BenchmarkReadFrame reads frames of a publish stream: one frame per op.
func BenchmarkReadFrame(b *testing.B) {
	s := publishStream()
	r := NewFrameReader(&loopReader{data: bytes.Repeat(s, 64)})
	b.SetBytes(int64(len(s) / 3))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBasicPublish decodes a basic.publish payload, the same
// exchange and routing key each time as a steady publisher sends.
func BenchmarkDecodeBasicPublish(b *testing.B) {
	payload := (&BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created"}).Append(nil)
	var dec MethodDecoder
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dec.Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeBasicPublishNewKeys alternates routing keys, so each
// decode allocates the routing key string: the cost when keys vary.
func BenchmarkDecodeBasicPublishNewKeys(b *testing.B) {
	payloads := [2][]byte{
		(&BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.eu.created"}).Append(nil),
		(&BasicPublish{Exchange: "amq.topic", RoutingKey: "orders.us.created"}).Append(nil),
	}
	var dec MethodDecoder
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := dec.Decode(payloads[i&1]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAppendDeliver encodes a delivery (basic.deliver, content header
// and a 100-byte body) into a reused buffer, as a consumer's writer does.
func BenchmarkAppendDeliver(b *testing.B) {
	deliver := &BasicDeliver{ConsumerTag: "amq.ctag-0123456789abcdef", Exchange: "amq.topic", RoutingKey: "orders.eu.created"}
	props := []byte("\x10application/json\x02")
	body := bytes.Repeat([]byte("x"), 100)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		deliver.DeliveryTag++
		buf = AppendMethodFrame(buf[:0], 1, deliver)
		buf = AppendContentFrames(buf, 1, ClassBasic, FlagContentType|FlagDeliveryMode, props, body, DefaultFrameMax)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkScanProperties indexes a typical property list and reads what
// the publish path needs.
func BenchmarkScanProperties(b *testing.B) {
	p := Properties{
		Flags:        FlagContentType | FlagHeaders | FlagDeliveryMode | FlagMessageID | FlagTimestamp | FlagExpiration,
		ContentType:  "application/json",
		Headers:      Table{"x-retry": int32(3), "tenant": "acme"},
		DeliveryMode: 2,
		Expiration:   "60000",
		MessageID:    "4f6c1f4e-8d4b-4b53-9d3c-2f1f5c0e7a11",
		Timestamp:    1700000000,
	}
	raw, err := p.Append(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, err := ScanProperties(p.Flags, raw)
		if err != nil || v.DeliveryMode() != 2 {
			b.Fatal(err)
		}
		if _, ok := v.Bytes(FlagExpiration); !ok {
			b.Fatal("no expiration")
		}
	}
}

// BenchmarkDecodeTable decodes a typical queue.declare arguments table.
func BenchmarkDecodeTable(b *testing.B) {
	t, _ := AppendTable(nil, Table{"x-queue-type": "classic", "x-max-length": int32(1000),
		"x-dead-letter-exchange": "dlx", "x-message-ttl": int32(60000)})
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeTable(t); err != nil {
			b.Fatal(err)
		}
	}
}
