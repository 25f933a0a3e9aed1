// Package mqtt is Warren's codec for MQTT 3.1, 3.1.1 and 5.0, the
// protocol core/mqtt serves on port 1883 and over WebSocket. It is a pure
// codec: packets in, packets out. It knows nothing of sessions or
// brokers, starts no goroutines and logs nothing.
//
// It follows the OASIS standards MQTT Version 3.1.1 (2014) and MQTT
// Version 5.0 (2019), and IBM's MQTT V3.1 for the "MQIsdp" protocol;
// requirement numbers such as [MQTT-3.1.2-3] are theirs. Where they leave
// a choice open, the choice is written down beside the code and in the
// list below.
//
// # Packets
//
// A packet is a fixed header, a type (4 bits), flags (4 bits) and the
// remaining length (a Variable Byte Integer, 1 to 4 bytes), then a body.
// A PacketReader splits a byte stream into whole packets, refusing any
// over its limit before reading it. Decode turns a packet into a Packet;
// a packet's Append encodes one into a caller's buffer. Every packet type
// is a struct named after it: Connect (with its Will), Connack, Publish,
// Puback, Pubrec, Pubrel, Pubcomp, Subscribe (of Subscriptions), Suback,
// Unsubscribe, Unsuback, Pingreq, Pingresp, Disconnect and Auth.
//
// # Versions
//
// The body's layout depends on the protocol version, which only CONNECT
// carries: Decode takes the session's version (0 before CONNECT, when
// only a CONNECT decodes) and Append the version to write. The versions
// differ in the protocol name ("MQIsdp" for 3.1), in 5.0's properties
// (after the variable header of most packets and before a will) and reason
// codes (in CONNACK, the acknowledgements, DISCONNECT and AUTH), in the
// SUBSCRIBE options 5.0 adds, and in AUTH, which only 5.0 has. Encoding in
// an older version leaves out what it lacks.
//
// # Properties
//
// Properties holds a 5.0 property list with a field per property; a
// property is present when its field is not zero, or when its bit in
// Zeros says it was sent as zero. User Properties keep their order and
// may repeat, as may Subscription Identifiers in PUBLISH. Decoding checks
// each property against the packet it is in (table 2-4), repetitions,
// and each value's range.
//
// # Errors
//
// A packet that does not decode is a *DecodeError naming the packet, the
// byte where decoding stopped, what is wrong (ErrTruncated, ErrFlags,
// ErrUTF8, ErrDuplicateProperty, ErrTopicFilter, ...) and the 5.0 reason
// code a server answers with: Malformed Packet when the bytes do not
// parse, Protocol Error when they parse to something not allowed, and a
// more precise code where the specification gives one (Topic Name
// invalid, Topic Filter invalid, Topic Alias invalid). A CONNECT of an
// unknown protocol is an *UnsupportedVersionError (Unsupported Protocol
// Version, or return code 1 before 5.0), a packet over the limit a
// *PacketTooLargeError (Packet too large). CodeOf gives the reason code
// of any of them.
//
// # Choices where the specifications are open or silent
//
//   - A Variable Byte Integer in more bytes than it needs is refused in
//     every version: 5.0 forbids it ([MQTT-1.5.5-1]) and 3.1.1 shows only
//     minimal encodings; the fixed header is read before the version is
//     known.
//   - UTF-8 strings must be well-formed and hold no U+0000; the control
//     characters and non-characters that SHOULD NOT be sent are accepted.
//   - MQTT 3.1 may set DUP on a PUBREL, SUBSCRIBE or UNSUBSCRIBE it sends
//     again; in 3.1 those flags (0b1010) are accepted. Every other fixed
//     header flag is checked in every version.
//   - The password-without-user-name rule of 3.1.1 ([MQTT-3.1.2-22]) is
//     applied to 3.1 too, as brokers do; 5.0 allows it.
//   - A topic name with a wildcard, in PUBLISH or a will, is Topic Name
//     invalid (0x90); an empty one without a Topic Alias is a Protocol
//     Error, as 5.0 says. A malformed topic filter, or shared
//     subscription, is Topic Filter invalid (0x8F) and ends the
//     connection: SUBACK's per-filter 0x8F is for filters that are well
//     formed but not allowed.
//   - A reason code a packet may not carry is a Protocol Error, as is a
//     3.1.1 CONNACK return code above 5 and a SUBACK or UNSUBACK without
//     codes. Session Present with a refusal is refused too.
//   - A Payload Format Indicator other than 0 or 1 is a Protocol Error,
//     as the specification says of the other Byte flags. A Response
//     Topic with wildcards is a Protocol Error.
//   - An AUTH of remaining length 1 (a reason code without properties)
//     is refused: only an empty AUTH may leave out the Authentication
//     Method.
//   - The 3.1 CONNACK's first byte, reserved in 3.1, is read as 3.1.1's
//     Session Present.
//   - The client identifier's length and characters, a second CONNECT,
//     the direction a packet type travels, Topic Alias ranges and
//     Receive Maximum are the server's to check: they depend on the
//     session or on policy, not on the bytes.
//
// # Invariants
//
//   - Decoding never panics, whatever the input, and never allocates more
//     than a small multiple of the packet's size.
//   - Decoded byte slices (payloads, passwords, Correlation and
//     Authentication Data) alias the packet, so a publish is not copied
//     on its way to a queue; strings are copies. Empty byte slices decode
//     as nil.
//   - Decoding then encoding gives a packet that decodes to an equal
//     value. The bytes may differ: properties are written in identifier
//     order and the short forms are chosen where they apply.
//   - Encoding writes what it is given, without the checks Decode makes,
//     so tests can build what a decoder must refuse. It panics only on a
//     value no packet can hold: a string or binary field over 65,535
//     bytes, a Variable Byte Integer over MaxVarInt, a QoS over 3, an AUTH
//     before 5.0, a CONNECT without a known Version.
package mqtt
