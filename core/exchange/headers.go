package exchange

import (
	"bytes"
	"sort"
	"strings"
	"time"

	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Headers routes on message headers instead of the routing key. A binding's
// arguments are the headers to look for; x-match says how they combine:
//
//	all (default)  every argument must match
//	any            at least one argument must match
//	all-with-x,
//	any-with-x     the same, but arguments starting with "x-" take part
//	               (all and any ignore them)
//
// An argument with a void value matches when the header is present. Other
// values match by value as RabbitMQ compares them: numbers across widths and
// kinds (int 1 = long 1 = double 1.0), strings and byte arrays by bytes, but
// never a string against a number. "all" with no arguments matches every
// message; "any" with none matches nothing.
//
// Routing does not test every binding. A binding is indexed under the
// header values a message must carry to match it, its anchors, so Route
// tests just the bindings its own headers lead to: an "all" binding that
// names a string (or byte-array) value is indexed under one such argument,
// the one fewest other bindings share, so that a value common to them all
// (a region, say) does not lead to every one; an "any" binding whose
// arguments are all strings, under each of them. The rest (void or
// numeric values, no arguments) are tested against every message.
//
// Route reads the message's headers where they lie (protocol.RawTable):
// text values are compared as bytes, and only a header a binding compares
// with a number or another non-text value is decoded.
type Headers struct{}

func (Headers) Name() string                     { return "headers" }
func (Headers) ValidateDeclare(Definition) error { return nil }
func (Headers) Create(Definition) (Router, error) {
	return &headersRouter{
		anchored: make(map[string]map[string]*denseset.Set[*headerMatch]),
		compiled: make(map[*Binding]*headerMatch),
	}, nil
}

// headersRouter holds every binding either in anchored, under each of its
// anchors' names and values, or in scan.
type headersRouter struct {
	anchored map[string]map[string]*denseset.Set[*headerMatch] // header name → value → bindings
	scan     denseset.Set[*headerMatch]                        // bindings without an anchor
	compiled map[*Binding]*headerMatch
}

// headerMatch is a binding compiled once at bind time.
type headerMatch struct {
	binding *Binding
	any     bool
	args    []headerArg // sorted by key
	anchors []anchor    // none: tested against every message
}

// anchor is a header a message must carry, with this value, to match.
type anchor struct{ key, value string }

type headerArg struct {
	key    string
	value  any    // compared as RabbitMQ does (ValuesEqual)
	void   bool   // matches any value
	isText bool   // value is a string or byte array: text holds it
	text   string // compared with a text header's bytes, not decoded
}

func compileHeaders(b *Binding) (*headerMatch, error) {
	hm := &headerMatch{binding: b}
	withX := false
	if raw, ok := b.Args["x-match"]; ok {
		mode, isString := raw.(string)
		if !isString {
			mode = ""
		}
		switch mode {
		case "all":
		case "any":
			hm.any = true
		case "all-with-x":
			withX = true
		case "any-with-x":
			hm.any, withX = true, true
		default:
			return nil, reply.PreconditionFailed("Invalid x-match field value %v; expected all, any, all-with-x, or any-with-x", raw)
		}
	}
	for k, v := range b.Args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		text, isText := protocol.TextValue(v)
		hm.args = append(hm.args, headerArg{key: k, value: v, void: v == nil, isText: isText, text: text})
	}
	sort.Slice(hm.args, func(i, j int) bool { return hm.args[i].key < hm.args[j].key })
	for _, a := range hm.args {
		if a.isText {
			hm.anchors = append(hm.anchors, anchor{a.key, a.text})
		} else if hm.any {
			hm.anchors = nil // a match on this one would go unseen
			break
		}
	}
	return hm, nil
}

func (r *headersRouter) ValidateBinding(b *Binding) error {
	_, err := compileHeaders(b)
	return err
}

func (r *headersRouter) AddBinding(b *Binding) error {
	hm, err := compileHeaders(b)
	if err != nil {
		return err
	}
	r.compiled[b] = hm
	if !hm.any && len(hm.anchors) > 1 {
		// "all" needs every argument, so one anchor is enough.
		hm.anchors = []anchor{r.leastShared(hm.anchors)}
	}
	if len(hm.anchors) == 0 {
		r.scan.Add(hm)
		return nil
	}
	for _, a := range hm.anchors {
		values := r.anchored[a.key]
		if values == nil {
			values = make(map[string]*denseset.Set[*headerMatch])
			r.anchored[a.key] = values
		}
		set := values[a.value]
		if set == nil {
			set = new(denseset.Set[*headerMatch])
			values[a.value] = set
		}
		set.Add(hm)
	}
	return nil
}

func (r *headersRouter) RemoveBindings(bs []*Binding) error {
	for _, b := range bs {
		hm := r.compiled[b]
		if hm == nil {
			continue
		}
		delete(r.compiled, b)
		if len(hm.anchors) == 0 {
			r.scan.Remove(hm)
			continue
		}
		for _, a := range hm.anchors {
			values := r.anchored[a.key]
			if set := values[a.value]; set.Remove(hm) && set.Len() == 0 {
				delete(values, a.value)
			}
			if len(values) == 0 {
				delete(r.anchored, a.key)
			}
		}
	}
	return nil
}

// leastShared is the anchor fewest bindings are indexed under yet, the
// first such in key order.
func (r *headersRouter) leastShared(anchors []anchor) anchor {
	best, bestCount := anchors[0], -1
	for _, a := range anchors {
		n := 0
		if set := r.anchored[a.key][a.value]; set != nil {
			n = set.Len()
		}
		if bestCount < 0 || n < bestCount {
			best, bestCount = a, n
		}
	}
	return best
}

// Route reads the message's headers where they lie (RawHeaders): decoding
// them cost more than the index's lookups.
func (r *headersRouter) Route(m *message.Message, res *Result) error {
	if len(r.compiled) == 0 {
		return nil
	}
	headers := m.RawHeaders()
	for _, hm := range r.scan.Items() {
		if hm.matches(headers) {
			res.Bindings = append(res.Bindings, hm.binding)
		}
	}
	if len(r.anchored) == 0 {
		return nil
	}
	// Each entry is visited once, and of a name the message repeats only
	// the last entry counts, so an "all" binding, with one anchor, is
	// reached at most once; an "any" binding is returned only through the
	// first of its arguments the message matches.
	fields := headers.Fields()
	for {
		name, value, ok := fields.Next()
		if !ok {
			return nil
		}
		values := r.anchored[string(name)]
		if values == nil {
			continue
		}
		text, ok := protocol.RawText(value)
		if !ok {
			continue
		}
		candidates := values[string(text)]
		if candidates == nil || fields.Later(name) {
			continue
		}
		for _, hm := range candidates.Items() {
			if hm.matchesFirstAt(headers, name) {
				res.Bindings = append(res.Bindings, hm.binding)
			}
		}
	}
}

func (hm *headerMatch) matches(headers protocol.RawTable) bool {
	if hm.any {
		for _, a := range hm.args {
			if a.matches(headers) {
				return true
			}
		}
		return false
	}
	for _, a := range hm.args {
		if !a.matches(headers) {
			return false
		}
	}
	return true
}

// matchesFirstAt reports whether hm matches headers, and, for "any", that
// name is the first of hm's arguments that does: so an "any" binding
// reached through several of its anchors is returned once.
func (hm *headerMatch) matchesFirstAt(headers protocol.RawTable, name []byte) bool {
	if !hm.any {
		return hm.matches(headers)
	}
	for _, a := range hm.args {
		if a.matches(headers) {
			return a.key == string(name)
		}
	}
	return false
}

// matches compares a text argument with the header's bytes in place, and
// decodes the header for the other comparisons.
func (a *headerArg) matches(headers protocol.RawTable) bool {
	v, present := headers.Lookup(a.key)
	switch {
	case !present:
		return false
	case a.void:
		return true
	case a.isText:
		text, ok := protocol.RawText(v)
		return ok && string(text) == a.text
	}
	hv, _, err := protocol.DecodeFieldValue(v)
	return err == nil && ValuesEqual(a.value, hv)
}

func (r *headersRouter) PolicyChanged(protocol.Table) error { return nil }
func (r *headersRouter) Delete()                            {}
func (r *headersRouter) Info() map[string]any               { return nil }

// ValuesEqual compares two field-table values the way RabbitMQ's headers
// exchange does (Erlang's ==): numbers by value whatever their wire type,
// strings and byte arrays by their bytes, tables and arrays element-wise.
func ValuesEqual(a, b any) bool {
	if na, ok := number(a); ok {
		nb, ok := number(b)
		if !ok {
			return false
		}
		if na.isInt && nb.isInt {
			return na.i == nb.i
		}
		return na.f == nb.f
	}
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case []byte:
			return x == string(y)
		}
		return false
	case []byte:
		switch y := b.(type) {
		case string:
			return string(x) == y
		case []byte:
			return bytes.Equal(x, y)
		}
		return false
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case protocol.Decimal:
		y, ok := b.(protocol.Decimal)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !ValuesEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case protocol.Table:
		y, ok := b.(protocol.Table)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !ValuesEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// numeric is a field value read as a number. Integers keep their exact
// value so two 64-bit integers compare without rounding; f serves the
// comparisons that involve a float.
type numeric struct {
	i     int64
	f     float64
	isInt bool
}

// number reads any numeric field value, and a timestamp, which RabbitMQ
// carries as an integer.
func number(v any) (numeric, bool) {
	var n int64
	switch x := v.(type) {
	case int8:
		n = int64(x)
	case uint8:
		n = int64(x)
	case int16:
		n = int64(x)
	case uint16:
		n = int64(x)
	case int32:
		n = int64(x)
	case uint32:
		n = int64(x)
	case int64:
		n = x
	case int:
		n = int64(x)
	case time.Time:
		n = x.Unix()
	case float32:
		return numeric{f: float64(x)}, true
	case float64:
		return numeric{f: x}, true
	default:
		return numeric{}, false
	}
	return numeric{i: n, f: float64(n), isInt: true}, true
}
