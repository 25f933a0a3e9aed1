package sdk

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/sdk/abi"
)

// keyType is a test exchange type: bindings route by key, "via" asks for
// another type, "boom" panics, "fail" errors; declare argument x-bad is
// refused.
type keyType struct{}

func (keyType) Name() string { return "x-key" }

func (keyType) ValidateDeclare(d *Declaration) error {
	if _, ok := d.Args.Get("x-bad"); ok {
		return Errorf(PreconditionFailed, "x-bad is bad")
	}
	return nil
}

func (keyType) Create(d *Declaration) (Exchange, error) {
	if d.Name == "plain-error" {
		return nil, errors.New("cannot create")
	}
	return &keyExchange{decl: d, byKey: map[string][]BindingID{}}, nil
}

type keyExchange struct {
	decl    *Declaration
	byKey   map[string][]BindingID
	policy  Table
	deleted *bool
}

func (x *keyExchange) ValidateBinding(b *Binding) error {
	if b.Key == "" {
		return errors.New("empty key")
	}
	return nil
}

func (x *keyExchange) AddBinding(b *Binding) error {
	x.byKey[b.Key] = append(x.byKey[b.Key], b.ID)
	return nil
}

func (x *keyExchange) RemoveBindings(ids []BindingID) error {
	for k, list := range x.byKey {
		x.byKey[k] = slices.DeleteFunc(list, func(id BindingID) bool { return slices.Contains(ids, id) })
	}
	return nil
}

func (x *keyExchange) Route(m *Message, r *Result) error {
	switch m.RoutingKey() {
	case "via":
		r.Via("direct", 2*time.Second)
	case "boom":
		panic("boom")
	case "fail":
		return Errorf(NotFound, "nothing for %s", "fail")
	default:
		r.AddAll(x.byKey[m.RoutingKey()])
	}
	return nil
}

func (x *keyExchange) PolicyChanged(p Table) error { x.policy = p; return nil }

func (x *keyExchange) Info() map[string]any {
	return map[string]any{"keys": len(x.byKey), "policy": x.policy.Valid()}
}

func newTestDispatcher() *dispatcher {
	return newDispatcher(Plugin{
		Name: "test", Version: "0.1", Features: FeatureHeaders | FeatureBody,
		Types:    []ExchangeType{keyType{}},
		Settings: []Setting{{Name: "s", Kind: StringSetting, Doc: "a setting"}},
	})
}

func output(t *testing.T, out []byte) abi.Output {
	t.Helper()
	o, err := abi.ReadOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func table(t *testing.T, m map[string]any) []byte {
	t.Helper()
	if m == nil {
		return nil
	}
	tb, err := MakeTable(m)
	if err != nil {
		t.Fatal(err)
	}
	return tb.Raw()
}

func routeIn(id uint32, key string, flags uint16, props, body []byte) []byte {
	in := make([]byte, abi.RouteSize(len(key), len(props), len(body)))
	abi.PutRoute(in, id, key, flags, props, body)
	return in
}

func TestDispatcher(t *testing.T) {
	d := newTestDispatcher()
	o := output(t, d.call((*dispatcher).describe, nil))
	desc, err := abi.ReadDescription(o.Payload)
	if err != nil || desc.Name != "test" || desc.Features != abi.FeatureHeaders|abi.FeatureBody ||
		!slices.Equal(desc.Types, []string{"x-key"}) || desc.Settings[0].Name != "s" {
		t.Fatalf("describe: %+v %v", desc, err)
	}

	// Declares: the type's 406, an unknown type, a plain error at create.
	o = output(t, d.call((*dispatcher).validateDeclare, abi.AppendDefinition(nil, abi.None, "/", "e", "x-key", 0, table(t, map[string]any{"x-bad": 1}))))
	if o.Status != abi.StatusError || o.Code != 406 || string(o.Text) != "x-bad is bad" {
		t.Fatalf("validate declare: %+v", o)
	}
	o = output(t, d.call((*dispatcher).validateDeclare, abi.AppendDefinition(nil, abi.None, "/", "e", "x-other", 0, nil)))
	if o.Status != abi.StatusError || !strings.Contains(string(o.Text), "no exchange type 'x-other'") {
		t.Fatalf("unknown type: %+v", o)
	}
	o = output(t, d.call((*dispatcher).create, abi.AppendDefinition(nil, 9, "/", "plain-error", "x-key", 0, nil)))
	if o.Status != abi.StatusError || o.Code != 406 || string(o.Text) != "cannot create" {
		t.Fatalf("plain error: %+v", o)
	}
	if out := d.call((*dispatcher).create, abi.AppendDefinition(nil, 2, "/", "e", "x-key", abi.FlagDurable, nil)); len(out) != 0 {
		t.Fatalf("create: %+v", output(t, out))
	}
	x := d.exch[2].(*keyExchange)
	if !x.decl.Durable || x.decl.Name != "e" || x.decl.VHost != "/" {
		t.Fatalf("declaration: %+v", x.decl)
	}
	if o := output(t, d.call((*dispatcher).create, abi.AppendDefinition(nil, 2, "/", "e", "x-key", 0, nil))); o.Status != abi.StatusFault {
		t.Fatalf("creating an id twice: %+v", o)
	}

	// Bindings.
	o = output(t, d.call((*dispatcher).validateBinding, abi.AppendBinding(nil, 2, abi.None, abi.DestQueue, "q", "", nil)))
	if o.Status != abi.StatusError || string(o.Text) != "empty key" {
		t.Fatalf("validate binding: %+v", o)
	}
	for id, key := range []string{"a", "a", "b"} {
		if out := d.call((*dispatcher).addBinding, abi.AppendBinding(nil, 2, uint32(id), abi.DestQueue, "q", key, nil)); len(out) != 0 {
			t.Fatalf("add binding: %+v", output(t, out))
		}
	}

	routeIDs := func(key string) []uint32 {
		t.Helper()
		o := output(t, d.route(routeIn(2, key, 0, nil, nil)))
		if o.Status != abi.StatusOK {
			t.Fatalf("route %s: %+v", key, o)
		}
		ro, err := abi.ReadRouteOutput(o.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint32
		for i := range ro.Count() {
			ids = append(ids, ro.ID(i))
		}
		return ids
	}
	if got := routeIDs("a"); !slices.Equal(got, []uint32{0, 1}) {
		t.Fatalf("route a: %v", got)
	}
	if got := routeIDs("nothing"); got != nil {
		t.Fatalf("route nothing: %v", got)
	}
	o = output(t, d.route(routeIn(2, "via", 0, nil, nil)))
	ro, err := abi.ReadRouteOutput(o.Payload)
	if err != nil || !ro.HasVia || string(ro.Via) != "direct" || ro.Hold != 2000 {
		t.Fatalf("via: %+v %v", ro, err)
	}
	o = output(t, d.route(routeIn(2, "fail", 0, nil, nil)))
	if o.Status != abi.StatusError || o.Code != 404 {
		t.Fatalf("route error: %+v", o)
	}
	if o = output(t, d.route(routeIn(7, "a", 0, nil, nil))); o.Status != abi.StatusFault {
		t.Fatalf("route on an unknown exchange: %+v", o)
	}
	if o = output(t, d.route(routeIn(2, "a", 0, nil, nil)[:8])); o.Status != abi.StatusFault {
		t.Fatalf("truncated route: %+v", o)
	}
	// A panic outside route is recovered as a FAULT carrying its message.
	if o = output(t, d.call((*dispatcher).route, routeIn(2, "boom", 0, nil, nil))); o.Status != abi.StatusFault || !strings.HasPrefix(string(o.Text), "panic: boom") {
		t.Fatalf("panic: %+v", o)
	}

	if out := d.call((*dispatcher).removeBindings, abi.AppendRemove(nil, 2, []uint32{0})); len(out) != 0 {
		t.Fatalf("remove: %+v", output(t, out))
	}
	if got := routeIDs("a"); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("after remove: %v", got)
	}
	d.call((*dispatcher).policyChanged, abi.AppendPolicy(nil, 2, table(t, map[string]any{"alternate-exchange": "ae"}), true))
	if v, ok := x.policy.Get("alternate-exchange"); !ok || must(v.AsString()) != "ae" {
		t.Fatalf("policy: %v", x.policy)
	}
	o = output(t, d.call((*dispatcher).info, abi.AppendExchange(nil, 2)))
	info := Table{raw: o.Payload}
	if v, _ := info.Get("keys"); must(v.AsInt()) != 2 {
		t.Fatalf("info: %x", o.Payload)
	}
	d.call((*dispatcher).delete, abi.AppendExchange(nil, 2))
	if d.exchange(2) != nil {
		t.Fatal("delete left the exchange")
	}
	if out := d.call((*dispatcher).idle, nil); len(out) != 0 {
		t.Fatal("idle answered")
	}
}

func must[T any](v T, _ bool) T { return v }

func TestBufferAndRouteAllocs(t *testing.T) {
	d := newTestDispatcher()
	if b := d.buffer(10); len(b) < 10 {
		t.Fatal("small buffer")
	}
	if b := d.buffer(1 << 21); len(b) < 1<<21 {
		t.Fatal("large buffer")
	}
	d.idle(nil)
	if len(d.in) > keepBuffer {
		t.Fatal("idle kept an outsized buffer")
	}
	d.call((*dispatcher).create, abi.AppendDefinition(nil, 1, "/", "e", "x-key", 0, nil))
	for id := range 4 {
		d.call((*dispatcher).addBinding, abi.AppendBinding(nil, 1, uint32(id), 0, "q", "k", nil))
	}
	in := routeIn(1, "k", 0, nil, []byte("body"))
	d.route(in)
	if n := testing.AllocsPerRun(100, func() { d.route(in) }); n != 0 {
		t.Fatalf("route allocates %v times", n)
	}
}

// TestMessageProperties reads a property list the broker's codec encoded:
// testdata/properties.bin, which a test of the broker's module checks
// against its encoder (core/wasmhost's TestSDKPropertiesFixture). Its
// flags are content-type, headers, delivery-mode, priority,
// correlation-id, message-id, timestamp and app-id.
func TestMessageProperties(t *testing.T) {
	const flags = 0xbcc8
	raw, err := os.ReadFile("testdata/properties.bin")
	if err != nil {
		t.Fatal(err)
	}
	m := RawMessage("key", flags, raw, nil)
	if ct, ok := m.ContentType(); !ok || ct != "application/json" {
		t.Errorf("content type %q %v", ct, ok)
	}
	if m.DeliveryMode() != 2 || m.Priority() != 5 {
		t.Errorf("delivery mode %d priority %d", m.DeliveryMode(), m.Priority())
	}
	if s, _ := m.CorrelationID(); s != "corr" {
		t.Errorf("correlation id %q", s)
	}
	if s, _ := m.MessageID(); s != "mid" {
		t.Errorf("message id %q", s)
	}
	if ts, ok := m.Timestamp(); !ok || ts != 1700000000 {
		t.Errorf("timestamp %d", ts)
	}
	if s, _ := m.AppID(); s != "app" {
		t.Errorf("app id %q", s)
	}
	if _, ok := m.ReplyTo(); ok {
		t.Error("reply-to present")
	}
	h := m.Headers()
	checks := []struct {
		name string
		ok   bool
	}{
		{"s", must(must(h.Get("s")).AsString()) == "str"},
		{"i", must(must(h.Get("i")).AsInt()) == -7},
		{"l", must(must(h.Get("l")).AsInt()) == 1<<40},
		{"d", must(must(h.Get("d")).AsFloat()) == 2.5},
		{"b", must(must(h.Get("b")).AsBool())},
		{"v", must(h.Get("v")).IsVoid()},
		{"n", must(must(must(h.Get("n")).AsTable()).Get("k")).Equal(Value{kind: 'S', data: []byte("v")})},
		{"x", string(must(must(h.Get("x")).AsBytes())) == "\x01\x02"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("header %s", c.name)
		}
	}
	var arr []string
	for v := range must(must(h.Get("a")).AsArray()).All() {
		arr = append(arr, string(v.Kind()))
	}
	if strings.Join(arr, "") != "lS" {
		t.Errorf("array kinds %v", arr)
	}
	if h.Len() != 9 {
		t.Errorf("%d headers", h.Len())
	}
	if _, ok := m.Header("missing"); ok {
		t.Error("missing header found")
	}
	// A truncated list reads as absent from the fault on, without panicking.
	cut := RawMessage("k", flags, raw[:len(raw)-6], nil)
	if _, ok := cut.AppID(); ok {
		t.Error("app id read from a truncated list")
	}
	if ct, _ := cut.ContentType(); ct != "application/json" {
		t.Error("content type lost in a truncated list")
	}
}

func TestValueEqual(t *testing.T) {
	tb, _ := MakeTable(map[string]any{"i": int32(1), "l": int64(1), "d": 1.0, "s": "1", "t": true, "big": int64(math.MaxInt64)})
	get := func(k string) Value { return must(tb.Get(k)) }
	if !get("i").Equal(get("l")) || !get("l").Equal(get("d")) {
		t.Error("numbers of different types differ")
	}
	if get("s").Equal(get("l")) {
		t.Error("a string equals a number")
	}
	if get("t").Equal(get("i")) {
		t.Error("a boolean equals a number")
	}
	if get("big").Equal(get("d")) {
		t.Error("MaxInt64 equals 1.0")
	}
}

func TestMakeTableErrors(t *testing.T) {
	if _, err := MakeTable(map[string]any{"k": struct{}{}}); err == nil || !strings.Contains(err.Error(), `"k"`) {
		t.Errorf("unsupported value: %v", err)
	}
	if _, err := MakeTable(map[string]any{strings.Repeat("k", 256): 1}); err == nil {
		t.Error("long key accepted")
	}
	if _, err := MakeTable(map[string]any{"u": uint64(math.MaxUint64)}); err == nil {
		t.Error("uint64 overflow accepted")
	}
}

func TestSettingsNative(t *testing.T) {
	if err := SetSettings(map[string]any{"greeting": "hi"}); err != nil {
		t.Fatal(err)
	}
	if s, _ := must(Settings().Get("greeting")).AsString(); s != "hi" {
		t.Fatalf("setting %q", s)
	}
	if Monotonic() < 0 || Now().IsZero() {
		t.Fatal("clocks")
	}
}
