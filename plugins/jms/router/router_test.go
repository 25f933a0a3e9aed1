package router

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

func TestPatterns(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		// The seed's examples.
		{"files.cn.hz.#", "files.cn.hz", true},
		{"files.cn.hz.#", "files.cn.hz.store", true},
		{"files.cn.*.store", "files.cn.hz.store", true},
		{"files.cn.*.store", "files.cn.sz.store", true},
		{"files.cn.hz.#", "files.cn.sz.store", false},
		{"*.stock.#", "usd.stock", true},
		{"*.stock.#", "eur.stock.db", true},
		{"*.stock.#", "stock.nasdaq", false},
		// Exact keys.
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
		{"a.b", "a", false},
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		// '*' is exactly one word, possibly empty.
		{"*", "a", true},
		{"*", "", false},
		{"*", "a.b", false},
		{"*", ".", false},
		{"*.*", ".", true},
		{"a.*", "a.", true},
		{"a.*", "a", false},
		{"*.b.*", "a.b.c", true},
		// '#' is zero or more words.
		{"#", "", true},
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"#", "..", true},
		{"a.#", "a", true},
		{"a.#", "a.b.c", true},
		{"a.#", "b.a", false},
		{"#.a", "a", true},
		{"#.a", "x.y.a", true},
		{"#.a", "a.x", false},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.x.y.c", false},
		{"#.#", "", true},
		{"#.#.#.x", "a.b.c.d.e.f.g.h.x", true},
		{"#.#.#.x", "a.b.c.d.e.f.g.h.y", false},
		{"#.*", "", false},
		{"#.*", "a", true},
		{"*.#.*", "a", false},
		{"*.#.*", "a.b", true},
		{"#.b.#.d.#", "a.b.c.d.e", true},
		{"#.b.#.d.#", "a.d.c.b.e", false},
		// Empty words.
		{"a..b", "a..b", true},
		{"a.*.b", "a..b", true},
		{"a.#.b", "a..b", true},
		// Wildcards only as whole words.
		{"a*", "ab", false},
		{"a*", "a*", true},
		{"#a", "#a", true},
	}
	for _, c := range cases {
		p := compilePattern(c.pattern)
		if got := p.match(c.key, splitKey(nil, c.key)); got != c.want {
			t.Errorf("%q matches %q: %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

// matchSlow is the definition of topic matching, recursively.
func matchSlow(p, k []string) bool {
	if len(p) == 0 {
		return len(k) == 0
	}
	switch p[0] {
	case "#":
		for i := 0; i <= len(k); i++ {
			if matchSlow(p[1:], k[i:]) {
				return true
			}
		}
		return false
	case "*":
		return len(k) > 0 && matchSlow(p[1:], k[1:])
	}
	return len(k) > 0 && k[0] == p[0] && matchSlow(p[1:], k[1:])
}

func words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ".")
}

// TestPatternsAgainstDefinition: the backtracking matcher agrees with the
// recursive definition on random patterns and keys.
func TestPatternsAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(from []string, n int) string {
		var ws []string
		for range n {
			ws = append(ws, from[rng.IntN(len(from))])
		}
		return strings.Join(ws, ".")
	}
	for range 20000 {
		pat := pick([]string{"a", "b", "", "*", "#"}, rng.IntN(6))
		key := pick([]string{"a", "b", ""}, rng.IntN(7))
		p := compilePattern(pat)
		if got, want := p.match(key, splitKey(nil, key)), matchSlow(words(pat), words(key)); got != want {
			t.Fatalf("%q matches %q: %v, want %v", pat, key, got, want)
		}
	}
}

// fixture builds an exchange of either type and names the queues a
// message reached.
type fixture struct {
	t    *testing.T
	x    sdk.Exchange
	dest map[sdk.BindingID]string
	next sdk.BindingID
}

func newFixture(t *testing.T, typ sdk.ExchangeType) *fixture {
	x, err := typ.Create(&sdk.Declaration{Name: "x", Type: typ.Name()})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, x: x, dest: map[sdk.BindingID]string{}}
}

func (f *fixture) bind(q, key string, args map[string]any) sdk.BindingID {
	f.t.Helper()
	tb, err := sdk.MakeTable(args)
	if err != nil {
		f.t.Fatal(err)
	}
	b := &sdk.Binding{ID: f.next, Destination: q, Key: key, Args: tb}
	if err := f.x.ValidateBinding(b); err != nil {
		f.t.Fatalf("binding %s %q %v: %v", q, key, args, err)
	}
	if err := f.x.AddBinding(b); err != nil {
		f.t.Fatal(err)
	}
	f.dest[b.ID] = q
	f.next++
	return b.ID
}

func (f *fixture) routeMsg(m *sdk.Message) string {
	f.t.Helper()
	var r sdk.Result
	if err := f.x.Route(m, &r); err != nil {
		f.t.Fatal(err)
	}
	var qs []string
	for _, id := range r.Bindings() {
		qs = append(qs, f.dest[id])
	}
	slices.Sort(qs)
	return strings.Join(qs, " ")
}

func (f *fixture) route(key string, headers map[string]any) string {
	f.t.Helper()
	m, err := sdk.MakeMessage(key, headers, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.routeMsg(m)
}

type bindingSpec struct {
	queue, key string
	args       map[string]any
}

type messageSpec struct {
	key     string
	headers map[string]any
	want    string // the queues reached, sorted
}

// routeEach makes the bindings on a new x-jms-topic exchange and checks
// where each message goes.
func routeEach(t *testing.T, binds []bindingSpec, msgs []messageSpec) {
	t.Helper()
	f := newFixture(t, TopicType{})
	for _, b := range binds {
		f.bind(b.queue, b.key, b.args)
	}
	for _, m := range msgs {
		if got := f.route(m.key, m.headers); got != m.want {
			t.Errorf("%q %v: routed to %q, want %q", m.key, m.headers, got, m.want)
		}
	}
}

func TestTopic(t *testing.T) {
	f := newFixture(t, TopicType{})
	f.bind("all", "#", nil)
	f.bind("stocks", "stock.*", nil)
	f.bind("heavy", "stock.*", map[string]any{"x-selector": "weight > 10"})
	f.bind("redblue", "stock.#", map[string]any{"x-selector": "weight > 10 AND color IN ('red','blue')"})
	// The JMS client's bindings route on the selector alone: their keys
	// play no part.
	f.bind("erl", "stock.ibm", map[string]any{ArgErlangSelector: `{'>', {'ident', <<"weight">>}, 10}.`, "rjms_version": "3.0.0"})
	f.bind("light", "*.ibm", map[string]any{ArgErlangSelector: `{'not', {'>', {'ident', <<"weight">>}, 10}}.`})
	f.bind("empty", "stock.ibm", map[string]any{"x-selector": "  "}) // JMS: no selector

	cases := []struct {
		key     string
		headers map[string]any
		want    string
	}{
		{"stock.ibm", map[string]any{"weight": 11, "color": "red"}, "all empty erl heavy redblue stocks"},
		{"stock.ibm", map[string]any{"weight": 11, "color": "green"}, "all empty erl heavy stocks"},
		{"stock.ibm", map[string]any{"weight": 5}, "all empty light stocks"},
		// No weight: every selector on it is unknown, NOT included.
		{"stock.ibm", nil, "all empty stocks"},
		{"stock.hp", map[string]any{"weight": 20.5, "color": "blue"}, "all erl heavy redblue stocks"},
		{"stock.hp.x", map[string]any{"weight": 20, "color": "blue"}, "all erl redblue"},
		{"bond.ibm", map[string]any{"weight": 1}, "all light"},
		{"", map[string]any{"weight": 100}, "all erl"},
		{"bond", map[string]any{"weight": 1}, "all light"},
	}
	for _, c := range cases {
		if got := f.route(c.key, c.headers); got != c.want {
			t.Errorf("%q %v: routed to %q, want %q", c.key, c.headers, got, c.want)
		}
	}
	info := f.x.(sdk.Informer).Info()
	if info["bindings"] != 7 || info["patterns"] != 4 || info["selectors"] != 4 || info["selector_only"] != 2 {
		t.Errorf("info: %v", info)
	}
}

func TestTopicUnbind(t *testing.T) {
	f := newFixture(t, TopicType{})
	a := f.bind("a", "k.*", map[string]any{"x-selector": "n = 1"})
	f.bind("b", "k.*", nil)
	c := f.bind("c", "#", nil)
	if got := f.route("k.x", map[string]any{"n": 1}); got != "a b c" {
		t.Fatalf("routed to %q", got)
	}
	if err := f.x.RemoveBindings([]sdk.BindingID{a, c}); err != nil {
		t.Fatal(err)
	}
	if got := f.route("k.x", map[string]any{"n": 1}); got != "b" {
		t.Errorf("after unbinding: routed to %q", got)
	}
	f.bind("d", "k.*", map[string]any{"x-selector": "n = 2"})
	if got := f.route("k.y", map[string]any{"n": 2}); got != "b d" {
		t.Errorf("after rebinding: routed to %q", got)
	}
	info := f.x.(sdk.Informer).Info()
	if info["bindings"] != 2 || info["patterns"] != 1 || info["selectors"] != 1 {
		t.Errorf("info: %v", info)
	}
}

// TestMixedBindings: on one exchange, the JMS client's bindings ignore the
// key while x-selector bindings and bindings without a selector are
// topic-matched (Warren's own; RabbitMQ has neither, see
// TestBindingsRabbitMQRefuses).
func TestMixedBindings(t *testing.T) {
	routeEach(t,
		[]bindingSpec{
			{"jms", "orders", erlSel(`{'>',{'ident',<<"weight">>},10}.`)},
			{"sql", "orders", map[string]any{ArgSQLSelector: "weight > 10"}},
			{"sql-pattern", "orders.*", map[string]any{ArgSQLSelector: "weight > 10"}},
			{"plain", "orders", nil},
			{"plain-pattern", "#.eu", nil},
			{"empty-sql", "orders", map[string]any{ArgSQLSelector: ""}},
		},
		[]messageSpec{
			{"orders", map[string]any{"weight": int32(11)}, "empty-sql jms plain sql"},
			{"orders", map[string]any{"weight": int32(5)}, "empty-sql plain"},
			{"orders.eu", map[string]any{"weight": int32(11)}, "jms plain-pattern sql-pattern"},
			{"stock", map[string]any{"weight": int32(11)}, "jms"},
			{"stock", nil, ""},
		})
}

// TestSelectorOnlyUnbind: unbinding a binding that ignores the key leaves
// the others and the exchange's figures right.
func TestSelectorOnlyUnbind(t *testing.T) {
	f := newFixture(t, TopicType{})
	a := f.bind("a", "k", erlSel(`{'=',{'ident',<<"n">>},1}.`))
	f.bind("b", "x.y", erlSel(`{'>',{'ident',<<"n">>},0}.`))
	c := f.bind("c", "k", nil)
	if got := f.route("z", map[string]any{"n": 1}); got != "a b" {
		t.Fatalf("routed to %q", got)
	}
	if err := f.x.RemoveBindings([]sdk.BindingID{a, c}); err != nil {
		t.Fatal(err)
	}
	if got := f.route("k", map[string]any{"n": 1}); got != "b" {
		t.Errorf("after unbinding: routed to %q", got)
	}
	info := f.x.(sdk.Informer).Info()
	if info["bindings"] != 1 || info["patterns"] != 0 || info["selectors"] != 1 || info["selector_only"] != 1 {
		t.Errorf("info: %v", info)
	}
}

// TestHeaderTypes: every AMQP field type reads as the JMS value it is.
func TestHeaderTypes(t *testing.T) {
	f := newFixture(t, TopicType{})
	f.bind("q", "#", map[string]any{"x-selector": "v = 5"})
	f.bind("str", "#", map[string]any{"x-selector": "v = '5'"})
	f.bind("null", "#", map[string]any{"x-selector": "v IS NULL"})
	f.bind("bool", "#", map[string]any{"x-selector": "v = TRUE"})
	for _, v := range []any{int8(5), uint8(5), int16(5), uint16(5), int32(5), uint32(5), int64(5), float32(5), 5.0} {
		if got := f.route("k", map[string]any{"v": v}); got != "q" {
			t.Errorf("%T 5: routed to %q", v, got)
		}
	}
	for v, want := range map[any]string{"5": "str", true: "bool"} {
		if got := f.route("k", map[string]any{"v": v}); got != want {
			t.Errorf("%v: routed to %q, want %q", v, got, want)
		}
	}
	if got := f.route("k", map[string]any{"v": []byte("5")}); got != "str" {
		t.Errorf("byte array: routed to %q", got)
	}
	for _, v := range []any{nil, map[string]any{"a": 1}, []any{5}} {
		if got := f.route("k", map[string]any{"v": v}); got != "null" {
			t.Errorf("%T: routed to %q, want null", v, got)
		}
	}
	// A decimal 'D' (scale 1, 50): 5.0.
	raw := []byte{0, 0, 0, 0, 1, 'v', 'D', 1, 0, 0, 0, 50}
	binary.BigEndian.PutUint32(raw, uint32(len(raw)-4))
	if got := f.routeMsg(sdk.RawMessage("k", 0x2000, raw, nil)); got != "q" {
		t.Errorf("decimal 5.0: routed to %q", got)
	}
}

// props encodes a property list with the given JMS-relevant properties.
func props(deliveryMode, priority byte, correlationID, messageID string, timestamp int64, typ string, headers []byte) (uint16, []byte) {
	var flags uint16
	var b []byte
	short := func(s string) { b = append(append(b, byte(len(s))), s...) }
	if headers != nil {
		flags |= 0x2000
		b = append(b, headers...)
	}
	if deliveryMode != 0 {
		flags |= 0x1000
		b = append(b, deliveryMode)
	}
	if priority != 0 {
		flags |= 0x0800
		b = append(b, priority)
	}
	if correlationID != "" {
		flags |= 0x0400
		short(correlationID)
	}
	if messageID != "" {
		flags |= 0x0080
		short(messageID)
	}
	if timestamp != 0 {
		flags |= 0x0040
		b = binary.BigEndian.AppendUint64(b, uint64(timestamp))
	}
	if typ != "" {
		flags |= 0x0020
		short(typ)
	}
	return flags, b
}

func TestJMSFields(t *testing.T) {
	f := newFixture(t, TopicType{})
	sels := map[string]string{
		"persistent": "JMSDeliveryMode = 'PERSISTENT'",
		"urgent":     "JMSPriority > 5",
		"corr":       "JMSCorrelationID = 'c-1'",
		"id":         "JMSMessageID LIKE 'ID:%'",
		"recent":     "JMSTimestamp >= 1700000000000",
		"car":        "JMSType = 'car'",
	}
	for q, s := range sels {
		f.bind(q, "#", map[string]any{"x-selector": s})
	}
	flags, p := props(2, 9, "c-1", "ID:42", 1700000000, "car", nil)
	if got := f.routeMsg(sdk.RawMessage("k", flags, p, nil)); got != "car corr id persistent recent urgent" {
		t.Errorf("all properties: routed to %q", got)
	}
	flags, p = props(1, 1, "c-2", "42", 1600000000, "bike", nil)
	if got := f.routeMsg(sdk.RawMessage("k", flags, p, nil)); got != "" {
		t.Errorf("other properties: routed to %q", got)
	}
	if got := f.routeMsg(sdk.RawMessage("k", 0, nil, nil)); got != "" {
		t.Errorf("no properties: routed to %q", got)
	}
	// A header of the same name wins over the property.
	h, _ := sdk.MakeTable(map[string]any{"JMSType": "car", "JMSPriority": 1})
	flags, p = props(0, 9, "", "", 0, "bike", h.Raw())
	if got := f.routeMsg(sdk.RawMessage("k", flags, p, nil)); got != "car" {
		t.Errorf("headers over properties: routed to %q", got)
	}
}

func TestQueue(t *testing.T) {
	f := newFixture(t, QueueType{})
	a := f.bind("a", "orders", nil)
	f.bind("b", "orders", nil)
	f.bind("c", "orders.*", nil)
	f.bind("d", "", nil)
	for key, want := range map[string]string{"orders": "a b", "orders.*": "c", "orders.x": "", "": "d", "other": ""} {
		if got := f.route(key, nil); got != want {
			t.Errorf("%q: routed to %q, want %q", key, got, want)
		}
	}
	if err := f.x.RemoveBindings([]sdk.BindingID{a, 99}); err != nil {
		t.Fatal(err)
	}
	if got := f.route("orders", nil); got != "b" {
		t.Errorf("after unbinding: %q", got)
	}
	if info := f.x.(sdk.Informer).Info(); info["bindings"] != 3 || info["keys"] != 3 {
		t.Errorf("info: %v", info)
	}
}

func TestBindingErrors(t *testing.T) {
	cases := []struct {
		typ  sdk.ExchangeType
		args map[string]any
		want string
	}{
		{TopicType{}, map[string]any{"x-selector": "weight >"}, "invalid selector in binding argument x-selector: expected an identifier, a literal or '(', found the end at position 9"},
		{TopicType{}, map[string]any{"x-selector": "color IN ()"}, "invalid selector in binding argument x-selector: expected a string or a number in the IN list"},
		{TopicType{}, map[string]any{ArgErlangSelector: "{'>', {'ident', <<\"w\">>}"}, "invalid selector in binding argument rjms_erlang_selector: expected '}'"},
		{TopicType{}, map[string]any{ArgErlangSelector: "{'gt', 1, 2}."}, "unknown selector operator 'gt'"},
		{TopicType{}, map[string]any{"x-selector": 5}, "binding argument x-selector must be a string"},
		{TopicType{}, map[string]any{"x-selector": "a = 1", ArgErlangSelector: "'true'."}, "a binding takes one selector"},
		{TopicType{}, map[string]any{ArgErlangSelector: ""}, "binding argument rjms_erlang_selector is empty; for no selector, bind without it"},
		{TopicType{}, map[string]any{ArgErlangSelector: " \t"}, "binding argument rjms_erlang_selector is empty"},
		{TopicType{}, map[string]any{ArgErlangSelector: []byte("'true'.")}, "binding argument rjms_erlang_selector must be a string"},
		{QueueType{}, map[string]any{"x-selector": "a = 1"}, "x-jms-queue bindings take no selector (binding argument x-selector)"},
		{QueueType{}, map[string]any{ArgErlangSelector: "'true'."}, "x-jms-queue bindings take no selector (binding argument rjms_erlang_selector)"},
	}
	for _, c := range cases {
		x, _ := c.typ.Create(&sdk.Declaration{})
		tb, _ := sdk.MakeTable(c.args)
		b := &sdk.Binding{Key: "k", Destination: "q", Args: tb}
		for _, err := range []error{x.ValidateBinding(b), x.AddBinding(b)} {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s %v: got %v, want %q", c.typ.Name(), c.args, err, c.want)
				continue
			}
			if e, ok := err.(*sdk.Error); !ok || e.Code != sdk.PreconditionFailed {
				t.Errorf("%v: want a 406 *sdk.Error, got %#v", c.args, err)
			}
		}
	}
}

// TestRouteDoesNotAllocate: routing, selectors included, allocates nothing.
func TestRouteDoesNotAllocate(t *testing.T) {
	f := newFixture(t, TopicType{})
	for i := range 10 {
		f.bind(fmt.Sprint("q", i), fmt.Sprintf("stock.%d.#", i%3), map[string]any{"x-selector": fmt.Sprintf("weight > %d AND color LIKE 'bl%%' AND tag IN ('a', 'b')", i)})
	}
	f.bind("erl", "#", map[string]any{ArgErlangSelector: `{'=', {'ident', <<"raw">>}, <<"xy">>}`})
	m, _ := sdk.MakeMessage("stock.1.nyse", map[string]any{"weight": 5, "color": "blue", "tag": "b", "raw": []byte("xy")}, nil)
	var r sdk.Result
	r.Add(0)
	if n := testing.AllocsPerRun(100, func() {
		r.Reset()
		m.Reset(m.RoutingKey(), m.Flags(), m.RawProperties(), nil)
		_ = f.x.Route(m, &r)
	}); n != 0 {
		t.Errorf("Route allocates %.1f times", n)
	}
	if r.Len() != 3 { // q1 and q4 (weight 5 > 1, 4) and erl
		t.Errorf("%d matches: %v", r.Len(), r.Bindings())
	}
	q := newFixture(t, QueueType{})
	q.bind("a", "k", nil)
	mk, _ := sdk.MakeMessage("k", nil, nil)
	if n := testing.AllocsPerRun(100, func() {
		r.Reset()
		_ = q.x.Route(mk, &r)
	}); n != 0 {
		t.Errorf("x-jms-queue Route allocates %.1f times", n)
	}
}

func BenchmarkTopicRoute(b *testing.B) {
	x, _ := TopicType{}.Create(&sdk.Declaration{})
	for i := range 20 {
		args, _ := sdk.MakeTable(map[string]any{"x-selector": fmt.Sprintf("weight > %d AND color IN ('red', 'blue')", i)})
		_ = x.AddBinding(&sdk.Binding{ID: sdk.BindingID(i), Key: fmt.Sprintf("stock.%d.*", i%4), Args: args})
	}
	m, _ := sdk.MakeMessage("stock.1.ibm", map[string]any{"weight": 12, "color": "blue", "region": "eu"}, nil)
	var r sdk.Result
	b.ReportAllocs()
	for b.Loop() {
		r.Reset()
		_ = x.Route(m, &r)
	}
}
