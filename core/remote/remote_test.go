package remote

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// twoNodes is node "a" with a queue, and node "b" consuming it, wired by
// calls in memory; a node cut off answers nothing.
type twoNodes struct {
	mu    sync.Mutex
	down  map[string]bool
	nodes map[string]*Consuming
	q     *queue.Queue
}

type caller struct {
	n    *twoNodes
	from string
}

func (c caller) Up(node string) bool {
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	return !c.n.down[node] && !c.n.down[c.from]
}

func (c caller) Call(node string, req protocol.Table) (protocol.Table, error) {
	if !c.Up(node) {
		return nil, reply.Internal("node %s is down", node)
	}
	req["from"] = c.from
	target := c.n.nodes[node]
	switch op := String(req, "op"); op {
	case CallDeliver, CallCancelled:
		return target.HandleSourceCall(op, req)
	default:
		return target.HandleConsumerCall(op, c.n.q, req)
	}
}

func newTwoNodes(t *testing.T) *twoNodes {
	n := &twoNodes{down: map[string]bool{}, nodes: map[string]*Consuming{}}
	for _, name := range []string{"a", "b"} {
		n.nodes[name] = New("/", caller{n: n, from: name}, zerolog.Nop())
	}
	n.q = queue.New(queue.Config{Name: "q", VHost: "/", Settings: queue.DefaultSettings(), Events: noEvents{}})
	return n
}

// source is b's Source for a's queue.
func (n *twoNodes) source() *Source {
	b := n.nodes["b"]
	return b.Source(Home{Node: "a", Queue: "q", Call: func(op string, req protocol.Table) (protocol.Table, error) {
		req["op"] = op
		return b.caller.Call("a", req)
	}})
}

func (n *twoNodes) publish(t *testing.T, bodies ...string) {
	for _, body := range bodies {
		m, err := message.New("", "q", 0, nil, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		n.q.Enqueue(m)
	}
}

func (n *twoNodes) cut(node string, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[node] = cut
}

// sending says whether a consumer here is still sending to its node.
func (c *Consuming) sending() bool {
	c.mu.Lock() // a leaf: the consumers' locks are taken after
	var ks []*consumer
	for _, k := range c.consumers {
		ks = append(ks, k)
	}
	c.mu.Unlock()
	for _, k := range ks {
		k.mu.Lock()
		busy := k.sending
		k.mu.Unlock()
		if busy {
			return true
		}
	}
	return false
}

type noEvents struct{}

func (noEvents) DeadLetter(*queue.Queue, []queue.Dead) {}
func (noEvents) Unused(*queue.Queue)                   {}
func (noEvents) Abandoned(*queue.Queue)                {}

// channel is b's channel's consumer: it takes up to prefetch deliveries
// and records them in order.
type channel struct {
	mu        sync.Mutex
	prefetch  int
	got       []queue.Delivery
	cancelled bool
}

func (c *channel) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) >= c.prefetch {
		return false
	}
	c.got = append(c.got, d)
	return true
}
func (c *channel) Cancelled()      { c.mu.Lock(); c.cancelled = true; c.mu.Unlock() }
func (c *channel) NoAck() bool     { return false }
func (c *channel) Exclusive() bool { return false }
func (c *channel) Prefetch() int   { return c.prefetch }

func (c *channel) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range c.got {
		out = append(out, string(d.Entry.Msg.Body))
	}
	return out
}

func (c *channel) entries() []queue.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []queue.Entry
	for _, d := range c.got {
		out = append(out, d.Entry)
	}
	return out
}

// TestConsumingAcrossNodes: b's consumer gets a's messages in order,
// within its prefetch; its acks settle them on a; a requeue puts them
// back at their place, and a cancel gives back what b never took.
func TestConsumingAcrossNodes(t *testing.T) {
	n := newTwoNodes(t)
	n.publish(t, "1", "2", "3", "4", "5")
	src, ch := n.source(), &channel{prefetch: 2}
	if err := src.Consume(ch, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "b's consumer has its prefetch", func() bool { return len(ch.bodies()) == 2 })
	if got := fmt.Sprint(ch.bodies()); got != "[1 2]" {
		t.Fatalf("delivered %s, want [1 2] in order", got)
	}
	// The channel's prefetch, not only the credit on a, holds back the
	// rest: they wait in the Source or in the queue.
	if st := n.q.Stats(); st.Ready+st.Unacked != 5 {
		t.Fatalf("queue holds %d, want all 5 until acked", st.Ready+st.Unacked)
	}
	src.Ack(ch.entries())
	poll.Until(t, 5*time.Second, "the acks reach a", func() bool { return n.q.Stats().Ready+n.q.Stats().Unacked == 3 })
	// The credit on a is the prefetch at consume: two in flight.
	ch.mu.Lock()
	ch.got = nil
	ch.mu.Unlock()
	src.Kick()
	poll.Until(t, 5*time.Second, "the next two", func() bool { return len(ch.bodies()) == 2 })
	if got := fmt.Sprint(ch.bodies()); got != "[3 4]" {
		t.Fatalf("delivered %s, want [3 4]", got)
	}
	// 4 goes back to the head; what a sends next waits in the Source (the
	// channel is full) until the cancel gives it back.
	src.Requeue(ch.entries()[1:])
	src.Ack(ch.entries()[:1])
	src.Cancel(ch)
	if !poll.Within(5*time.Second, func() bool {
		st := n.q.Stats()
		return st.Ready == 2 && st.Unacked == 0 && st.Consumers == 0
	}) {
		t.Fatalf("4 and 5 not back in a's queue: %+v", n.q.Stats())
	}
	d, _, ok := n.q.Get(true)
	if !ok || string(d.Entry.Msg.Body) != "4" || !d.Redelivered {
		t.Fatalf("after the requeue, the head is %q (redelivered %v), want 4 redelivered", d.Entry.Msg.Body, d.Redelivered)
	}
}

// TestANodeCutOff: when b cannot be reached, a drops b's consumer and
// requeues what it held; b cancels its own consumer, whose client hears
// of it.
func TestANodeCutOff(t *testing.T) {
	n := newTwoNodes(t)
	n.publish(t, "1", "2")
	src, ch := n.source(), &channel{prefetch: 10}
	if err := src.Consume(ch, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "both delivered", func() bool { return len(ch.bodies()) == 2 })
	n.cut("b", true)
	n.nodes["a"].Check()
	n.nodes["b"].Check()
	if st := n.q.Stats(); st.Ready != 2 || st.Consumers != 0 {
		t.Fatalf("after b was cut off, a's queue: %+v; want both back and no consumer", st)
	}
	ch.mu.Lock()
	cancelled := ch.cancelled
	ch.mu.Unlock()
	if !cancelled {
		t.Fatal("b's client was not told its consumer ended")
	}
	// A restarted b forgets nothing here: a's consumers of b's earlier
	// run are ended when b says where its ids start.
	n.cut("b", false)
	src2, ch2 := n.source(), &channel{prefetch: 10}
	if err := src2.Consume(ch2, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "redelivered to b's new consumer", func() bool { return len(ch2.bodies()) == 2 })
	n.nodes["a"].ForgetConsumersOf("b", n.nodes["b"].seq.Load()+1)
	if st := n.q.Stats(); st.Ready != 2 || st.Consumers != 0 {
		t.Fatalf("after b's restart was announced: %+v; want both back and no consumer", st)
	}
}

// TestAcksAfterACancelCount: a client may settle what it holds after it
// cancelled its consumer. A delivery on its way when the cancel came goes
// back to the queue, but what the client holds stays its own: its ack,
// made after the cancel, settles it, and it is never delivered again.
func TestAcksAfterACancelCount(t *testing.T) {
	n := newTwoNodes(t)
	n.publish(t, "1", "2", "3", "4")
	src, ch := n.source(), &channel{prefetch: 2}
	if err := src.Consume(ch, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "the client holds 1 and 2", func() bool { return len(ch.bodies()) == 2 })
	held := ch.entries()
	// The ack of 1 gives a credit for 3, which reaches b and waits there:
	// the client's prefetch is full (it still counts 1 as its own).
	src.Ack(held[:1])
	poll.Until(t, 5*time.Second, "3 on its way to b", func() bool { return n.q.Stats().Ready == 1 })
	src.Cancel(ch)
	// The deliver call of 3 came back refused (the consumer is gone) and
	// a has dealt with it before the client's ack of 2 leaves b.
	poll.Until(t, 5*time.Second, "a's sending over", func() bool { return !n.nodes["a"].sending() })
	src.Ack(held[1:])
	if !poll.Within(5*time.Second, func() bool {
		st := n.q.Stats()
		return st.Ready == 2 && st.Unacked == 0 && st.Consumers == 0
	}) {
		t.Fatalf("a's queue after the cancel and the ack of 2: %+v; want 3 and 4 ready, nothing held", n.q.Stats())
	}
	for _, want := range []string{"3", "4"} {
		d, _, ok := n.q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != want {
			t.Fatalf("got %q, want %s: an acked message came back", d.Entry.Msg.Body, want)
		}
	}
}
