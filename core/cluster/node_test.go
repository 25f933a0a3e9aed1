package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/storage"
)

// memLog is raft.MemoryStorage with Save: durable for as long as the test
// keeps it, which is what a restart within a test needs.
type memLog struct{ *raft.MemoryStorage }

func (m memLog) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if snap != nil && !raft.IsEmptySnap(snap) {
		if err := m.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	if err := m.Append(ents); err != nil {
		return err
	}
	if hs != nil && !raft.IsEmptyHardState(hs) {
		return m.SetHardState(hs)
	}
	return nil
}

// journal is a state machine that records its commands; a command that
// starts with "bad" is refused, on every node alike.
// A closed journal applies nothing and answers ErrStopped, counting the
// commands it turned away.
type journal struct {
	mu      sync.Mutex
	applied uint64
	cmds    []string
	closed  bool
	refused int
	// gate, when set, holds each command back until it is closed, and
	// then calls applying.
	gate     chan struct{}
	applying func(cmd string)
}

func (j *journal) Apply(index uint64, cmd []byte) error {
	j.mu.Lock()
	gate, applying := j.gate, j.applying
	j.mu.Unlock()
	if gate != nil && cmd != nil {
		<-gate
		applying(string(cmd))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		j.refused++
		return ErrStopped
	}
	j.applied = index
	if cmd == nil {
		return nil
	}
	if strings.HasPrefix(string(cmd), "bad") {
		return fmt.Errorf("refused %q", cmd)
	}
	j.cmds = append(j.cmds, string(cmd))
	return nil
}

func (j *journal) Applied() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.applied
}

func (j *journal) Snapshot() ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return []byte(strings.Join(j.cmds, "\n")), nil
}

func (j *journal) Restore(index uint64, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.applied, j.cmds = index, nil
	if len(data) > 0 {
		j.cmds = strings.Split(string(data), "\n")
	}
	return nil
}

func (j *journal) commands() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.cmds)
}

// testNode is a node with its log and state, which outlive a Stop.
type testNode struct {
	*Node
	cfg   Config
	state *journal
}

var secret = []byte("the cluster's secret")

func startNode(t testing.TB, name string, seeds []string, tweak func(*Config)) *testNode {
	t.Helper()
	tn := &testNode{state: &journal{}}
	tn.cfg = Config{Name: name, Listen: "127.0.0.1:0", Seeds: seeds, Secret: secret, Log: memLog{raft.NewMemoryStorage()}, State: tn.state,
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	if tweak != nil {
		tweak(&tn.cfg)
	}
	tn.start(t)
	return tn
}

func (tn *testNode) start(t testing.TB) {
	t.Helper()
	n, err := Start(tn.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn.Node = n
	tn.cfg.Listen = n.Addr() // a restart keeps the address the others know
	t.Cleanup(n.Stop)
}

// threeNodes starts a, then b and c joining through a.
func threeNodes(t testing.TB, tweak func(*Config)) []*testNode {
	t.Helper()
	a := startNode(t, "a", nil, tweak)
	nodes := []*testNode{a, startNode(t, "b", []string{a.Addr()}, tweak), startNode(t, "c", []string{a.Addr()}, tweak)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitJoined(ctx); err != nil {
			t.Fatalf("%s: %v", n.cfg.Name, err)
		}
	}
	return nodes
}

func propose(t *testing.T, n *testNode, cmd string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Propose(ctx, []byte(cmd))
}

// converge waits until every node has applied the same commands, want.
func converge(t *testing.T, nodes []*testNode, want []string) {
	t.Helper()
	var behind *testNode
	var got []string
	if !poll.Within(20*time.Second, func() bool {
		for _, n := range nodes {
			if got = n.state.commands(); !slices.Equal(got, want) {
				behind = n
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%s applied %q, want %q", behind.cfg.Name, got, want)
	}
}

func TestThreeNodesApplyTheSameCommands(t *testing.T) {
	nodes := threeNodes(t, nil)
	var want []string
	for i := range 30 {
		n := nodes[i%3]
		cmd := fmt.Sprintf("cmd-%d-via-%s", i, n.cfg.Name)
		if err := propose(t, n, cmd); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		want = append(want, cmd)
		// Propose returns once the command is applied where it was
		// proposed.
		if got := n.state.commands(); got[len(got)-1] != cmd {
			t.Fatalf("%s answered before applying %s", n.cfg.Name, cmd)
		}
	}
	// A refusal is the state machine's answer, given to the proposer.
	if err := propose(t, nodes[1], "bad thing"); err == nil || !strings.Contains(err.Error(), `refused "bad thing"`) {
		t.Fatalf("bad command: %v", err)
	}
	converge(t, nodes, want)
	for _, n := range nodes {
		if got := n.Members(); len(got) != 3 || got[0].Name != "a" || got[2].Name != "c" {
			t.Fatalf("%s sees members %+v", n.cfg.Name, got)
		}
	}
}

// TestMinorityRefusesChanges cuts c off: it cannot commit, and says so;
// a and b go on; after healing c has what they did.
func TestMinorityRefusesChanges(t *testing.T) {
	nodes := threeNodes(t, nil)
	a, b, c := nodes[0], nodes[1], nodes[2]
	for _, cut := range []bool{true, false} {
		for _, n := range []*testNode{a, b} {
			n.Block("c", cut)
			c.Block(n.cfg.Name, cut)
		}
		if !cut {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := c.Propose(ctx, []byte("from the minority"))
		cancel()
		if !errors.Is(err, ErrNoQuorum) {
			t.Fatalf("minority: %v, want ErrNoQuorum", err)
		}
		if err := propose(t, b, "from the majority"); err != nil {
			t.Fatalf("majority: %v", err)
		}
	}
	converge(t, nodes, []string{"from the majority"})
	if err := propose(t, c, "after healing"); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes, []string{"from the majority", "after healing"})
}

// TestRestartedNodeCatchesUp stops b, changes things without it, and
// restarts it from its log: it catches up from the leader's log or, with
// the log compacted past it, from a snapshot.
func TestRestartedNodeCatchesUp(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compact), func(t *testing.T) {
			var tweak func(*Config)
			if compact {
				tweak = func(c *Config) { c.SnapshotEvery, c.KeepAfterSnapshot = 10, 2 }
			}
			nodes := threeNodes(t, tweak)
			var want []string
			for i := range 5 {
				want = append(want, fmt.Sprintf("before-%d", i))
				if err := propose(t, nodes[0], want[i]); err != nil {
					t.Fatal(err)
				}
			}
			converge(t, nodes, want)
			b := nodes[1]
			b.Stop()
			for i := range 40 {
				cmd := fmt.Sprintf("while-b-was-down-%d", i)
				if err := propose(t, nodes[i%2*2], cmd); err != nil {
					t.Fatal(err)
				}
				want = append(want, cmd)
			}
			b.start(t)
			converge(t, nodes, want)
			// Raft's configuration on the restarted node has every voter,
			// though the changes that made it were applied before the
			// restart (and, compacted, after the snapshot or before it).
			if v := b.Status().Voters; v != 3 {
				t.Fatalf("the restarted node's Raft configuration has %d voters, want 3", v)
			}
			if compact {
				if first, _ := nodes[0].cfg.Log.FirstIndex(); first < 10 {
					t.Fatalf("the leader's log was not compacted (first index %d)", first)
				}
			}
		})
	}
}

// TestClosedStateMachine: a node whose state machine answers ErrStopped
// applies nothing after it, even once the state machine would take
// commands again, so nothing is skipped: at its restart it applies the
// turned-away command and what followed.
func TestClosedStateMachine(t *testing.T) {
	nodes := threeNodes(t, nil)
	if err := propose(t, nodes[0], "first"); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes, []string{"first"})
	b := nodes[1]
	b.state.mu.Lock()
	b.state.closed = true
	b.state.mu.Unlock()
	if err := propose(t, nodes[0], "while-closed"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "b offering the command to its closed state machine", func() bool {
		b.state.mu.Lock()
		defer b.state.mu.Unlock()
		return b.state.refused > 0
	})
	b.state.mu.Lock()
	b.state.closed = false
	b.state.mu.Unlock()
	if err := propose(t, nodes[0], "after"); err != nil {
		t.Fatal(err)
	}
	converge(t, []*testNode{nodes[0], nodes[2]}, []string{"first", "while-closed", "after"})
	if got := b.state.commands(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("b applied %q after its state machine closed, want only what came before", got)
	}
	b.Stop()
	b.start(t)
	converge(t, nodes, []string{"first", "while-closed", "after"})
}

// TestForgetNode removes a node; the others go on as a cluster of two.
func TestForgetNode(t *testing.T) {
	nodes := threeNodes(t, nil)
	alive := func(n *testNode, name string) bool {
		for _, m := range n.Status().Members {
			if m.Name == name {
				return m.Alive
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if !poll.Within(10*time.Second, cond) {
			t.Fatal(what)
		}
	}
	// Followers hear from each other through pings, not only from the
	// leader.
	waitFor("b and c never saw each other alive", func() bool { return alive(nodes[1], "c") && alive(nodes[2], "b") })
	// Pings echo each other, so each link gets a round trip.
	waitFor("no round trip measured from b to c", func() bool {
		for _, m := range nodes[1].Status().Members {
			if m.Name == "c" {
				return m.Latency > 0 && m.Latency < time.Second
			}
		}
		return false
	})
	nodes[2].Stop()
	waitFor("c is still reported alive after it stopped", func() bool { return !alive(nodes[0], "c") && !alive(nodes[1], "c") })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nodes[0].Forget(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Forget(ctx, "nobody"); err == nil {
		t.Fatal("forgot a node that is not a member")
	}
	for _, n := range nodes[:2] {
		if !poll.Within(10*time.Second, func() bool { return len(n.Members()) == 2 }) {
			t.Fatalf("%s still sees %+v", n.cfg.Name, n.Members())
		}
	}
	if err := propose(t, nodes[1], "two of two"); err != nil {
		t.Fatal(err)
	}
}

// TestWrongSecretCannotJoin: a node without the secret is refused.
func TestWrongSecretCannotJoin(t *testing.T) {
	a := startNode(t, "a", nil, nil)
	intruder := startNode(t, "intruder", []string{a.Addr()}, func(c *Config) { c.Secret = []byte("a guess") })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := intruder.WaitJoined(ctx); err == nil {
		t.Fatal("a node with the wrong secret joined")
	}
	if got := a.Members(); len(got) != 1 {
		t.Fatalf("members: %+v", got)
	}
}

// TestOnTheStore runs the nodes on storage.RaftLog, the log a broker
// keeps: a node restarted with a fresh state machine (one that keeps
// nothing) rebuilds it from the snapshot and the log on disk.
func TestOnTheStore(t *testing.T) {
	stores := map[string]*storage.Store{}
	// Registered first, so run last: after every node has stopped.
	t.Cleanup(func() {
		for _, st := range stores {
			st.Close()
		}
	})
	open := func(name, dir string) *storage.RaftLog {
		st, err := storage.Open(filepath.Join(dir, "data"), storage.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		stores[name] = st
		l, err := st.RaftLog(1)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	nodes := threeNodes(t, func(c *Config) {
		c.Log = open(c.Name, dirs[c.Name])
		c.SnapshotEvery, c.KeepAfterSnapshot = 10, 2
	})
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("stored-%d", i))
		if err := propose(t, nodes[i%3], want[i]); err != nil {
			t.Fatal(err)
		}
	}
	converge(t, nodes, want)

	// b goes down, its store is closed and opened again, and it comes
	// back with an empty state machine.
	b := nodes[1]
	b.Stop()
	stores["b"].Close()
	b.cfg.Log = open("b", dirs["b"])
	b.state = &journal{}
	b.cfg.State = b.state
	want = append(want, "while b was down")
	if err := propose(t, nodes[0], want[len(want)-1]); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	converge(t, nodes, want)
	if got := b.Members(); len(got) != 3 {
		t.Fatalf("b restarted with members %+v", got)
	}
}

// selfSigned is a TLS config with a fresh self-signed certificate.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warren node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestOverTLS: the nodes replicate over TLS; a node that speaks plain
// TCP cannot join them.
func TestOverTLS(t *testing.T) {
	cert := selfSigned(t)
	nodes := threeNodes(t, func(c *Config) { c.TLS = cert })
	if err := propose(t, nodes[2], "over TLS"); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes, []string{"over TLS"})

	plain := startNode(t, "plain", []string{nodes[0].Addr()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := plain.WaitJoined(ctx); err == nil {
		t.Fatal("a node without TLS joined a cluster that uses it")
	}
}

// TestBarrier: after a Barrier a node has applied what was committed
// before it, from any node, with nothing written to the log; a node cut
// off from the majority cannot pass one.
// TestProposeWaitsForEveryMemberToApply: a change is answered once every
// member heard from has applied it, so a read through any node after
// the answer sees it; a member that is heard from but does not apply is
// waited for SeenWithin, then counted as having not seen the change.
func TestProposeWaitsForEveryMemberToApply(t *testing.T) {
	nodes := threeNodes(t, func(c *Config) { c.SeenWithin = 300 * time.Millisecond })
	a, c := nodes[0], nodes[2]
	var mu sync.Mutex
	var events []string
	event := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	gate := make(chan struct{})
	c.state.mu.Lock()
	c.state.gate, c.state.applying = gate, func(cmd string) { event("c applied " + cmd) }
	c.state.mu.Unlock()
	answered := make(chan error, 1)
	go func() {
		err := propose(t, a, "declare")
		event("a answered declare")
		answered <- err
	}()
	// a and b apply it at once; a's answer waits for c. The gate opens
	// once a has applied it, so an answer that did not wait would come
	// first.
	poll.Until(t, 10*time.Second, "a to apply the change", func() bool { return slices.Contains(a.state.commands(), "declare") })
	close(gate)
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(events)
	mu.Unlock()
	if want := []string{"c applied declare", "a answered declare"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}

	// c is heard from (its pings go on) but applies nothing.
	c.state.mu.Lock()
	c.state.gate = make(chan struct{})
	held := c.state.gate
	c.state.mu.Unlock()
	t.Cleanup(func() { close(held) })
	if err := propose(t, a, "while c is stuck"); err != nil {
		t.Fatal(err)
	}
	for _, m := range a.Status().Members {
		if want := uint64(0); m.Name == "c" {
			want = 1
			if m.Unseen != want {
				t.Fatalf("a counts %d changes c did not see, want %d", m.Unseen, want)
			}
		} else if m.Unseen != want {
			t.Fatalf("a counts %d changes %s did not see", m.Unseen, m.Name)
		}
	}
}

func TestBarrier(t *testing.T) {
	nodes := threeNodes(t, nil)
	a, c := nodes[0], nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		cmd := fmt.Sprintf("cmd-%d", i)
		if err := propose(t, a, cmd); err != nil {
			t.Fatal(err)
		}
		// c did not propose it, and may not have applied it yet; after the
		// barrier it has.
		if err := c.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		if got := c.state.commands(); len(got) != i+1 || got[i] != cmd {
			t.Fatalf("after the barrier c has %q", got)
		}
	}
	before := a.Status().Commit
	for range 10 {
		if err := c.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if after := a.Status().Commit; after != before {
		t.Fatalf("barriers wrote to the log: commit %d -> %d", before, after)
	}
	for _, n := range nodes[:2] {
		n.Block("c", true)
		c.Block(n.cfg.Name, true)
	}
	cut, cancelCut := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelCut()
	if err := c.Barrier(cut); !errors.Is(err, ErrNoQuorum) {
		t.Fatalf("barrier on the minority: %v", err)
	}
}

// A peer of another cluster protocol version is refused, naming both.
func TestTransportRefusesAnotherVersion(t *testing.T) {
	server, client := net.Pipe()
	defer server.Close()
	defer client.Close()
	go func() {
		hello := append([]byte(magic), version-1)
		hello = binary.BigEndian.AppendUint64(hello, 7)
		_, _ = client.Write(append(hello, make([]byte, nonceLen)...))
	}()
	_, err := (&Transport{}).accept(server)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d, this node's is %d", version-1, version)) {
		t.Fatalf("a peer of version %d: %v", version-1, err)
	}
}
