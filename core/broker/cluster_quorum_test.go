package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/tests/losscheck"

	"github.com/warrenmq/warren/internal/poll"
)

func quorumDef(name string, args protocol.Table) topology.QueueDef {
	a := protocol.Table{"x-queue-type": "quorum"}
	for k, v := range args {
		a[k] = v
	}
	return topology.QueueDef{Name: name, Durable: true, Args: a}
}

// quorumView is the named quorum queue's group as node b sees it.
func quorumView(t *testing.T, b *Broker, name string) (queuetype.QuorumView, bool) {
	t.Helper()
	info, ok := root(t, b).QueueInfo(name)
	if !ok {
		return queuetype.QuorumView{}, false
	}
	return info.QuorumStatus()
}

// getVia takes one message from the named queue through node b, acking
// it; "" when the queue has none.
func getVia(t *testing.T, b *Broker, name string) string {
	t.Helper()
	src, err := root(t, b).Source(name, nil)
	if err != nil {
		t.Fatalf("source %s: %v", name, err)
	}
	d, _, ok := src.Get(false)
	if !ok {
		return ""
	}
	src.Ack([]queue.Entry{d.Entry})
	return string(d.Entry.Msg.Body)
}

// waitLeader waits until every node names the same leader of the queue,
// other than not.
func waitLeader(t *testing.T, nodes []*clusterNode, name, not string) string {
	t.Helper()
	var leader string
	eventually(t, nodes, "a leader of "+name, func(b *Broker) bool {
		view, ok := quorumView(t, b, name)
		if !ok || view.Leader == "" || view.Leader == not || leader != "" && view.Leader != leader {
			return false
		}
		leader = view.Leader
		return true
	})
	return leader
}

// TestClusterQuorumQueue: a quorum queue declared on one node of three has
// a member on each; what is published through any node is confirmed once
// committed, read through any node, and survives its leader's node
// stopping.
func TestClusterQuorumQueue(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	v1, v2 := root(t, n1.Broker), root(t, n2.Broker)

	d, err := v1.Declare(quorumDef("orders", nil), false)
	if err != nil || d.Type() != queue.Quorum || !d.Created {
		t.Fatalf("declare: %+v, %v", d, err)
	}
	if !slices.Equal(d.MemberNodes(), []string{"n1", "n2", "n3"}) {
		t.Fatalf("members %v: want the declaring node first, then the others", d.MemberNodes())
	}
	if leader := waitLeader(t, nodes, "orders", ""); leader != "n1" {
		t.Fatalf("leader %s: client-local puts it on the declaring node", leader)
	}
	// A redeclare anywhere is compared with it; another type is refused.
	if _, err := v2.Declare(quorumDef("orders", nil), false); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.Declare(topology.QueueDef{Name: "orders", Durable: true}, false); code(err) != protocol.PreconditionFailed {
		t.Fatalf("classic redeclare through n2: %v", err)
	}

	for i := range 5 {
		publishVia(t, nodes[i%3].Broker, "", "orders", fmt.Sprint("m", i), true)
	}
	eventually(t, nodes, "five ready on every member", func(b *Broker) bool {
		info, ok := root(t, b).QueueInfo("orders")
		return ok && info.Ready == 5
	})
	// A consumer on the leader's node takes the first and holds it.
	src, err := v1.Source("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	holder := &holdingConsumer{got: make(chan queue.Delivery, 10)}
	if err := src.Consume(holder, nil); err != nil {
		t.Fatal(err)
	}
	if d := <-holder.got; string(d.Entry.Msg.Body) != "m0" {
		t.Fatalf("the consumer on n1 got %q", d.Entry.Msg.Body)
	}
	if got := getVia(t, n3.Broker, "orders"); got != "m1" {
		t.Fatalf("through n3: %q", got)
	}
	if got := getVia(t, n2.Broker, "orders"); got != "m2" {
		t.Fatalf("through n2: %q", got)
	}

	// The leader's node stops: the others elect a leader and go on, and
	// what its consumer held comes back, redelivered.
	n1.stop(t)
	rest := nodes[1:]
	waitLeader(t, rest, "orders", "n1")
	publishVia(t, n2.Broker, "", "orders", "after", true)
	got := map[string]bool{}
	src3, err := root(t, n3.Broker).Source("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	poll.Within(15*time.Second, func() bool {
		for len(got) < 4 {
			d, _, ok := src3.Get(false)
			if !ok {
				return false
			}
			body := string(d.Entry.Msg.Body)
			if got[body] || body == "m0" != d.Redelivered {
				t.Fatalf("%q redelivered %v (had %v)", body, d.Redelivered, got)
			}
			got[body] = true
			src3.Ack([]queue.Entry{d.Entry})
		}
		return true
	})
	if want := map[string]bool{"m0": true, "m3": true, "m4": true, "after": true}; !maps.Equal(got, want) {
		t.Fatalf("after failover: %v, want %v", got, want)
	}

	// n1 comes back and catches up: the acks taken without it hold.
	n1.start(t)
	eventually(t, nodes, "an empty queue on every member", func(b *Broker) bool {
		info, ok := root(t, b).QueueInfo("orders")
		return ok && info.Ready == 0 && info.Unacked == 0
	})
	if _, err := root(t, n1.Broker).DeleteQueue("orders", nil, false, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "the queue gone", func(b *Broker) bool { return !root(t, b).HasQueue("orders") })
}

// holdingConsumer takes one delivery at a time and never settles it.
type holdingConsumer struct{ got chan queue.Delivery }

func (c *holdingConsumer) Deliver(d queue.Delivery) bool {
	select {
	case c.got <- d:
		return true
	default:
		return false
	}
}
func (c *holdingConsumer) Cancelled()      {}
func (c *holdingConsumer) NoAck() bool     { return false }
func (c *holdingConsumer) Exclusive() bool { return false }
func (c *holdingConsumer) Prefetch() int   { return 1 }

// TestClusterQuorumQueueNotAMember: a node that has no member of a quorum
// queue publishes to it and reads it through a member.
func TestClusterQuorumQueueNotAMember(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2 := nodes[0], nodes[1]
	d, err := root(t, n1.Broker).Declare(quorumDef("small", protocol.Table{"x-quorum-initial-group-size": int64(1)}), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.MemberNodes(), []string{"n1"}) {
		t.Fatalf("members %v", d.MemberNodes())
	}
	waitLeader(t, nodes, "small", "")
	publishVia(t, n2.Broker, "", "small", "via n2", true)
	d2, err := root(t, n2.Broker).Declare(topology.QueueDef{Name: "small"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if ready, _, err := root(t, n2.Broker).Counts(d2); err != nil || ready != 1 {
		t.Fatalf("counts through n2: %d, %v", ready, err)
	}
	if got := getVia(t, nodes[2].Broker, "small"); got != "via n2" {
		t.Fatalf("get through n3: %q", got)
	}
	view, _ := quorumView(t, nodes[2].Broker, "small")
	if view.Leader != "n1" || view.Raft.Role != "" {
		t.Fatalf("n3's view: %+v", view)
	}
	// Its only member stops: publishing through another node is refused.
	n1.stop(t)
	eventually(t, nodes[1:], "n1 down", func(b *Broker) bool { return !b.Cluster().Alive("n1") })
	_, err = root(t, n2.Broker).Source("small", nil)
	if code(err) != protocol.NotFound {
		t.Fatalf("consuming with no member up: %v", err)
	}
}

// TestClusterQuorumMembers: a quorum queue's members change while it holds
// messages: the member added gets them from the group, and the queue goes
// on after its leader's node is removed.
func TestClusterQuorumMembers(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	v1, v2, v3 := root(t, n1.Broker), root(t, n2.Broker), root(t, n3.Broker)
	if _, err := v1.Declare(quorumDef("moving", protocol.Table{"x-quorum-initial-group-size": int64(1)}), false); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, nodes, "moving", "")
	for i := range 3 {
		publishVia(t, n2.Broker, "", "moving", fmt.Sprint("m", i), true)
	}

	// Added through a node that is not a member (n3 itself).
	if err := v3.ChangeQuorumMember("moving", "n3", true); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "n3 a member", func(b *Broker) bool {
		view, _ := quorumView(t, b, "moving")
		return slices.Equal(view.Members, []string{"n1", "n3"})
	})
	eventually(t, []*clusterNode{n3}, "n3's member caught up", func(b *Broker) bool {
		view, _ := quorumView(t, b, "moving")
		info, _ := root(t, b).QueueInfo("moving")
		return view.Raft.Role == "follower" && info.Ready == 3
	})
	for _, c := range []struct {
		node string
		add  bool
		code uint16
	}{{"n3", true, protocol.PreconditionFailed}, {"n2", false, protocol.PreconditionFailed}, {"n9", true, protocol.NotFound}} {
		if err := v2.ChangeQuorumMember("moving", c.node, c.add); code(err) != c.code {
			t.Fatalf("add %v %s: %v, want %d", c.add, c.node, err, c.code)
		}
	}

	// The leader's node is removed: n3 alone leads, n1 keeps the queue
	// as a node that reaches it through n3.
	if err := v2.ChangeQuorumMember("moving", "n1", false); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, nodes, "moving", "n1")
	publishVia(t, n1.Broker, "", "moving", "m3", true)
	for i := range 4 {
		if got := getVia(t, n1.Broker, "moving"); got != fmt.Sprint("m", i) {
			t.Fatalf("get %d through n1: %q", i, got)
		}
	}
	if view, _ := quorumView(t, n1.Broker, "moving"); view.Raft.Role != "" || !slices.Equal(view.Members, []string{"n3"}) {
		t.Fatalf("n1's view after its removal: %+v", view)
	}
	if err := v1.ChangeQuorumMember("moving", "n3", false); code(err) != protocol.PreconditionFailed {
		t.Fatalf("removing the last member: %v", err)
	}
}

// TestClusterQuorumPartition cuts the leader's node off from the other two
// under load (a publisher on each side, consumers on the majority side):
// the minority confirms nothing more, the majority elects a leader and
// goes on, and once the partition heals the cut-off member catches up:
// every member holds the same, and nothing confirmed is lost.
func TestClusterQuorumPartition(t *testing.T) {
	nodes := threeBrokers(t)
	urls := map[string]string{}
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		urls[n.name] = "amqp://guest:guest@" + n.Addr().String() + "/"
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	if _, err := root(t, n1.Broker).Declare(quorumDef("split", nil), false); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, nodes, "split", "")
	on := func(name string) losscheck.URLs { return func() []string { return []string{urls[name]} } }

	check := losscheck.New()
	stop, stopConsumers := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	run(func() { check.Publish("minority", "split", 20, on("n1"), stop) })
	run(func() { check.Publish("majority", "split", 20, on("n2"), stop) })
	run(func() { check.Consume("c2", "split", 20, on("n2"), stopConsumers) })
	run(func() { check.Consume("c3", "split", 20, on("n3"), stopConsumers) })
	poll.Until(t, 20*time.Second, "200 confirms through each side", func() bool {
		return check.Confirms("minority") >= 200 && check.Confirms("majority") >= 200
	})

	cut := func(c bool) {
		for _, other := range []string{"n2", "n3"} {
			n1.Cluster().Block(other, c)
			nodes[map[string]int{"n2": 1, "n3": 2}[other]].Cluster().Block("n1", c)
		}
	}
	cut(true)
	fault := check.AddFault(losscheck.Fault{Node: losscheck.NodeOf(urls["n1"]), Kind: "partition", From: time.Now()})
	waitLeader(t, []*clusterNode{n2, n3}, "split", "n1")
	majority := check.Confirms("majority")
	poll.Until(t, 20*time.Second, "200 more confirms through the majority", func() bool {
		return check.Confirms("majority") >= majority+200
	})
	// Past the minority's proposals' deadline: long enough for a wrong
	// confirm to come, not a synchronisation. The checker tells a
	// publish sent into the cut and confirmed from a publish n1 had
	// committed before it.
	time.Sleep(10 * time.Second)
	if r := check.Report(); r.Count["minority confirm"] > 0 {
		t.Fatalf("the cut-off minority confirmed publishes: %s", r)
	}

	cut(false)
	check.EndFault(fault, time.Now())
	close(stop)
	poll.Within(20*time.Second, check.Drained) // the report says what did not come
	time.Sleep(time.Second)
	close(stopConsumers)
	wg.Wait()
	r := check.Report()
	t.Logf("%s", r)
	if len(r.Lost) > 0 || len(r.Problems) > 0 {
		t.Fatal(r)
	}
	// Every member, n1 included, holds the same.
	state := func(b *Broker) string {
		view, _ := quorumView(t, b, "split")
		info, _ := root(t, b).QueueInfo("split")
		return fmt.Sprintf("applied %d, %d ready, %d unacked", view.Raft.Applied, info.Ready, info.Unacked)
	}
	var want string
	if !poll.Within(15*time.Second, func() bool {
		want = state(n2.Broker)
		return state(n1.Broker) == want && state(n3.Broker) == want
	}) {
		t.Fatalf("members differ: n1 %s, n2 %s, n3 %s", state(n1.Broker), want, state(n3.Broker))
	}
	t.Logf("every member: %s", want)
}

// TestForgetClusterNode: forget_cluster_node refuses a node that runs;
// once it is down, it removes it from the quorum queues and streams it is
// a member of (their groups then count two voters, not three), keeps the
// queue whose only member it is (as RabbitMQ 3.10, logged), and then from
// the cluster.
func TestForgetClusterNode(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n3 := nodes[0], nodes[2]
	v1, v3 := root(t, n1.Broker), root(t, n3.Broker)
	if _, err := v1.Declare(quorumDef("three", nil), false); err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Declare(topology.QueueDef{Name: "events", Durable: true, Args: protocol.Table{"x-queue-type": "stream"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v3.Declare(quorumDef("only-n3", protocol.Table{"x-quorum-initial-group-size": int64(1)}), false); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"three", "events"} {
		waitLeader(t, nodes, q, "")
	}
	ctx := context.Background()
	if _, err := n1.ForgetClusterNode(ctx, "n3"); !errors.Is(err, cluster.ErrMemberRunning) {
		t.Fatalf("forgetting a running node: %v", err)
	}

	n3.stop(t)
	eventually(t, nodes[:2], "n3 seen down", func(b *Broker) bool { return !b.Cluster().Alive("n3") })
	changes, err := n1.ForgetClusterNode(ctx, "n3")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ch := range changes {
		got[ch.Name] = fmt.Sprint(ch.Size, " ", code(ch.Err))
	}
	if want := map[string]string{"three": "2 0", "events": "2 0", "only-n3": "1 406"}; !maps.Equal(got, want) {
		t.Fatalf("shrunk %v, want %v", got, want)
	}
	if got := len(n1.Cluster().Members()); got != 2 {
		t.Fatalf("%d members after the forget", got)
	}
	eventually(t, nodes[:2], "the queues without n3", func(b *Broker) bool {
		for _, q := range []string{"three", "events"} {
			view, _ := quorumView(t, b, q)
			if !slices.Equal(view.Members, []string{"n1", "n2"}) || view.Raft.Role == "leader" && !slices.Equal(view.Voters, []string{"n1", "n2"}) {
				return false
			}
		}
		view, _ := quorumView(t, b, "only-n3")
		return slices.Equal(view.Members, []string{"n3"})
	})
	// Two voters of two: the queues take messages with n3 gone for good.
	publishVia(t, nodes[1].Broker, "", "three", "after", true)
	if got := getVia(t, n1.Broker, "three"); got != "after" {
		t.Fatalf("got %q", got)
	}
}

// TestSnapshotCarriesQuorumMembers: a node that missed a change of a
// quorum queue's members, and learns the topology from a snapshot (the
// log behind the change compacted), takes the members the snapshot has:
// removed meanwhile, it stops its member rather than run on and ask to be
// added back.
func TestSnapshotCarriesQuorumMembers(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2 := nodes[0], nodes[1]
	if _, err := root(t, n1.Broker).Declare(quorumDef("q", nil), false); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, nodes, "q", "")
	eventually(t, []*clusterNode{n2}, "n2's member of q", func(b *Broker) bool {
		view, _ := quorumView(t, b, "q")
		return view.Raft.Role == "follower"
	})
	n2.Cluster().Block("n1", true)
	n2.Cluster().Block("n3", true)
	if err := root(t, n1.Broker).ChangeQuorumMember("q", "n2", false); err != nil {
		t.Fatal(err)
	}
	log, _ := n1.store.RaftLog(metaGroup)
	state := metaState{b: n1.Broker, log: log}
	snap, err := state.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	n2log, _ := n2.store.RaftLog(metaGroup)
	if err := (metaState{b: n2.Broker, log: n2log}).Restore(state.Applied(), snap); err != nil {
		t.Fatal(err)
	}
	view, _ := quorumView(t, n2.Broker, "q")
	if !slices.Equal(view.Members, []string{"n1", "n3"}) || view.Raft.Role != "" {
		t.Fatalf("n2 after the snapshot: members %v, its member %q", view.Members, view.Raft.Role)
	}
}
