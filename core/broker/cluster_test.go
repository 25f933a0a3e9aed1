package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
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

// eventually waits for cond on every node.
func eventually(t *testing.T, nodes []*clusterNode, what string, cond func(*Broker) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, n := range nodes {
		for !cond(n.Broker) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not on %s", what, n.name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestClusterReplicatesDefinitions(t *testing.T) {
	nodes := threeBrokers(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if st := n.Cluster().Status(); len(st.Members) != 3 {
			t.Fatalf("%s sees members %+v", n.name, st.Members)
		}
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
	pw := "pw"
	for _, err := range []error{
		src.PutUser("kept", &pw, []string{"monitoring"}),
		func() error { _, err := src.AddVHost("v"); return err }(),
		src.SetPermission("v", "kept", ".*", "^w", ".*"),
		src.SetPolicy("v", "p", ".*", policy.All, 3, protocol.Table{"message-ttl": int64(1000)}),
		src.SetClusterName("snap"),
		dst.PutUser("dropped", &pw, nil),
		func() error { _, err := dst.AddVHost("gone"); return err }(),
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
	if err := (metaState{b: dst, log: dstLog}).Restore(17, data); err != nil {
		t.Fatal(err)
	}
	if dstLog.Applied() != 17 {
		t.Errorf("applied %d after restoring a snapshot at 17", dstLog.Applied())
	}
	a, _ := json.Marshal(src.ExportDefinitions())
	b, _ := json.Marshal(dst.ExportDefinitions())
	if string(a) != string(b) {
		t.Fatalf("after restoring, definitions differ:\nsource: %s\nrestored: %s", a, b)
	}
}
