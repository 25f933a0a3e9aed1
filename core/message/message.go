// Package message holds the message as the broker carries it from the
// publishing channel through exchanges and queues to consumers.
//
// One Message value is shared by every queue it was routed to and by every
// consumer it is delivered to, so its content (exchange, routing key, flags,
// properties, body and what New decodes of them) is never written after New
// or NewFromClient returns; a message with other properties or another key is
// a new value (WithHeaders, WithRoutingKey). Two things are set later, each
// before the message is shared: ID, its storage id, which package queue
// sets on a persistent message stored once for several durable queues
// (queue.StoreShared, called by vhost's enqueue before any queue has it)
// and on one it rebuilds from the store (entryFromStore); and a pooled body's lender (Lend, body.go), whose holder
// count then changes atomically (Hold, Release, Pin). The property list is
// kept exactly as the publisher sent it (Flags and Props) and written back
// verbatim on delivery; only the few properties the broker acts on are decoded
// up front. Headers are decoded on first use, at most once, for the exchange
// types and dead-lettering that need them.
package message

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// NoTTL marks a message without an expiration property.
const NoTTL = -1

// Message is one published message.
type Message struct {
	Exchange   string
	RoutingKey string
	Flags      uint16 // basic property flags as received
	// holds counts the holders of a body lent by bodies (body.go), with
	// its pinned bit; it sits here, in Flags' padding, so a Message
	// stays 128 bytes.
	holds atomic.Int32
	Props []byte // raw property list as received
	Body  []byte

	Persistent bool   // delivery-mode 2
	Priority   uint8  // 0 when absent
	TTL        int64  // per-message expiration in ms, NoTTL when absent
	ID         uint64 // storage id; 0 until a store assigns one

	headers atomic.Pointer[protocol.Table]
	bodies  *Bodies // when set, lent Body (holds)
}

// MaxTTL is the longest expiration, x-message-ttl or x-expires RabbitMQ
// accepts, in ms: ten years. Anything longer is refused at the door with
// 406, and nothing longer ever reaches a queue's timers.
const MaxTTL = 315_360_000_000

// NewFromClient builds a message a client published. props and body are
// retained, not copied: the caller hands them over. It fails with 406 when
// the expiration property is not an integer in [0, MaxTTL], in RabbitMQ's
// words, and with 502 when the property list does not decode.
func NewFromClient(exchange, routingKey string, flags uint16, props, body []byte) (*Message, error) {
	return build(exchange, routingKey, flags, props, body, true)
}

// New builds a message the broker already holds: read back from the store,
// released from a delay, or republished by dead-lettering. It checks what
// NewFromClient checks, except that an expiration above MaxTTL (which an
// older Warren let in) counts as MaxTTL rather than failing, so such a
// message is never lost to a restart.
func New(exchange, routingKey string, flags uint16, props, body []byte) (*Message, error) {
	return build(exchange, routingKey, flags, props, body, false)
}

func build(exchange, routingKey string, flags uint16, props, body []byte, fromClient bool) (*Message, error) {
	m := &Message{Exchange: exchange, RoutingKey: routingKey, Flags: flags, Props: props, Body: body, TTL: NoTTL}
	if flags == 0 {
		return m, nil
	}
	if flags == FlagAMQP10 && !fromClient {
		m.Persistent = true // a stream's, read back; props is its filter value
		return m, nil
	}
	view, err := protocol.ScanProperties(flags, props)
	if err != nil {
		return nil, &reply.Error{Code: protocol.SyntaxError, Text: err.Error()}
	}
	m.Persistent = view.DeliveryMode() == 2
	m.Priority = view.Priority()
	if exp, ok := view.Expiration(); ok {
		ttl, why, tooLarge := parseExpiry(exp)
		if why != "" && (fromClient || !tooLarge) {
			return nil, expirationError(exp, why)
		}
		m.TTL = ttl
	}
	return m, nil
}

// FlagAMQP10 marks a message the stream protocol published: its body is
// the AMQP 1.0 message as the client encoded it (protocol/amqp10), and it
// has no AMQP 0-9-1 properties: its Props hold its filter value
// (StreamFilterValue), empty without one. It is bit 0 of the property flags, which
// AMQP 0-9-1 never sets on basic properties (it would announce a second
// flags word), so no message a client published over AMQP carries it.
// Only a stream takes such a message, and it converts it for an AMQP
// 0-9-1 reader; nothing writes it to an AMQP socket as it is.
const FlagAMQP10 = 0x0001

// NewAMQP10 builds a message the stream protocol published to the stream
// named routingKey, with filterValue ("" for none, as publish v1 gives):
// body is the AMQP 1.0 message, retained, not copied. It is persistent,
// as everything a stream keeps is.
func NewAMQP10(routingKey, filterValue string, body []byte) *Message {
	m := &Message{RoutingKey: routingKey, Flags: FlagAMQP10, Body: body, Persistent: true, TTL: NoTTL}
	if filterValue != "" {
		m.Props = []byte(filterValue)
	}
	return m
}

// IsAMQP10 reports whether m is an AMQP 1.0 message (FlagAMQP10).
func (m *Message) IsAMQP10() bool { return m.Flags == FlagAMQP10 }

// StreamFilterHeader is the header that gives an AMQP 0-9-1 message its
// stream filter value, as RabbitMQ 3.13 reads it.
const StreamFilterHeader = "x-stream-filter-value"

// StreamFilterValue is the value a stream's filtering (RabbitMQ 3.13's)
// matches m by: the filter value a stream-protocol publisher gave it, or
// an AMQP 0-9-1 message's StreamFilterHeader when a string; "" when it
// has none.
func (m *Message) StreamFilterValue() string {
	if m.IsAMQP10() {
		return string(m.Props)
	}
	switch v := m.Headers()[StreamFilterHeader].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

// ParseExpiration reads an expiration property as RabbitMQ does: a decimal
// count of milliseconds up to MaxTTL. Anything else is 406, in RabbitMQ's
// words.
func ParseExpiration(s string) (int64, error) {
	ttl, why, _ := parseExpiry(s)
	if why != "" {
		return 0, expirationError(s, why)
	}
	return ttl, nil
}

func expirationError(s, why string) error {
	return reply.PreconditionFailed("invalid expiration '%s': %s", s, why)
}

// parseExpiry reads s the way RabbitMQ does (Erlang's string:to_integer,
// then rabbit_misc:check_expiry). why is RabbitMQ's reason term when s is
// refused, "" otherwise; a value above MaxTTL is refused with tooLarge set
// and ttl = MaxTTL.
func parseExpiry(s string) (ttl int64, why string, tooLarge bool) {
	start := 0
	if start < len(s) && (s[start] == '+' || s[start] == '-') {
		start++
	}
	end := start
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	switch {
	case end == start:
		return 0, "no_integer", false
	case end < len(s):
		return 0, fmt.Sprintf("{leftover_string,%q}", s[end:]), false
	}
	digits := strings.TrimLeft(s[start:end], "0")
	if digits == "" {
		return 0, "", false
	}
	if s[0] == '-' {
		return 0, "{value_negative,-" + digits + "}", false
	}
	// MaxTTL has 12 digits: a longer number is too large, and a shorter one
	// parses without overflow.
	if len(digits) <= 12 {
		if n, _ := strconv.ParseInt(digits, 10, 64); n <= MaxTTL {
			return n, "", false
		}
	}
	return MaxTTL, "{value_too_large," + digits + "}", true
}

// View indexes the property list. New has validated it already, so the
// error can only come from a Message built by hand.
func (m *Message) View() (protocol.PropertyView, error) {
	return protocol.ScanProperties(m.Flags, m.Props)
}

// Headers returns the decoded headers table, nil when there is none. A
// table that does not decode reads as empty: New has validated the lengths,
// so that only happens to field types we do not know.
func (m *Message) Headers() protocol.Table {
	if m.Flags&protocol.FlagHeaders == 0 {
		return nil
	}
	if t := m.headers.Load(); t != nil {
		return *t
	}
	view, err := m.View()
	if err != nil {
		return nil
	}
	t, err := view.Headers()
	if err != nil {
		t = protocol.Table{}
	}
	m.headers.Store(&t)
	return t
}

// RawHeaders reads the headers table where it lies, for lookups that need
// not decode it; the empty table when there is none. A table that does not
// decode reads as empty, as in Headers.
func (m *Message) RawHeaders() protocol.RawTable {
	if m.Flags&protocol.FlagHeaders == 0 {
		return protocol.RawTable{}
	}
	view, err := m.View()
	if err != nil {
		return protocol.RawTable{}
	}
	raw, _ := view.HeadersRaw()
	t, err := protocol.ScanTable(raw)
	if err != nil {
		return protocol.RawTable{}
	}
	return t
}

// Properties decodes the whole property list, for the rare paths that must
// rewrite it (dead-lettering adds x-death).
func (m *Message) Properties() (protocol.Properties, error) {
	return protocol.DecodeProperties(m.Flags, m.Props)
}

// Size is the body size, the figure length limits in bytes count.
func (m *Message) Size() int { return len(m.Body) }

// MemSize is the memory the body holds: a pooled body's whole buffer, which
// its size class makes up to a fifth larger than the body, else the body.
// It does not change while the message lives, so a queue may count it in
// and out.
func (m *Message) MemSize() int {
	if m.bodies != nil {
		return cap(m.Body)
	}
	return len(m.Body)
}

// WithProperties returns a copy of m carrying new properties, for the
// broker's own republishes (dead-lettering, delayed delivery). The body is
// shared, which is safe because messages are immutable; a pooled body is
// pinned, since the copy does not count as its holder.
func (m *Message) WithProperties(exchange, routingKey string, p *protocol.Properties) (*Message, error) {
	m.Pin()
	props, err := p.Append(nil)
	if err != nil {
		return nil, reply.Internal("re-encoding properties: %v", err)
	}
	return New(exchange, routingKey, p.Flags, props, m.Body)
}

// WithHeader is m with the header name set to value, the others kept (a
// quorum queue's x-delivery-count, a stream's x-stream-offset); m itself
// when its properties do not decode.
func (m *Message) WithHeader(name string, value any) *Message {
	p, err := m.Properties()
	if err != nil {
		return m
	}
	h := make(protocol.Table, len(p.Headers)+1)
	for k, v := range p.Headers {
		h[k] = v
	}
	h[name] = value
	p.Headers = h
	p.Flags |= protocol.FlagHeaders
	if out, err := m.WithProperties(m.Exchange, m.RoutingKey, &p); err == nil {
		return out
	}
	return m
}

// SenderKeys returns the extra routing keys a publisher chose with the CC
// and BCC headers (RabbitMQ's sender-selected distribution): arrays of
// strings, each an additional routing key. Most messages have neither, and
// a byte search of the raw properties rules that out without decoding.
func (m *Message) SenderKeys() (cc, bcc []string) {
	if m.Flags&protocol.FlagHeaders == 0 || !bytes.Contains(m.Props, []byte("CC")) {
		return nil, nil
	}
	h := m.Headers()
	return stringArray(h["CC"]), stringArray(h["BCC"])
}

func stringArray(v any) []string {
	arr, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		if s, ok := protocol.TextValue(e); ok {
			out = append(out, s)
		}
	}
	return out
}

// WithRoutingKey returns a shallow copy of m that routes under another key.
// It is only for asking exchanges where the key leads; the copy is never
// stored or delivered.
func (m *Message) WithRoutingKey(key string) *Message {
	return &Message{Exchange: m.Exchange, RoutingKey: key, Flags: m.Flags, Props: m.Props, Body: m.Body,
		Persistent: m.Persistent, Priority: m.Priority, TTL: m.TTL}
}

// WithHeaders returns m with its headers changed: each entry of set
// replaces the header of that name or is added, and a nil value removes
// it. The properties are re-encoded; m itself is not changed.
func (m *Message) WithHeaders(set protocol.Table) (*Message, error) {
	if len(set) == 0 {
		return m, nil
	}
	p, err := m.Properties()
	if err != nil {
		return nil, err
	}
	headers := make(protocol.Table, len(p.Headers)+len(set))
	for k, v := range p.Headers {
		headers[k] = v
	}
	for k, v := range set {
		if v == nil {
			delete(headers, k)
		} else {
			headers[k] = v
		}
	}
	p.Headers = headers
	if len(headers) > 0 {
		p.Flags |= protocol.FlagHeaders
	} else {
		p.Flags &^= protocol.FlagHeaders
		p.Headers = nil
	}
	return m.WithProperties(m.Exchange, m.RoutingKey, &p)
}

// WithoutHeaders returns m with the named headers removed, re-encoding its
// properties; m itself when it has none of them.
func (m *Message) WithoutHeaders(names ...string) (*Message, error) {
	h := m.Headers()
	found := false
	for _, n := range names {
		if _, ok := h[n]; ok {
			found = true
		}
	}
	if !found {
		return m, nil
	}
	p, err := m.Properties()
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		delete(p.Headers, n)
	}
	return m.WithProperties(m.Exchange, m.RoutingKey, &p)
}
