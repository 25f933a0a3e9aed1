package stream

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// The consuming side: Subscribe, Deliver, Credit, Unsubscribe,
// StoreOffset, QueryOffset, ConsumerUpdate and ResolveOffsetSpec.

// Subscribe starts a subscription at an offset with an initial credit (in
// chunks). Properties include single-active-consumer, super-stream,
// filter.N and match-unfiltered. Empty properties are left out, as
// RabbitMQ's encoder does; both forms decode.
type Subscribe struct {
	CorrelationID  uint32
	SubscriptionID uint8
	Stream         string
	Offset         OffsetSpec
	Credit         uint16
	Properties     map[string]string
}

func (c *Subscribe) Key() Key { return KeySubscribe }

func (c *Subscribe) Append(dst []byte) []byte {
	dst = appendU8(appendCorrelated(dst, KeySubscribe, c.CorrelationID), c.SubscriptionID)
	dst = appendOffsetSpec(appendString(dst, c.Stream), c.Offset)
	dst = appendU16(dst, c.Credit)
	if len(c.Properties) > 0 {
		dst = appendMap(dst, c.Properties)
	}
	return dst
}

func decodeSubscribe(r *reader, _ uint16) Command {
	return &Subscribe{
		CorrelationID:  r.u32(),
		SubscriptionID: r.u8(),
		Stream:         r.str(),
		Offset:         r.offsetSpec(false),
		Credit:         r.u16(),
		Properties:     r.optionalMap(),
	}
}

// SubscribeResponse answers Subscribe.
type SubscribeResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *SubscribeResponse) Key() Key { return KeySubscribe | ResponseBit }

func (c *SubscribeResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeySubscribe, c.CorrelationID, c.Code)
}

func decodeSubscribeResponse(r *reader, _ uint16) Command {
	return &SubscribeResponse{CorrelationID: r.u32(), Code: r.code()}
}

// Deliver carries one OSIRIS chunk to a subscription: the rest of the
// frame, header and data, left raw (ParseChunk reads it). Version 2 adds
// the id of the last committed chunk.
type Deliver struct {
	Version          uint16 // 1 or 2; 0 means 1
	SubscriptionID   uint8
	CommittedChunkID uint64 // version 2 only
	Chunk            []byte
}

func (c *Deliver) Key() Key { return KeyDeliver }

func (c *Deliver) Append(dst []byte) []byte {
	v := max(c.Version, 1)
	dst = appendU8(appendHeader(dst, KeyDeliver, v), c.SubscriptionID)
	if v >= 2 {
		dst = appendU64(dst, c.CommittedChunkID)
	}
	return append(dst, c.Chunk...)
}

// inlineBody is the largest body ChunkParts copies: a larger one is
// written from where it lies, which saves its copy, and a smaller one
// costs less to copy than a writev's entry of its own.
const inlineBody = 256

// ChunkParts is a chunk as Deliver carries it, in parts to write one
// after the other (a writev): h, then a simple entry per body, where a
// body of more than inlineBody bytes is a part of its own, not copied.
// h's NumEntries, NumRecords, DataLength and CRC are set from bodies; the
// caller sets the rest. The parts alias bodies, which must not change
// while they are written; several subscriptions can send the same parts,
// each behind its own DeliverHead. size is the chunk's length.
func ChunkParts(h ChunkHeader, bodies [][]byte) (parts [][]byte, size int) {
	data, copied, large := 0, 0, 0
	for _, b := range bodies {
		if len(b) > math.MaxInt32 {
			panic(fmt.Sprintf("stream: entry of %d bytes exceeds 2^31-1", len(b)))
		}
		data += 4 + len(b)
		if len(b) <= inlineBody {
			copied += len(b)
		} else {
			large++
		}
	}
	// buf holds the header, every length and the copied bodies; its
	// capacity is exact, so it never moves and the parts taken from it
	// stay its.
	buf := make([]byte, ChunkHeaderSize, ChunkHeaderSize+4*len(bodies)+copied)
	parts = make([][]byte, 0, 2*large+1)
	run := 0 // where buf's part being filled starts
	for _, b := range bodies {
		buf = appendU32(buf, uint32(len(b)))
		if len(b) <= inlineBody {
			buf = append(buf, b...)
			continue
		}
		parts = append(parts, buf[run:len(buf):len(buf)], b)
		run = len(buf)
	}
	if run < len(buf) || len(parts) == 0 {
		parts = append(parts, buf[run:])
	}
	crc := crc32.ChecksumIEEE(parts[0][ChunkHeaderSize:])
	for _, p := range parts[1:] {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	h.NumEntries, h.NumRecords = uint16(len(bodies)), uint32(len(bodies))
	h.DataLength, h.CRC = uint32(data), crc
	h.Append(buf[:0])
	return parts, ChunkHeaderSize + data
}

// DeliverHead is the start of a Deliver frame (size prefix included)
// whose chunk, chunkLen bytes, follows it on the wire: d's version,
// subscription and, in version 2, committed chunk id; d.Chunk is not
// read.
func DeliverHead(d Deliver, chunkLen int) []byte {
	head := make([]byte, sizePrefix, sizePrefix+13)
	v := max(d.Version, 1)
	head = appendU8(appendHeader(head, KeyDeliver, v), d.SubscriptionID)
	if v >= 2 {
		head = appendU64(head, d.CommittedChunkID)
	}
	binary.BigEndian.PutUint32(head, uint32(len(head)-sizePrefix+chunkLen))
	return head
}

func decodeDeliver(r *reader, version uint16) Command {
	c := &Deliver{Version: version, SubscriptionID: r.u8()}
	if version >= 2 {
		c.CommittedChunkID = r.u64()
	}
	c.Chunk = nonEmpty(r.take(r.left()))
	return c
}

// Credit grants a subscription more chunks.
type Credit struct {
	SubscriptionID uint8
	Credit         uint16
}

func (c *Credit) Key() Key { return KeyCredit }

func (c *Credit) Append(dst []byte) []byte {
	return appendU16(appendU8(appendHeader(dst, KeyCredit, 1), c.SubscriptionID), c.Credit)
}

func decodeCredit(r *reader, _ uint16) Command {
	return &Credit{SubscriptionID: r.u8(), Credit: r.u16()}
}

// CreditResponse is sent only when Credit fails (an unknown subscription).
// Unlike other responses it has no correlation id, and its code comes
// before the subscription id.
type CreditResponse struct {
	Code           ResponseCode
	SubscriptionID uint8
}

func (c *CreditResponse) Key() Key { return KeyCredit | ResponseBit }

func (c *CreditResponse) Append(dst []byte) []byte {
	return appendU8(appendU16(appendHeader(dst, KeyCredit|ResponseBit, 1), uint16(c.Code)), c.SubscriptionID)
}

func decodeCreditResponse(r *reader, _ uint16) Command {
	return &CreditResponse{Code: r.code(), SubscriptionID: r.u8()}
}

// Unsubscribe ends a subscription.
type Unsubscribe struct {
	CorrelationID  uint32
	SubscriptionID uint8
}

func (c *Unsubscribe) Key() Key { return KeyUnsubscribe }

func (c *Unsubscribe) Append(dst []byte) []byte {
	return appendU8(appendCorrelated(dst, KeyUnsubscribe, c.CorrelationID), c.SubscriptionID)
}

func decodeUnsubscribe(r *reader, _ uint16) Command {
	return &Unsubscribe{CorrelationID: r.u32(), SubscriptionID: r.u8()}
}

// UnsubscribeResponse answers Unsubscribe.
type UnsubscribeResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *UnsubscribeResponse) Key() Key { return KeyUnsubscribe | ResponseBit }

func (c *UnsubscribeResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyUnsubscribe, c.CorrelationID, c.Code)
}

func decodeUnsubscribeResponse(r *reader, _ uint16) Command {
	return &UnsubscribeResponse{CorrelationID: r.u32(), Code: r.code()}
}

// StoreOffset stores a consumer's offset under a reference; it has no
// response.
type StoreOffset struct {
	Reference string
	Stream    string
	Offset    uint64
}

func (c *StoreOffset) Key() Key { return KeyStoreOffset }

func (c *StoreOffset) Append(dst []byte) []byte {
	dst = appendString(appendHeader(dst, KeyStoreOffset, 1), c.Reference)
	return appendU64(appendString(dst, c.Stream), c.Offset)
}

func decodeStoreOffset(r *reader, _ uint16) Command {
	return &StoreOffset{Reference: r.str(), Stream: r.str(), Offset: r.u64()}
}

// QueryOffset asks for the offset stored under a reference.
type QueryOffset struct {
	CorrelationID uint32
	Reference     string
	Stream        string
}

func (c *QueryOffset) Key() Key { return KeyQueryOffset }

func (c *QueryOffset) Append(dst []byte) []byte {
	dst = appendCorrelated(dst, KeyQueryOffset, c.CorrelationID)
	return appendString(appendString(dst, c.Reference), c.Stream)
}

func decodeQueryOffset(r *reader, _ uint16) Command {
	return &QueryOffset{CorrelationID: r.u32(), Reference: r.str(), Stream: r.str()}
}

// QueryOffsetResponse gives the stored offset, or CodeNoOffset.
type QueryOffsetResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Offset        uint64
}

func (c *QueryOffsetResponse) Key() Key { return KeyQueryOffset | ResponseBit }

func (c *QueryOffsetResponse) Append(dst []byte) []byte {
	return appendU64(appendPlainResponse(dst, KeyQueryOffset, c.CorrelationID, c.Code), c.Offset)
}

func decodeQueryOffsetResponse(r *reader, _ uint16) Command {
	c := &QueryOffsetResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Offset = r.u64()
	}
	return c
}

// ConsumerUpdate is the server telling a single-active-consumer
// subscription that it became active or inactive.
type ConsumerUpdate struct {
	CorrelationID  uint32
	SubscriptionID uint8
	Active         bool
}

func (c *ConsumerUpdate) Key() Key { return KeyConsumerUpdate }

func (c *ConsumerUpdate) Append(dst []byte) []byte {
	var active uint8
	if c.Active {
		active = 1
	}
	return appendU8(appendU8(appendCorrelated(dst, KeyConsumerUpdate, c.CorrelationID), c.SubscriptionID), active)
}

func decodeConsumerUpdate(r *reader, _ uint16) Command {
	return &ConsumerUpdate{CorrelationID: r.u32(), SubscriptionID: r.u8(), Active: r.boolean()}
}

// ConsumerUpdateResponse is the client's answer: where the now active
// consumer starts (OffsetNone: where the server says).
type ConsumerUpdateResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Offset        OffsetSpec
}

func (c *ConsumerUpdateResponse) Key() Key { return KeyConsumerUpdate | ResponseBit }

func (c *ConsumerUpdateResponse) Append(dst []byte) []byte {
	return appendOffsetSpec(appendPlainResponse(dst, KeyConsumerUpdate, c.CorrelationID, c.Code), c.Offset)
}

func decodeConsumerUpdateResponse(r *reader, _ uint16) Command {
	c := &ConsumerUpdateResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Offset = r.offsetSpec(true)
	}
	return c
}

// ResolveOffsetSpec asks the server to turn an offset specification into
// an offset, with Subscribe's filter properties (and chunk_selector).
type ResolveOffsetSpec struct {
	CorrelationID uint32
	Stream        string
	Offset        OffsetSpec
	Properties    map[string]string
}

func (c *ResolveOffsetSpec) Key() Key { return KeyResolveOffsetSpec }

func (c *ResolveOffsetSpec) Append(dst []byte) []byte {
	dst = appendString(appendCorrelated(dst, KeyResolveOffsetSpec, c.CorrelationID), c.Stream)
	dst = appendOffsetSpec(dst, c.Offset)
	if len(c.Properties) > 0 {
		dst = appendMap(dst, c.Properties)
	}
	return dst
}

func decodeResolveOffsetSpec(r *reader, _ uint16) Command {
	return &ResolveOffsetSpec{
		CorrelationID: r.u32(),
		Stream:        r.str(),
		Offset:        r.offsetSpec(false),
		Properties:    r.optionalMap(),
	}
}

// ResolveOffsetSpecResponse gives the resolved offset; OffsetType is
// OffsetOffset today, and Offset is always sent.
type ResolveOffsetSpecResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	OffsetType    OffsetType
	Offset        uint64
}

func (c *ResolveOffsetSpecResponse) Key() Key { return KeyResolveOffsetSpec | ResponseBit }

func (c *ResolveOffsetSpecResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeyResolveOffsetSpec, c.CorrelationID, c.Code)
	return appendU64(appendU16(dst, uint16(c.OffsetType)), c.Offset)
}

func decodeResolveOffsetSpecResponse(r *reader, _ uint16) Command {
	c := &ResolveOffsetSpecResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.OffsetType = OffsetType(r.u16())
		c.Offset = r.u64()
	}
	return c
}
