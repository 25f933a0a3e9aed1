package stream

// The publishing side: DeclarePublisher, Publish, PublishConfirm,
// PublishError, QueryPublisherSequence and DeletePublisher.

// DeclarePublisher declares a publisher on a stream. A non-empty
// Reference (at most 256 characters) names the publisher for
// deduplication across connections.
type DeclarePublisher struct {
	CorrelationID uint32
	PublisherID   uint8
	Reference     string
	Stream        string
}

func (c *DeclarePublisher) Key() Key { return KeyDeclarePublisher }

func (c *DeclarePublisher) Append(dst []byte) []byte {
	dst = appendU8(appendCorrelated(dst, KeyDeclarePublisher, c.CorrelationID), c.PublisherID)
	return appendString(appendString(dst, c.Reference), c.Stream)
}

func decodeDeclarePublisher(r *reader, _ uint16) Command {
	return &DeclarePublisher{CorrelationID: r.u32(), PublisherID: r.u8(), Reference: r.str(), Stream: r.str()}
}

// DeclarePublisherResponse answers DeclarePublisher.
type DeclarePublisherResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *DeclarePublisherResponse) Key() Key { return KeyDeclarePublisher | ResponseBit }

func (c *DeclarePublisherResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyDeclarePublisher, c.CorrelationID, c.Code)
}

func decodeDeclarePublisherResponse(r *reader, _ uint16) Command {
	return &DeclarePublisherResponse{CorrelationID: r.u32(), Code: r.code()}
}

// PublishedMessage is one message of a Publish. Message is opaque to the
// broker (clients send AMQP 1.0 encoded messages) and aliases the frame
// once decoded.
//
// Clients batching with sub-entries send a SubBatch instead of a single
// message: Message then holds SubBatch.Records messages, compressed as
// SubBatch.Compression says, each behind a uint32 length; the broker
// stores it as one chunk entry. RabbitMQ accepts sub-batches in Publish
// version 1 only.
type PublishedMessage struct {
	PublishingID uint64
	FilterValue  string // version 2 only; empty is sent as null, no filter value
	SubBatch     *SubBatch
	Message      []byte
}

// Publish carries messages from a declared publisher; the server answers
// with PublishConfirm or PublishError. Version 2 gives each message a
// filter value.
type Publish struct {
	Version     uint16 // 1 or 2; 0 means 1
	PublisherID uint8
	Messages    []PublishedMessage
}

func (c *Publish) Key() Key { return KeyPublish }

func (c *Publish) Append(dst []byte) []byte {
	v := max(c.Version, 1)
	dst = appendU8(appendHeader(dst, KeyPublish, v), c.PublisherID)
	dst = appendU32(dst, uint32(len(c.Messages)))
	for i := range c.Messages {
		m := &c.Messages[i]
		dst = appendU64(dst, m.PublishingID)
		if v >= 2 {
			dst = appendNullString(dst, m.FilterValue)
		}
		dst = AppendEntry(dst, Entry{SubBatch: m.SubBatch, Body: m.Message})
	}
	return dst
}

func decodePublish(r *reader, version uint16) Command {
	c := &Publish{Version: version, PublisherID: r.u8()}
	minSize := 8 + 4 // publishing id, message length
	if version >= 2 {
		minSize += 2 // filter value length
	}
	n := r.count(minSize)
	if n == 0 {
		return c
	}
	c.Messages = make([]PublishedMessage, 0, n)
	for range n {
		m := PublishedMessage{PublishingID: r.u64()}
		if version >= 2 {
			m.FilterValue = r.str()
		}
		m.SubBatch, m.Message = r.entry()
		c.Messages = append(c.Messages, m)
	}
	return c
}

// PublishConfirm confirms messages by publishing id.
type PublishConfirm struct {
	PublisherID   uint8
	PublishingIDs []uint64
}

func (c *PublishConfirm) Key() Key { return KeyPublishConfirm }

func (c *PublishConfirm) Append(dst []byte) []byte {
	dst = appendU8(appendHeader(dst, KeyPublishConfirm, 1), c.PublisherID)
	dst = appendU32(dst, uint32(len(c.PublishingIDs)))
	for _, id := range c.PublishingIDs {
		dst = appendU64(dst, id)
	}
	return dst
}

func decodePublishConfirm(r *reader, _ uint16) Command {
	c := &PublishConfirm{PublisherID: r.u8()}
	if n := r.count(8); n > 0 {
		c.PublishingIDs = make([]uint64, 0, n)
		for range n {
			c.PublishingIDs = append(c.PublishingIDs, r.u64())
		}
	}
	return c
}

// PublishingError is one rejected message: its publishing id and why.
type PublishingError struct {
	PublishingID uint64
	Code         ResponseCode
}

// PublishError rejects messages.
type PublishError struct {
	PublisherID uint8
	Errors      []PublishingError
}

func (c *PublishError) Key() Key { return KeyPublishError }

func (c *PublishError) Append(dst []byte) []byte {
	dst = appendU8(appendHeader(dst, KeyPublishError, 1), c.PublisherID)
	dst = appendU32(dst, uint32(len(c.Errors)))
	for _, e := range c.Errors {
		dst = appendU16(appendU64(dst, e.PublishingID), uint16(e.Code))
	}
	return dst
}

func decodePublishError(r *reader, _ uint16) Command {
	c := &PublishError{PublisherID: r.u8()}
	if n := r.count(10); n > 0 {
		c.Errors = make([]PublishingError, 0, n)
		for range n {
			c.Errors = append(c.Errors, PublishingError{PublishingID: r.u64(), Code: r.code()})
		}
	}
	return c
}

// QueryPublisherSequence asks for the last publishing id stored for a
// named publisher on a stream.
type QueryPublisherSequence struct {
	CorrelationID uint32
	Reference     string
	Stream        string
}

func (c *QueryPublisherSequence) Key() Key { return KeyQueryPublisherSequence }

func (c *QueryPublisherSequence) Append(dst []byte) []byte {
	dst = appendCorrelated(dst, KeyQueryPublisherSequence, c.CorrelationID)
	return appendString(appendString(dst, c.Reference), c.Stream)
}

func decodeQueryPublisherSequence(r *reader, _ uint16) Command {
	return &QueryPublisherSequence{CorrelationID: r.u32(), Reference: r.str(), Stream: r.str()}
}

// QueryPublisherSequenceResponse gives the sequence (0 if none stored).
type QueryPublisherSequenceResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Sequence      uint64
}

func (c *QueryPublisherSequenceResponse) Key() Key { return KeyQueryPublisherSequence | ResponseBit }

func (c *QueryPublisherSequenceResponse) Append(dst []byte) []byte {
	return appendU64(appendPlainResponse(dst, KeyQueryPublisherSequence, c.CorrelationID, c.Code), c.Sequence)
}

func decodeQueryPublisherSequenceResponse(r *reader, _ uint16) Command {
	c := &QueryPublisherSequenceResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Sequence = r.u64()
	}
	return c
}

// DeletePublisher deletes a publisher.
type DeletePublisher struct {
	CorrelationID uint32
	PublisherID   uint8
}

func (c *DeletePublisher) Key() Key { return KeyDeletePublisher }

func (c *DeletePublisher) Append(dst []byte) []byte {
	return appendU8(appendCorrelated(dst, KeyDeletePublisher, c.CorrelationID), c.PublisherID)
}

func decodeDeletePublisher(r *reader, _ uint16) Command {
	return &DeletePublisher{CorrelationID: r.u32(), PublisherID: r.u8()}
}

// DeletePublisherResponse answers DeletePublisher.
type DeletePublisherResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *DeletePublisherResponse) Key() Key { return KeyDeletePublisher | ResponseBit }

func (c *DeletePublisherResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyDeletePublisher, c.CorrelationID, c.Code)
}

func decodeDeletePublisherResponse(r *reader, _ uint16) Command {
	return &DeletePublisherResponse{CorrelationID: r.u32(), Code: r.code()}
}
