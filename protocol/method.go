package protocol

// Method is an AMQP method: one struct per method in methods_gen.go.
type Method interface {
	ClassID() uint16
	MethodID() uint16
	Name() string      // e.g. "basic.publish"
	HasContent() bool  // a content header and body frames follow it
	Synchronous() bool // the spec marks it synchronous: a reply is expected
	// Decode decodes the arguments, the payload after the class and method
	// ids. On error the receiver's fields are unspecified.
	Decode(args []byte) error
	// Append appends the class id, method id and arguments.
	Append(buf []byte) []byte
}
