// Package content is the x-content exchange type: routing on the fields of
// a JSON body. The plugin's main package registers it; it is a package of
// its own so its logic runs natively too, in tests and in the host's
// benchmarks against the same logic compiled to WebAssembly.
//
// A binding names fields and the values they must hold, the way a headers
// binding names headers: every argument not starting with "x-" is a dotted
// path into the body ("order.country", "items.0.sku") and the value there
// (a string, number or boolean; void: the field only has to exist).
// x-match is all (the default) or any. x-path and x-value give one more
// field, for paths that themselves start with "x-". The routing key plays
// no part. A body that is not JSON matches nothing.
package content

import (
	"bytes"
	"strconv"
	"strings"
	"unsafe"

	"github.com/warrenmq/warren/sdk"
)

// Type is the x-content exchange type.
type Type struct{}

func (Type) Name() string { return "x-content" }

func (Type) ValidateDeclare(*sdk.Declaration) error { return nil }

func (Type) Create(*sdk.Declaration) (sdk.Exchange, error) {
	return &contentExchange{pathIndex: make(map[string]int)}, nil
}

// DefaultMaxBody is the max_body setting's default.
const DefaultMaxBody = 1 << 20

// MaxBody is the max_body setting: the largest body, in bytes, the
// exchange looks into; a larger one matches nothing. It is read from the
// settings once and again when they change (SettingsChanged), not per
// message.
func MaxBody() int {
	if maxBody == 0 {
		maxBody = maxBodyOf(sdk.Settings())
	}
	return maxBody
}

var maxBody int // 0 until read

func maxBodyOf(settings sdk.Table) int {
	if v, ok := settings.Get("max_body"); ok {
		if n, ok := v.AsInt(); ok && n > 0 {
			return int(n)
		}
	}
	return DefaultMaxBody
}

// SettingsChanged takes new settings in a running broker: max_body must
// be a positive integer when given.
func SettingsChanged(settings sdk.Table) error {
	if v, ok := settings.Get("max_body"); ok {
		if n, ok := v.AsInt(); !ok || n <= 0 {
			return sdk.Errorf(sdk.PreconditionFailed, "max_body must be a positive number of bytes")
		}
	}
	maxBody = maxBodyOf(settings)
	return nil
}

// condition is one field test of a binding.
type condition struct {
	path int // index into contentExchange.paths
	kind byte
	str  string  // kindString
	num  float64 // kindNumber
	flag bool    // kindBool
}

const (
	kindExists = 'V' // argument without a value: the field must be there
	kindString = 'S'
	kindNumber = 'n'
	kindBool   = 't'
)

// binding is a compiled binding: all of its conditions must hold (x-match
// all, the default) or one of them (any).
type binding struct {
	id    sdk.BindingID
	any   bool
	conds []condition
}

// contentExchange holds the compiled bindings. Paths are shared between
// bindings: each is looked up at most once per message.
type contentExchange struct {
	bindings  []binding
	paths     [][]string
	pathIndex map[string]int
	pathRefs  []int // bindings using each path, to drop unused ones

	// Per-message scratch, reused: the looked-up value of each path.
	looked []bool
	found  []bool
	values [][]byte
}

// parseBinding compiles a binding's arguments: every argument not starting
// with "x-" is a path and the value it must hold; x-path and x-value state
// one more (for paths that start with "x-"); x-match is all or any.
func parseBinding(args sdk.Table) (any bool, conds []rawCondition, err error) {
	var xPath string
	var xValue sdk.Value
	var hasXPath, hasXValue bool
	for k, v := range args.All() {
		switch {
		case k == "x-match":
			s, _ := v.AsString()
			switch s {
			case "all":
			case "any":
				any = true
			default:
				return false, nil, sdk.Errorf(sdk.PreconditionFailed, "x-match must be 'all' or 'any', not %s", describe(v))
			}
		case k == "x-path":
			s, ok := v.AsString()
			if !ok {
				return false, nil, sdk.Errorf(sdk.PreconditionFailed, "x-path must be a string")
			}
			xPath, hasXPath = strings.Clone(s), true
		case k == "x-value":
			xValue, hasXValue = v, true
		case strings.HasPrefix(k, "x-"):
			// other x- arguments belong to the broker or to no one
		default:
			conds = append(conds, rawCondition{path: strings.Clone(k), value: v})
		}
	}
	if hasXValue && !hasXPath {
		return false, nil, sdk.Errorf(sdk.PreconditionFailed, "x-value needs x-path")
	}
	if hasXPath {
		if !hasXValue {
			xValue = sdk.Value{}
		}
		conds = append(conds, rawCondition{path: xPath, value: xValue})
	}
	if len(conds) == 0 {
		return false, nil, sdk.Errorf(sdk.PreconditionFailed, "a binding to an x-content exchange needs at least one field, e.g. x-path=order.country and x-value=NO")
	}
	for _, c := range conds {
		if err := checkPath(c.path); err != nil {
			return false, nil, err
		}
		switch c.value.Kind() {
		case 0, 'V', 'S', 't', 'b', 'B', 's', 'u', 'I', 'i', 'l', 'f', 'd', 'D':
		default:
			return false, nil, sdk.Errorf(sdk.PreconditionFailed, "field '%s': value must be a string, number, boolean or void", c.path)
		}
	}
	return any, conds, nil
}

type rawCondition struct {
	path  string
	value sdk.Value
}

func checkPath(p string) error {
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return sdk.Errorf(sdk.PreconditionFailed, "field path '%s' has an empty segment", p)
		}
	}
	return nil
}

func describe(v sdk.Value) string {
	if s, ok := v.AsString(); ok {
		return "'" + s + "'"
	}
	return "a value of type " + string(v.Kind())
}

func (x *contentExchange) ValidateBinding(b *sdk.Binding) error {
	_, _, err := parseBinding(b.Args)
	return err
}

func (x *contentExchange) AddBinding(b *sdk.Binding) error {
	any, raw, err := parseBinding(b.Args)
	if err != nil {
		return err
	}
	nb := binding{id: b.ID, any: any}
	for _, rc := range raw {
		c := condition{path: x.pathFor(rc.path), kind: kindExists}
		switch v := rc.value; v.Kind() {
		case 'S':
			s, _ := v.AsString()
			c.kind, c.str = kindString, strings.Clone(s)
		case 't':
			c.kind, c.flag = kindBool, must(v.AsBool())
		case 0, 'V':
		default:
			c.kind, c.num = kindNumber, must(v.AsFloat())
		}
		nb.conds = append(nb.conds, c)
	}
	x.bindings = append(x.bindings, nb)
	return nil
}

func must[T any](v T, _ bool) T { return v }

func (x *contentExchange) pathFor(p string) int {
	if i, ok := x.pathIndex[p]; ok {
		x.pathRefs[i]++
		return i
	}
	x.pathIndex[p] = len(x.paths)
	x.paths = append(x.paths, strings.Split(p, "."))
	x.pathRefs = append(x.pathRefs, 1)
	x.looked = append(x.looked, false)
	x.found = append(x.found, false)
	x.values = append(x.values, nil)
	return len(x.paths) - 1
}

func (x *contentExchange) RemoveBindings(ids []sdk.BindingID) error {
	kept := x.bindings[:0]
	for _, b := range x.bindings {
		gone := false
		for _, id := range ids {
			if b.id == id {
				gone = true
				break
			}
		}
		if gone {
			for _, c := range b.conds {
				x.pathRefs[c.path]-- // the path slot stays; its lookups stop
			}
			continue
		}
		kept = append(kept, b)
	}
	clear(x.bindings[len(kept):])
	x.bindings = kept
	return nil
}

// Route evaluates each binding against the body. Each path is looked up at
// most once per message, and only if a binding asks for it.
func (x *contentExchange) Route(m *sdk.Message, r *sdk.Result) error {
	body := m.Body()
	if len(body) > MaxBody() {
		return nil
	}
	clear(x.looked)
	for i := range x.bindings {
		if b := &x.bindings[i]; x.matches(body, b) {
			r.Add(b.id)
		}
	}
	return nil
}

func (x *contentExchange) matches(body []byte, b *binding) bool {
	for i := range b.conds {
		ok := x.holds(body, &b.conds[i])
		if ok && b.any {
			return true
		}
		if !ok && !b.any {
			return false
		}
	}
	return !b.any
}

func (x *contentExchange) holds(body []byte, c *condition) bool {
	if !x.looked[c.path] {
		x.values[c.path], x.found[c.path] = lookup(body, x.paths[c.path])
		x.looked[c.path] = true
	}
	if !x.found[c.path] {
		return false
	}
	v := x.values[c.path]
	switch c.kind {
	case kindExists:
		return true
	case kindString:
		return v[0] == '"' && stringEquals(v, c.str)
	case kindBool:
		return (c.flag && bytes.Equal(v, []byte("true"))) || (!c.flag && bytes.Equal(v, []byte("false")))
	case kindNumber:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return false
		}
		f, err := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64)
		return err == nil && f == c.num
	}
	return false
}

// Info reports the figures the admin API shows for the exchange.
func (x *contentExchange) Info() map[string]any {
	used := 0
	for _, n := range x.pathRefs {
		if n > 0 {
			used++
		}
	}
	return map[string]any{"bindings": len(x.bindings), "paths": used}
}
