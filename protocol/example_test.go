package protocol_test

import (
	"bytes"
	"fmt"

	"github.com/warrenmq/warren/protocol"
)

// A publish as a client sends it, read back frame by frame the way a
// broker's connection loop does.
func Example() {
	var wire []byte
	wire = protocol.AppendMethodFrame(wire, 1, &protocol.BasicPublish{Exchange: "amq.direct", RoutingKey: "jobs"})
	props := protocol.Properties{Flags: protocol.FlagDeliveryMode | protocol.FlagMessageID, DeliveryMode: 2, MessageID: "m1"}
	raw, _ := props.Append(nil)
	wire = protocol.AppendContentFrames(wire, 1, protocol.ClassBasic, props.Flags, raw, []byte("hello"), protocol.DefaultFrameMax)

	r := protocol.NewFrameReader(bytes.NewReader(wire))
	var dec protocol.MethodDecoder
	for {
		f, err := r.ReadFrame()
		if err != nil {
			break
		}
		switch f.Type {
		case protocol.FrameMethod:
			m, _ := dec.Decode(f.Payload)
			pub := m.(*protocol.BasicPublish)
			fmt.Printf("%s to %q with key %q\n", m.Name(), pub.Exchange, pub.RoutingKey)
		case protocol.FrameHeader:
			h, _ := protocol.ParseContentHeader(f.Payload)
			v, _ := protocol.ScanProperties(h.Flags, h.Raw)
			id, _ := v.MessageID()
			fmt.Printf("%d-byte body, delivery mode %d, message id %s\n", h.BodySize, v.DeliveryMode(), id)
		case protocol.FrameBody:
			fmt.Printf("body %q\n", f.Payload)
		}
	}
	// Output:
	// basic.publish to "amq.direct" with key "jobs"
	// 5-byte body, delivery mode 2, message id m1
	// body "hello"
}

func ExampleAppendTable() {
	b, _ := protocol.AppendTable(nil, protocol.Table{"x-max-length": int32(10), "x-queue-type": "classic"})
	t, n, _ := protocol.DecodeTable(b)
	fmt.Println(n, t["x-max-length"], t["x-queue-type"])
	// Output: 47 10 classic
}

func ExampleReplyText() {
	code := uint16(protocol.NotFound)
	fmt.Println(protocol.ReplyText(code)+" - no queue 'jobs' in vhost '/'", protocol.IsHardError(code))
	// Output: NOT_FOUND - no queue 'jobs' in vhost '/' false
}
