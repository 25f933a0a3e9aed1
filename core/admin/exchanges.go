package admin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablejson"
	"github.com/warrenmq/warren/protocol"
)

func (a *api) routeExchanges(mux *router) {
	a.handle(mux, "GET /api/exchanges", management, a.exchanges)
	a.handle(mux, "GET /api/exchanges/{vhost}", management, a.exchanges)
	a.handle(mux, "GET /api/exchanges/{vhost}/{exchange}", management, a.exchange)
	a.handle(mux, "PUT /api/exchanges/{vhost}/{exchange}", management, a.putExchange)
	a.handle(mux, "DELETE /api/exchanges/{vhost}/{exchange}", management, a.deleteExchange)
	a.handle(mux, "POST /api/exchanges/{vhost}/{exchange}/publish", management, a.publish)
	a.handle(mux, "GET /api/exchanges/{vhost}/{exchange}/bindings/source", management, a.exchangeBindings)
	a.handle(mux, "GET /api/exchanges/{vhost}/{exchange}/bindings/destination", management, a.exchangeBindings)
	a.handle(mux, "GET /api/exchanges/{vhost}/{exchange}/delayed", management, a.heldMessages)
	a.handle(mux, "DELETE /api/exchanges/{vhost}/{exchange}/delayed", management, a.purgeHeld)
}

// exchangeName reads the exchange in the path: RabbitMQ writes the
// default exchange, whose name is "", as amq.default.
func exchangeName(c *call) string {
	if n := c.path("exchange"); n != "amq.default" {
		return n
	}
	return ""
}

// exchangeJSON is an exchange as RabbitMQ lists it. type_info is Warren's:
// what a plugin exchange type says about the exchange.
type exchangeJSON struct {
	Arguments  map[string]any `json:"arguments"`
	AutoDelete bool           `json:"auto_delete"`
	Durable    bool           `json:"durable"`
	Internal   bool           `json:"internal"`
	// MessagesDelayed is Warren's: the messages the exchange holds for
	// delayed routing. Shown for exchanges of plugin types (which may
	// hold) and any holding messages; RabbitMQ shows nothing of the kind.
	MessagesDelayed *int           `json:"messages_delayed,omitempty"`
	MessageStats    map[string]any `json:"message_stats,omitempty"`
	Name            string         `json:"name"`
	Policy          string         `json:"policy,omitempty"`
	Type            string         `json:"type"`
	TypeInfo        any            `json:"type_info,omitempty"`
	VHost           string         `json:"vhost"`
}

func exchangeView(x vhost.ExchangeInfo) exchangeJSON {
	e := exchangeJSON{
		Arguments: tablejson.Render(x.Args), AutoDelete: x.AutoDelete, Durable: x.Durable, Internal: x.Internal,
		MessageStats: messageStats(x.Counters, x.Rates), Name: x.Name, Policy: x.Policy, Type: x.Type, VHost: x.VHost,
	}
	if x.Info != nil {
		e.TypeInfo = tablejson.Value(x.Info) // a plugin's description may hold floats
	}
	if x.MayHold || x.Held > 0 {
		n := x.Held
		e.MessagesDelayed = &n
	}
	return e
}

var exchangeLister = lister[exchangeJSON]{
	name: func(x exchangeJSON) string { return x.Name },
	field: func(x exchangeJSON, key string) (any, bool) {
		switch key {
		case "vhost":
			return x.VHost, true
		case "type":
			return x.Type, true
		}
		return nil, false
	},
}

func (a *api) exchanges(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	var out []exchangeJSON
	for _, v := range vs {
		for _, x := range v.Exchanges() {
			out = append(out, exchangeView(x))
		}
	}
	return list(out, p, exchangeLister, same)
}

// findExchange returns one exchange's snapshot.
func findExchange(v *vhost.VHost, name string) (vhost.ExchangeInfo, bool) {
	for _, x := range v.Exchanges() {
		if x.Name == name {
			return x, true
		}
	}
	return vhost.ExchangeInfo{}, false
}

func (a *api) exchange(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	x, ok := findExchange(v, exchangeName(c))
	if !ok {
		return nil, errNotFound
	}
	// RabbitMQ adds per-link rates here in detailed mode; Warren has none.
	return struct {
		exchangeJSON
		Incoming []any `json:"incoming"`
		Outgoing []any `json:"outgoing"`
	}{exchangeView(x), []any{}, []any{}}, nil
}

// declareVHost is the vhost a PUT declares in (RabbitMQ's 404
// vhost_not_found when there is none, a 401 when the user may not use it),
// with the request's body decoded into body.
func (c *call) declareVHost(body any) (*vhost.VHost, error) {
	v, ok := c.a.b.VHost(c.path("vhost"))
	if !ok {
		return nil, &reply.Error{Code: protocol.NotFound, Text: "vhost_not_found"}
	}
	if !c.mayUse(v.Name) {
		return nil, notAuthorised(notInVHost)
	}
	return v, decode(c.r, body)
}

// exchangeBody is PUT /api/exchanges/{vhost}/{exchange}'s body; the type
// defaults to direct, as RabbitMQ's does.
type exchangeBody struct {
	Type       string         `json:"type"`
	Durable    flag           `json:"durable"`
	AutoDelete flag           `json:"auto_delete"`
	Internal   flag           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

func (a *api) putExchange(c *call) (any, error) {
	var body exchangeBody
	v, err := c.declareVHost(&body)
	if err != nil {
		return nil, err
	}
	if body.Type == "" {
		body.Type = "direct"
	}
	name := exchangeName(c)
	_, existed := findExchange(v, name)
	args := amqpTable(body.Arguments)
	g := c.grant(v.Name)
	if err := allow(g, g.DeclareExchange(name, args, !existed), refusedPlain); err != nil {
		return nil, err
	}
	_, err = v.DeclareExchange(exchange.Definition{Name: name, Type: body.Type, Durable: bool(body.Durable),
		AutoDelete: bool(body.AutoDelete), Internal: bool(body.Internal), Args: args}, false)
	if err != nil {
		if e, ok := err.(*reply.Error); ok && e.Code == protocol.CommandInvalid {
			// RabbitMQ's words, from its HTTP API.
			return nil, badRequest("unknown exchange type '%s'", body.Type)
		}
		return nil, err
	}
	return createdOrUpdated(!existed)
}

func (a *api) deleteExchange(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	name := exchangeName(c)
	if _, ok := findExchange(v, name); !ok {
		return nil, errNotFound // before the permission, as RabbitMQ
	}
	g := c.grant(v.Name)
	if err := allow(g, g.DeleteExchange(name), refusedPlain); err != nil {
		return nil, err
	}
	return nil, v.DeleteExchange(name, c.query("if-unused") == "true")
}

func (a *api) exchangeBindings(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	// RabbitMQ 3.10.8 lists nothing, rather than a 404, for a missing
	// exchange here.
	name := exchangeName(c)
	asSource := c.r.URL.Path[len(c.r.URL.Path)-len("source"):] == "source"
	return sortedBindings(bindingsOf(v, name == "", func(b vhost.BindingInfo) bool {
		if asSource {
			return b.Source == name
		}
		return b.Destination.Kind == exchange.ToExchange && b.Destination.Name == name
	})), nil
}

// publishBody is POST /api/exchanges/{vhost}/{exchange}/publish's body.
type publishBody struct {
	Properties      map[string]any `json:"properties"`
	RoutingKey      *string        `json:"routing_key"`
	Payload         *string        `json:"payload"`
	PayloadEncoding *string        `json:"payload_encoding"`
}

// publish publishes one message as a client would, and answers whether it
// was routed to a queue. Like RabbitMQ's, it is not mandatory and not
// confirmed: a persistent message is on its way to the disk when the
// answer comes.
func (a *api) publish(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	var body publishBody
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"routing_key", body.RoutingKey != nil}, field{"payload", body.Payload != nil},
		field{"payload_encoding", body.PayloadEncoding != nil}); err != nil {
		return nil, err
	}
	var payload []byte
	switch *body.PayloadEncoding {
	case "string":
		payload = []byte(*body.Payload)
	case "base64":
		if payload, err = base64.StdEncoding.DecodeString(*body.Payload); err != nil {
			return nil, badRequest("field 'payload' is not valid base64: %v", err)
		}
	default:
		return nil, badRequest("field 'payload_encoding' must be string or base64, not %q", *body.PayloadEncoding)
	}
	props, err := propertiesFromJSON(body.Properties)
	if err != nil {
		return nil, err
	}
	raw, err := props.Append(nil)
	if err != nil {
		return nil, badRequest("properties: %v", err)
	}
	name := exchangeName(c)
	// Permission before existence, as RabbitMQ.
	g := c.grant(v.Name)
	if err := allow(g, g.Publish(name), refusedPublish); err != nil {
		return nil, err
	}
	x, err := v.FindExchange(name)
	if err != nil {
		// RabbitMQ answers a missing exchange here with a 400.
		if e, ok := err.(*reply.Error); ok {
			return nil, badRequest("%d %s", e.Code, e.Text)
		}
		return nil, err
	}
	if x.Internal {
		return nil, reply.AccessRefused("cannot publish to internal exchange '%s' in vhost '%s'", name, v.Name)
	}
	if x.Type == exchange.TypeTopic {
		if err := allow(g, g.PublishTopic(name, *body.RoutingKey), refusedPublish); err != nil {
			return nil, err
		}
	}
	m, err := message.NewFromClient(name, *body.RoutingKey, props.Flags, raw, payload)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	out, err := v.Publish(x, m, &vhost.RouteBuffers{})
	if err != nil {
		return nil, err
	}
	v.Counters.Inc(stats.Publish)
	if !out.Routed() {
		v.Counters.Inc(stats.DropUnroutable)
	}
	return map[string]bool{"routed": out.Routed()}, nil
}

// propertiesFromJSON reads RabbitMQ's properties object: the basic
// properties by their snake_case names, headers as an object; an integer
// field that is not one, or a string field that is not a string, is a 400
// naming it. Unknown names are ignored.
func propertiesFromJSON(m map[string]any) (protocol.Properties, error) {
	var p protocol.Properties
	str := func(key string, flag uint16, dst *string) error {
		v, ok := m[key]
		if !ok {
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return badRequest("property '%s' must be a string", key)
		}
		*dst = s
		p.Flags |= flag
		return nil
	}
	integer := func(key string, flag uint16, max int64) (int64, error) {
		v, ok := m[key]
		if !ok {
			return 0, nil
		}
		n, isNum := v.(json.Number)
		i, err := n.Int64()
		if !isNum || err != nil || i < 0 || i > max {
			return 0, badRequest("property '%s' must be an integer from 0 to %d", key, max)
		}
		p.Flags |= flag
		return i, nil
	}
	for _, s := range []struct {
		key  string
		flag uint16
		dst  *string
	}{
		{"content_type", protocol.FlagContentType, &p.ContentType},
		{"content_encoding", protocol.FlagContentEncoding, &p.ContentEncoding},
		{"correlation_id", protocol.FlagCorrelationID, &p.CorrelationID},
		{"reply_to", protocol.FlagReplyTo, &p.ReplyTo},
		{"expiration", protocol.FlagExpiration, &p.Expiration},
		{"message_id", protocol.FlagMessageID, &p.MessageID},
		{"type", protocol.FlagType, &p.Type},
		{"user_id", protocol.FlagUserID, &p.UserID},
		{"app_id", protocol.FlagAppID, &p.AppID},
		{"cluster_id", protocol.FlagClusterID, &p.ClusterID},
	} {
		if err := str(s.key, s.flag, s.dst); err != nil {
			return p, err
		}
	}
	dm, err := integer("delivery_mode", protocol.FlagDeliveryMode, 255)
	if err != nil {
		return p, err
	}
	prio, err := integer("priority", protocol.FlagPriority, 255)
	if err != nil {
		return p, err
	}
	ts, err := integer("timestamp", protocol.FlagTimestamp, 1<<62)
	if err != nil {
		return p, err
	}
	p.DeliveryMode, p.Priority, p.Timestamp = uint8(dm), uint8(prio), uint64(ts)
	if h, ok := m["headers"]; ok {
		obj, ok := h.(map[string]any)
		if !ok {
			return p, badRequest("property 'headers' must be an object")
		}
		p.Headers = amqpTable(obj)
		p.Flags |= protocol.FlagHeaders
	}
	return p, nil
}

// propertiesJSON shows a message's properties as RabbitMQ's get does:
// snake_case names, headers as an object, absent ones left out.
func propertiesJSON(flags uint16, raw []byte) map[string]any {
	out := map[string]any{}
	if flags == 0 {
		return out
	}
	p, err := protocol.DecodeProperties(flags, raw)
	if err != nil {
		out["error"] = fmt.Sprintf("undecodable properties: %v", err)
		return out
	}
	set := func(flag uint16, key string, v any) {
		if flags&flag != 0 {
			out[key] = v
		}
	}
	set(protocol.FlagContentType, "content_type", p.ContentType)
	set(protocol.FlagContentEncoding, "content_encoding", p.ContentEncoding)
	set(protocol.FlagHeaders, "headers", tablejson.Render(p.Headers))
	set(protocol.FlagDeliveryMode, "delivery_mode", p.DeliveryMode)
	set(protocol.FlagPriority, "priority", p.Priority)
	set(protocol.FlagCorrelationID, "correlation_id", p.CorrelationID)
	set(protocol.FlagReplyTo, "reply_to", p.ReplyTo)
	set(protocol.FlagExpiration, "expiration", p.Expiration)
	set(protocol.FlagMessageID, "message_id", p.MessageID)
	set(protocol.FlagTimestamp, "timestamp", p.Timestamp)
	set(protocol.FlagType, "type", p.Type)
	set(protocol.FlagUserID, "user_id", p.UserID)
	set(protocol.FlagAppID, "app_id", p.AppID)
	set(protocol.FlagClusterID, "cluster_id", p.ClusterID)
	return out
}

// heldJSON is one held message, shaped like an item of RabbitMQ's
// get-messages answer, with when it is due.
type heldJSON struct {
	Due             string         `json:"due"`    // RFC 3339, UTC, ms
	DueMs           int64          `json:"due_ms"` // unix ms
	Via             string         `json:"via"`    // the type it is routed with when due
	Exchange        string         `json:"exchange"`
	RoutingKey      string         `json:"routing_key"`
	Properties      map[string]any `json:"properties"`
	Durable         bool           `json:"durable"` // survives a restart
	PayloadBytes    int            `json:"payload_bytes"`
	Payload         string         `json:"payload"`
	PayloadEncoding string         `json:"payload_encoding"`
}

// heldPreview is how much of each payload a listing shows.
const heldPreview = 256

// heldMessages lists the messages an exchange holds, in due order and
// paged as other listings are (?page, ?page_size; without ?page the first
// page of 100). Payloads are shown up to 256 bytes (?truncate=N for
// another limit), as strings when they are valid UTF-8, else base64.
func (a *api) heldMessages(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	if !p.paged {
		p.page = 1
	}
	preview := heldPreview
	if t := c.query("truncate"); t != "" {
		if _, err := fmt.Sscan(t, &preview); err != nil || preview < 0 {
			return nil, badRequest("truncate must be a number of bytes")
		}
	}
	g := c.grant(v.Name)
	if err := allow(g, g.ReadHeld(exchangeName(c)), refusedWithText); err != nil {
		return nil, err
	}
	list, total, err := v.HeldMessages(exchangeName(c), (p.page-1)*p.size, p.size)
	if err != nil {
		if e, ok := err.(*reply.Error); ok && e.Code == protocol.NotFound {
			return nil, errNotFound
		}
		return nil, err
	}
	items := make([]heldJSON, 0, len(list))
	for _, h := range list {
		m := h.Message
		body := m.Body[:min(len(m.Body), preview)]
		item := heldJSON{Due: h.Due.UTC().Format("2006-01-02T15:04:05.000Z07:00"), DueMs: h.Due.UnixMilli(), Via: h.Via,
			Exchange: m.Exchange, RoutingKey: m.RoutingKey, Properties: propertiesJSON(m.Flags, m.Props),
			Durable: h.Durable, PayloadBytes: len(m.Body), Payload: string(body), PayloadEncoding: "string"}
		if !utf8.Valid(body) {
			item.Payload, item.PayloadEncoding = base64.StdEncoding.EncodeToString(body), "base64"
		}
		items = append(items, item)
	}
	return pageAnswer[heldJSON]{FilteredCount: total, ItemCount: len(items), Items: items, Page: p.page,
		PageCount: (total + p.size - 1) / p.size, PageSize: p.size, TotalCount: total}, nil
}

// purgeHeld drops every message an exchange holds and answers how many.
func (a *api) purgeHeld(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	g := c.grant(v.Name)
	if err := allow(g, g.ReadHeld(exchangeName(c)), refusedWithText); err != nil {
		return nil, err
	}
	n, err := v.PurgeHeld(exchangeName(c))
	if err != nil {
		if e, ok := err.(*reply.Error); ok && e.Code == protocol.NotFound {
			return nil, errNotFound
		}
		return nil, err
	}
	return map[string]int{"message_count": n}, nil
}
