// Package stream is Warren's codec for the RabbitMQ stream protocol, the
// binary protocol RabbitMQ's rabbitmq_stream plugin serves on port 5552.
// It is a pure codec: frames and commands in, frames and commands out. It
// knows nothing of brokers, starts no goroutines and logs nothing; the
// server front end builds on it.
//
// It follows rabbitmq-server's deps/rabbitmq_stream/docs/PROTOCOL.adoc,
// and where the document is silent or loose, what RabbitMQ's
// rabbit_stream_core.erl reads and writes.
//
// # Frames
//
// A frame is a uint32 size, then the key (uint16), the version (uint16)
// and the command's fields, all big-endian. A response's key is its
// request's with ResponseBit (0x8000) set. Strings have an int16 length,
// bytes an int32 length (-1 is null for both), arrays an int32 count.
//
// A FrameReader splits a byte stream into frames, refusing any over its
// limit (the negotiated frame_max) before reading it. Decode turns a
// frame into a Command; AppendFrame, or a command's Append, encodes one
// into a caller's buffer.
//
// # Commands
//
// Each command is a struct named after it, its response named with
// "Response" after it: DeclarePublisher, Publish (versions 1 and 2, with
// filter values), PublishConfirm, PublishError, QueryPublisherSequence,
// DeletePublisher, Subscribe (offset specifications first, last, next,
// offset and timestamp, and properties), Deliver (versions 1 and 2, with
// the committed chunk id), Credit, StoreOffset, QueryOffset, Unsubscribe,
// Create, Delete, Metadata, MetadataUpdate, PeerProperties, SaslHandshake,
// SaslAuthenticate, Tune, Open, Close, Heartbeat, Route, Partitions,
// ConsumerUpdate, ExchangeCommandVersions, StreamStats, CreateSuperStream,
// DeleteSuperStream and ResolveOffsetSpec, keys 0x0001 to 0x001f, every
// one in version 1 and Publish and Deliver in version 2 as well.
//
// The commands PROTOCOL.adoc marks as one-way have no response type. The
// document leaves out the responses of Subscribe, Create, Delete,
// CreateSuperStream and DeleteSuperStream; they carry a correlation id and
// a code, as RabbitMQ sends them. Where the document and RabbitMQ differ, this package does as
// RabbitMQ does: DeclarePublisher's reference is a string, not an array;
// CreditResponse has no correlation id; Subscribe's and
// ResolveOffsetSpec's properties and OpenResponse's may be left out when
// empty; a response may stop after its code.
//
// # Chunks
//
// Deliver carries an OSIRIS chunk, left raw: a 48-byte ChunkHeader and
// the data entries, each a simple entry (one message) or a sub-batch
// (several, maybe compressed). Published messages have the same layout,
// so a Publish's messages become a chunk's entries unchanged. AppendChunk
// and AppendEntry build chunks; ParseChunk and ReadEntry read them.
//
// # Invariants
//
//   - Decoding never panics, whatever the input, and never allocates
//     more than a small multiple of the frame's size: every length and
//     count is checked against the bytes left before anything is
//     allocated for it.
//   - Malformed input is an error value: *UnknownCommandError for an
//     unknown key, *UnsupportedVersionError for an unknown version,
//     *DecodeError (wrapping ErrTruncated, ErrNegativeLength,
//     ErrCountTooLarge, ErrTrailingBytes or ErrBadValue) for fields that
//     do not decode, *FrameTooLargeError for a frame over the limit. Each
//     has a Code method giving the response code to close the connection
//     with.
//   - Decoded byte slices (messages, chunks, SASL data) alias the frame,
//     so a publish is not copied on its way to storage; strings and maps
//     are copies. Empty byte slices, maps and arrays decode as nil, and
//     null strings as "".
//   - Decoding then encoding gives a frame that decodes to an equal
//     value. The bytes may differ: map keys are sorted, null strings and
//     empty ones are one, and optional fields follow RabbitMQ's choice.
//   - Encoding panics only on a value no frame can hold (a string over
//     32767 bytes, a message over 2^31-1), a bug in the caller.
package stream
