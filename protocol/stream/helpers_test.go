package stream

import (
	"encoding/hex"
	"strings"
	"testing"
)

// mustHex decodes hex written with spaces and newlines between fields.
func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

// frameBody strips and checks a frame's size prefix.
func frameBody(t *testing.T, frame []byte) []byte {
	t.Helper()
	if len(frame) < 4 {
		t.Fatalf("frame of %d bytes has no size prefix", len(frame))
	}
	size := int(frame[0])<<24 | int(frame[1])<<16 | int(frame[2])<<8 | int(frame[3])
	if size != len(frame)-4 {
		t.Fatalf("size prefix %d, frame holds %d bytes", size, len(frame)-4)
	}
	return frame[4:]
}

// allCommands holds at least one value of every command, with every field
// set to something other than its zero value where it can be, and the
// variants the wire distinguishes (versions, offset types, optional
// fields present and absent).
func allCommands() []Command {
	props := map[string]string{"product": "warren", "version": "0.1", "empty": ""}
	return []Command{
		&PeerProperties{CorrelationID: 1, Properties: props},
		&PeerProperties{CorrelationID: 1},
		&PeerPropertiesResponse{CorrelationID: 1, Code: CodeOK, Properties: props},
		&PeerPropertiesResponse{CorrelationID: 1, Code: CodeInternalError},
		&SaslHandshake{CorrelationID: 2},
		&SaslHandshakeResponse{CorrelationID: 2, Code: CodeOK, Mechanisms: []string{"PLAIN", "AMQPLAIN"}},
		&SaslAuthenticate{CorrelationID: 3, Mechanism: "PLAIN", Data: []byte("\x00guest\x00guest")},
		&SaslAuthenticate{CorrelationID: 3, Mechanism: "EXTERNAL"},
		&SaslAuthenticateResponse{CorrelationID: 3, Code: CodeOK},
		&SaslAuthenticateResponse{CorrelationID: 3, Code: CodeSaslChallenge, Data: []byte("challenge")},
		&Tune{FrameMax: 1 << 20, Heartbeat: 60},
		&TuneResponse{FrameMax: 131072, Heartbeat: 0},
		&Open{CorrelationID: 4, VirtualHost: "/"},
		&OpenResponse{CorrelationID: 4, Code: CodeOK, Properties: map[string]string{"advertised_host": "localhost", "advertised_port": "5552"}},
		&OpenResponse{CorrelationID: 4, Code: CodeVirtualHostAccessFailure},
		&Close{CorrelationID: 5, Code: CodeOK, Reason: "bye"},
		&CloseResponse{CorrelationID: 5, Code: CodeOK},
		&Heartbeat{},
		&ExchangeCommandVersions{CorrelationID: 6, Commands: []CommandVersion{{KeyPublish, 1, 2}, {KeyDeliver, 1, 2}}},
		&ExchangeCommandVersionsResponse{CorrelationID: 6, Code: CodeOK, Commands: []CommandVersion{{KeyDeclarePublisher, 1, 1}}},

		&DeclarePublisher{CorrelationID: 7, PublisherID: 9, Reference: "ref", Stream: "orders"},
		&DeclarePublisher{CorrelationID: 7, PublisherID: 0, Stream: "orders"},
		&DeclarePublisherResponse{CorrelationID: 7, Code: CodeStreamDoesNotExist},
		&Publish{Version: 1, PublisherID: 9, Messages: []PublishedMessage{
			{PublishingID: 1, Message: []byte("one")},
			{PublishingID: 2},
			{PublishingID: 3, SubBatch: &SubBatch{Compression: CompressionZstd, Records: 3, UncompressedSize: 99}, Message: []byte("zzz")},
		}},
		&Publish{Version: 1, PublisherID: 1},
		&Publish{Version: 2, PublisherID: 9, Messages: []PublishedMessage{
			{PublishingID: 1, FilterValue: "eu", Message: []byte("one")},
			{PublishingID: 2, Message: []byte("two")},
		}},
		&PublishConfirm{PublisherID: 9, PublishingIDs: []uint64{1, 2, 1 << 63}},
		&PublishError{PublisherID: 9, Errors: []PublishingError{{4, CodePublisherDoesNotExist}, {5, CodeAccessRefused}}},
		&QueryPublisherSequence{CorrelationID: 8, Reference: "ref", Stream: "orders"},
		&QueryPublisherSequenceResponse{CorrelationID: 8, Code: CodeOK, Sequence: 1234},
		&DeletePublisher{CorrelationID: 9, PublisherID: 9},
		&DeletePublisherResponse{CorrelationID: 9, Code: CodeOK},

		&Subscribe{CorrelationID: 10, SubscriptionID: 1, Stream: "s", Offset: OffsetSpec{Type: OffsetFirst}, Credit: 10},
		&Subscribe{CorrelationID: 10, SubscriptionID: 2, Stream: "s", Offset: OffsetSpec{Type: OffsetLast}, Credit: 1},
		&Subscribe{CorrelationID: 10, SubscriptionID: 3, Stream: "s", Offset: OffsetSpec{Type: OffsetNext}, Credit: 1},
		&Subscribe{CorrelationID: 10, SubscriptionID: 4, Stream: "s", Offset: OffsetSpec{Type: OffsetOffset, Offset: 1 << 40}, Credit: 1},
		&Subscribe{CorrelationID: 10, SubscriptionID: 5, Stream: "s", Offset: OffsetSpec{Type: OffsetTimestamp, Timestamp: -1}, Credit: 1,
			Properties: map[string]string{"single-active-consumer": "true", "name": "app", "filter.0": "eu", "match-unfiltered": "false"}},
		&SubscribeResponse{CorrelationID: 10, Code: CodeSubscriptionIDAlreadyExists},
		&Deliver{Version: 1, SubscriptionID: 1, Chunk: testChunk()},
		&Deliver{Version: 2, SubscriptionID: 1, CommittedChunkID: 77, Chunk: testChunk()},
		&Credit{SubscriptionID: 1, Credit: 65535},
		&CreditResponse{Code: CodeSubscriptionIDDoesNotExist, SubscriptionID: 1},
		&Unsubscribe{CorrelationID: 11, SubscriptionID: 1},
		&UnsubscribeResponse{CorrelationID: 11, Code: CodeOK},
		&StoreOffset{Reference: "app", Stream: "s", Offset: 42},
		&QueryOffset{CorrelationID: 12, Reference: "app", Stream: "s"},
		&QueryOffsetResponse{CorrelationID: 12, Code: CodeOK, Offset: 42},
		&QueryOffsetResponse{CorrelationID: 12, Code: CodeNoOffset},
		&ConsumerUpdate{CorrelationID: 13, SubscriptionID: 1, Active: true},
		&ConsumerUpdate{CorrelationID: 13, SubscriptionID: 1, Active: false},
		&ConsumerUpdateResponse{CorrelationID: 13, Code: CodeOK, Offset: OffsetSpec{Type: OffsetNone}},
		&ConsumerUpdateResponse{CorrelationID: 13, Code: CodeOK, Offset: OffsetSpec{Type: OffsetOffset, Offset: 5}},
		&ConsumerUpdateResponse{CorrelationID: 13, Code: CodeOK, Offset: OffsetSpec{Type: OffsetTimestamp, Timestamp: 1700000000000}},
		&ResolveOffsetSpec{CorrelationID: 14, Stream: "s", Offset: OffsetSpec{Type: OffsetTimestamp, Timestamp: 5}, Properties: map[string]string{"chunk_selector": "all"}},
		&ResolveOffsetSpec{CorrelationID: 14, Stream: "s", Offset: OffsetSpec{Type: OffsetNext}},
		&ResolveOffsetSpecResponse{CorrelationID: 14, Code: CodeOK, OffsetType: OffsetOffset, Offset: 100},

		&Create{CorrelationID: 15, Stream: "s", Arguments: map[string]string{"max-age": "1h", "max-length-bytes": "1000"}},
		&Create{CorrelationID: 15, Stream: "s"},
		&CreateResponse{CorrelationID: 15, Code: CodeStreamAlreadyExists},
		&Delete{CorrelationID: 16, Stream: "s"},
		&DeleteResponse{CorrelationID: 16, Code: CodeOK},
		&Metadata{CorrelationID: 17, Streams: []string{"a", "b"}},
		&MetadataResponse{CorrelationID: 17,
			Brokers: []Broker{{0, "node-a", 5552}, {1, "node-b", 5553}},
			Streams: []StreamMetadata{
				{Stream: "a", Code: CodeOK, Leader: 0, Replicas: []uint16{1}},
				{Stream: "b", Code: CodeStreamDoesNotExist, Leader: 0xffff},
			}},
		&MetadataUpdate{Code: CodeStreamNotAvailable, Stream: "a"},
		&Route{CorrelationID: 18, RoutingKey: "eu", SuperStream: "invoices"},
		&RouteResponse{CorrelationID: 18, Code: CodeOK, Streams: []string{"invoices-0"}},
		&Partitions{CorrelationID: 19, SuperStream: "invoices"},
		&PartitionsResponse{CorrelationID: 19, Code: CodeOK, Streams: []string{"invoices-0", "invoices-1"}},
		&StreamStats{CorrelationID: 20, Stream: "s"},
		&StreamStatsResponse{CorrelationID: 20, Code: CodeOK, Stats: map[string]int64{"first_chunk_id": 0, "committed_chunk_id": -1}},
		&CreateSuperStream{CorrelationID: 21, Name: "invoices", Partitions: []string{"invoices-0", "invoices-1"},
			BindingKeys: []string{"0", "1"}, Arguments: map[string]string{"max-age": "1h"}},
		&CreateSuperStreamResponse{CorrelationID: 21, Code: CodeOK},
		&DeleteSuperStream{CorrelationID: 22, Name: "invoices"},
		&DeleteSuperStreamResponse{CorrelationID: 22, Code: CodeOK},
	}
}

// testChunk is a user chunk of a simple entry and a sub-batch.
func testChunk() []byte {
	var data []byte
	data = AppendEntry(data, Entry{Body: []byte("hello")})
	data = AppendEntry(data, Entry{SubBatch: &SubBatch{Records: 2, UncompressedSize: 10}, Body: []byte("\x00\x00\x00\x01a\x00\x00\x00\x01b")})
	h := ChunkHeader{Type: ChunkUser, NumEntries: 2, NumRecords: 3, Timestamp: 1700000000000, Epoch: 1, ChunkID: 100}
	return AppendChunk(nil, h, data)
}
