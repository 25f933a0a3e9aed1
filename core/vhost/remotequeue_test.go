package vhost_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// oneNodeCluster is a cluster as one node sees it, with nobody else in
// it: a command is applied here at once, forwards are recorded, and the
// other nodes are up or not as the test says.
type oneNodeCluster struct {
	v *vhost.VHost

	mu        sync.Mutex
	up        map[string]bool
	forwarded []string // home:queue
}

func (c *oneNodeCluster) Node() string { return "a" }
func (c *oneNodeCluster) Propose(cmd protocol.Table) error {
	return c.v.Apply(cmd)
}
func (c *oneNodeCluster) ProposeLater(cmd protocol.Table) { _ = c.v.Apply(cmd) }
func (c *oneNodeCluster) Call(node string, _ protocol.Table) (protocol.Table, error) {
	return protocol.Table{"messages": int64(4), "consumers": int64(1)}, nil
}
func (c *oneNodeCluster) Up(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up[node]
}
func (c *oneNodeCluster) Nodes() []string      { return []string{"a", "b"} }
func (c *oneNodeCluster) NodeID(string) uint64 { return 1 }
func (c *oneNodeCluster) Removed(uint64) bool  { return false }
func (c *oneNodeCluster) Sync() error          { return nil }
func (c *oneNodeCluster) Forward(home, _ string, queues []string, _ *message.Message, _ bool, done func(error)) {
	c.mu.Lock()
	for _, q := range queues {
		c.forwarded = append(c.forwarded, home+":"+q)
	}
	c.mu.Unlock()
	done(nil)
}

func (c *oneNodeCluster) setUp(node string, up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up[node] = up
}

func (c *oneNodeCluster) takeForwarded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.forwarded
	c.forwarded = nil
	return out
}

func newClusterVHost(t *testing.T) (*vhost.VHost, *oneNodeCluster) {
	t.Helper()
	c := &oneNodeCluster{up: map[string]bool{"a": true, "b": true}}
	v := newVHost(t, vhost.Config{Cluster: c})
	c.v = v
	return v, c
}

// A classic queue homed on another node is one of the vhost's Queues:
// listed with its home, reached by routing and forwarded there (or left
// out while its home is down), declared passively, counted and purged
// through calls, and refused for what needs it here.
func TestAQueueHomedElsewhereIsAQueue(t *testing.T) {
	v, c := newClusterVHost(t)
	if err := v.ApplyCommand(topology.DeclareQueue{Def: topology.QueueDef{Name: "x", Durable: true, Home: "b", ID: 7}}); err != nil {
		t.Fatal(err)
	}
	info, ok := v.QueueInfo("x")
	if !ok || info.Home != "b" || !info.Durable || info.Ready != 4 || info.Consumers != 1 || info.Down {
		t.Fatalf("x as listed: %+v, %v", info, ok)
	}
	for _, q := range v.Queues() {
		if q.Name == "x" {
			t.Fatal("a queue homed elsewhere counted among this node's")
		}
	}

	out := publish(t, v, "", "x", "m")
	if out.Forwarded == nil || out.HomesDown != 0 {
		t.Fatalf("outcome %+v", out)
	}
	if got := c.takeForwarded(); len(got) != 1 || got[0] != "b:x" {
		t.Fatalf("forwarded %v, want [b:x]", got)
	}

	d, err := v.Declare(topology.QueueDef{Name: "x", Durable: true}, true)
	if err != nil || d.Home() != "b" {
		t.Fatalf("passive declare: %+v, %v", d, err)
	}
	if ready, consumers, err := v.Counts(d); err != nil || ready != 4 || consumers != 1 {
		t.Fatalf("counts %d %d %v", ready, consumers, err)
	}
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "x", Durable: true}, true); err == nil || !strings.Contains(err.Error(), "is on node 'b'") {
		t.Fatalf("declare for use here: %v", err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "x", Durable: false}, false); reply.As(err).Code != protocol.PreconditionFailed {
		t.Fatalf("inequivalent redeclare: %v", err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "x", Exclusive: true}, false); reply.As(err).Code != protocol.ResourceLocked {
		t.Fatalf("exclusive declare of its name: %v", err)
	}

	c.setUp("b", false)
	if out := publish(t, v, "", "x", "m"); out.Forwarded != nil || out.HomesDown != 1 {
		t.Fatalf("outcome with its home down %+v", out)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "x", Durable: true}, true); err == nil || !strings.Contains(err.Error(), "home node 'b'") {
		t.Fatalf("passive declare with its home down: %v", err)
	}
	if _, err := v.PurgeQueue("x", nil); err == nil || !strings.Contains(err.Error(), "down or inaccessible") {
		t.Fatalf("purge with its home down: %v", err)
	}

	if err := v.ApplyCommand(topology.DeleteQueue{Name: "x", Incarnation: 8}); err != nil || !v.HasQueue("x") {
		t.Fatalf("a delete of another incarnation: %v", err)
	}
	if err := v.ApplyCommand(topology.DeleteQueue{Name: "x", Incarnation: 7}); err != nil || v.HasQueue("x") {
		t.Fatalf("its delete: %v", err)
	}
}

// A local exclusive queue that nobody bound yet, declared before the
// cluster committed a queue of the same name homed elsewhere, shadows that
// one for this node's clients: they reach, list and route to their own.
// The other is still the cluster's: its delete leaves the local one.
func TestALocalExclusiveQueueShadowsOneHomedElsewhere(t *testing.T) {
	v, c := newClusterVHost(t)
	owner := new(int)
	local, _, err := v.DeclareQueue(topology.QueueDef{Name: "y", Exclusive: true, Owner: owner}, false)
	if err != nil {
		t.Fatal(err)
	}
	cq, _ := classicqueue.Of(local)
	if err := v.ApplyCommand(topology.DeclareQueue{Def: topology.QueueDef{Name: "y", Durable: true, Home: "b", ID: 9}}); err != nil {
		t.Fatal(err)
	}
	if q, err := v.Queue("y", owner); err != nil || q != local {
		t.Fatalf("the owner's queue: %v, %v", q, err)
	}
	if src, err := v.Source("y", owner); err != nil || src != queuetype.Source(cq) {
		t.Fatalf("the owner's source: %v, %v", src, err)
	}
	if names := v.QueueNames(); len(names) != 1 {
		t.Fatalf("listed %v, want y once", names)
	}
	if info, _ := v.QueueInfo("y"); info.Home != "" || !info.Exclusive {
		t.Fatalf("y as listed: %+v", info)
	}
	if out := publish(t, v, "", "y", "m"); out.Queues != 1 || out.Forwarded != nil {
		t.Fatalf("outcome %+v", out)
	}
	if got := c.takeForwarded(); len(got) != 0 {
		t.Fatalf("forwarded %v", got)
	}
	if err := v.ApplyCommand(topology.DeleteQueue{Name: "y", Incarnation: 9}); err != nil {
		t.Fatal(err)
	}
	if q, err := v.Queue("y", owner); err != nil || q != local || ready(t, cq) != 1 {
		t.Fatalf("after the other's delete: %v, %v", q, err)
	}
}
