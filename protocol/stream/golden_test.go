package stream

import (
	"bytes"
	"reflect"
	"testing"
)

// Frames written by hand from PROTOCOL.adoc, so that an encoder and
// decoder that agree with each other but not with the spec still fail.
var goldenFrames = []struct {
	name  string
	cmd   Command
	frame string // hex, size prefix included
}{
	{
		name: "PeerProperties",
		cmd:  &PeerProperties{CorrelationID: 1, Properties: map[string]string{"product": "warren"}},
		frame: `0000001d 0011 0001 00000001
			00000001 0007 70726f64756374 0006 77617272656e`,
	},
	{
		name:  "DeclarePublisher",
		cmd:   &DeclarePublisher{CorrelationID: 2, PublisherID: 7, Stream: "s1"},
		frame: `0000000f 0001 0001 00000002 07 0000 0002 7331`,
	},
	{
		name: "Publish v1, two messages",
		cmd: &Publish{Version: 1, PublisherID: 1, Messages: []PublishedMessage{
			{PublishingID: 1, Message: []byte("ab")},
			{PublishingID: 2, Message: []byte("c")},
		}},
		frame: `00000024 0002 0001 01 00000002
			0000000000000001 00000002 6162
			0000000000000002 00000001 63`,
	},
	{
		name: "Publish v2, a filter value and none",
		cmd: &Publish{Version: 2, PublisherID: 1, Messages: []PublishedMessage{
			{PublishingID: 1, FilterValue: "f", Message: []byte("ab")},
			{PublishingID: 2, Message: []byte("c")},
		}},
		frame: `00000029 0002 0002 01 00000002
			0000000000000001 0001 66 00000002 6162
			0000000000000002 ffff 00000001 63`,
	},
	{
		name: "Publish v1, a gzip sub-batch",
		cmd: &Publish{Version: 1, PublisherID: 5, Messages: []PublishedMessage{
			{PublishingID: 9, SubBatch: &SubBatch{Compression: CompressionGzip, Records: 2, UncompressedSize: 10}, Message: []byte("xyz")},
		}},
		frame: `0000001f 0002 0001 05 00000001
			0000000000000009 90 0002 0000000a 00000003 78797a`,
	},
	{
		name:  "PublishConfirm",
		cmd:   &PublishConfirm{PublisherID: 1, PublishingIDs: []uint64{1, 2}},
		frame: `00000019 0003 0001 01 00000002 0000000000000001 0000000000000002`,
	},
	{
		name:  "Credit",
		cmd:   &Credit{SubscriptionID: 3, Credit: 10},
		frame: `00000007 0009 0001 03 000a`,
	},
	{
		name:  "CreditResponse, no correlation id",
		cmd:   &CreditResponse{Code: CodeSubscriptionIDDoesNotExist, SubscriptionID: 3},
		frame: `00000007 8009 0001 0004 03`,
	},
	{
		name:  "Subscribe at an offset",
		cmd:   &Subscribe{CorrelationID: 4, Stream: "s", Offset: OffsetSpec{Type: OffsetOffset, Offset: 42}, Credit: 10},
		frame: `00000018 0007 0001 00000004 00 0001 73 0004 000000000000002a 000a`,
	},
	{
		name:  "Subscribe at next",
		cmd:   &Subscribe{CorrelationID: 4, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetNext}, Credit: 1},
		frame: `00000010 0007 0001 00000004 01 0001 73 0003 0001`,
	},
	{
		name:  "Tune",
		cmd:   &Tune{FrameMax: 1 << 20, Heartbeat: 60},
		frame: `0000000c 0014 0001 00100000 0000003c`,
	},
	{
		name:  "Heartbeat",
		cmd:   &Heartbeat{},
		frame: `00000004 0017 0001`,
	},
	{
		name:  "OpenResponse without properties",
		cmd:   &OpenResponse{CorrelationID: 3, Code: CodeOK},
		frame: `0000000a 8015 0001 00000003 0001`,
	},
	{
		name:  "Deliver v2",
		cmd:   &Deliver{Version: 2, SubscriptionID: 1, CommittedChunkID: 3, Chunk: []byte{0x50, 0}},
		frame: `0000000f 0008 0002 01 0000000000000003 5000`,
	},
}

func TestGoldenFrames(t *testing.T) {
	for _, g := range goldenFrames {
		t.Run(g.name, func(t *testing.T) {
			want := mustHex(g.frame)
			if got := AppendFrame(nil, g.cmd); !bytes.Equal(got, want) {
				t.Fatalf("encoded\n got %x\nwant %x", got, want)
			}
			got, err := Decode(want[4:])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, g.cmd) {
				t.Fatalf("decoded\n got %#v\nwant %#v", got, g.cmd)
			}
		})
	}
}

// TestOptionalFieldsLeftOut checks frames without the fields RabbitMQ
// leaves out or reads as optional.
func TestOptionalFieldsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		frame string
		want  Command
	}{
		// Subscribe with the property count present but zero.
		{`0007 0001 00000004 01 0001 73 0001 0001 00000000`,
			&Subscribe{CorrelationID: 4, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetFirst}, Credit: 1}},
		// Error responses that stop after the code.
		{`8005 0001 00000001 0002`, &QueryPublisherSequenceResponse{CorrelationID: 1, Code: CodeStreamDoesNotExist}},
		{`801a 0001 00000001 0001`, &ConsumerUpdateResponse{CorrelationID: 1, Code: CodeOK}},
		{`8018 0001 00000001 0002`, &RouteResponse{CorrelationID: 1, Code: CodeStreamDoesNotExist}},
		{`8013 0001 00000001 0008`, &SaslAuthenticateResponse{CorrelationID: 1, Code: CodeAuthenticationFailure}},
		// SASL data sent as null and as empty.
		{`0013 0001 00000001 0005 504c41494e ffffffff`, &SaslAuthenticate{CorrelationID: 1, Mechanism: "PLAIN"}},
		{`0013 0001 00000001 0005 504c41494e 00000000`, &SaslAuthenticate{CorrelationID: 1, Mechanism: "PLAIN"}},
		// A null string reads as empty.
		{`0001 0001 00000001 00 ffff 0001 73`, &DeclarePublisher{CorrelationID: 1, Stream: "s"}},
	} {
		got, err := Decode(mustHex(tc.frame))
		if err != nil {
			t.Errorf("%s: %v", tc.frame, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s\n got %#v\nwant %#v", tc.frame, got, tc.want)
		}
	}
}
