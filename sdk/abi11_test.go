package sdk

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/sdk/abi"
)

// checkType asks for checks: declares validate as the type named by the
// x-as argument, bindings as the exchange's x-as too; routing holds the
// message 1 s and stamps it.
type checkType struct{}

func (checkType) Name() string { return "x-check" }

func (checkType) ValidateDeclare(d *Declaration) error {
	if v, ok := d.Args.Get("x-as"); ok {
		s, _ := v.AsString()
		if !TypeExists(s) {
			return Errorf(PreconditionFailed, "no type %s", s)
		}
		d.ValidateAs(s)
	}
	return nil
}

func (checkType) Create(d *Declaration) (Exchange, error) {
	as, _ := d.Args.Get("x-as")
	s, _ := as.AsString()
	return &checkExchange{as: strings.Clone(s)}, nil
}

type checkExchange struct{ as string }

func (x *checkExchange) ValidateBinding(b *Binding) error {
	if x.as != "" {
		b.ValidateAs(x.as)
	}
	return nil
}
func (x *checkExchange) AddBinding(*Binding) error        { return nil }
func (x *checkExchange) RemoveBindings([]BindingID) error { return nil }
func (x *checkExchange) Route(m *Message, r *Result) error {
	switch m.RoutingKey() {
	case "unheld":
		r.SetHeader("x-stamp", "no")
	case "bad":
		r.Via("direct", time.Second)
		r.SetHeader("x-bad", struct{}{})
	default:
		r.Via("direct", time.Second)
		r.SetHeader("x-delay", int32(-1000))
		r.RemoveHeader("x-gone")
	}
	return nil
}

func TestValidateAsAndTypeExists(t *testing.T) {
	d := newDispatcher(Plugin{Name: "c", Version: "1", Types: []ExchangeType{checkType{}}})
	SetTypes(map[string]bool{"x-other": true})
	defer SetTypes(map[string]bool{"x-other": false})

	as := func(s string) []byte {
		return abi.AppendDefinition(nil, abi.None, "/", "e", "x-check", 0, table(t, map[string]any{"x-as": s}))
	}
	o := output(t, d.call((*dispatcher).validateDeclare, as("x-other")))
	if types, err := abi.ReadChecks(o.Payload); err != nil || !slices.Equal(types, []string{"x-other"}) {
		t.Fatalf("declare checks %v %v", types, err)
	}
	if o := output(t, d.call((*dispatcher).validateDeclare, as("x-missing"))); o.Status != abi.StatusError || string(o.Text) != "no type x-missing" {
		t.Fatalf("missing type: %+v", o)
	}
	if out := d.call((*dispatcher).validateDeclare, abi.AppendDefinition(nil, abi.None, "/", "e", "x-check", 0, nil)); len(out) != 0 {
		t.Fatalf("no checks asked, answer %x", out)
	}
	d.call((*dispatcher).create, abi.AppendDefinition(nil, 1, "/", "e", "x-check", 0, table(t, map[string]any{"x-as": "topic"})))
	o = output(t, d.call((*dispatcher).validateBinding, abi.AppendBinding(nil, 1, abi.None, 0, "q", "a.*", nil)))
	if types, _ := abi.ReadChecks(o.Payload); !slices.Equal(types, []string{"topic"}) {
		t.Fatalf("binding checks %v", types)
	}
}

func TestSetHeadersOutput(t *testing.T) {
	d := newDispatcher(Plugin{Name: "c", Version: "1", Types: []ExchangeType{checkType{}}})
	d.call((*dispatcher).create, abi.AppendDefinition(nil, 0, "/", "e", "x-check", 0, nil))
	o := output(t, d.route(routeIn(0, "k", 0, nil, nil)))
	ro, err := abi.ReadRouteOutput(o.Payload)
	if err != nil || ro.Hold != 1000 || string(ro.Via) != "direct" {
		t.Fatalf("%+v %v", ro, err)
	}
	h := Table{raw: ro.SetHeaders}
	if v, _ := h.Get("x-delay"); must(v.AsInt()) != -1000 {
		t.Errorf("x-delay %v", v)
	}
	if v, ok := h.Get("x-gone"); !ok || !v.IsVoid() {
		t.Errorf("x-gone %v %v", v, ok)
	}
	// The next route starts with no changes.
	o = output(t, d.route(routeIn(0, "k", 0, nil, nil)))
	ro, _ = abi.ReadRouteOutput(o.Payload)
	if (Table{raw: ro.SetHeaders}).Len() != 2 {
		t.Errorf("changes carried over: %x", ro.SetHeaders)
	}
	for key, want := range map[string]string{"unheld": "without asking for Via", "bad": "SetHeader: header \"x-bad\""} {
		o, err := abi.ReadOutput(d.route(routeIn(0, key, 0, nil, nil)))
		if err != nil || o.Status != abi.StatusFault || !strings.Contains(string(o.Text), want) {
			t.Errorf("%s: %+v %v, want a fault saying %q", key, o, err, want)
		}
	}
	in := routeIn(0, "k", 0, nil, nil)
	if n := testing.AllocsPerRun(100, func() { d.route(in) }); n != 0 {
		t.Errorf("a route setting headers allocates %v times", n)
	}
}

func TestSettingsChanged(t *testing.T) {
	var seen []string
	d := newDispatcher(Plugin{Name: "c", Version: "1", Types: []ExchangeType{checkType{}},
		OnSettingsChanged: func(s Table) error {
			v, _ := s.Get("level")
			l, _ := v.AsString()
			if l == "bad" {
				return Errorf(PreconditionFailed, "level bad")
			}
			seen = append(seen, l)
			return nil
		}})
	defer func() { settingsRead = false }()
	if out := d.call((*dispatcher).settingsChanged, table(t, map[string]any{"level": "high"})); len(out) != 0 {
		t.Fatalf("answer %x", out)
	}
	if v, _ := Settings().Get("level"); must(v.AsString()) != "high" || !slices.Equal(seen, []string{"high"}) {
		t.Fatalf("settings now %v, hook saw %v", v, seen)
	}
	o := output(t, d.call((*dispatcher).settingsChanged, table(t, map[string]any{"level": "bad"})))
	if o.Status != abi.StatusError {
		t.Fatalf("refusal: %+v", o)
	}
	if v, _ := Settings().Get("level"); must(v.AsString()) != "high" {
		t.Fatalf("a refused change took effect: %v", v)
	}
}

// The header index: first match wins, headers past the index are found,
// and lookups after the first do not decode the table again.
func TestHeaderIndex(t *testing.T) {
	headers := map[string]any{}
	for i := range 40 {
		headers[fmt.Sprintf("h%02d", i)] = int64(i)
	}
	m, err := MakeMessage("k", headers, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		v, ok := m.Header(fmt.Sprintf("h%02d", i))
		if n, _ := v.AsInt(); !ok || n != int64(i) {
			t.Fatalf("h%02d: %v %v", i, v, ok)
		}
	}
	if _, ok := m.Header("h40"); ok {
		t.Fatal("found a header that is not there")
	}
	// A property list with the same name twice: the first one counts, as
	// Table.Get finds it.
	raw := []byte{0, 0, 0, 14, 1, 'a', 'I', 0, 0, 0, 1, 1, 'a', 'I', 0, 0, 0, 2}
	raw[3] = byte(len(raw) - 4)
	dup := RawMessage("k", propFlag(propHeaders), raw, nil)
	if v, _ := dup.Header("a"); must(v.AsInt()) != 1 {
		t.Fatalf("duplicate header: %v", v)
	}
	// Reset forgets the index.
	dup.Reset("k", 0, nil, nil)
	if _, ok := dup.Header("a"); ok {
		t.Fatal("index survived Reset")
	}
	m2, _ := MakeMessage("k", map[string]any{"a": 1, "b": 2, "c": 3, "d": 4}, nil)
	if n := testing.AllocsPerRun(100, func() {
		m2.indexed = false
		m2.Header("a")
		m2.Header("d")
		m2.Header("zz")
	}); n != 0 {
		t.Fatalf("header lookups allocate %v times", n)
	}
}

// BenchmarkHeaderLookups reads four of ten headers of one message, the
// index built once per message as on the route path.
func BenchmarkHeaderLookups(b *testing.B) {
	h := map[string]any{}
	for i := range 10 {
		h[fmt.Sprintf("header-%d", i)] = "value"
	}
	m, _ := MakeMessage("k", h, nil)
	for b.Loop() {
		m.indexed = false
		for _, name := range []string{"header-9", "header-5", "header-7", "missing"} {
			m.Header(name)
		}
	}
}
