package protocol

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestMethodRoundTrip encodes every method with random arguments, decodes
// it with a MethodDecoder and with Decode on a fresh value, and compares.
func TestMethodRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var dec MethodDecoder
	for _, id := range methodIDs {
		for range 50 {
			m := NewMethod(id[0], id[1])
			if m == nil {
				t.Fatalf("NewMethod(%d, %d) = nil", id[0], id[1])
			}
			fillRandom(r, m)
			payload := m.Append(nil)

			got, err := dec.Decode(payload)
			if err != nil {
				t.Fatalf("%s: decode: %v", m.Name(), err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("%s: round trip\n got %+v\nwant %+v", m.Name(), got, m)
			}
			fresh := NewMethod(id[0], id[1])
			if err := fresh.Decode(payload[4:]); err != nil || !reflect.DeepEqual(fresh, m) {
				t.Fatalf("%s: Decode on a fresh value: %v", m.Name(), err)
			}
			if again := got.Append(nil); !bytes.Equal(again, payload) {
				t.Fatalf("%s: re-encoding differs", m.Name())
			}
		}
	}
}

// TestMethodMetadata checks the generated identity methods against the spec.
func TestMethodMetadata(t *testing.T) {
	for _, id := range methodIDs {
		m := NewMethod(id[0], id[1])
		if m.ClassID() != id[0] || m.MethodID() != id[1] {
			t.Errorf("%s: ids %d,%d, want %d,%d", m.Name(), m.ClassID(), m.MethodID(), id[0], id[1])
		}
		if MethodName(id[0], id[1]) != m.Name() {
			t.Errorf("MethodName(%d,%d) = %q, want %q", id[0], id[1], MethodName(id[0], id[1]), m.Name())
		}
		content := map[string]bool{"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.get-ok": true}
		if m.HasContent() != content[m.Name()] {
			t.Errorf("%s: HasContent() = %v", m.Name(), m.HasContent())
		}
	}
	if len(methodIDs) != 64 {
		t.Errorf("%d methods, want the 64 of the extended spec", len(methodIDs))
	}
	for _, c := range []struct {
		m    Method
		sync bool
	}{
		{&BasicPublish{}, false}, {&BasicAck{}, false}, {&BasicNack{}, false},
		{&ChannelFlowOk{}, false}, {&ConnectionBlocked{}, false},
		{&QueueDeclare{}, true}, {&BasicGetOk{}, true}, {&ConfirmSelect{}, true},
	} {
		if c.m.Synchronous() != c.sync {
			t.Errorf("%s: Synchronous() = %v, want %v", c.m.Name(), c.m.Synchronous(), c.sync)
		}
	}
	if got := MethodName(60, 99); got != "unknown(60,99)" {
		t.Errorf("MethodName(60, 99) = %q", got)
	}
	if NewMethod(60, 99) != nil {
		t.Error("NewMethod(60, 99) != nil")
	}
	if NewMethod(40, 41) != nil || NewMethod(40, 51) == nil {
		t.Error("exchange.unbind-ok is (40, 51) in RabbitMQ's extended spec")
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// TestMethodBytes compares encoded frames with bytes worked out by hand from
// the spec, so the encoder and decoder cannot share a mistake unnoticed.
func TestMethodBytes(t *testing.T) {
	cases := []struct {
		name    string
		channel uint16
		m       Method
		frame   string
	}{{
		name:    "basic.publish",
		channel: 1,
		m:       &BasicPublish{Exchange: "amq.direct", RoutingKey: "rk", Mandatory: true},
		frame: `01 0001 00000015
			003c 0028 0000
			0a 616d712e646972656374
			02 726b
			01
			ce`,
	}, {
		name: "connection.tune",
		m:    &ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
		frame: `01 0000 0000000c
			000a 001e 07ff 00020000 003c
			ce`,
	}, {
		name:    "exchange.declare",
		channel: 7,
		m: &ExchangeDeclare{Exchange: "x", Type: "topic", Durable: true, NoWait: true,
			Arguments: Table{"alternate-exchange": "ae"}},
		frame: `01 0007 0000002d
			0028 000a 0000
			01 78
			05 746f706963
			12
			0000001a 12 616c7465726e6174652d65786368616e6765 53 00000002 6165
			ce`,
	}, {
		name:    "basic.deliver",
		channel: 2,
		m:       &BasicDeliver{ConsumerTag: "ctag", DeliveryTag: 1, Redelivered: true, RoutingKey: "q"},
		frame: `01 0002 00000015
			003c 003c
			04 63746167
			0000000000000001
			01
			00
			01 71
			ce`,
	}, {
		name: "connection.close",
		m:    &ConnectionClose{ReplyCode: 320, ReplyText: "bye", FailingClassID: 60, FailingMethodID: 40},
		frame: `01 0000 0000000e
			000a 0032 0140 03 627965 003c 0028
			ce`,
	}, {
		name:    "basic.nack",
		channel: 1,
		m:       &BasicNack{DeliveryTag: 0x0102030405060708, Multiple: false, Requeue: true},
		frame: `01 0001 0000000d
			003c 0078 0102030405060708 02
			ce`,
	}}
	for _, c := range cases {
		want := mustHex(c.frame)
		got := AppendMethodFrame(nil, c.channel, c.m)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x\nwant %x", c.name, got, want)
			continue
		}
		var dec MethodDecoder
		m, err := dec.Decode(want[7 : len(want)-1])
		if err != nil || !reflect.DeepEqual(m, c.m) {
			t.Errorf("%s: decode = %+v, %v", c.name, m, err)
		}
	}
}

func TestMethodDecodeErrors(t *testing.T) {
	var dec MethodDecoder
	full := (&ExchangeDeclare{Exchange: "x", Type: "direct", Arguments: Table{"a": "b"}}).Append(nil)
	// Every strict prefix is truncated somewhere.
	for n := range len(full) {
		_, err := dec.Decode(full[:n])
		var se *BadSyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("prefix %d: err = %v, want *BadSyntaxError", n, err)
		}
		if !strings.HasPrefix(se.Text, "SYNTAX_ERROR - ") || se.Code() != SyntaxError {
			t.Fatalf("prefix %d: text %q", n, se.Text)
		}
	}
	_, err := dec.Decode(append(full, 0))
	var se *BadSyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Text, "1 bytes left after the last argument") {
		t.Errorf("trailing byte: %v", err)
	}

	_, err = dec.Decode([]byte{0, 60, 0, 99})
	var ue *UnknownMethodError
	if !errors.As(err, &ue) || ue.ClassID != 60 || ue.MethodID != 99 || ue.Code() != CommandInvalid {
		t.Errorf("unknown method: %v", err)
	}

	// A bad table inside a method names the method and argument.
	bad := (&QueueDeclare{Queue: "q"}).Append(nil)
	bad = append(bad[:len(bad)-4], 0, 0, 0, 3, 1, 'k', 'Z')
	_, err = dec.Decode(bad)
	if err == nil || !strings.Contains(err.Error(), `queue.declare arguments: table key "k": unknown field value type 'Z'`) {
		t.Errorf("bad table: %v", err)
	}
}

// TestDecoderReusesValues checks the documented reuse: the same pointer
// comes back for the same method type, and repeated strings are kept.
func TestDecoderReusesValues(t *testing.T) {
	var dec MethodDecoder
	p1 := (&BasicPublish{Exchange: "ex", RoutingKey: "a.b"}).Append(nil)
	p2 := (&BasicPublish{Exchange: "ex", RoutingKey: "c.d", Immediate: true}).Append(nil)
	m1, _ := dec.Decode(p1)
	m2, _ := dec.Decode(p2)
	if m1 != m2 {
		t.Fatal("decoder returned a new value for the same method type")
	}
	pub := m2.(*BasicPublish)
	if pub.RoutingKey != "c.d" || pub.Mandatory || !pub.Immediate {
		t.Fatalf("second decode: %+v", pub)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := dec.Decode(p2); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("decoding a repeated publish: %v allocs, want 0", allocs)
	}
}

func TestLongStringArgument(t *testing.T) {
	m := &ConnectionStartOk{Mechanism: "PLAIN", Response: strings.Repeat("\x00guest", 1000), Locale: "en_US"}
	var dec MethodDecoder
	got, err := dec.Decode(m.Append(nil))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("decode = %v", err)
	}
}

func TestShortStrTruncates(t *testing.T) {
	b := AppendShortStr(nil, strings.Repeat("x", 300))
	if len(b) != 256 || b[0] != 255 {
		t.Fatalf("len %d, length octet %d", len(b), b[0])
	}
}

func TestReplyCodes(t *testing.T) {
	for code, want := range map[uint16]string{
		404: "NOT_FOUND", 406: "PRECONDITION_FAILED", 320: "CONNECTION_FORCED",
		501: "FRAME_ERROR", 502: "SYNTAX_ERROR", 200: "REPLY_SUCCESS", 999: "",
	} {
		if got := ReplyText(code); got != want {
			t.Errorf("ReplyText(%d) = %q, want %q", code, got, want)
		}
	}
	hard := map[uint16]bool{320: true, 402: true, 501: true, 502: true, 503: true, 504: true, 505: true, 506: true, 530: true, 540: true, 541: true}
	for _, code := range []uint16{200, 311, 312, 313, 320, 402, 403, 404, 405, 406, 501, 502, 503, 504, 505, 506, 530, 540, 541} {
		if IsHardError(code) != hard[code] {
			t.Errorf("IsHardError(%d) = %v", code, IsHardError(code))
		}
	}
}

func TestAppendMethodTablePanicsOnBadType(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), `connection.start server-properties: protocol: table key "bad"`) {
			t.Fatalf("recover() = %v", r)
		}
	}()
	(&ConnectionStart{ServerProperties: Table{"bad": struct{}{}}}).Append(nil)
}

// TestShortStringsAreUTF8: the short strings of a method without content
// must be UTF-8, as RabbitMQ 3.10.8 checks them (a queue.declare named
// "bad\xff" closes its connection with 501 "FRAME_ERROR - Malformed UTF-8
// in shortstr"); a publish's are not checked, nor are long strings.
func TestShortStringsAreUTF8(t *testing.T) {
	const bad = "bad\xff\xfe"
	for _, tc := range []struct {
		m       Method
		refused bool
	}{
		{&QueueDeclare{Queue: bad}, true},
		{&ExchangeDeclare{Exchange: bad, Type: "direct"}, true},
		{&ExchangeDeclare{Exchange: "x", Type: bad}, true},
		{&QueueBind{Queue: "q", Exchange: "x", RoutingKey: bad}, true},
		{&BasicConsume{Queue: "q", ConsumerTag: bad}, true},
		{&ConnectionOpen{VirtualHost: bad}, true},
		{&ConnectionClose{ReplyText: bad}, true},
		{&ConnectionStartOk{Mechanism: "PLAIN", Response: bad, Locale: "en_US"}, false}, // a long string
		{&BasicPublish{Exchange: bad, RoutingKey: bad}, false},                          // carries content
		{&QueueDeclare{Queue: "répertoire\x00日本"}, false},
	} {
		var dec MethodDecoder
		_, err := dec.Decode(tc.m.Append(nil))
		var frameErr *BadFrameError
		switch {
		case tc.refused && (!errors.As(err, &frameErr) || frameErr.Text != "FRAME_ERROR - Malformed UTF-8 in shortstr" || frameErr.Code() != FrameError):
			t.Errorf("%s %+v: %v, want 501 Malformed UTF-8 in shortstr", tc.m.Name(), tc.m, err)
		case !tc.refused && err != nil:
			t.Errorf("%s %+v: %v", tc.m.Name(), tc.m, err)
		}
	}
}
