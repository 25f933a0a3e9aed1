package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/warrenmq/warren/internal/poll"
)

// oldStore is a data directory from before node ids were stored.
type oldStore struct{ id uint64 }

func (s *oldStore) NodeID() uint64 { return s.id }
func (s *oldStore) SetNodeID(id uint64) error {
	s.id = id
	return nil
}

// A node's identity is its data directory's: the same across restarts,
// another on a fresh directory, and on a directory from before ids were
// stored, the hash of its name it had then, recorded.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	first, err := Identity(st, "a")
	if err != nil {
		t.Fatal(err)
	}
	if first == 0 || first == LegacyID("a") {
		t.Fatalf("a new data directory's id is %x", first)
	}
	st.Close()
	st = openStore(t, dir)
	again, err := Identity(st, "a")
	st.Close()
	if err != nil || again != first {
		t.Fatalf("the same data directory, restarted: %x (%v), was %x", again, err, first)
	}
	st = openStore(t, t.TempDir())
	fresh, err := Identity(st, "a")
	st.Close()
	if err != nil || fresh == first || fresh == 0 {
		t.Fatalf("a fresh data directory under the same name: %x (%v), the first was %x", fresh, err, first)
	}

	old := &oldStore{}
	if id, err := Identity(old, "a"); err != nil || id != LegacyID("a") || old.id != id {
		t.Fatalf("a data directory from before ids were stored: %x (%v), stored %x; want %x", id, err, old.id, LegacyID("a"))
	}
}

// Raft messages addressed to another incarnation of a node, sent where
// that one listened, are dropped by the one listening there now: a
// leader that counts the old one's log would hand it a commit index past
// the end of its own (the panic of issue 29). The applied index, sent
// after them on the same connection, shows they arrived first.
func TestMessagesForAnotherIncarnationAreDropped(t *testing.T) {
	const sender, old, current = 0xa, 0xb1, 0xb2
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	var mu sync.Mutex
	var got []uint64 // the commit index of each message delivered
	var applied uint64
	rx, err := newTransport(current, "127.0.0.1:0", secret, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	rx.deliver = func(_ uint64, m *raftpb.Message) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, m.GetCommit())
	}
	rx.onApplied = func(_, index uint64) {
		mu.Lock()
		defer mu.Unlock()
		applied = index
	}
	rx.unreachable, rx.snapshotSent = func(uint64, uint64) {}, func(uint64, uint64, bool) {}
	rx.serve()
	defer rx.close()
	tx, err := newTransport(sender, "127.0.0.1:0", secret, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	tx.unreachable, tx.snapshotSent = func(uint64, uint64) {}, func(uint64, uint64, bool) {}
	tx.serve()
	defer tx.close()

	heartbeat := func(to, commit uint64) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(sender)), To: new(to), Commit: new(commit)}
	}
	tx.setPeer(old, rx.Addr()) // the old incarnation's address is the new one's
	tx.send(0, []*raftpb.Message{heartbeat(old, 6)})
	tx.send(3, []*raftpb.Message{heartbeat(old, 7)})
	tx.sendApplied(42)
	poll.Until(t, 10*time.Second, "the applied index sent after the messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return applied == 42
	})
	mu.Lock()
	if len(got) > 0 {
		t.Fatalf("delivered messages meant for another incarnation, with commits %v", got)
	}
	mu.Unlock()

	tx.setPeer(current, rx.Addr())
	tx.send(0, []*raftpb.Message{heartbeat(current, 8)})
	poll.Until(t, 10*time.Second, "the message addressed to the node listening", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(got, []uint64{8})
	})
}

// A node that comes back under its name with an empty log and a new id
// replaces the member it was: the old incarnation leaves the
// configuration and the new one joins, catches up and takes changes; the
// messages meant for the old one never reach it (without that, raft
// panics in commitTo). A new incarnation is refused while the old one
// runs, and the old one may not come back once removed.
func TestNodeReplaced(t *testing.T) {
	nodes := threeNodes(t, nil)
	a, c := nodes[0], nodes[2]
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprint("before-", i))
		if err := propose(t, nodes[i%3], want[i]); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, nodes, want)
	oldID := c.ID()

	// While the old incarnation runs, the new one is not let in.
	early := startNode(t, "c", []string{a.Addr()}, func(cfg *Config) { cfg.ID = 0xc2 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := early.WaitJoined(ctx); err == nil {
		t.Fatal("a new incarnation of c joined while c runs")
	}
	cancel()
	early.Stop()
	if id, _ := a.MemberID("c"); id != oldID {
		t.Fatalf("c is %x, want the running incarnation %x", id, oldID)
	}
	if err := a.Forget(context.Background(), "c"); !errors.Is(err, ErrMemberRunning) {
		t.Fatalf("forgetting a running node: %v", err)
	}

	// c loses its data and comes back where it was, as a new incarnation.
	c.Stop()
	c2 := &testNode{state: &journal{}}
	c2.cfg = c.cfg
	c2.cfg.ID, c2.cfg.Seeds, c2.cfg.State, c2.cfg.Log = 0xc3, []string{a.Addr()}, c2.state, memLog{raft.NewMemoryStorage()}
	c2.start(t)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c2.WaitJoined(ctx); err != nil {
		t.Fatal(err)
	}
	want = append(want, "after")
	if err := propose(t, c2, "after"); err != nil {
		t.Fatal(err)
	}
	live := []*testNode{a, nodes[1], c2}
	converge(t, live, want)
	for _, n := range live {
		poll.Until(t, 10*time.Second, n.cfg.Name+" to see c as its new incarnation, among three voters", func() bool {
			id, _ := n.MemberID("c")
			return id == 0xc3 && len(n.Members()) == 3 && n.Status().Voters == 3
		})
	}
	if !a.Removed(oldID) || a.Removed(0xc3) {
		t.Fatalf("removed: old %v, new %v", a.Removed(oldID), a.Removed(0xc3))
	}

	// The incarnation removed cannot join again (wiping or resetting
	// makes a new one).
	ghost := startNode(t, "c", []string{a.Addr()}, func(cfg *Config) { cfg.ID = oldID })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if err := ghost.WaitJoined(ctx2); err == nil {
		t.Fatal("an incarnation the cluster removed joined again")
	}
}
