package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// clusterNode is a broker of a test cluster, with what it needs to be
// restarted as the same node.
type clusterNode struct {
	*Broker
	name, dir, listen string
	seeds             []string
}

func (n *clusterNode) start(t *testing.T) {
	t.Helper()
	n.Broker = testBroker(t, n.dir, func(c *config.Config) {
		c.Cluster = config.Cluster{NodeName: n.name, Listen: n.listen, Seeds: n.seeds,
			Secret: "sixteen+ characters", ChangeTimeout: config.Duration(3 * time.Second)}
	})
	n.listen = n.Cluster().Addr() // a restart keeps the address the others know
	t.Cleanup(func() { n.Shutdown(context.Background()) })
}

func (n *clusterNode) stop(t *testing.T) {
	t.Helper()
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// threeBrokers starts n1, then n2 and n3 joining through it.
func threeBrokers(t *testing.T) []*clusterNode {
	t.Helper()
	first := &clusterNode{name: "n1", dir: t.TempDir(), listen: "127.0.0.1:0"}
	first.start(t)
	nodes := []*clusterNode{first}
	for _, name := range []string{"n2", "n3"} {
		n := &clusterNode{name: name, dir: t.TempDir(), listen: "127.0.0.1:0", seeds: []string{first.listen}}
		n.start(t)
		nodes = append(nodes, n)
	}
	return nodes
}

// eventually waits for cond on every node in turn, all within 15 s.
func eventually(t *testing.T, nodes []*clusterNode, what string, cond func(*Broker) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		if !poll.Within(time.Until(deadline), func() bool { return cond(n.Broker) }) {
			t.Fatalf("%s: not on %s", what, n.name)
		}
	}
}

func TestClusterReplicatesDefinitions(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	// n3 joined through n1: n2 sees it once it applied the change.
	eventually(t, nodes, "three members", func(b *Broker) bool { return len(b.Cluster().Status().Members) == 3 })
	// A member's figures come from it, through a call.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if f, err := n1.MemberFigures(ctx, "n3"); err != nil || f.UptimeMS == 0 || f.OSPid != os.Getpid() || f.Processors == 0 {
		t.Fatalf("n3's figures through n1: %+v, %v", f, err)
	}
	if _, err := n1.MemberFigures(ctx, "nobody"); err == nil {
		t.Fatal("figures of a node that is not a member")
	}
	if m, err := n1.MemberMemory(ctx, "n3"); err != nil || m.Allocated == 0 || m.HeapOther == 0 {
		t.Fatalf("n3's memory through n1: %+v, %v", m, err)
	}

	pw := "alice-pw"
	if err := n2.PutUser("alice", &pw, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	// Answered after it is applied where it was made.
	if _, err := n2.Users().Login("alice", pw, false); err != nil {
		t.Fatalf("n2 answered before applying: %v", err)
	}
	eventually(t, nodes, "alice logs in", func(b *Broker) bool {
		_, err := b.Users().Login("alice", pw, false)
		return err == nil
	})

	if _, err := n3.AddVHost("orders"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "vhost orders", func(b *Broker) bool { _, ok := b.VHost("orders"); return ok })
	if err := n1.SetPermission("orders", "alice", "^a", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "alice's permission", func(b *Broker) bool {
		p, ok := b.Users().Permission("orders", "alice")
		return ok && p.CanConfigure("abc") && !p.CanConfigure("xyz")
	})
	if err := n3.SetTopicPermission("orders", "alice", "amq.topic", `^{username}\.`, ".*"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "alice's topic permission", func(b *Broker) bool {
		g, _ := b.Users().Grant("orders", "alice")
		return g.PublishTopic("amq.topic", "alice.x") == nil && g.PublishTopic("amq.topic", "bob.x") != nil
	})
	if err := n1.SetVHostLimits("orders", topology.Limits{"max-queues": 100}); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "orders' limits", func(b *Broker) bool {
		v, ok := b.VHost("orders")
		n, set := v.Limit(topology.LimitMaxQueues)
		return ok && set && n == 100
	})
	if err := n2.SetPolicy("orders", "cap", "^q", policy.Queues, 1, protocol.Table{"max-length": int64(5)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "policy cap", func(b *Broker) bool {
		v, ok := b.VHost("orders")
		return ok && len(v.Policies()) == 1
	})
	if err := n3.SetClusterName("rabbits"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "cluster name", func(b *Broker) bool { return b.ClusterName() == "rabbits" })
	// A component's parameter, checked where it is set (the only node
	// that registered it), held by every node.
	n2.RegisterParameterComponent("fake", &fakeComponent{})
	var n3Watched atomic.Int64
	n3.WatchVHostParameters(func() { n3Watched.Add(1) })
	poll.Until(t, 5*time.Second, "n3's watcher called at registration", func() bool { return n3Watched.Load() == 1 })
	if _, err := n2.SetVHostParameter("orders", "fake", "s", protocol.Table{"src-uri": "amqp://"}, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "a component's parameter", func(b *Broker) bool { _, ok := b.LookupVHostParameter("orders", "fake", "s"); return ok })
	poll.Until(t, 5*time.Second, "n3's watcher told of it", func() bool { return n3Watched.Load() >= 2 })

	// A change that the state refuses is refused on the node it was made
	// on, with the same answer a node of its own gives.
	err := n1.SetPermission("nowhere", "alice", ".*", ".*", ".*")
	if e := reply.As(err); e == nil || e.Code != protocol.NotFound {
		t.Fatalf("permission in a missing vhost: %v", err)
	}

	// Deleting goes everywhere too.
	if err := n3.ClearPolicy("orders", "cap"); err != nil {
		t.Fatal(err)
	}
	if err := n1.DeleteVHost("orders"); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "vhost orders gone", func(b *Broker) bool { _, ok := b.VHost("orders"); return !ok })
	eventually(t, nodes, "its parameter gone", func(b *Broker) bool { return len(b.VHostParameters("", "")) == 0 })
}

// TestClusterNodeCatchesUpAfterRestart: what changed while a node was down
// is there when it is back, from the other nodes, and what it had is kept
// in its own store.
func TestClusterNodeCatchesUpAfterRestart(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2 := nodes[0], nodes[1]
	pw := "pw"
	for i := range 3 {
		if err := n1.PutUser(fmt.Sprintf("user-%d", i), &pw, nil); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, nodes, "users", func(b *Broker) bool { _, ok := b.Users().User("user-2"); return ok })
	n2.stop(t)
	if err := n1.DeleteUser("user-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[2].AddVHost("while-n2-was-down"); err != nil {
		t.Fatal(err)
	}
	n2.start(t)
	eventually(t, nodes, "caught up", func(b *Broker) bool {
		_, gone := b.Users().User("user-0")
		_, kept := b.Users().User("user-1")
		_, vh := b.VHost("while-n2-was-down")
		return !gone && kept && vh
	})
}

// TestClusterMinorityRefusesChanges: a node cut off from the others says
// it cannot make a change, and makes none; the others go on.
func TestClusterMinorityRefusesChanges(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, other := range []*clusterNode{n1, n2} {
		n3.Cluster().Block(other.name, true)
		other.Cluster().Block("n3", true)
	}
	pw := "pw"
	err := n3.PutUser("from-the-minority", &pw, nil)
	if !errors.Is(err, cluster.ErrNoQuorum) {
		t.Fatalf("minority: %v, want ErrNoQuorum", err)
	}
	if _, ok := n3.Users().User("from-the-minority"); ok {
		t.Fatal("the minority applied a change it could not commit")
	}
	if err := n1.PutUser("from-the-majority", &pw, nil); err != nil {
		t.Fatal(err)
	}
	for _, other := range []*clusterNode{n1, n2} {
		n3.Cluster().Block(other.name, false)
		other.Cluster().Block("n3", false)
	}
	eventually(t, nodes, "healed", func(b *Broker) bool {
		_, ok := b.Users().User("from-the-majority")
		return ok
	})
}

// TestMetaSnapshotRestore: a node that gets a snapshot ends with the
// snapshot's definitions exactly, what it had of its own removed.
func TestMetaSnapshotRestore(t *testing.T) {
	src, dst := testBroker(t, t.TempDir()), testBroker(t, t.TempDir())
	src.RegisterParameterComponent("fake", &fakeComponent{})
	dst.RegisterParameterComponent("fake", &fakeComponent{})
	var dstWatched atomic.Int64
	dst.WatchVHostParameters(func() { dstWatched.Add(1) })
	setParam := func(b *Broker, vh, name, uri string) error {
		_, err := b.SetVHostParameter(vh, "fake", name, protocol.Table{"src-uri": uri}, "")
		return err
	}
	pw := "pw"
	for _, err := range []error{
		src.PutUser("kept", &pw, []string{"monitoring"}),
		func() error { _, err := src.AddVHost("v"); return err }(),
		src.SetPermission("v", "kept", ".*", "^w", ".*"),
		src.SetTopicPermission("v", "kept", "amq.topic", "^w", ""),
		src.SetVHostLimits("v", topology.Limits{"max-connections": 9}),
		src.SetVHostMetadata("v", topology.Metadata{Description: "kept", Tags: []string{"t"}}),
		src.SetPolicy("v", "p", ".*", policy.All, 3, protocol.Table{"message-ttl": int64(1000)}),
		src.SetClusterName("snap"),
		setParam(src, "v", "kept", "amqp://a"),
		setParam(src, "/", "changed", "amqp://new"),
		dst.PutUser("dropped", &pw, nil),
		func() error { _, err := dst.AddVHost("gone"); return err }(),
		dst.PutUser("kept", &pw, nil),
		dst.SetTopicPermission("/", "kept", "amq.topic", "^dropped", ""),
		setParam(dst, "/", "dropped", "amqp://d"),
		setParam(dst, "/", "changed", "amqp://old"),
		setParam(dst, "gone", "dropped", "amqp://g"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	srcLog, _ := src.store.RaftLog(metaGroup)
	dstLog, _ := dst.store.RaftLog(metaGroup)
	data, err := metaState{b: src, log: srcLog}.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "dst's watcher called at registration", func() bool { return dstWatched.Load() > 0 })
	watchedBefore := dstWatched.Load()
	if err := (metaState{b: dst, log: dstLog}).Restore(17, data); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "dst's watcher called after the restore", func() bool { return dstWatched.Load() > watchedBefore })
	if got := paramNames(dst.VHostParameters("", "")); !reflect.DeepEqual(got, paramNames(src.VHostParameters("", ""))) || len(got) != 2 {
		t.Fatalf("after restoring, parameters %q", got)
	}
	if dstLog.Applied() != 17 {
		t.Errorf("applied %d after restoring a snapshot at 17", dstLog.Applied())
	}
	a, _ := json.Marshal(src.ExportDefinitions())
	b, _ := json.Marshal(dst.ExportDefinitions())
	if string(a) != string(b) {
		t.Fatalf("after restoring, definitions differ:\nsource: %s\nrestored: %s", a, b)
	}
	if v, ok := dst.VHost("v"); !ok || v.Metadata().Description != "kept" || v.Limits()["max-connections"] != 9 {
		t.Fatalf("after restoring, vhost v: %+v", v)
	}
}

// TestMetaApplyAfterClose: a change committed while the node shuts down,
// after its vhosts closed, is neither refused nor recorded as applied: a
// closed vhost refuses a declare (320), and recording that answer lost
// the queue on this node for good (a flake of TestClusterRandomFaults).
// The node applies it again at its next start.
func TestMetaApplyAfterClose(t *testing.T) {
	b := testBroker(t, t.TempDir())
	log, err := b.store.RaftLog(metaGroup)
	if err != nil {
		t.Fatal(err)
	}
	state := metaState{b: b, log: log}
	declare := func(name string) []byte {
		cmd := protocol.Table{"op": topology.OpDeclareQueue, "vhost": "/", "name": name, "durable": true,
			"arguments": protocol.Table{}, "id": int64(1)}
		data, err := protocol.AppendTable(nil, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := state.Apply(5, declare("before")); err != nil {
		t.Fatal(err)
	}
	b.closeVHosts()
	if err := state.Apply(6, declare("after")); !errors.Is(err, cluster.ErrStopped) {
		t.Fatalf("apply after the vhosts closed: %v, want cluster.ErrStopped", err)
	}
	if err := state.Restore(7, nil); !errors.Is(err, cluster.ErrStopped) {
		t.Fatalf("restore after the vhosts closed: %v, want cluster.ErrStopped", err)
	}
	if got := log.Applied(); got != 5 {
		t.Fatalf("applied index %d after an apply the closed broker could not make, want 5", got)
	}
}

// TestClusterRandomFaults is in the style of Jepsen: clients make changes
// through random nodes while links are cut and healed and a node is
// stopped and restarted. Each change touches its own object (a user, an
// exchange, a queue, a queue's binding), once, so the
// checks need no model of interleavings: every change a node answered as
// done is in the final state, every change refused with ErrNoQuorum may
// or may not be, nothing else changed, and every node ends with the same
// users.
func TestClusterRandomFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("several seconds of faults")
	}
	nodes := threeBrokers(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	type outcome struct{ done, unknown bool }
	var mu sync.Mutex                // guards outcomes, generation and the nodes' Broker
	outcomes := map[string]outcome{} // user name -> what its put answered
	generation := map[string]int{}   // how often each node was stopped
	var live sync.WaitGroup
	stop := make(chan struct{})
	for c := range 4 {
		live.Add(1)
		go func() {
			defer live.Done()
			pw := "pw"
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				n := nodes[(c+i)%3]
				b, gen := n.Broker, generation[n.name]
				mu.Unlock()
				if b == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				// Users, exchanges, and queues bound as they are made,
				// each change on an object of its own.
				var name string
				var err error
				switch i % 3 {
				case 0:
					name = fmt.Sprintf("user:client%d-%d", c, i)
					err = b.PutUser(name, &pw, nil)
				case 1:
					name = fmt.Sprintf("exchange:client%d-%d", c, i)
					v, _ := b.VHost("/")
					_, err = v.DeclareExchange(exchange.Definition{Name: name, Type: "fanout", Durable: true}, false)
				case 2:
					name = fmt.Sprintf("queue:client%d-%d", c, i)
					v, _ := b.VHost("/")
					if _, err = v.Declare(topology.QueueDef{Name: name, Durable: true}, false); err == nil {
						mu.Lock()
						outcomes[name] = outcome{done: true}
						mu.Unlock()
						name = "binding:" + name
						err = v.Bind("amq.direct", exchange.Destination{Kind: exchange.ToQueue, Name: strings.TrimPrefix(name, "binding:")}, "k", nil, nil)
					}
				}
				mu.Lock()
				switch {
				case err == nil:
					outcomes[name] = outcome{done: true}
				case errors.Is(err, cluster.ErrNoQuorum), errors.Is(err, cluster.ErrStopped), generation[n.name] != gen:
					// Refused, or the node stopped under the call.
					outcomes[name] = outcome{unknown: true}
				default:
					t.Errorf("%s on %s: %v", name, n.name, err)
				}
				mu.Unlock()
			}
		}()
	}

	// Faults: cut one node off and heal, or stop one and restart it.
	for range 6 {
		victim := nodes[rng.Intn(3)]
		if rng.Intn(2) == 0 {
			for _, o := range nodes {
				if o != victim {
					victim.Cluster().Block(o.name, true)
					o.Cluster().Block(victim.name, true)
				}
			}
			time.Sleep(time.Duration(500+rng.Intn(1000)) * time.Millisecond)
			for _, o := range nodes {
				if o != victim {
					victim.Cluster().Block(o.name, false)
					o.Cluster().Block(victim.name, false)
				}
			}
		} else {
			mu.Lock()
			b := victim.Broker
			victim.Broker = nil
			generation[victim.name]++
			mu.Unlock()
			b.Shutdown(context.Background())
			time.Sleep(time.Duration(300+rng.Intn(700)) * time.Millisecond)
			mu.Lock()
			victim.start(t)
			mu.Unlock()
		}
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	live.Wait()

	// Every node converges to the same users and topology.
	users := func(b *Broker) map[string]bool {
		out := map[string]bool{}
		for _, u := range b.Users().Users() {
			out[u.Name] = true
		}
		v, _ := b.VHost("/")
		for _, x := range v.Exchanges() {
			if strings.HasPrefix(x.Name, "exchange:") {
				out[x.Name] = true
			}
		}
		for _, q := range v.QueueNames() {
			out[q] = true
		}
		for _, bd := range v.Bindings() {
			out["binding:"+bd.Destination.Name] = true
		}
		return out
	}
	var a, b, c map[string]bool
	if !poll.Within(20*time.Second, func() bool {
		a, b, c = users(nodes[0].Broker), users(nodes[1].Broker), users(nodes[2].Broker)
		return maps.Equal(a, b) && maps.Equal(b, c) && topologyOf(t, nodes[0].Broker) == topologyOf(t, nodes[1].Broker) &&
			topologyOf(t, nodes[1].Broker) == topologyOf(t, nodes[2].Broker)
	}) {
		t.Fatalf("nodes disagree: %d, %d and %d objects; only on some: %v", len(a), len(b), len(c), unshared(a, b, c))
	}
	final := users(nodes[0].Broker)
	done, unknown, landed := 0, 0, 0
	for name, o := range outcomes {
		switch {
		case o.done:
			done++
			if !final[name] {
				t.Errorf("%s was answered as done and is missing", name)
			}
		case o.unknown:
			unknown++
			if final[name] {
				landed++
			}
		}
	}
	for name := range final {
		if _, ok := outcomes[name]; !ok && name != "guest" {
			t.Errorf("%s is in the final state and nobody made it", name)
		}
	}
	t.Logf("%d changes answered done, %d refused (%d of those landed anyway)", done, unknown, landed)
	if done == 0 {
		t.Fatal("no change succeeded: the test tested nothing")
	}
}

// unshared names the objects some of sets have and others lack, with
// the indexes of the sets that have them.
func unshared(sets ...map[string]bool) map[string][]int {
	out := map[string][]int{}
	for _, s := range sets {
		for name := range s {
			var on []int
			for i, o := range sets {
				if o[name] {
					on = append(on, i)
				}
			}
			if len(on) < len(sets) {
				out[name] = on
			}
		}
	}
	return out
}

// BenchmarkDefinitionChange times one definitions change (a user put)
// answered by a node of its own and by a node of a cluster of three (from
// the leader and from a follower): the cluster adds a round of consensus
// and the Raft log's fsync on a majority. The same for a durable queue's
// declare (BenchmarkQueueDeclare), one client at a time and eight at once.
//
//	go test ./core/broker -run '^$' -bench 'DefinitionChange|QueueDeclare' -benchtime 200x
func BenchmarkDefinitionChange(b *testing.B) {
	benchEachRole(b, func(b *testing.B, br *Broker) {
		pw := "pw"
		for i := 0; b.Loop(); i++ {
			if err := br.PutUser(fmt.Sprintf("user-%d", i), &pw, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkQueueDeclare(b *testing.B) {
	declare := func(b *testing.B, br *Broker, name string) {
		v, _ := br.VHost("/")
		if _, err := v.Declare(topology.QueueDef{Name: name, Durable: true}, false); err != nil {
			b.Fatal(err)
		}
	}
	// Every declare makes a new queue, however often -count reruns a
	// benchmark on the same brokers.
	var n atomic.Int64
	b.Run("serial", func(b *testing.B) {
		benchEachRole(b, func(b *testing.B, br *Broker) {
			for b.Loop() {
				declare(b, br, fmt.Sprintf("q-%d", n.Add(1)))
			}
		})
	})
	b.Run("parallel8", func(b *testing.B) {
		benchEachRole(b, func(b *testing.B, br *Broker) {
			b.SetParallelism(4) // 2 cores: 8 clients
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					declare(b, br, fmt.Sprintf("q-%d", n.Add(1)))
				}
			})
		})
	})
}

// BenchmarkQueueBind times one binding of a durable queue to a durable
// exchange, as BenchmarkQueueDeclare times a declare.
func BenchmarkQueueBind(b *testing.B) {
	var n atomic.Int64
	benchEachRole(b, func(b *testing.B, br *Broker) {
		v, _ := br.VHost("/")
		if _, err := v.DeclareExchange(exchange.Definition{Name: "bench-x", Type: "direct", Durable: true}, false); err != nil {
			b.Fatal(err)
		}
		if _, err := v.Declare(topology.QueueDef{Name: "bench-q", Durable: true}, false); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := v.Bind("bench-x", exchange.Destination{Kind: exchange.ToQueue, Name: "bench-q"}, fmt.Sprint("k-", n.Add(1)), nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchEachRole runs run on a node of its own, then on the leader and on
// a follower of a cluster of three.
func benchEachRole(b *testing.B, run func(*testing.B, *Broker)) {
	b.Run("single", func(b *testing.B) {
		run(b, benchBroker(b, nil))
	})
	b.Run("cluster", func(b *testing.B) {
		first := benchBroker(b, func(c *config.Config) { c.Cluster.NodeName = "n1" })
		seed := first.Cluster().Addr()
		second := benchBroker(b, func(c *config.Config) { c.Cluster.NodeName, c.Cluster.Seeds = "n2", []string{seed} })
		benchBroker(b, func(c *config.Config) { c.Cluster.NodeName, c.Cluster.Seeds = "n3", []string{seed} })
		for _, br := range []*Broker{first, second} {
			role := br.Cluster().Status().Role
			b.Run(role, func(b *testing.B) { run(b, br) })
		}
	})
}

func benchBroker(b *testing.B, cluster func(*config.Config)) *Broker {
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = nil
	cfg.MQTT.Listen = nil
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = b.TempDir()
	if cluster != nil {
		cfg.Cluster = config.Cluster{Listen: "127.0.0.1:0", Secret: "sixteen+ characters", ChangeTimeout: config.Duration(10 * time.Second)}
		cluster(&cfg)
	}
	br, err := New(cfg, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { br.Shutdown(context.Background()) })
	return br
}

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warren"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestClusterOverTLS: cluster.tls with the amqps certificate.
func TestClusterOverTLS(t *testing.T) {
	certFile, keyFile := writeCert(t)
	start := func(name string, seeds []string) *Broker {
		return testBroker(t, t.TempDir(), func(c *config.Config) {
			c.AMQPS.CertFile, c.AMQPS.KeyFile = certFile, keyFile
			c.Cluster = config.Cluster{NodeName: name, Listen: "127.0.0.1:0", Seeds: seeds, TLS: true,
				Secret: "sixteen+ characters", ChangeTimeout: config.Duration(5 * time.Second)}
		})
	}
	first := start("t1", nil)
	second := start("t2", []string{first.Cluster().Addr()})
	pw := "pw"
	if err := first.PutUser("over-tls", &pw, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, []*clusterNode{{Broker: second, name: "t2"}}, "the user on t2", func(b *Broker) bool {
		_, ok := b.Users().User("over-tls")
		return ok
	})
	if _, err := tryBroker(t, t.TempDir(), func(c *config.Config) {
		c.Cluster = config.Cluster{NodeName: "x", Listen: "127.0.0.1:0", TLS: true, Secret: "sixteen+ characters",
			ChangeTimeout: config.Duration(time.Second)}
	}); err == nil || !strings.Contains(err.Error(), "cluster.tls") {
		t.Fatalf("cluster.tls without a certificate: %v", err)
	}
}

// TestJoinCluster: a cluster of one joins another as join_cluster does:
// reset (its own users and vhosts gone), then the other cluster's
// definitions; the membership lasts across a restart.
func TestJoinCluster(t *testing.T) {
	solo := func(name string) *clusterNode {
		n := &clusterNode{name: name, dir: t.TempDir(), listen: "127.0.0.1:0"}
		n.start(t)
		return n
	}
	a, b := solo("a"), solo("b")
	pw := "pw"
	if err := a.PutUser("from-a", &pw, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.PutUser("from-b", &pw, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddVHost("b-only"); err != nil {
		t.Fatal(err)
	}
	b.RegisterParameterComponent("fake", &fakeComponent{})
	if _, err := b.SetVHostParameter("/", "fake", "b-only", protocol.Table{"src-uri": "amqp://"}, ""); err != nil {
		t.Fatal(err)
	}

	if err := testBroker(t, t.TempDir()).JoinCluster(a.listen); err == nil || !strings.Contains(err.Error(), "[cluster]") {
		t.Fatalf("join_cluster on a node without [cluster]: %v", err)
	}
	if err := b.JoinCluster(a.listen); err != nil {
		t.Fatal(err)
	}
	b.listen = b.Cluster().Addr()
	nodes := []*clusterNode{a, b}
	eventually(t, nodes, "a's user on both", func(br *Broker) bool { _, ok := br.Users().User("from-a"); return ok })
	if _, ok := b.Users().User("from-b"); ok {
		t.Fatal("b kept its own user through the reset")
	}
	if _, ok := b.VHost("b-only"); ok {
		t.Fatal("b kept its own vhost through the reset")
	}
	if ps := b.VHostParameters("", ""); len(ps) != 0 {
		t.Fatalf("b kept its own parameters through the reset: %v", ps)
	}
	if got := len(a.Cluster().Members()); got != 2 {
		t.Fatalf("a has %d members, want 2", got)
	}
	if err := a.JoinCluster(b.listen); err == nil || !strings.Contains(err.Error(), "already clustered") {
		t.Fatalf("join_cluster on a clustered node: %v", err)
	}
	// Changes go both ways, and b is still a member after a restart.
	if err := b.PutUser("made-on-b", &pw, nil); err != nil {
		t.Fatal(err)
	}
	b.stop(t)
	b.seeds = nil
	b.start(t)
	if err := a.PutUser("after-restart", &pw, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, nodes, "both users on both", func(br *Broker) bool {
		_, x := br.Users().User("made-on-b")
		_, y := br.Users().User("after-restart")
		return x && y
	})
}
