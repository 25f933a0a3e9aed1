package amqp10

import (
	"fmt"
)

// Section descriptor codes, AMQP 1.0 part 3 section 3.2.
const (
	DescriptorHeader                = 0x70
	DescriptorDeliveryAnnotations   = 0x71
	DescriptorMessageAnnotations    = 0x72
	DescriptorProperties            = 0x73
	DescriptorApplicationProperties = 0x74
	DescriptorData                  = 0x75
	DescriptorAMQPSequence          = 0x76
	DescriptorAMQPValue             = 0x77
	DescriptorFooter                = 0x78
)

// sectionNames are the symbolic descriptors of the sections, by code less
// DescriptorHeader; Parse accepts them in place of the codes.
var sectionNames = [...]Symbol{
	"amqp:header:list",
	"amqp:delivery-annotations:map",
	"amqp:message-annotations:map",
	"amqp:properties:list",
	"amqp:application-properties:map",
	"amqp:data:binary",
	"amqp:amqp-sequence:list",
	"amqp:amqp-value:*",
	"amqp:footer:map",
}

// Message is an AMQP 1.0 message: the bare message a client sends, with
// the annotations around it. A nil pointer, nil Map or nil slice is a
// section that is absent; an empty, non-nil one is present and empty.
type Message struct {
	Header                *Header
	DeliveryAnnotations   Map // keys are Symbols or uint64s
	MessageAnnotations    Map // keys are Symbols or uint64s
	Properties            *Properties
	ApplicationProperties Map // keys are strings, values simple types

	// The body is one or more data sections, one or more amqp-sequence
	// sections, or one amqp-value section; a message with none has an
	// empty body. A message should use one kind; Append writes them in
	// this order if it has several, and Parse refuses that.
	Data     [][]byte
	Sequence [][]any
	Value    any
	HasValue bool // Value is present (it may be nil, a null value)

	Footer Map
}

// Header is the header section. A nil field is absent, and the receiver
// takes the spec's default: not durable, priority 4, no TTL, not first
// acquirer, delivery count 0.
type Header struct {
	Durable       *bool
	Priority      *uint8
	TTL           *uint32 // milliseconds
	FirstAcquirer *bool
	DeliveryCount *uint32
}

// Properties is the properties section. A nil field is absent.
type Properties struct {
	MessageID          any    // nil, uint64, UUID, []byte or string
	UserID             []byte // nil: absent
	To                 *string
	Subject            *string
	ReplyTo            *string
	CorrelationID      any // as MessageID
	ContentType        *Symbol
	ContentEncoding    *Symbol
	AbsoluteExpiryTime *Timestamp
	CreationTime       *Timestamp
	GroupID            *string
	GroupSequence      *uint32
	ReplyToGroupID     *string
}

var (
	headerFields     = [...]string{"durable", "priority", "ttl", "first-acquirer", "delivery-count"}
	propertiesFields = [...]string{"message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
		"content-type", "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
		"group-sequence", "reply-to-group-id"}
)

// Parse decodes a message: its sections in the order the spec gives,
// each at most once except data and amqp-sequence, which may repeat, and
// one kind of body. Section descriptors may be codes or symbols. The
// message does not alias b. Anything else is a *DecodeError.
func Parse(b []byte) (*Message, error) {
	var d decoder
	m := &Message{}
	last := -1 // the last section's code less DescriptorHeader
	for off := 0; off < len(b); {
		v, n, err := d.value(b[off:], off, 0)
		if err != nil {
			return nil, err
		}
		s, ok := v.(Described)
		if !ok {
			return nil, errorf(off, ErrBadSection, "a %s where a section should start", typeName(v))
		}
		code := sectionCode(s.Descriptor)
		if code < 0 {
			return nil, errorf(off, ErrBadSection, "unknown section descriptor %v", s.Descriptor)
		}
		repeat := code == last && (code == DescriptorData-DescriptorHeader || code == DescriptorAMQPSequence-DescriptorHeader)
		isBody := func(c int) bool {
			return c >= DescriptorData-DescriptorHeader && c <= DescriptorAMQPValue-DescriptorHeader
		}
		if code <= last && !repeat || isBody(code) && isBody(last) && code != last {
			return nil, errorf(off, ErrBadSection, "section %s after %s", sectionNames[code], sectionNames[last])
		}
		if err := m.setSection(code+DescriptorHeader, s.Value); err != nil {
			return nil, errorf(off, ErrBadSection, "%s: %v", sectionNames[code], err)
		}
		last = code
		off += n
	}
	return m, nil
}

// sectionCode returns the section's code less DescriptorHeader, -1 if the
// descriptor names no section.
func sectionCode(desc any) int {
	switch d := desc.(type) {
	case uint64:
		if d >= DescriptorHeader && d <= DescriptorFooter {
			return int(d - DescriptorHeader)
		}
	case Symbol:
		for i, name := range sectionNames {
			if d == name {
				return i
			}
		}
	}
	return -1
}

func (m *Message) setSection(code int, v any) error {
	switch code {
	case DescriptorHeader:
		f, err := fields(v, len(headerFields))
		if err != nil {
			return err
		}
		h := &Header{}
		m.Header = h
		return firstError(
			field(f, 0, headerFields[:], &h.Durable),
			field(f, 1, headerFields[:], &h.Priority),
			field(f, 2, headerFields[:], &h.TTL),
			field(f, 3, headerFields[:], &h.FirstAcquirer),
			field(f, 4, headerFields[:], &h.DeliveryCount))
	case DescriptorDeliveryAnnotations, DescriptorMessageAnnotations, DescriptorApplicationProperties, DescriptorFooter:
		mp, ok := v.(Map)
		if !ok {
			return fmt.Errorf("a %s, not a map", typeName(v))
		}
		switch code {
		case DescriptorDeliveryAnnotations:
			m.DeliveryAnnotations = mp
		case DescriptorMessageAnnotations:
			m.MessageAnnotations = mp
		case DescriptorApplicationProperties:
			m.ApplicationProperties = mp
		default:
			m.Footer = mp
		}
		return nil
	case DescriptorProperties:
		f, err := fields(v, len(propertiesFields))
		if err != nil {
			return err
		}
		p := &Properties{}
		m.Properties = p
		names := propertiesFields[:]
		var userID *[]byte
		err = firstError(
			messageID(f, 0, &p.MessageID),
			field(f, 1, names, &userID),
			field(f, 2, names, &p.To),
			field(f, 3, names, &p.Subject),
			field(f, 4, names, &p.ReplyTo),
			messageID(f, 5, &p.CorrelationID),
			field(f, 6, names, &p.ContentType),
			field(f, 7, names, &p.ContentEncoding),
			field(f, 8, names, &p.AbsoluteExpiryTime),
			field(f, 9, names, &p.CreationTime),
			field(f, 10, names, &p.GroupID),
			field(f, 11, names, &p.GroupSequence),
			field(f, 12, names, &p.ReplyToGroupID))
		if userID != nil {
			p.UserID = *userID
		}
		return err
	case DescriptorData:
		b, ok := v.([]byte)
		if !ok {
			return fmt.Errorf("a %s, not a binary", typeName(v))
		}
		m.Data = append(m.Data, b)
	case DescriptorAMQPSequence:
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("a %s, not a list", typeName(v))
		}
		m.Sequence = append(m.Sequence, l)
	case DescriptorAMQPValue:
		m.Value, m.HasValue = v, true
	}
	return nil
}

// fields returns a composite's list of fields, at most max of them.
func fields(v any, max int) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("a %s, not a list", typeName(v))
	}
	if len(l) > max {
		return nil, fmt.Errorf("%d fields, at most %d defined", len(l), max)
	}
	return l, nil
}

// field sets *dst to point at field i of f if it is present and not null,
// and fails if it is not of type T.
func field[T any](f []any, i int, names []string, dst **T) error {
	if i >= len(f) || f[i] == nil {
		return nil
	}
	x, ok := f[i].(T)
	if !ok {
		var want T
		return fmt.Errorf("field %s is a %s, not a %s", names[i], typeName(f[i]), typeName(want))
	}
	*dst = &x
	return nil
}

// messageID sets *dst to field i of f, which must be a message-id: ulong,
// uuid, binary or string.
func messageID(f []any, i int, dst *any) error {
	if i >= len(f) || f[i] == nil {
		return nil
	}
	switch f[i].(type) {
	case uint64, UUID, []byte, string:
		*dst = f[i]
		return nil
	}
	return fmt.Errorf("field %s is a %s, not a ulong, uuid, binary or string", propertiesFields[i], typeName(f[i]))
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// typeName names v's AMQP type, for errors.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case uint8:
		return "ubyte"
	case uint16:
		return "ushort"
	case uint32:
		return "uint"
	case uint64:
		return "ulong"
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "int"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case Decimal32:
		return "decimal32"
	case Decimal64:
		return "decimal64"
	case Decimal128:
		return "decimal128"
	case Char:
		return "char"
	case Timestamp:
		return "timestamp"
	case UUID:
		return "uuid"
	case []byte:
		return "binary"
	case string:
		return "string"
	case Symbol:
		return "symbol"
	case []any:
		return "list"
	case Map:
		return "map"
	case Array:
		return "array"
	case Described:
		return "described value"
	}
	return fmt.Sprintf("Go %T", v)
}

// Append appends m's sections in the spec's order, each with its code as
// descriptor and the narrowest encodings (see AppendValue); composites
// leave out their trailing absent fields. Parsing what it appends gives a
// message equal to m. Append panics if m holds a value of a Go type Decode
// never returns, or an array whose values share no type: a bug in the
// caller, as every message Parse or FromAMQP091 returns encodes.
func (m *Message) Append(buf []byte) []byte {
	buf, err := m.append(buf)
	if err != nil {
		panic(err)
	}
	return buf
}

func (m *Message) append(buf []byte) ([]byte, error) {
	var err error
	sec := func(code byte, v any) {
		if err == nil {
			buf, err = AppendValue(append(buf, codeDescribed, codeSmallUlong, code), v)
		}
	}
	if h := m.Header; h != nil {
		sec(DescriptorHeader, composite(opt(h.Durable), opt(h.Priority), opt(h.TTL), opt(h.FirstAcquirer), opt(h.DeliveryCount)))
	}
	if m.DeliveryAnnotations != nil {
		sec(DescriptorDeliveryAnnotations, m.DeliveryAnnotations)
	}
	if m.MessageAnnotations != nil {
		sec(DescriptorMessageAnnotations, m.MessageAnnotations)
	}
	if p := m.Properties; p != nil {
		var userID any
		if p.UserID != nil {
			userID = p.UserID
		}
		sec(DescriptorProperties, composite(p.MessageID, userID, opt(p.To), opt(p.Subject), opt(p.ReplyTo),
			p.CorrelationID, opt(p.ContentType), opt(p.ContentEncoding), opt(p.AbsoluteExpiryTime),
			opt(p.CreationTime), opt(p.GroupID), opt(p.GroupSequence), opt(p.ReplyToGroupID)))
	}
	if m.ApplicationProperties != nil {
		sec(DescriptorApplicationProperties, m.ApplicationProperties)
	}
	for _, d := range m.Data {
		if d == nil {
			d = []byte{}
		}
		sec(DescriptorData, d)
	}
	for _, s := range m.Sequence {
		if s == nil {
			s = []any{}
		}
		sec(DescriptorAMQPSequence, s)
	}
	if m.HasValue {
		sec(DescriptorAMQPValue, m.Value)
	}
	if m.Footer != nil {
		sec(DescriptorFooter, m.Footer)
	}
	return buf, err
}

// opt returns *p, or nil (null) if p is nil.
func opt[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// composite returns a composite's fields as a list without its trailing
// nulls, which the spec lets an encoder leave out.
func composite(f ...any) []any {
	for len(f) > 0 && f[len(f)-1] == nil {
		f = f[:len(f)-1]
	}
	return f
}
