package amqp10

import (
	"encoding/base64"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/warren/protocol"
)

// The names RabbitMQ 3.10 gives the 0-9-1 properties AMQP 1.0 has no
// field for, and the headers it adds for message ids 0-9-1 cannot hold.
const (
	keyType            = "x-basic-type"                  // application property, string
	keyAppID           = "x-basic-app-id"                // application property, string
	keyPriority        = Symbol("x-basic-priority")      // message annotation, ubyte
	keyDeliveryMode    = Symbol("x-basic-delivery-mode") // message annotation, ubyte
	keyExpiration      = Symbol("x-basic-expiration")    // message annotation, string
	keyExchange        = Symbol("x-exchange")            // message annotation, string
	keyRoutingKey      = Symbol("x-routing-key")         // message annotation, string
	hdrMessageIDType   = "x-message-id-type"
	hdrCorrelationType = "x-correlation-id-type"
	hdrMessageID       = "x-message-id"
	hdrCorrelationID   = "x-correlation-id"

	// TypeAMQP10 is the type property ToAMQP091 gives a message whose body
	// is not a single data section, as RabbitMQ 3.13 does.
	TypeAMQP10 = "amqp-1.0"
)

// shortStrMax is the longest string a 0-9-1 property (a short string)
// holds.
const shortStrMax = 255

// FromAMQP091 returns a message published over AMQP 0-9-1 as RabbitMQ
// 3.10 stores it in a stream, so as a stream-protocol consumer sees it;
// see the package doc for the mapping. The message aliases body and the
// byte-array header values.
func FromAMQP091(p protocol.Properties, body []byte) *Message {
	m := &Message{Data: [][]byte{body}}
	if body == nil {
		m.Data[0] = []byte{}
	}
	has := func(flag uint16) bool { return p.Flags&flag != 0 }

	var props Properties
	present := false
	str := func(flag uint16, s string) *string {
		if !has(flag) {
			return nil
		}
		present = true
		return &s
	}
	sym := func(flag uint16, s string) *Symbol {
		if !has(flag) {
			return nil
		}
		present = true
		y := Symbol(s)
		return &y
	}
	if has(protocol.FlagMessageID) {
		props.MessageID, present = p.MessageID, true
	}
	if has(protocol.FlagUserID) {
		props.UserID, present = []byte(p.UserID), true
	}
	props.ReplyTo = str(protocol.FlagReplyTo, p.ReplyTo)
	if has(protocol.FlagCorrelationID) {
		props.CorrelationID, present = p.CorrelationID, true
	}
	props.ContentType = sym(protocol.FlagContentType, p.ContentType)
	props.ContentEncoding = sym(protocol.FlagContentEncoding, p.ContentEncoding)
	if has(protocol.FlagTimestamp) {
		ts := Timestamp(int64(p.Timestamp) * 1000)
		props.CreationTime, present = &ts, true
	}
	if present {
		m.Properties = &props
	}

	var ap Map
	if has(protocol.FlagType) {
		ap = append(ap, MapEntry{keyType, p.Type})
	}
	if has(protocol.FlagAppID) {
		ap = append(ap, MapEntry{keyAppID, p.AppID})
	}
	if has(protocol.FlagHeaders) {
		keys := make([]string, 0, len(p.Headers))
		for k := range p.Headers {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if v, ok := fromHeader(p.Headers[k]); ok {
				ap = append(ap, MapEntry{k, v})
			}
		}
	}
	m.ApplicationProperties = ap

	var ma Map
	if has(protocol.FlagPriority) {
		ma = append(ma, MapEntry{keyPriority, p.Priority})
	}
	if has(protocol.FlagDeliveryMode) {
		ma = append(ma, MapEntry{keyDeliveryMode, p.DeliveryMode})
	}
	if has(protocol.FlagExpiration) {
		ma = append(ma, MapEntry{keyExpiration, p.Expiration})
	}
	m.MessageAnnotations = ma
	return m
}

// fromHeader converts a 0-9-1 header value to an application property
// value, as RabbitMQ 3.10's from_091 does; false for the values it drops
// (tables, arrays) or cannot convert (decimals).
func fromHeader(v any) (any, bool) {
	switch v := v.(type) {
	case string, []byte, int8, uint8, int16, uint16, int32, uint32, int64, float32, float64, bool, nil:
		if b, ok := v.([]byte); ok && b == nil {
			return []byte{}, true
		}
		return v, true
	case int:
		return int64(v), true
	case time.Time:
		return Timestamp(v.Unix() * 1000), true
	}
	return nil, false
}

// ToAMQP091 returns the properties and body an AMQP 0-9-1 consumer of a
// stream receives for m, as RabbitMQ 3.10 converts it (3.13 where 3.10
// fails); see the package doc for the mapping. The body aliases m's data
// section when there is exactly one.
func (m *Message) ToAMQP091() (protocol.Properties, []byte) {
	var p protocol.Properties
	set := func(flag uint16, dst *string, s string) {
		if len(s) <= shortStrMax {
			*dst = s
			p.Flags |= flag
		}
	}
	var headers protocol.Table
	header := func(k string, v any) {
		if headers == nil {
			headers = protocol.Table{}
		}
		headers[k] = v
	}

	// Application properties: x-basic-type and x-basic-app-id become
	// properties, the rest headers. The first entry of a key wins.
	ap := slices.Clone(m.ApplicationProperties)
	if v, ok := take(&ap, keyType); ok {
		if s, ok := v.(string); ok {
			set(protocol.FlagType, &p.Type, s)
		}
	}
	if v, ok := take(&ap, keyAppID); ok {
		if s, ok := v.(string); ok {
			set(protocol.FlagAppID, &p.AppID, s)
		}
	}
	for _, e := range ap {
		k, ok := e.Key.(string)
		if !ok || len(k) > shortStrMax {
			continue
		}
		if _, dup := headers[k]; dup {
			continue
		}
		if v, ok := toHeader(e.Value); ok {
			header(k, v)
		}
	}

	// Message annotations: the x-basic ones become properties, the rest
	// are dropped.
	if v, ok := m.MessageAnnotations.Get(keyPriority); ok {
		if n, ok := octet(v); ok {
			p.Priority, p.Flags = n, p.Flags|protocol.FlagPriority
		}
	}
	if v, ok := m.MessageAnnotations.Get(keyDeliveryMode); ok {
		if n, ok := octet(v); ok {
			p.DeliveryMode, p.Flags = n, p.Flags|protocol.FlagDeliveryMode
		}
	}
	if v, ok := m.MessageAnnotations.Get(keyExpiration); ok {
		if s, ok := v.(string); ok {
			set(protocol.FlagExpiration, &p.Expiration, s)
		}
	}

	if q := m.Properties; q != nil {
		if id, ok := idTo091(q.MessageID, hdrMessageID, hdrMessageIDType, header); ok {
			set(protocol.FlagMessageID, &p.MessageID, id)
		}
		if id, ok := idTo091(q.CorrelationID, hdrCorrelationID, hdrCorrelationType, header); ok {
			set(protocol.FlagCorrelationID, &p.CorrelationID, id)
		}
		if q.UserID != nil {
			set(protocol.FlagUserID, &p.UserID, string(q.UserID))
		}
		if q.ReplyTo != nil {
			set(protocol.FlagReplyTo, &p.ReplyTo, *q.ReplyTo)
		}
		if q.ContentType != nil {
			set(protocol.FlagContentType, &p.ContentType, string(*q.ContentType))
		}
		if q.ContentEncoding != nil {
			set(protocol.FlagContentEncoding, &p.ContentEncoding, string(*q.ContentEncoding))
		}
		if q.CreationTime != nil {
			p.Timestamp, p.Flags = uint64(int64(*q.CreationTime)/1000), p.Flags|protocol.FlagTimestamp
		}
	}
	if headers != nil {
		p.Headers, p.Flags = headers, p.Flags|protocol.FlagHeaders
	}

	if len(m.Data) == 1 && len(m.Sequence) == 0 && !m.HasValue {
		return p, m.Data[0]
	}
	if len(m.Data) == 0 && len(m.Sequence) == 0 && !m.HasValue {
		return p, nil
	}
	body := (&Message{Data: m.Data, Sequence: m.Sequence, Value: m.Value, HasValue: m.HasValue}).Append(nil)
	p.Type, p.Flags = TypeAMQP10, p.Flags|protocol.FlagType
	return p, body
}

// take removes the first entry with key k from *m and returns its value.
func take(m *Map, k string) (any, bool) {
	for i, e := range *m {
		if s, ok := e.Key.(string); ok && s == k {
			*m = slices.Delete(*m, i, i+1)
			return e.Value, true
		}
	}
	return nil, false
}

// octet returns v as a uint8 if it is an integer from 0 to 255.
func octet(v any) (uint8, bool) {
	var n int64
	switch v := v.(type) {
	case uint8:
		return v, true
	case uint16:
		n = int64(v)
	case uint32:
		n = int64(v)
	case uint64:
		if v > 255 {
			return 0, false
		}
		n = int64(v)
	case int8:
		n = int64(v)
	case int16:
		n = int64(v)
	case int32:
		n = int64(v)
	case int64:
		n = v
	default:
		return 0, false
	}
	if n < 0 || n > 255 {
		return 0, false
	}
	return uint8(n), true
}

// idTo091 converts a message-id or correlation-id as RabbitMQ 3.10's
// message_id does: a string as itself, a ulong in decimal and a uuid in
// its 36-character form with a type header ("ulong", "uuid"), a binary in
// base64 with the type header "binary". A string or base64 text too long
// for a short string goes, raw, into the header named by hdr instead
// (RabbitMQ's limit is 256 bytes, one more than a short string holds). It
// returns the property value and whether to set it.
func idTo091(id any, hdr, typeHdr string, header func(string, any)) (string, bool) {
	switch id := id.(type) {
	case string:
		if len(id) > shortStrMax {
			header(hdr, id)
			return "", false
		}
		return id, true
	case uint64:
		header(typeHdr, "ulong")
		return strconv.FormatUint(id, 10), true
	case UUID:
		header(typeHdr, "uuid")
		return id.String(), true
	case []byte:
		e := base64.StdEncoding.EncodeToString(id)
		if len(e) > shortStrMax {
			header(hdr, string(id))
			return "", false
		}
		header(typeHdr, "binary")
		return e, true
	}
	return "", false
}

// toHeader converts an application property value to a 0-9-1 header
// value, as RabbitMQ 3.10's to_091 does; false for the types it has no
// conversion for (ulong, symbol, char, uuid, decimals, lists, maps, arrays,
// described values), which RabbitMQ 3.10 fails on and Warren drops.
func toHeader(v any) (any, bool) {
	switch v := v.(type) {
	case string, int8, uint8, int16, uint16, int32, uint32, int64, float32, float64, bool, nil:
		return v, true
	case []byte:
		if len(v) == 0 {
			return []byte(nil), true // as protocol.DecodeTable gives an empty byte array
		}
		return v, true
	case Timestamp:
		return time.Unix(int64(v)/1000, 0).UTC(), true
	}
	return nil, false
}

// SetRouting records the exchange and routing key a message was published
// with, in the message annotations x-exchange and x-routing-key, as
// RabbitMQ 3.10 does when a message published over 0-9-1 enters a stream.
// It replaces any earlier ones.
func (m *Message) SetRouting(exchange, routingKey string) {
	ma := Map{{keyRoutingKey, routingKey}, {keyExchange, exchange}}
	for _, e := range m.MessageAnnotations {
		if !keyEqual(e.Key, keyExchange) && !keyEqual(e.Key, keyRoutingKey) {
			ma = append(ma, e)
		}
	}
	m.MessageAnnotations = ma
}

// Routing returns the exchange and routing key a 0-9-1 consumer of the
// stream named queue sees for m: the x-exchange and x-routing-key message
// annotations when they are strings, otherwise, as RabbitMQ 3.10 does for
// messages published over the stream protocol, the default exchange ("")
// and the stream's name.
func (m *Message) Routing(queue string) (exchange, routingKey string) {
	exchange, routingKey = "", queue
	if v, ok := m.MessageAnnotations.Get(keyExchange); ok {
		if s, ok := v.(string); ok {
			exchange = s
		}
	}
	if v, ok := m.MessageAnnotations.Get(keyRoutingKey); ok {
		if s, ok := v.(string); ok {
			routingKey = s
		}
	}
	return exchange, routingKey
}
