package chash

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

// fixture is an exchange with its bindings by id, so tests can name the
// destination a message reached.
type fixture struct {
	t      *testing.T
	x      *Exchange
	dest   map[sdk.BindingID]string
	nextID sdk.BindingID
}

func newFixture(t *testing.T, args map[string]any) *fixture {
	t.Helper()
	tb, err := sdk.MakeTable(args)
	if err != nil {
		t.Fatal(err)
	}
	d := &sdk.Declaration{Name: "chx", Type: TypeName, Args: tb}
	if err := (Type{}).ValidateDeclare(d); err != nil {
		t.Fatal(err)
	}
	x, err := Type{}.Create(d)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, x: x.(*Exchange), dest: map[sdk.BindingID]string{}}
}

// bind binds queue q with weight key and returns the binding id.
func (f *fixture) bind(q, key string) sdk.BindingID {
	f.t.Helper()
	b := &sdk.Binding{ID: f.nextID, Kind: sdk.ToQueue, Destination: q, Key: key}
	if err := f.x.ValidateBinding(b); err != nil {
		f.t.Fatal(err)
	}
	if err := f.x.AddBinding(b); err != nil {
		f.t.Fatal(err)
	}
	f.dest[b.ID] = q
	f.nextID++
	return b.ID
}

func (f *fixture) unbind(ids ...sdk.BindingID) {
	f.t.Helper()
	if err := f.x.RemoveBindings(ids); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) route(m *sdk.Message) string {
	f.t.Helper()
	var r sdk.Result
	if err := f.x.Route(m, &r); err != nil {
		f.t.Fatal(err)
	}
	switch r.Len() {
	case 0:
		return ""
	case 1:
		return f.dest[r.ID(0)]
	}
	f.t.Fatalf("routed to %d bindings", r.Len())
	return ""
}

func (f *fixture) routeKey(key string) string {
	m, _ := sdk.MakeMessage(key, nil, nil)
	return f.route(m)
}

// spread routes n keys and returns where each went.
func (f *fixture) spread(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f.routeKey(fmt.Sprintf("order-%d", i))
	}
	return out
}

func shares(routed []string) map[string]float64 {
	s := map[string]float64{}
	for _, q := range routed {
		s[q] += 1 / float64(len(routed))
	}
	return s
}

const keys = 60000

func TestDistribution(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]string
	}{
		{"1:2", map[string]string{"q1": "1", "q2": "2"}},
		{"equal", map[string]string{"a": "1", "b": "1", "c": "1", "d": "1"}},
		{"1:2:3:4", map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}},
		{"10:20", map[string]string{"a": "10", "b": "20"}},
		{"1:100", map[string]string{"a": "1", "b": "100"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			total := 0.0
			for _, q := range sortedKeys(c.weights) {
				f.bind(q, c.weights[q])
				w, _ := ParseWeight(c.weights[q])
				total += float64(w)
			}
			got := shares(f.spread(keys))
			for q, k := range c.weights {
				w, _ := ParseWeight(k)
				want := float64(w) / total
				// Binomial noise at 60k keys is under 0.005; allow 0.015.
				if math.Abs(got[q]-want) > 0.015 {
					t.Errorf("%s: share %.4f, want %.4f", q, got[q], want)
				}
			}
		})
	}
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// TestStability: removing a binding moves only the keys it had, adding one
// takes keys only for itself.
func TestStability(t *testing.T) {
	f := newFixture(t, nil)
	ids := map[string]sdk.BindingID{}
	for i, q := range []string{"a", "b", "c", "d", "e"} {
		ids[q] = f.bind(q, fmt.Sprint(i%3+1)) // weights 1 2 3 1 2, total 9
	}
	before := f.spread(keys)

	f.unbind(ids["c"]) // weight 3 of 9
	after := f.spread(keys)
	moved := 0
	for i := range before {
		switch {
		case before[i] == "c":
			moved++
			if after[i] == "c" {
				t.Fatalf("key %d still routed to the removed binding", i)
			}
		case after[i] != before[i]:
			t.Fatalf("key %d moved from %s to %s though its binding stayed", i, before[i], after[i])
		}
	}
	if share := float64(moved) / keys; math.Abs(share-3.0/9) > 0.015 {
		t.Errorf("the removed binding had %.4f of the keys, want about %.4f", share, 3.0/9)
	}

	f.bind("f", "2")
	added := f.spread(keys)
	for i := range after {
		if added[i] != after[i] && added[i] != "f" {
			t.Fatalf("key %d moved from %s to %s when f was added", i, after[i], added[i])
		}
	}
	if share := shares(added)["f"]; math.Abs(share-2.0/8) > 0.015 {
		t.Errorf("the new binding took %.4f of the keys, want about %.4f", share, 2.0/8)
	}
}

// TestDeterminism: where a key goes depends on the active bindings only,
// not on their order, their ids or the history of the exchange; the
// golden answers pin the algorithm, which users' routing relies on.
func TestDeterminism(t *testing.T) {
	build := func(order []string) *fixture {
		f := newFixture(t, nil)
		f.nextID = sdk.BindingID(len(order[0])) // ids differ between builds
		for _, q := range order {
			f.bind(q, map[string]string{"q1": "1", "q2": "2", "q3": "3"}[q])
		}
		return f
	}
	a := build([]string{"q1", "q2", "q3"})
	b := build([]string{"q3", "q1", "q2"})
	// c had a binding added and removed, as a replay would not show.
	c := build([]string{"q2", "q3"})
	gone := c.bind("q9", "5")
	c.bind("q1", "1")
	c.unbind(gone)
	ra, rb, rc := a.spread(5000), b.spread(5000), c.spread(5000)
	for i := range ra {
		if ra[i] != rb[i] || ra[i] != rc[i] {
			t.Fatalf("key %d: %s, %s and %s", i, ra[i], rb[i], rc[i])
		}
	}

	golden := map[string]string{
		"":        "q3",
		"a":       "q2",
		"order-1": "q2",
		"order-2": "q2",
		"order-3": "q1",
		"user.42": "q3",
		"béla":    "q3",
	}
	for key, want := range golden {
		if got := a.routeKey(key); got != want {
			t.Errorf("key %q went to %s, want %s (the algorithm changed: routing of existing users moves)", key, got, want)
		}
	}

	// Equal weights take the integer path; pin it too.
	eq := newFixture(t, nil)
	for _, q := range []string{"q1", "q2", "q3"} {
		eq.bind(q, "1")
	}
	goldenEqual := map[string]string{"": "q3", "a": "q2", "order-1": "q2", "order-2": "q2", "user.42": "q3"}
	for key, want := range goldenEqual {
		if got := eq.routeKey(key); got != want {
			t.Errorf("equal weights: key %q went to %s, want %s", key, got, want)
		}
	}
}

// TestReplay: after bindings come and go, the exchange routes exactly as
// one built from the surviving bindings in their order, which is what a
// restart or a new instance gets.
func TestReplay(t *testing.T) {
	live := newFixture(t, nil)
	a := live.bind("a", "1")
	b := live.bind("b", "2")
	live.bind("c", "3")
	live.unbind(a)
	live.bind("a", "4")
	live.bind("d", "1")
	live.unbind(b)

	replayed := newFixture(t, nil)
	replayed.bind("c", "3")
	replayed.bind("a", "4")
	replayed.bind("d", "1")

	x, y := live.spread(10000), replayed.spread(10000)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("key %d: live %s, replayed %s", i, x[i], y[i])
		}
	}
}

func TestDuplicates(t *testing.T) {
	f := newFixture(t, nil)
	first := f.bind("q1", "1")
	f.bind("q1", "5") // ignored while the first is there
	f.bind("q2", "1")
	if s := shares(f.spread(keys))["q1"]; math.Abs(s-0.5) > 0.015 {
		t.Errorf("q1 has %.4f of the keys with weight 1 against 1, want 0.5", s)
	}
	if info := f.x.Info(); info["bindings"] != 3 || info["destinations"] != 2 || info["total_weight"] != int64(2) {
		t.Errorf("info: %v", info)
	}
	// Removing the first makes the second binding to q1 the active one.
	f.unbind(first)
	if s := shares(f.spread(keys))["q1"]; math.Abs(s-5.0/6) > 0.015 {
		t.Errorf("q1 has %.4f of the keys with weight 5 against 1, want %.4f", s, 5.0/6)
	}
	// A queue and an exchange of the same name are different destinations.
	g := newFixture(t, nil)
	g.bind("same", "1")
	b := &sdk.Binding{ID: 7, Kind: sdk.ToExchange, Destination: "same", Key: "1"}
	if err := g.x.AddBinding(b); err != nil {
		t.Fatal(err)
	}
	if n := len(g.x.active); n != 2 {
		t.Errorf("%d active bindings, want 2", n)
	}
}

func TestEmptyAndSingle(t *testing.T) {
	f := newFixture(t, nil)
	if got := f.routeKey("k"); got != "" {
		t.Errorf("no bindings: routed to %s", got)
	}
	id := f.bind("only", "3")
	for _, k := range []string{"", "a", "b"} {
		if got := f.routeKey(k); got != "only" {
			t.Errorf("one binding: %q routed to %q", k, got)
		}
	}
	f.unbind(id)
	if got := f.routeKey("k"); got != "" {
		t.Errorf("after unbinding: routed to %s", got)
	}
}

func TestHashHeader(t *testing.T) {
	f := newFixture(t, map[string]any{"hash-header": "hash-on"})
	for _, q := range []string{"q1", "q2", "q3", "q4"} {
		f.bind(q, "1")
	}
	msg := func(rk string, headers map[string]any) *sdk.Message {
		m, err := sdk.MakeMessage(rk, headers, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// The routing key plays no part.
	seen := map[string]bool{}
	for i := range 200 {
		seen[f.route(msg(fmt.Sprint(i), map[string]any{"hash-on": "fixed"}))] = true
	}
	if len(seen) != 1 {
		t.Errorf("one header value went to %d queues", len(seen))
	}
	// Values hash by their text: an integer of any width and its digits
	// agree, and so do strings and byte arrays.
	for i := range 100 {
		want := f.route(msg("", map[string]any{"hash-on": fmt.Sprint(i)}))
		for _, v := range []any{int8(i), uint8(i), int16(i), int32(i), uint32(i), int64(i), []byte(fmt.Sprint(i))} {
			if got := f.route(msg("", map[string]any{"hash-on": v})); got != want {
				t.Fatalf("header %T(%d) went to %s, the string to %s", v, i, got, want)
			}
		}
	}
	// Different values spread.
	seen = map[string]bool{}
	for i := range 200 {
		seen[f.route(msg("", map[string]any{"hash-on": i}))] = true
	}
	if len(seen) != 4 {
		t.Errorf("200 header values reached %d of 4 queues", len(seen))
	}
	// Without the header (or without headers) every message hashes as the
	// empty value: one destination for all, like RabbitMQ's `undefined`.
	missing := f.route(msg("a", nil))
	for i := range 100 {
		if got := f.route(msg(fmt.Sprint(i), map[string]any{"other": i})); got != missing {
			t.Fatalf("messages without the header went to %s and %s", missing, got)
		}
	}
	if got := f.route(msg("", map[string]any{"hash-on": ""})); got != missing {
		t.Errorf("the empty header went to %s, a missing one to %s", got, missing)
	}
	if got := f.route(msg("", map[string]any{"hash-on": nil})); got != missing {
		t.Errorf("a void header went to %s, a missing one to %s", got, missing)
	}
	// Other kinds hash without failing.
	for _, v := range []any{true, false, 1.5, float32(2.5), map[string]any{"a": 1}, []any{1, "x"}} {
		if got := f.route(msg("", map[string]any{"hash-on": v})); got == "" {
			t.Errorf("%T header routed nowhere", v)
		}
	}
}

// props encodes a property list with message-id, correlation-id and
// timestamp, each when given.
func props(messageID, correlationID string, timestamp int64) (uint16, []byte) {
	var flags uint16
	var b []byte
	if correlationID != "" {
		flags |= 0x0400
		b = append(append(b, byte(len(correlationID))), correlationID...)
	}
	if messageID != "" {
		flags |= 0x0080
		b = append(append(b, byte(len(messageID))), messageID...)
	}
	if timestamp != 0 {
		flags |= 0x0040
		b = binary.BigEndian.AppendUint64(b, uint64(timestamp))
	}
	return flags, b
}

func TestHashProperty(t *testing.T) {
	for _, prop := range []string{"message_id", "correlation_id", "timestamp"} {
		t.Run(prop, func(t *testing.T) {
			f := newFixture(t, map[string]any{"hash-property": prop})
			for _, q := range []string{"q1", "q2", "q3"} {
				f.bind(q, "2")
			}
			seen := map[string]bool{}
			for i := range 300 {
				var flags uint16
				var p []byte
				switch prop {
				case "message_id":
					flags, p = props(fmt.Sprint("m", i), "", 0)
				case "correlation_id":
					flags, p = props("", fmt.Sprint("c", i), 0)
				case "timestamp":
					flags, p = props("", "", 1700000000+int64(i))
				}
				got := f.route(sdk.RawMessage("same-key", flags, p, nil))
				again := f.route(sdk.RawMessage("other-key", flags, p, nil))
				if got != again {
					t.Fatalf("the routing key changed the destination")
				}
				seen[got] = true
			}
			if len(seen) != 3 {
				t.Errorf("300 values reached %d of 3 queues", len(seen))
			}
			// A message without the property hashes as the empty value.
			none := f.route(sdk.RawMessage("k1", 0, nil, nil))
			for i := range 50 {
				flags, p := props("", "", 0)
				if got := f.route(sdk.RawMessage(fmt.Sprint(i), flags, p, nil)); got != none {
					t.Fatalf("messages without %s went to %s and %s", prop, none, got)
				}
			}
		})
	}
	// The timestamp hashes by its decimal digits, as RabbitMQ's does.
	f := newFixture(t, map[string]any{"hash-property": "timestamp"})
	g := newFixture(t, map[string]any{"hash-header": "ts"})
	for _, q := range []string{"a", "b", "c"} {
		f.bind(q, "1")
		g.bind(q, "1")
	}
	for i := range 100 {
		ts := 1700000000 + int64(i)*7919
		flags, p := props("", "", ts)
		m, _ := sdk.MakeMessage("", map[string]any{"ts": fmt.Sprint(ts)}, nil)
		if x, y := f.route(sdk.RawMessage("", flags, p, nil)), g.route(m); x != y {
			t.Fatalf("timestamp %d: property to %s, its digits to %s", ts, x, y)
		}
	}
}

func TestDeclareErrors(t *testing.T) {
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"hash-header": "h", "hash-property": "message_id"}, "hash-header and hash-property are mutually exclusive"},
		{map[string]any{"hash-property": "priority"}, "Unsupported property: 'priority'"},
		{map[string]any{"hash-property": 3}, "Unsupported property: a value of type 'l'"},
		{map[string]any{"hash-header": 3}, "hash-header must be a string"},
		{map[string]any{"hash-header": ""}, "hash-header must be a string naming a header"},
		{map[string]any{"hash-header": nil}, "not a void value"},
	}
	for _, c := range cases {
		tb, _ := sdk.MakeTable(c.args)
		err := Type{}.ValidateDeclare(&sdk.Declaration{Args: tb})
		checkError(t, fmt.Sprint(c.args), err, c.want)
		if _, err := (Type{}).Create(&sdk.Declaration{Args: tb}); err == nil {
			t.Errorf("%v: Create accepted what ValidateDeclare refused", c.args)
		}
	}
	for _, ok := range []map[string]any{nil, {"hash-header": "h"}, {"hash-property": "timestamp"}, {"x-delayed-type": "direct", "other": 1}} {
		tb, _ := sdk.MakeTable(ok)
		if err := (Type{}).ValidateDeclare(&sdk.Declaration{Args: tb}); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

func TestWeights(t *testing.T) {
	good := map[string]uint32{"1": 1, "2": 2, "007": 7, "+3": 3, "4294967295": math.MaxUint32, "20": 20, "10000": 10000}
	for key, want := range good {
		if w, err := ParseWeight(key); err != nil || w != want {
			t.Errorf("ParseWeight(%q) = %d, %v; want %d", key, w, err, want)
		}
	}
	bad := map[string]string{
		"0":                       "binding key '0' is not a valid weight: it must be greater than 0",
		"-1":                      "binding key '-1' is not a valid weight: it must be greater than 0",
		"000":                     "must be greater than 0",
		"":                        "binding key '' is not a valid weight: an x-consistent-hash binding key must be a positive integer",
		"abc":                     "binding key 'abc' is not a valid weight",
		"1.5":                     "binding key '1.5' is not a valid weight",
		" 1":                      "binding key ' 1' is not a valid weight",
		"1 ":                      "binding key '1 ' is not a valid weight",
		"+":                       "binding key '+' is not a valid weight",
		"-":                       "binding key '-' is not a valid weight: an x-consistent-hash",
		"0x10":                    "binding key '0x10'",
		"4294967296":              "at most 4294967295",
		"99999999999999999999999": "at most 4294967295",
	}
	f := newFixture(t, nil)
	for key, want := range bad {
		b := &sdk.Binding{Key: key, Destination: "q"}
		checkError(t, "validate "+key, f.x.ValidateBinding(b), want)
		checkError(t, "add "+key, f.x.AddBinding(b), want)
	}
	if len(f.x.members) != 0 {
		t.Errorf("refused bindings were added: %v", f.x.members)
	}
}

func checkError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want %q", what, err, want)
		return
	}
	if e, ok := err.(*sdk.Error); !ok || e.Code != sdk.PreconditionFailed {
		t.Errorf("%s: want a 406 *sdk.Error, got %#v", what, err)
	}
}

func TestInfo(t *testing.T) {
	f := newFixture(t, map[string]any{"hash-property": "correlation_id"})
	f.bind("a", "3")
	f.bind("b", "4")
	info := f.x.Info()
	if info["bindings"] != 2 || info["destinations"] != 2 || info["total_weight"] != int64(7) || info["hash_on"] != "property correlation_id" {
		t.Errorf("info: %v", info)
	}
	if _, err := sdk.MakeTable(info); err != nil {
		t.Errorf("info does not encode: %v", err)
	}
}

// TestRouteDoesNotAllocate: the route path is allocation-free, for the
// routing key and for header values that hash by their text.
func TestRouteDoesNotAllocate(t *testing.T) {
	for _, c := range []struct {
		args map[string]any
		n    int
	}{
		{nil, 4}, {map[string]any{"hash-header": "h"}, 4}, {nil, 40},
		{map[string]any{"hash-algorithm": "rabbitmq"}, 40},
		{map[string]any{"hash-algorithm": "rabbitmq", "hash-header": "h"}, 4},
		{map[string]any{"hash-algorithm": "rabbitmq", "hash-property": "timestamp"}, 4},
	} {
		args := c.args
		f := newFixture(t, args)
		for i := range c.n {
			f.bind(fmt.Sprint("q", i), fmt.Sprint(i%3+1))
		}
		m, _ := sdk.MakeMessage("some.routing.key", map[string]any{"h": 123456789, "x": "y"}, nil)
		var r sdk.Result
		r.Add(0)
		if n := testing.AllocsPerRun(100, func() {
			r.Reset()
			m.Reset(m.RoutingKey(), m.Flags(), m.RawProperties(), nil)
			_ = f.x.Route(m, &r)
		}); n != 0 {
			t.Errorf("%v: Route allocates %.1f times", args, n)
		}
	}
}

// benchExchange is an exchange with n bindings, of weight 1 or of weights
// 1 to 4, placing by algorithm ("" for the default).
func benchExchange(b *testing.B, algorithm string, n int, weighted bool) *Exchange {
	args := map[string]any{}
	if algorithm != "" {
		args["hash-algorithm"] = algorithm
	}
	tb, _ := sdk.MakeTable(args)
	x, err := Type{}.Create(&sdk.Declaration{Args: tb})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		w := "1"
		if weighted {
			w = fmt.Sprint(i%4 + 1)
		}
		_ = x.AddBinding(&sdk.Binding{ID: sdk.BindingID(i), Destination: fmt.Sprint("q", i), Key: w})
	}
	return x.(*Exchange)
}

func BenchmarkRoute(b *testing.B) {
	for _, algorithm := range []string{AlgorithmRendezvous, AlgorithmRabbitMQ} {
		for _, n := range []int{4, 16, 1000} {
			for _, weighted := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/bindings=%d/weighted=%v", algorithm, n, weighted), func(b *testing.B) {
					x := benchExchange(b, algorithm, n, weighted)
					m, _ := sdk.MakeMessage("customer.12345.orders", nil, nil)
					var r sdk.Result
					b.ReportAllocs()
					for b.Loop() {
						r.Reset()
						_ = x.Route(m, &r)
					}
				})
			}
		}
	}
}

// TestBeatsBounds: the comparison that skips logarithms where bounds
// settle it picks what comparing the scores always would.
func TestBeatsBounds(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 12 {
		f.bind(fmt.Sprint("q", i), fmt.Sprint([]int{1, 2, 3, 1000, 1001, 7}[i%6]))
	}
	exact := func(i, j int, key uint64) bool {
		a, b := &f.x.active[i], &f.x.active[j]
		da, db := draw(key, a), draw(key, b)
		if sa, sb := score(da, a), score(db, b); a.weight != b.weight && sa != sb {
			return sa < sb
		}
		if da != db {
			return da > db
		}
		return a.seed < b.seed
	}
	for s := range uint32(20000) {
		key := slotKey(s)
		for i := range f.x.active {
			for j := range f.x.active {
				if i != j && f.x.beats(i, j, key) != exact(i, j, key) {
					t.Fatalf("slot %d: bindings %d and %d compare differently with bounds", s, i, j)
				}
			}
		}
	}
}
