package membership_test

import (
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/membership"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// nodes is a cluster of named nodes, some down, that carries nothing: all
// Place asks of it is who is there and who is up.
type nodes struct {
	self string
	all  []string
	down []string
}

func (c *nodes) Node() string                                        { return c.self }
func (c *nodes) Propose(protocol.Table) error                        { return nil }
func (c *nodes) ProposeLater(protocol.Table)                         {}
func (c *nodes) Call(string, protocol.Table) (protocol.Table, error) { return nil, nil }
func (c *nodes) Up(n string) bool                                    { return slices.Contains(c.all, n) && !slices.Contains(c.down, n) }
func (c *nodes) Nodes() []string                                     { return c.all }
func (c *nodes) Removed(uint64) bool                                 { return false }
func (c *nodes) Sync() error                                         { return nil }
func (c *nodes) Forward(_, _ string, _ []string, _ *message.Message, _ bool, done func(error)) {
	done(nil)
}

// NodeID numbers the nodes from 1, in the order all names them.
func (c *nodes) NodeID(n string) uint64 {
	if i := slices.Index(c.all, n); i >= 0 {
		return uint64(i + 1)
	}
	return 0
}

// TestPlace: a new replicated queue's members are this node first
// (client-local) or the node leading fewest (balanced), then the nodes up
// holding fewest members, by name; as many as its size argument says, at
// most the nodes up.
func TestPlace(t *testing.T) {
	for _, c := range []struct {
		name    string
		cluster nodes
		args    protocol.Table
		want    []string
		fails   bool
	}{
		{name: "three by default, this node first", cluster: nodes{self: "c", all: []string{"a", "b", "c", "d", "e"}},
			want: []string{"c", "a", "b"}},
		{name: "a node down is left out", cluster: nodes{self: "c", all: []string{"a", "b", "c", "d"}, down: []string{"a"}},
			want: []string{"c", "b", "d"}},
		{name: "the size argument", cluster: nodes{self: "a", all: []string{"a", "b", "c", "d"}},
			args: protocol.Table{"x-quorum-initial-group-size": int64(2)}, want: []string{"a", "b"}},
		{name: "at most the nodes up", cluster: nodes{self: "a", all: []string{"a", "b", "c"}, down: []string{"c"}},
			args: protocol.Table{"x-quorum-initial-group-size": int64(5)}, want: []string{"a", "b"}},
		{name: "this node down leads nothing", cluster: nodes{self: "c", all: []string{"a", "b", "c"}, down: []string{"c"}},
			want: []string{"a", "b"}},
		{name: "balanced", cluster: nodes{self: "c", all: []string{"a", "b", "c"}},
			args: protocol.Table{"x-queue-leader-locator": "balanced"}, want: []string{"a", "b", "c"}},
		{name: "none up", cluster: nodes{self: "c", all: []string{"a", "b", "c"}, down: []string{"a", "b", "c"}},
			fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop(), Cluster: &c.cluster})
			t.Cleanup(v.Close)
			got, err := membership.Place(v.Host(), topology.QueueDef{Name: "q", Args: c.args}, "x-quorum-initial-group-size")
			switch {
			case c.fails && err == nil:
				t.Fatalf("placed %v with no node up", got)
			case !c.fails && err != nil:
				t.Fatal(err)
			case !slices.Equal(got, c.want):
				t.Fatalf("placed %v, want %v", got, c.want)
			}
		})
	}
}

// TestBootIDs: a new group's first configuration is the ids its
// declaration names, or, in a declaration from before ids were per
// incarnation, the ids its members' names had then.
func TestBootIDs(t *testing.T) {
	def := topology.QueueDef{Members: []string{"a", "b"}, MemberIDs: []uint64{7, 9}}
	if got := membership.BootIDs(def); !slices.Equal(got, []uint64{7, 9}) {
		t.Fatalf("boot ids %v", got)
	}
	legacy := membership.BootIDs(topology.QueueDef{Members: []string{"a", "b"}})
	if len(legacy) != 2 || legacy[0] == 0 || legacy[0] == legacy[1] {
		t.Fatalf("legacy boot ids %v", legacy)
	}
}

// TestRecord: a replicated queue's record names its members, its home
// (the first) and its incarnation only in a cluster.
func TestRecord(t *testing.T) {
	if rec := membership.Record(nil, 5, nil); rec.Home != "" || rec.Incarnation != 0 || rec.StoreID != 5 || !rec.Durable {
		t.Fatalf("on a node of its own: %+v", rec)
	}
	rec := membership.Record(nil, 5, []string{"b", "a"})
	if rec.Home != "b" || rec.Incarnation != 5 || !slices.Equal(rec.Members, []string{"b", "a"}) {
		t.Fatalf("in a cluster: %+v", rec)
	}
}
