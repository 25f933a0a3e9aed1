// Package protocol is Warren's AMQP 0-9-1 codec: frames, methods, field
// tables and content headers, as RabbitMQ speaks them. It is a pure codec:
// it knows nothing of brokers, starts no goroutines and logs nothing.
//
// # Reading
//
// A FrameReader splits a byte stream into frames. A MethodDecoder turns a
// method frame's payload into a Method; ParseContentHeader splits a header
// frame's payload into its fixed fields and the raw property list, which
// ScanProperties indexes and DecodeProperties decodes. Body frames are
// payload only.
//
// # Writing
//
// Encoders append to a caller's buffer and return it, so one buffer per
// connection serves every frame: AppendMethodFrame, AppendContentFrames,
// AppendHeartbeatFrame, or BeginFrame and EndFrame around any payload.
//
// # Methods
//
// methods_gen.go is generated from spec/amqp0-9-1.stripped.extended.xml
// (RabbitMQ's extended 0-9-1 spec) by internal/gen: one struct per method,
// named class then method in CamelCase (basic.publish is BasicPublish), with
// one field per argument named the same way (routing-key is RoutingKey,
// reserved-1 is Reserved1, Go initialisms for "id"). Two exceptions avoid
// clashes: the class-id and method-id arguments of connection.close and
// channel.close are FailingClassID and FailingMethodID, and confirm.select's
// "nowait" is NoWait like every other method's no-wait.
//
// Argument types map as:
//
//	bit       bool      (consecutive bits pack into octets, first bit lowest)
//	octet     uint8
//	short     uint16
//	long      uint32
//	longlong  uint64
//	timestamp uint64
//	shortstr  string
//	longstr   string    (may hold binary data)
//	table     Table
//
// # Field tables
//
// A Table maps names to values of these Go types, by wire type octet:
//
//	't' bool     'b' int8    'B' uint8    's' int16    'u' uint16
//	'I' int32    'i' uint32  'l' int64    'f' float32  'd' float64
//	'D' Decimal  'S' string  'x' []byte   'A' []any    'T' time.Time
//	'F' Table    'V' nil
//
// Decoding then encoding gives back the same bytes, except that keys come
// out sorted, a later duplicate key wins, and true is always sent as 1.
// RawTable reads a table in place, without decoding it, and accepts and
// reads tables exactly as DecodeTable does: one walk serves both.
// Encoding also accepts int (as 'l') and map[string]any (as 'F'). Tables
// and arrays nest at most 64 deep.
//
// # Invariants
//
//   - Frame.Payload aliases the FrameReader's buffer and is valid only
//     until the next ReadFrame. ContentHeader.Raw, PropertyView and
//     RawTable alias the bytes they were made from. Decoded strings, byte
//     arrays and tables never alias: they are copies.
//   - A MethodDecoder owns one value per method type and decodes into it
//     again on the next frame of that type, so a returned Method is valid
//     until then. String arguments equal to the previous ones are kept
//     rather than allocated again: decoding a stream of publishes to the
//     same exchange and routing key allocates nothing.
//   - Every length read from the wire is checked against the bytes present
//     before anything is allocated, and the FrameReader checks a frame's
//     size against frame_max before buffering it, so no input makes the
//     codec allocate more than a small multiple of its own size.
//   - The short strings of a method without content (names, keys, tags,
//     reply texts) are valid UTF-8 once decoded, as RabbitMQ checks them;
//     basic.publish's exchange and routing key, and long strings, are
//     not checked.
//   - Malformed input is reported as a value, never a panic:
//     *BadFrameError (reply code 501), *BadSyntaxError (502) and
//     *UnknownMethodError (503), each with a Code method and a Text ready
//     for connection.close. Method.Append panics only if a Table holds a Go
//     type with no wire form, a bug in the code that built it.
package protocol

//go:generate go run ./internal/gen
