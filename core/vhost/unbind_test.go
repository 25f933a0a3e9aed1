package vhost_test

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// modelBinding is a binding as the model of TestUnbindingChurn has it.
type modelBinding struct{ source, queue, key string }

// TestUnbindingChurn binds queues to a topic, a direct and a fanout
// exchange, then deletes queues and unbinds single bindings in a random
// order, and after each change checks the vhost against a model: the
// bindings listed and stored, each exchange's count, each queue's
// bindings, and where each exchange routes. One queue has more bindings
// than the store takes at once (storeWriters), so its delete writes in
// several rounds.
func TestUnbindingChurn(t *testing.T) {
	st := memStore(t)
	v := newVHost(t, vhost.Config{Store: st})
	for name, typ := range map[string]string{"t": "topic", "d": "direct", "f": "fanout"} {
		mustExchange(t, v, name, typ, nil)
	}
	model := map[modelBinding]bool{}
	bind := func(b modelBinding) {
		t.Helper()
		mustBind(t, v, b.source, b.queue, b.key)
		model[b] = true
	}
	const queues = 12
	for i := range queues {
		q := fmt.Sprint("q", i)
		mustQueue(t, v, q, nil)
		perQueue := 20
		if i == 0 {
			perQueue = vhost.StoreWritersForTest + 44
		}
		for j := range perQueue {
			bind(modelBinding{"t", q, fmt.Sprintf("%s.k%d", q, j)})
		}
		for j := range 3 {
			bind(modelBinding{"t", q, fmt.Sprintf("shared.k%d", (i+j)%5)})
		}
		bind(modelBinding{"d", q, "all"})
		bind(modelBinding{"d", q, q})
		bind(modelBinding{"f", q, ""})
	}
	rng := rand.New(rand.NewPCG(29, 14))
	order := rng.Perm(queues)
	for step := 0; len(model) > 0; step++ {
		if step%3 == 2 && len(order) > 0 {
			q := fmt.Sprint("q", order[0])
			order = order[1:]
			if _, err := v.DeleteQueue(q, nil, false, false); err != nil {
				t.Fatal(err)
			}
			maps.DeleteFunc(model, func(b modelBinding, _ bool) bool { return b.queue == q })
		} else {
			list := slices.SortedFunc(maps.Keys(model), func(a, b modelBinding) int {
				return cmp.Compare(a.source+" "+a.queue+" "+a.key, b.source+" "+b.queue+" "+b.key)
			})
			b := list[rng.IntN(len(list))]
			if err := v.Unbind(b.source, exchange.Destination{Kind: exchange.ToQueue, Name: b.queue}, b.key, nil, nil); err != nil {
				t.Fatal(err)
			}
			delete(model, b)
		}
		checkAgainstModel(t, v, st, model, step)
	}
}

func checkAgainstModel(t *testing.T, v *vhost.VHost, st *storage.Store, model map[modelBinding]bool, step int) {
	t.Helper()
	var want []string
	perSource, perQueue := map[string]int{}, map[string]int{}
	for b := range model {
		want = append(want, fmt.Sprint(b))
		perSource[b.source]++
		perQueue[b.queue]++
	}
	slices.Sort(want)
	var listed []string
	for _, b := range v.Bindings() {
		listed = append(listed, fmt.Sprint(modelBinding{b.Source, b.Destination.Name, b.Key}))
	}
	slices.Sort(listed)
	if !slices.Equal(listed, want) {
		t.Fatalf("step %d: %d bindings listed, the model has %d", step, len(listed), len(want))
	}
	recs, err := st.Meta(storage.KindBinding, "/")
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, r := range recs {
		stored = append(stored, fmt.Sprint(modelBinding{r.Rec["source"].(string), r.Rec["destination"].(string), r.Rec["routing_key"].(string)}))
	}
	slices.Sort(stored)
	if !slices.Equal(stored, want) {
		t.Fatalf("step %d: %d bindings stored, the model has %d", step, len(stored), len(want))
	}
	counted := map[string]int{}
	for _, x := range v.Exchanges() {
		counted[x.Name] = x.Bindings
	}
	for _, name := range []string{"t", "d", "f"} {
		if _, err := v.Exchange(name); err != nil {
			t.Fatal(err)
		}
		if n := counted[name]; n != perSource[name] {
			t.Fatalf("step %d: exchange %s counts %d bindings, the model %d", step, name, n, perSource[name])
		}
	}
	for i := range 12 {
		q := fmt.Sprint("q", i)
		dest := exchange.Destination{Kind: exchange.ToQueue, Name: q}
		n, ok := v.BoundToForTest(dest)
		if n != perQueue[q] {
			t.Fatalf("step %d: %s has %d bindings, the model %d", step, q, n, perQueue[q])
		}
		if ok != (perQueue[q] > 0) {
			t.Fatalf("step %d: %s has a binding set: %v, the model %d bindings", step, q, ok, perQueue[q])
		}
	}
	for _, r := range []struct{ source, key string }{
		{"t", "q0.k7"}, {"t", "q0.k290"}, {"t", "q3.k2"}, {"t", "shared.k1"}, {"d", "all"}, {"d", "q5"}, {"f", "any"},
	} {
		var routes []string
		for b := range model {
			if b.source == r.source && (b.key == r.key || r.source == "f") {
				routes = append(routes, b.queue)
			}
		}
		slices.Sort(routes)
		if got := routedQueues(t, v, r.source, r.key); !slices.Equal(got, routes) {
			t.Fatalf("step %d: %s routes %q to %v, the model to %v", step, r.source, r.key, got, routes)
		}
	}
}

// routedQueues asks the exchange's router where key goes, sorted.
func routedQueues(t *testing.T, v *vhost.VHost, source, key string) []string {
	t.Helper()
	x, err := v.Exchange(source)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New(source, key, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res exchange.Result
	if err := x.RouteForTest(m, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range res.Bindings {
		out = append(out, b.Destination.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// recordingType is an exchange type whose routers record the bindings
// they are given, in order.
type recordingType struct{ added *[]uint64 }

func (recordingType) Name() string                              { return "x-recording" }
func (recordingType) ValidateDeclare(exchange.Definition) error { return nil }
func (t recordingType) Create(exchange.Definition) (exchange.Router, error) {
	*t.added = nil
	return recordingRouter{t}, nil
}

type recordingRouter struct{ t recordingType }

func (r recordingRouter) ValidateBinding(*exchange.Binding) error { return nil }
func (r recordingRouter) AddBinding(b *exchange.Binding) error {
	*r.t.added = append(*r.t.added, b.Seq)
	return nil
}
func (r recordingRouter) RemoveBindings([]*exchange.Binding) error       { return nil }
func (r recordingRouter) Route(*message.Message, *exchange.Result) error { return nil }
func (r recordingRouter) PolicyChanged(protocol.Table) error             { return nil }
func (r recordingRouter) Delete()                                        {}
func (r recordingRouter) Info() map[string]any                           { return nil }

// TestRebuiltRouterGetsBindingsInSeqOrder: the exchange's set of bindings
// reorders them as bindings go, yet a router rebuilt from it (a plugin's
// type coming back) is given them in the order they were made, which
// order-sensitive types rely on (exchange.Router's invariants).
func TestRebuiltRouterGetsBindingsInSeqOrder(t *testing.T) {
	var added []uint64
	types := exchange.NewRegistry()
	if err := types.Register(recordingType{&added}); err != nil {
		t.Fatal(err)
	}
	v := newVHost(t, vhost.Config{Types: types})
	mustExchange(t, v, "x", "x-recording", nil)
	for i := range 40 {
		mustQueue(t, v, fmt.Sprint("q", i), nil)
		mustBind(t, v, "x", fmt.Sprint("q", i), "k")
	}
	for _, i := range []int{3, 0, 17, 21, 22, 5} {
		if _, err := v.DeleteQueue(fmt.Sprint("q", i), nil, false, false); err != nil {
			t.Fatal(err)
		}
	}
	v.TypeGone("x-recording")
	if err := v.TypeBack("x-recording"); err != nil {
		t.Fatal(err)
	}
	if len(added) != 34 || !slices.IsSorted(added) {
		t.Fatalf("the rebuilt router was given %d bindings, by Seq %v", len(added), added)
	}
}
