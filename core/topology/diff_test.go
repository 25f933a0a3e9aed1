package topology

import (
	"reflect"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/protocol"
)

// Diff makes what a node has into what a snapshot says, changing only what
// differs.
func TestDiff(t *testing.T) {
	toQ := func(name string) exchange.Destination {
		return exchange.Destination{Kind: exchange.ToQueue, Name: name}
	}
	x := func(name, typ string) ExchangeRecord { return ExchangeRecord{Name: name, Type: typ, Durable: true} }
	q := func(name string, id uint64, members ...string) QueueRecord {
		return QueueRecord{Name: name, Durable: true, Incarnation: id, Members: members}
	}
	b := func(src, q, key string) BindingRecord {
		return BindingRecord{Source: src, Destination: toQ(q), Key: key}
	}
	def := func(r QueueRecord) QueueDef { d := r.Def(""); d.FromSnapshot = true; return d }

	have := Snapshot{
		Exchanges: []ExchangeRecord{x("same", "direct"), x("retyped", "direct"), x("gone", "fanout")},
		Queues:    []QueueRecord{q("same", 1), q("again", 2), q("gone", 3), q("moved", 4, "n1", "n2")},
		Bindings:  []BindingRecord{b("same", "same", "k"), b("same", "same", "gone")},
	}
	want := Snapshot{
		Exchanges: []ExchangeRecord{x("same", "direct"), x("retyped", "topic"), x("new", "headers")},
		Queues:    []QueueRecord{q("same", 1), q("again", 9), q("new", 5), q("moved", 4, "n2", "n3")},
		Bindings:  []BindingRecord{b("same", "same", "k"), b("same", "new", "k"), b("same", "new", "k")},
	}
	got, err := Diff(have, want)
	if err != nil {
		t.Fatal(err)
	}
	wantChanges := Changes{
		DeleteExchanges:  []string{"retyped", "gone"},
		DeclareExchanges: []ExchangeRecord{x("new", "headers"), x("retyped", "topic"), x("same", "direct")},
		DeleteQueues:     []DeleteQueue{{Name: "again", Incarnation: 2}, {Name: "gone", Incarnation: 3}},
		Members:          []QuorumMembers{{Name: "moved", Incarnation: 4, Members: []string{"n2", "n3"}}},
		DeclareQueues:    []QueueDef{def(q("again", 9)), def(q("new", 5))},
		Unbind:           []BindingRecord{b("same", "same", "gone")},
		Bind:             []BindingRecord{b("same", "same", "k"), b("same", "new", "k")},
	}
	if !reflect.DeepEqual(got, wantChanges) {
		t.Errorf("Diff:\n got %+v\nwant %+v", got, wantChanges)
	}

	// Nothing differs: nothing is deleted.
	same, err := Diff(want, want)
	if err != nil || same.DeleteExchanges != nil || same.DeleteQueues != nil || same.Members != nil || same.DeclareQueues != nil || same.Unbind != nil {
		t.Errorf("Diff of a snapshot with itself = %+v, %v", same, err)
	}

	// A binding whose arguments do not encode is reported, and the rest
	// still made.
	bad := want
	bad.Bindings = append([]BindingRecord{{Source: "same", Destination: toQ("same"), Args: protocol.Table{"x": struct{}{}}}}, want.Bindings...)
	c, err := Diff(have, bad)
	if err == nil || len(c.Bind) != 2 {
		t.Errorf("Diff with a bad binding = %d binds, %v; want 2 and an error", len(c.Bind), err)
	}
}
