package admin

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablejson"
	"github.com/warrenmq/warren/protocol"
)

func (a *api) routeBindings(mux *router) {
	a.handle(mux, "GET /api/bindings", management, a.bindings)
	a.handle(mux, "GET /api/bindings/{vhost}", management, a.bindings)
	for _, kind := range []struct {
		letter string
		kind   exchange.DestKind
	}{{"q", exchange.ToQueue}, {"e", exchange.ToExchange}} {
		base := "/api/bindings/{vhost}/e/{source}/" + kind.letter + "/{dest}"
		k := kind.kind
		a.handle(mux, "GET "+base, management, func(c *call) (any, error) { return a.bindingsBetween(c, k) })
		a.handle(mux, "POST "+base, management, func(c *call) (any, error) { return a.postBinding(c, k) })
		a.handle(mux, "GET "+base+"/{props}", management, func(c *call) (any, error) { return a.binding(c, k) })
		a.handle(mux, "DELETE "+base+"/{props}", management, func(c *call) (any, error) { return a.deleteBinding(c, k) })
	}
}

// bindingJSON is a binding as RabbitMQ lists it.
type bindingJSON struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
	PropertiesKey   string         `json:"properties_key"`

	args protocol.Table // for deleting it
}

// bindingsOf lists a vhost's bindings that keep reports true, with the
// default exchange's implicit binding to every queue (source "", the
// queue's name as the key) when withDefault is set, as RabbitMQ lists
// them.
func bindingsOf(v *vhost.VHost, withDefault bool, keep func(vhost.BindingInfo) bool) []bindingJSON {
	var all []vhost.BindingInfo
	if withDefault {
		for _, q := range v.QueueNames() {
			all = append(all, vhost.BindingInfo{Destination: exchange.Destination{Kind: exchange.ToQueue, Name: q}, Key: q})
		}
	}
	all = append(all, v.Bindings()...)
	out := make([]bindingJSON, 0, len(all))
	for _, b := range all {
		if keep != nil && !keep(b) {
			continue
		}
		out = append(out, bindingJSON{
			Source: b.Source, VHost: v.Name, Destination: b.Destination.Name,
			DestinationType: b.Destination.Kind.String(), RoutingKey: b.Key, Arguments: tablejson.Render(b.Args),
			PropertiesKey: propertiesKey(b.Key, b.Args), args: b.Args,
		})
	}
	return out
}

// sortedBindings orders bindings as RabbitMQ lists them: by source, then
// destination, its type, the routing key and the properties key.
func sortedBindings(bs []bindingJSON) []bindingJSON {
	slices.SortStableFunc(bs, func(a, b bindingJSON) int {
		for _, c := range [][2]string{{a.Source, b.Source}, {a.Destination, b.Destination},
			{a.DestinationType, b.DestinationType}, {a.RoutingKey, b.RoutingKey}, {a.PropertiesKey, b.PropertiesKey}} {
			if r := strings.Compare(c[0], c[1]); r != 0 {
				return r
			}
		}
		return 0
	})
	return bs
}

func (a *api) bindings(c *call) (any, error) {
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	out := []bindingJSON{}
	for _, v := range vs {
		out = append(out, sortedBindings(bindingsOf(v, true, nil))...)
	}
	return out, nil
}

// between lists the bindings from the path's source to its destination.
func between(c *call, v *vhost.VHost, kind exchange.DestKind) []bindingJSON {
	source, dest := sourceName(c), c.path("dest")
	return sortedBindings(bindingsOf(v, source == "", func(b vhost.BindingInfo) bool {
		return b.Source == source && b.Destination.Kind == kind && b.Destination.Name == dest
	}))
}

// sourceName reads the source exchange in the path (amq.default is "").
func sourceName(c *call) string {
	if s := c.path("source"); s != "amq.default" {
		return s
	}
	return ""
}

// bindingsBetween lists them; RabbitMQ 3.10.8 answers an empty list, not
// a 404, when the source or destination does not exist.
func (a *api) bindingsBetween(c *call, kind exchange.DestKind) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	return between(c, v, kind), nil
}

// bindingBody is POST /api/bindings/...'s body.
type bindingBody struct {
	RoutingKey string         `json:"routing_key"`
	Arguments  map[string]any `json:"arguments"`
}

// postBinding binds and answers 201 with the new binding's address
// relative to the request's, as RabbitMQ's Location header has it.
func (a *api) postBinding(c *call, kind exchange.DestKind) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	var body bindingBody
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	dest := exchange.Destination{Kind: kind, Name: c.path("dest")}
	if err := bindAllowed(c, v, sourceName(c), dest, body.RoutingKey); err != nil {
		return nil, err
	}
	args := amqpTable(body.Arguments)
	if err := v.Bind(sourceName(c), dest, body.RoutingKey, args, ownerOf(v, dest)); err != nil {
		return nil, err
	}
	loc := quotePlus(dest.Name) + "/" + quotePlus(propertiesKey(body.RoutingKey, args))
	return &answer{status: http.StatusCreated, location: loc}, nil
}

// bindAllowed checks a bind or unbind as the AMQP channel does: the
// user's permissions on both ends, then, from a topic exchange, the key
// against their topic permission on it (RabbitMQ 3.10.8's management API
// answers that refusal as any other: 401 "Access refused.").
func bindAllowed(c *call, v *vhost.VHost, source string, dest exchange.Destination, key string) error {
	g := c.grant(v.Name)
	if err := allow(g, g.Bind(source, dest.Kind.String(), dest.Name), refusedPlain); err != nil {
		return err
	}
	if x, err := v.Exchange(source); err == nil && x.Type == exchange.TypeTopic {
		return allow(g, g.BindTopic(source, key), refusedPlain)
	}
	return nil
}

// ownerOf is nil: the API binds as a connection of its own would, so
// another connection's exclusive queue is refused as RabbitMQ refuses it.
func ownerOf(*vhost.VHost, exchange.Destination) any { return nil }

// findBinding is the binding between the path's ends with the path's
// properties key. The key is compared unquoted, as RabbitMQ 3.10.8
// compares it, so a client may send the properties key ("a.%2A") or the
// plain routing key ("a.*"; rabbit-hole's DeleteBinding does).
func findBinding(c *call, kind exchange.DestKind) (*vhost.VHost, bindingJSON, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, bindingJSON{}, err
	}
	props := unquoteProps(c.path("props"))
	for _, b := range between(c, v, kind) {
		if unquoteProps(b.PropertiesKey) == props {
			return v, b, nil
		}
	}
	return nil, bindingJSON{}, errNotFound
}

// unquoteProps undoes quotePlus; what does not unquote stays as it is.
func unquoteProps(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

func (a *api) binding(c *call, kind exchange.DestKind) (any, error) {
	_, b, err := findBinding(c, kind)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (a *api) deleteBinding(c *call, kind exchange.DestKind) (any, error) {
	v, b, err := findBinding(c, kind)
	if err != nil {
		return nil, err
	}
	dest := exchange.Destination{Kind: kind, Name: b.Destination}
	if err := bindAllowed(c, v, b.Source, dest, b.RoutingKey); err != nil {
		return nil, err
	}
	return nil, v.Unbind(b.Source, dest, b.RoutingKey, b.args, ownerOf(v, dest))
}

// propertiesKey is RabbitMQ's properties_key, a binding's name among the
// bindings between the same two ends, used in its URL:
//
//   - "~" for an empty routing key without arguments;
//   - the routing key, quoted, without arguments;
//   - the quoted routing key, "~", and a quoted hash of the arguments.
//
// Quoting is RabbitMQ's quote_plus (letters, digits and "-_." kept, a
// space as "+", every other byte as %XX in upper case) with "~" written
// %7E, so the one unquoted "~" separates key and hash. RabbitMQ's hash is
// Erlang's phash2 of its own term for the arguments, which has no meaning
// outside Erlang; Warren's is FNV-1a (32 bits) of the arguments'
// canonical AMQP encoding, written like RabbitMQ's as 4 bytes in
// unpadded URL-safe base64. Clients take properties_key from a listing
// and put it in a URL; none computes it, so the hash's value differs from
// RabbitMQ's and its shape does not.
func propertiesKey(key string, args protocol.Table) string {
	if len(args) == 0 {
		if key == "" {
			return "~"
		}
		return quoteBinding(key)
	}
	return quoteBinding(key) + "~" + quoteBinding(argsHash(args))
}

func argsHash(args protocol.Table) string {
	enc, _ := protocol.AppendTable(nil, args) // a stored binding's arguments encode
	h := fnv.New32a()
	h.Write(enc)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], h.Sum32())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func quoteBinding(s string) string {
	return strings.ReplaceAll(quotePlus(s), "~", "%7E")
}

// quotePlus is RabbitMQ's (mochiweb's) quote_plus.
func quotePlus(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '.', c == '-', c == '~', c == '_':
			b.WriteByte(c)
		case c == ' ':
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
