package amqp10

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var testUUID = UUID{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}

// goldenMessages are written by hand from part 3 section 3.2 of the spec,
// one section to a line.
var goldenMessages = []struct {
	name     string
	sections []string
	msg      *Message
}{
	{
		name: "properties message-id and data",
		sections: []string{
			"00 53 73 c0 05 01 a1 02 6d31",
			"00 53 75 a0 05 68656c6c6f",
		},
		msg: &Message{Properties: &Properties{MessageID: "m1"}, Data: [][]byte{[]byte("hello")}},
	},
	{
		name: "every section",
		sections: []string{
			"00 53 70 c0 04 02 41 50 05",
			"00 53 71 c1 09 02 a3 03 782d64 a1 01 76",
			"00 53 72 c1 0c 02 a3 07 782d6f70742d6b 53 01",
			"00 53 73 c0 4d 0d" +
				" 53 07" + // message-id ulong 7
				" a0 01 75" + // user-id
				" a1 01 71" + // to
				" a1 01 73" + // subject
				" a1 01 72" + // reply-to
				" 98 123e4567e89b12d3a456426614174000" + // correlation-id
				" a3 0a 746578742f706c61696e" + // content-type
				" a3 04 677a6970" + // content-encoding
				" 83 0000018bcfe56800" + // absolute-expiry-time
				" 83 0000018bcfe567ff" + // creation-time
				" a1 01 67" + // group-id
				" 52 03" + // group-sequence
				" a1 02 7267", // reply-to-group-id
			"00 53 74 c1 06 02 a1 01 6b 54 ff",
			"00 53 75 a0 05 68656c6c6f",
			"00 53 75 a0 01 21",
			"00 53 78 c1 09 02 a3 03 782d66 a0 01 00",
		},
		msg: &Message{
			Header:              &Header{Durable: ptr(true), Priority: ptr(uint8(5))},
			DeliveryAnnotations: Map{{Symbol("x-d"), "v"}},
			MessageAnnotations:  Map{{Symbol("x-opt-k"), uint64(1)}},
			Properties: &Properties{
				MessageID:          uint64(7),
				UserID:             []byte("u"),
				To:                 ptr("q"),
				Subject:            ptr("s"),
				ReplyTo:            ptr("r"),
				CorrelationID:      testUUID,
				ContentType:        ptr(Symbol("text/plain")),
				ContentEncoding:    ptr(Symbol("gzip")),
				AbsoluteExpiryTime: ptr(Timestamp(1700000000000)),
				CreationTime:       ptr(Timestamp(1699999999999)),
				GroupID:            ptr("g"),
				GroupSequence:      ptr(uint32(3)),
				ReplyToGroupID:     ptr("rg"),
			},
			ApplicationProperties: Map{{"k", int32(-1)}},
			Data:                  [][]byte{[]byte("hello"), []byte("!")},
			Footer:                Map{{Symbol("x-f"), []byte{0}}},
		},
	},
	{
		name:     "amqp-value",
		sections: []string{"00 53 77 a1 03 616263"},
		msg:      &Message{Value: "abc", HasValue: true},
	},
	{
		name:     "amqp-value null after an empty header",
		sections: []string{"00 53 70 45", "00 53 77 40"},
		msg:      &Message{Header: &Header{}, Value: nil, HasValue: true},
	},
	{
		name:     "amqp-sequences",
		sections: []string{"00 53 76 c0 03 01 50 01", "00 53 76 45"},
		msg:      &Message{Sequence: [][]any{{uint8(1)}, {}}},
	},
	{
		name: "empty annotations, properties with a null in the middle, binary message-id",
		sections: []string{
			"00 53 72 c1 01 00",
			"00 53 73 c0 09 03 a0 02 0102 40 a1 01 72",
			"00 53 75 a0 00",
		},
		msg: &Message{
			MessageAnnotations: Map{},
			Properties:         &Properties{MessageID: []byte{1, 2}, To: ptr("r")},
			Data:               [][]byte{{}},
		},
	},
	{
		name:     "no sections",
		sections: nil,
		msg:      &Message{},
	},
}

func TestGoldenMessages(t *testing.T) {
	for _, g := range goldenMessages {
		t.Run(g.name, func(t *testing.T) {
			b := mustHex(strings.Join(g.sections, " "))
			m, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, g.msg) {
				t.Fatalf("Parse\n got %#v\nwant %#v", m, g.msg)
			}
			if got := g.msg.Append(nil); !bytes.Equal(got, b) {
				t.Fatalf("Append\n got % x\nwant % x", got, b)
			}
		})
	}
}

// TestParseTruncated parses every prefix of every golden message: a
// prefix that ends between sections is a shorter message, any other is an
// error, never a panic.
func TestParseTruncated(t *testing.T) {
	for _, g := range goldenMessages {
		b := mustHex(strings.Join(g.sections, " "))
		boundary := map[int]bool{0: true}
		n := 0
		for _, s := range g.sections {
			n += len(mustHex(s))
			boundary[n] = true
		}
		for n := range len(b) {
			m, err := Parse(b[:n])
			switch {
			case boundary[n] && err != nil:
				t.Errorf("%s: %d bytes, a whole number of sections: %v", g.name, n, err)
			case !boundary[n] && err == nil:
				t.Errorf("%s: %d of %d bytes parsed as %#v", g.name, n, len(b), m)
			case err != nil:
				checkDecodeError(t, err, n)
			}
		}
	}
}

func TestParseSymbolicDescriptors(t *testing.T) {
	b := mustHex("00 a3 14 616d71703a70726f706572746965733a6c697374 c0 03 01 53 09" + // amqp:properties:list
		"00 a3 10 616d71703a646174613a62696e617279 a0 01 78") // amqp:data:binary
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Message{Properties: &Properties{MessageID: uint64(9)}, Data: [][]byte{[]byte("x")}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %#v", m)
	}
}

func TestParseErrors(t *testing.T) {
	const (
		props = "00 53 73 45 "
		data  = "00 53 75 a0 00 "
		value = "00 53 77 40 "
		seq   = "00 53 76 45 "
	)
	for _, c := range []struct {
		name, hex string
		off       int
	}{
		{"not described", "a1 00", 0},
		{"unknown descriptor", "00 53 79 40", 0},
		{"string descriptor", "00 a1 01 78 40", 0},
		{"properties twice", props + props, 4},
		{"properties after data", data + props, 5},
		{"data after value", value + data, 4},
		{"value twice", value + value, 4},
		{"sequence then data", seq + data, 4},
		{"data then sequence", data + seq, 5},
		{"data not binary", "00 53 75 a1 00", 0},
		{"sequence not list", "00 53 76 40", 0},
		{"header not list", "00 53 70 c1 01 00", 0},
		{"annotations not map", "00 53 72 45", 0},
		{"header too many fields", "00 53 70 c0 07 06 40 40 40 40 40 40", 0},
		{"header durable not boolean", "00 53 70 c0 03 01 52 01", 0},
		{"properties message-id long", "00 53 73 c0 03 01 55 01", 0},
		{"properties to a symbol", "00 53 73 c0 06 03 40 40 a3 01 71", 0},
		{"properties group-sequence ulong", "00 53 73 c0 0e 0c 40 40 40 40 40 40 40 40 40 40 40 53 01", 0},
		{"second section bad", data + "00 53 75 a1 00", 5},
	} {
		b := mustHex(c.hex)
		m, err := Parse(b)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrBadSection) || de.Offset != c.off {
			t.Errorf("%s: Parse = %#v, %v; want a bad section at %d", c.name, m, err, c.off)
		}
	}
}

// TestMessageRoundTrip builds messages with every section and values of
// every type and checks that Append then Parse gives them back.
func TestMessageRoundTrip(t *testing.T) {
	all := []any{nil, true, false, uint8(1), uint16(2), uint32(3), uint64(4), int8(-5), int16(-6),
		int32(-7), int64(-8), float32(9.5), float64(10.25), Decimal32{1}, Decimal64{2}, Decimal128{3},
		Char('z'), Timestamp(-1), testUUID, []byte("bin"), "str", Symbol("sym"),
		[]any{uint8(1), "x"}, Map{{"k", "v"}, {uint64(1), nil}}, Array{Code: codeSym8, Values: []any{Symbol("a")}},
		Described{Symbol("com.example:x"), []any{}}, strings.Repeat("long", 100)}
	var ap Map
	for i, v := range all {
		ap = append(ap, MapEntry{string(rune('a' + i)), v})
	}
	msgs := []*Message{
		{
			Header: &Header{Durable: ptr(false), Priority: ptr(uint8(9)), TTL: ptr(uint32(60000)),
				FirstAcquirer: ptr(true), DeliveryCount: ptr(uint32(2))},
			DeliveryAnnotations:   Map{{Symbol("x-a"), all}},
			MessageAnnotations:    Map{{uint64(1), Array{Code: codeLong, Values: []any{int64(1), int64(1000)}}}},
			Properties:            &Properties{MessageID: testUUID, CorrelationID: []byte("c"), GroupSequence: ptr(uint32(0))},
			ApplicationProperties: ap,
			Sequence:              [][]any{all, all},
			Footer:                Map{},
		},
		{Value: all, HasValue: true, Properties: &Properties{}},
		{Value: Map{{nil, nil}}, HasValue: true},
		{Data: [][]byte{bytes.Repeat([]byte("x"), 70000)}},
	}
	for i, m := range msgs {
		b := m.Append(nil)
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("message %d\n got %#v\nwant %#v", i, got, m)
		}
		if b2 := got.Append(nil); !bytes.Equal(b, b2) {
			t.Fatalf("message %d encodes differently after a round trip", i)
		}
	}
}

func TestAppendPanicsOnForeignTypes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	(&Message{Value: 1, HasValue: true}).Append(nil)
}
