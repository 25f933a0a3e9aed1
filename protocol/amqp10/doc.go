// Package amqp10 is Warren's codec for AMQP 1.0 messages, the messages
// inside RabbitMQ stream-protocol chunks, and their mapping to and from
// the AMQP 0-9-1 form Warren stores. It is a pure codec: bytes in, values
// out and back. It starts no goroutines and logs nothing.
//
// # Types
//
// Decode and AppendValue cover the type system of the OASIS AMQP 1.0
// specification, part 1. Each AMQP type decodes to one Go type (listed at
// Decode): uint64 is ulong and int64 long, []byte binary and string
// string, Symbol symbol, Timestamp (milliseconds) timestamp, UUID, Char,
// Decimal32/64/128 (raw bytes), []any list, Map map (entries in wire
// order), Array array (with its element code and descriptor) and
// Described. AppendValue picks the narrowest encoding of each value;
// arrays keep their decoded element code when their values fit it.
//
// # Messages
//
// Parse and Append handle a message as part 3 section 3.2 defines it:
// header, delivery-annotations, message-annotations, properties,
// application-properties, a body of data sections, amqp-sequence sections
// or one amqp-value section, and footer. Parse takes sections in that
// order only, each once (data and amqp-sequence may repeat), with code or
// symbol descriptors, and checks the type of every header and properties
// field. A message without a body parses (an empty body), since RabbitMQ
// stores what stream clients publish unparsed.
//
// # Invariants
//
//   - Decoding never panics and allocates at most a small multiple of the
//     input: lengths and counts are checked against the bytes left before
//     anything is allocated (elements of zero-width array types, which
//     take no bytes, are capped at 65536 per input), and nesting stops at
//     MaxDepth. Bad input is a *DecodeError with the offset and cause.
//   - Decoded values do not alias the input.
//   - Whatever parses encodes, and parses again to an equal message (equal
//     with reflect.DeepEqual, NaN floats aside) whose encoding is the same
//     bytes. Input in the narrowest encodings (as the golden tests write
//     them) encodes back to itself; wider encodings (a uint as 0x70, a
//     list32 where a list8 fits, as RabbitMQ's Go stream client writes
//     properties, or symbolic descriptors) come back narrowed, with the
//     same values and types. Absent and empty are kept apart throughout.
//   - Append panics only on values of Go types Decode never returns.
//
// # From AMQP 0-9-1 (FromAMQP091)
//
// What a stream-protocol consumer reads for a message published over
// 0-9-1, as rabbit_msg_record:from_amqp091 in RabbitMQ 3.10 builds it
// (SetRouting adds the x-exchange and x-routing-key message annotations
// RabbitMQ's stream queue adds):
//
//   - properties: message-id, correlation-id and reply-to as strings,
//     user-id as binary, content-type and content-encoding as symbols,
//     timestamp as creation-time (seconds times 1000). The section is left
//     out when none of these is set.
//   - application-properties: x-basic-type (type) and x-basic-app-id
//     (app-id) as strings, then the headers in key order. Header values
//     map by 0-9-1 type: longstr to string, byte array to binary, bool to
//     boolean, signed 8/16/32/64-bit to byte/short/int/long, unsigned
//     8/16/32-bit to ubyte/ushort/uint, float, double, timestamp to
//     timestamp (times 1000), void to null. Tables and arrays are dropped,
//     as RabbitMQ 3.10 drops them; decimals are dropped too (3.10 fails on
//     them). x- headers are ordinary headers. A header named x-basic-type
//     or x-basic-app-id stays beside the property of that name.
//   - message-annotations: x-basic-priority and x-basic-delivery-mode as
//     ubytes, x-basic-expiration as a string.
//   - one data section holding the body. cluster-id is dropped.
//
// # To AMQP 0-9-1 (ToAMQP091)
//
// What a 0-9-1 consumer of a stream receives for a message, as
// rabbit_msg_record:to_amqp091 in RabbitMQ 3.10 converts it, with 3.13's
// rules where 3.10 fails:
//
//   - message-id and correlation-id: a string as itself; a ulong in
//     decimal and a uuid as 8-4-4-4-12 hex, adding the header
//     x-message-id-type (x-correlation-id-type) "ulong" or "uuid"; a
//     binary in base64 with the type header "binary". A string or base64
//     text over 255 bytes goes raw into the header x-message-id
//     (x-correlation-id) and the property is left out (RabbitMQ's cut-off
//     is 256, one byte more than a 0-9-1 short string holds).
//   - user-id, reply-to, content-type, content-encoding as strings, left
//     out when over 255 bytes; creation-time as timestamp, divided by
//     1000. to, subject, absolute-expiry-time, group-id, group-sequence
//     and reply-to-group-id are dropped.
//   - application-properties: the first x-basic-type and x-basic-app-id
//     entries become type and app-id (if strings); the rest become headers
//     by the reverse of the table above (binary to byte array, timestamp
//     to seconds), the first entry of a key winning. Values of types
//     RabbitMQ 3.10 cannot convert (ulong, symbol, char, uuid, decimals,
//     list, map, array, described) are dropped, as are keys that are not
//     strings or are over 255 bytes.
//   - message-annotations: x-basic-priority and x-basic-delivery-mode
//     (any integer from 0 to 255) and x-basic-expiration (a string)
//     become properties; all others, x-exchange and x-routing-key
//     included, are dropped (Routing reads those two).
//   - body: a single data section is the body. No body section is an
//     empty body. Several data sections, amqp-sequence or amqp-value
//     (which RabbitMQ 3.10 cannot deliver) give as body the encoded body
//     sections and the type TypeAMQP10 ("amqp-1.0"), as 3.13 does.
//   - header, delivery-annotations and footer are ignored.
//
// # Round trips
//
// FromAMQP091 then ToAMQP091 gives back equal properties and body, except
// that cluster-id, table, array and decimal headers, and a headers
// property left empty by them, are lost, and a header named x-basic-type
// or x-basic-app-id becomes the property when that property was absent.
// Timestamps survive up to 2^63/1000 seconds.
//
// ToAMQP091 then FromAMQP091 keeps every 0-9-1 property and header
// ToAMQP091 produced, so converting to 0-9-1 again gives the same result.
// What did not reach 0-9-1 is gone, and FromAMQP091, like RabbitMQ 3.10,
// does not undo the id conversions: a ulong message-id comes back as the
// string "9876789" with an x-message-id-type header, and an amqp-value
// body as a data section holding the encoded section.
package amqp10
