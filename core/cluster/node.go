package cluster

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Raft settings; the package doc says why each has its value.
const (
	tickInterval     = 100 * time.Millisecond
	electionTicks    = 10
	heartbeatTicks   = 1
	maxSizePerMsg    = 1 << 20
	maxInflightMsgs  = 256
	defaultSnapEvery = 10_000
	keepAfterSnap    = 1_000
	joinTimeout      = 10 * time.Second
)

// ErrNoQuorum is the answer to a change the cluster could not commit: this
// node cannot reach a majority (it is on the minority side of a partition,
// or most nodes are down), or no leader is elected yet.
var ErrNoQuorum = errors.New("cluster: the change was not committed: no majority of the cluster's nodes is reachable")

// ErrStopped is the answer to a change proposed to a stopped node.
var ErrStopped = errors.New("cluster: the node is stopping")

// LogStore keeps a Raft group's log, hard state and snapshot.
// storage.RaftLog is the durable one.
type LogStore interface {
	raft.Storage
	// Save persists what a Ready asks for, durably, before it returns.
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error
	CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error)
	Compact(compactIndex uint64) error
}

// StateMachine is what the cluster replicates. Every node applies the same
// commands in the same order.
type StateMachine interface {
	// Apply applies the command committed at index. It must be
	// deterministic: every node gets the same error, which is the
	// command's answer to whoever proposed it (an AMQP reply, say), not a
	// failure of the node. It makes index durable with the command's
	// effects, so that Applied is right after a crash.
	//
	// A state machine being closed (its node shutting down) answers
	// ErrStopped, or an error wrapping it, having done nothing and
	// recorded nothing: the node then stops applying, and the command is
	// applied again when the node restarts. A closed state machine must
	// not refuse a command the way an open one would, since that refusal
	// would count as its answer and the command would be lost here.
	Apply(index uint64, cmd []byte) error
	// Applied is the index of the last command whose effects are durable.
	Applied() uint64
	// Snapshot is the whole state, as of Applied.
	Snapshot() ([]byte, error)
	// Restore replaces the whole state with a snapshot taken at index.
	Restore(index uint64, data []byte) error
}

// Config configures a Node.
type Config struct {
	Name string // the node's name, unique in the cluster
	// ID is the node's Raft id, its data directory's (Identity); 0
	// takes LegacyID(Name), for a node that keeps no data directory.
	ID     uint64
	Listen string // address for other nodes (host:port; port 0 picks one)
	// Advertise is the address the other nodes are told to reach this
	// one at, when it is not Listen (behind NAT, a proxy or a container
	// port mapping).
	Advertise string
	Seeds     []string // other nodes' addresses; none: this node starts the cluster
	Secret    []byte   // shared by every node
	// TLS, when set, holds this node's certificate: the nodes then talk
	// over TLS 1.3 (see transport.go for what authenticates whom).
	TLS   *tls.Config
	Log   LogStore
	State StateMachine
	// OnCall answers other nodes' calls (calls.go); nil takes none.
	OnCall CallHandler
	// Groups, when set, is the host of this node's small groups, made
	// before the node (NewNodeGroups); nil makes one.
	Groups *Groups
	Logger zerolog.Logger
	// SnapshotEvery is how many applied entries make a snapshot (and a
	// compaction of the log); 0 means 10,000. KeepAfterSnapshot is how
	// many entries behind the snapshot stay in the log; 0 means 1,000.
	SnapshotEvery     uint64
	KeepAfterSnapshot uint64
	// SeenWithin bounds how long a change waits for the other members
	// to apply it (Propose); 0 means 5 s.
	SeenWithin time.Duration
}

// Member is a node of the cluster. In a Status, Alive says whether this
// node has heard from it in the last few seconds (always true of itself),
// Latency is the last round trip measured to it (0: none yet, or
// itself), and Unseen counts the changes this node answered before the
// member had applied them (Propose).
type Member struct {
	ID      uint64
	Name    string
	Addr    string
	Alive   bool
	Latency time.Duration
	Unseen  uint64
}

// Node is this process's member of the cluster.
type Node struct {
	cfg  Config
	id   uint64
	raft raft.Node
	tr   *Transport
	log  zerolog.Logger
	// groups hosts the small Raft groups (quorum queues) this node is a
	// member of, over the same transport.
	groups *Groups

	confMu lockorder.Mutex[lockorder.ClusterConf] // serializes configuration changes proposed here

	mu       lockorder.Mutex[lockorder.ClusterNode]
	members  map[uint64]Member
	waiters  map[uint64]chan answer  // by proposal sequence
	reads    map[uint64]*pendingRead // Barrier's read-index requests, by sequence
	seq      uint64
	status   Status
	joined   chan struct{} // closed once this node is in the configuration
	isJoined bool
	// peerApplied is the metadata index each peer said it has applied;
	// appliedMoved is closed (and replaced) when one says more. unseen
	// counts, per peer, the changes it had not applied when this node
	// answered them (seenWithin).
	peerApplied  map[uint64]uint64
	appliedMoved chan struct{}
	unseen       map[uint64]uint64
	// removed are the incarnations this node saw leave the
	// configuration (forgotten, or replaced by a new incarnation of
	// their name) since it started, with those its log's tail records.
	removed map[uint64]bool

	stop chan struct{}
	done chan struct{}
}

// Status is a node's view of the cluster.
type Status struct {
	ID      uint64
	Name    string
	Role    string // "leader", "follower", "candidate", "pre-candidate"
	Term    uint64
	Leader  uint64
	Commit  uint64
	Applied uint64
	Members []Member
	// LogBytes and LogEntries are the size of the log kept since the
	// last compaction, when the LogStore can tell (storage.RaftLog can).
	LogBytes, LogEntries uint64
	// Voters is how many voters Raft's configuration on this node has.
	Voters int
}

// Start starts the node: it restarts from its log if it has one, starts a
// new cluster of one without seeds, or asks the seeds to let it join.
func Start(cfg Config) (*Node, error) {
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = defaultSnapEvery
	}
	if cfg.KeepAfterSnapshot == 0 {
		cfg.KeepAfterSnapshot = keepAfterSnap
	}
	if cfg.SeenWithin == 0 {
		cfg.SeenWithin = seenWithin
	}
	id := cfg.ID
	if id == 0 {
		id = LegacyID(cfg.Name)
	}
	tr, err := newTransport(id, cfg.Listen, cfg.Secret, cfg.TLS, cfg.Logger)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, id: id, tr: tr, log: cfg.Logger.With().Str("component", "cluster").Logger(),
		members: map[uint64]Member{}, waiters: map[uint64]chan answer{}, reads: map[uint64]*pendingRead{}, joined: make(chan struct{}),
		peerApplied: map[uint64]uint64{}, appliedMoved: make(chan struct{}), unseen: map[uint64]uint64{}, removed: map[uint64]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	// Proposals are matched to their waiters by (node, seq) when they are
	// applied. Entries a previous run of this node proposed may be applied
	// after a restart: a random start keeps their seqs from meeting this
	// run's.
	var start [8]byte
	crand.Read(start[:])
	n.seq = binary.BigEndian.Uint64(start[:]) >> 1
	n.groups = cfg.Groups
	if n.groups == nil {
		n.groups = newGroups(id, cfg.Logger)
	} else if n.groups.self != id {
		tr.close()
		return nil, fmt.Errorf("cluster: the groups given are node %x's, not %s's", n.groups.self, cfg.Name)
	}
	n.groups.tr.Store(tr)
	n.groups.node.Store(n)
	tr.deliver = func(group uint64, m *raftpb.Message) {
		if group == 0 {
			n.receive(m)
		} else {
			n.groups.receive(group, m)
		}
	}
	tr.onJoin = n.handleJoin
	tr.onApplied = n.peerApplies
	if cfg.OnCall != nil {
		tr.onCall.Store(&cfg.OnCall)
	}
	tr.unreachable = func(group, id uint64) {
		if group == 0 {
			n.raft.ReportUnreachable(id)
		} else {
			n.groups.report(group, id, nil)
		}
	}
	tr.dead = n.groups.peerDead
	tr.snapshotSent = func(group, id uint64, ok bool) {
		status := raft.SnapshotFinish
		if !ok {
			status = raft.SnapshotFailure
		}
		if group == 0 {
			n.raft.ReportSnapshot(id, status)
		} else {
			n.groups.report(group, id, &status)
		}
	}

	hs, cs, err := cfg.Log.InitialState()
	if err != nil {
		tr.close()
		return nil, err
	}
	last, err := cfg.Log.LastIndex()
	if err != nil {
		tr.close()
		return nil, err
	}
	// A state machine behind the log's snapshot (one that keeps nothing
	// durable, or lost its data) starts from the snapshot: Raft hands
	// back only entries after it.
	applied := cfg.State.Applied()
	if snap, err := cfg.Log.Snapshot(); err != nil {
		tr.close()
		return nil, err
	} else if i := snap.GetMetadata().GetIndex(); i > applied {
		_, data, err := decodeSnapshot(snap.GetData())
		if err == nil {
			err = cfg.State.Restore(i, data)
		}
		if err != nil {
			tr.close()
			return nil, fmt.Errorf("cluster: restoring the snapshot at %d: %w", i, err)
		}
		applied = i
	}
	// Raft is told only the snapshot's index as applied, not the state
	// machine's: Raft rebuilds its configuration from the snapshot's and
	// the configuration changes it hands back, so every entry after the
	// snapshot must come back. The loop passes those the state machine
	// already has to Raft only (see run).
	raftApplied := uint64(0)
	if snap, err := cfg.Log.Snapshot(); err == nil {
		raftApplied = snap.GetMetadata().GetIndex()
	}
	rc := &raft.Config{
		ID: id, ElectionTick: electionTicks, HeartbeatTick: heartbeatTicks, Storage: cfg.Log,
		Applied: raftApplied, MaxSizePerMsg: maxSizePerMsg, MaxInflightMsgs: maxInflightMsgs,
		MaxUncommittedEntriesSize: 1 << 30, CheckQuorum: true, PreVote: true,
		Logger: raftLogger{n.log},
	}
	restart := !raft.IsEmptyHardState(hs) || last > 0 || len(cs.GetVoters()) > 0
	if restart {
		if err := n.recoverMembers(applied); err != nil {
			tr.close()
			return nil, err
		}
		n.raft = raft.RestartNode(rc)
	} else if len(cfg.Seeds) == 0 {
		self := Member{ID: id, Name: cfg.Name, Addr: n.advertised()}
		n.raft = raft.StartNode(rc, []raft.Peer{{ID: id, Context: encodeMember(id, 0, self)}})
	} else {
		n.raft = raft.RestartNode(rc) // empty: waits for the leader to add it
	}
	for _, m := range n.members {
		tr.setPeer(m.ID, m.Addr)
	}
	for id := range n.removed {
		tr.forbid(id, true)
	}
	tr.serve()
	// A new cluster of one elects itself at once rather than after an
	// election timeout, once its first configuration is applied (Raft
	// refuses before); a restarted one once its configuration is rebuilt.
	// See run.
	go n.run(!restart && len(cfg.Seeds) == 0)
	if !restart && len(cfg.Seeds) > 0 {
		go n.join()
	}
	return n, nil
}

// ID is the node's Raft id.
func (n *Node) ID() uint64 { return n.id }

// Groups hosts this node's members of small Raft groups (quorum queues).
func (n *Node) Groups() *Groups { return n.groups }

// Addr is the address this node listens on for the others.
func (n *Node) Addr() string { return n.tr.Addr() }

// advertised is the address the others are told to reach this node at.
func (n *Node) advertised() string {
	if n.cfg.Advertise != "" {
		return n.cfg.Advertise
	}
	return n.tr.Addr()
}

// WaitJoined waits until this node is a member of the configuration and
// has applied what the cluster committed up to then.
func (n *Node) WaitJoined(ctx context.Context) error {
	select {
	case <-n.joined:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: not joined: %w", ctx.Err())
	case <-n.done:
		return ErrStopped
	}
}

// WaitLeader waits until this node knows a leader (itself, perhaps).
func (n *Node) WaitLeader(ctx context.Context) error {
	for n.raft.Status().Lead == raft.None {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: no leader: %w", ctx.Err())
		case <-n.done:
			return ErrStopped
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// join asks the seeds, in turn, to add this node until one has.
func (n *Node) join() {
	self := joinRequest{id: n.id, name: n.cfg.Name, addr: n.advertised()}
	for attempt := 0; ; attempt++ {
		seed := n.cfg.Seeds[attempt%len(n.cfg.Seeds)]
		ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
		members, err := n.tr.request(ctx, seed, self)
		cancel()
		if err == nil {
			// Raft's first messages come before the log that names
			// their senders: the transport learns them now.
			for _, m := range members {
				n.tr.setPeer(m.ID, m.Addr)
			}
			n.log.Info().Str("seed", seed).Msg("joined the cluster")
			return
		}
		n.log.Info().Err(err).Str("seed", seed).Msg("could not join through this seed yet")
		select {
		case <-n.stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// handleJoin adds (or removes) a node, answering once the change is
// applied here, with the members. A node that joins under the name of a
// member with another id is a new incarnation of it (its data directory
// was lost, or reset): the member it was leaves the configuration first
// (package doc, "Node ids, and replacing a node").
func (n *Node) handleJoin(ctx context.Context, req joinRequest) ([]Member, error) {
	if !req.leave {
		if n.Removed(req.id) {
			return nil, fmt.Errorf("cluster: node %s (id %x) was removed from the cluster; wipe its data directory, or reset it with join_cluster, to bring it back", req.name, req.id)
		}
		if old, ok := n.memberNamed(req.name); ok && old.ID != req.id {
			if n.tr.alive(old.ID) {
				return nil, fmt.Errorf("cluster: node %s is a member and running (id %x); a new incarnation of it (id %x) joins once it is stopped", req.name, old.ID, req.id)
			}
			n.log.Warn().Str("node", req.name).Str("id", idString(old.ID)).Str("new_id", idString(req.id)).
				Msg("a node returns as a new incarnation (its data was lost or reset): the one it was leaves the cluster")
			if err := n.changeConf(ctx, joinRequest{id: old.ID, name: old.Name, addr: old.Addr, leave: true}); err != nil {
				return nil, err
			}
		}
	}
	if err := n.changeConf(ctx, req); err != nil {
		return nil, err
	}
	return n.Members(), nil
}

// idString is a Raft id as the logs write it: hexadecimal, as Raft's own
// lines do.
func idString(id uint64) string { return strconv.FormatUint(id, 16) }

// changeConf proposes a configuration change and waits until it is
// applied here. Raft takes one change at a time (it turns a second one
// proposed while the first is pending into an empty entry, which would
// leave its waiter without an answer), so a node proposes them in turn.
func (n *Node) changeConf(ctx context.Context, req joinRequest) error {
	n.confMu.Lock()
	defer n.confMu.Unlock()
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(req.id)}
	if req.leave {
		cc.Type = raftpb.ConfChangeRemoveNode.Enum()
	}
	seq, ch := n.wait()
	cc.Context = encodeMember(n.id, seq, Member{ID: req.id, Name: req.name, Addr: req.addr})
	if err := n.raft.ProposeConfChange(ctx, cc); err != nil {
		n.unwait(seq)
		return ErrNoQuorum
	}
	_, err := n.await(ctx, seq, ch)
	return err
}

// Members lists the cluster's nodes by name.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Member, 0, len(n.members))
	for _, m := range n.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return compareStrings(a.Name, b.Name) })
	return out
}

// ErrMemberRunning refuses to forget a node that is running, as
// rabbitmqctl forget_cluster_node refuses a node whose app runs.
var ErrMemberRunning = errors.New("cluster: the node is running")

// Forget removes a node from the cluster (rabbitmqctl
// forget_cluster_node); a node heard from lately is refused
// (ErrMemberRunning). The quorum queues and streams it is a member of are
// the caller's to shrink first, while its name still names its id.
func (n *Node) Forget(ctx context.Context, name string) error {
	m, ok := n.memberNamed(name)
	if !ok {
		return fmt.Errorf("cluster: no node %q in the cluster", name)
	}
	if m.ID == n.id || n.tr.alive(m.ID) {
		return fmt.Errorf("%w: node %s must be stopped before it can be removed", ErrMemberRunning, name)
	}
	return n.changeConf(ctx, joinRequest{id: m.ID, name: m.Name, addr: m.Addr, leave: true})
}

// memberNamed is the member table's entry for the node named name: its
// current incarnation.
func (n *Node) memberNamed(name string) (Member, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

// MemberID is the Raft id of the current incarnation of the node named
// name, as the member table has it; false when the cluster has no node of
// that name.
func (n *Node) MemberID(name string) (uint64, bool) {
	m, ok := n.memberNamed(name)
	return m.ID, ok
}

// nameOf names the member whose current incarnation is id; "" when none
// is.
func (n *Node) nameOf(id uint64) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members[id].Name
}

// Removed reports whether id is an incarnation this node saw leave the
// cluster, forgotten or replaced by a new incarnation of its name, since
// it started or in the part of the log its last snapshot does not cover.
func (n *Node) Removed(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.removed[id]
}

// Propose replicates cmd and returns once it is committed and applied on
// this node, and on every other member it hears from (read your writes:
// a declare answered through one node is there when the client publishes
// through another), with the state machine's answer to it. A member that
// has not applied it within Config.SeenWithin is waited for no longer:
// it is logged, and counted in its Member's Unseen.
func (n *Node) Propose(ctx context.Context, cmd []byte) error {
	seq, ch := n.wait()
	data := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n.id), seq)
	data = append(data, cmd...)
	if err := n.raft.Propose(ctx, data); err != nil {
		n.unwait(seq)
		if errors.Is(err, raft.ErrStopped) {
			return ErrStopped
		}
		return ErrNoQuorum
	}
	a, err := n.await(ctx, seq, ch)
	if err == nil && a.index > 0 {
		n.awaitSeen(a.index)
	}
	return err
}

// seenWithin is Config.SeenWithin's default. A member alive but not
// applying (paused, or replaying a long log) costs each change this much
// until it is heard from no more (aliveWithin).
const seenWithin = 5 * time.Second

// awaitSeen waits until every other member this node has heard from
// lately has applied index, or for Config.SeenWithin.
func (n *Node) awaitSeen(index uint64) {
	var timer *time.Timer
	for {
		n.mu.Lock()
		var behind []uint64
		for id := range n.members {
			if id != n.id && n.peerApplied[id] < index {
				behind = append(behind, id)
			}
		}
		moved := n.appliedMoved
		n.mu.Unlock()
		// Transport.mu is a leaf: alive is asked with Node.mu released.
		behind = slices.DeleteFunc(behind, func(id uint64) bool { return !n.tr.alive(id) })
		if len(behind) == 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(n.cfg.SeenWithin)
			defer timer.Stop()
		}
		select {
		case <-moved:
		case <-timer.C:
			n.mu.Lock()
			for _, id := range behind {
				n.unseen[id]++
				n.log.Warn().Str("member", n.members[id].Name).Uint64("index", index).Uint64("applied", n.peerApplied[id]).
					Dur("waited", n.cfg.SeenWithin).Msg("answering a change a member has not applied yet")
			}
			n.mu.Unlock()
			return
		case <-n.done:
			return
		}
	}
}

// peerApplies records the metadata index a peer says it has applied.
func (n *Node) peerApplies(from, index uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if index > n.peerApplied[from] {
		n.peerApplied[from] = index
		close(n.appliedMoved)
		n.appliedMoved = make(chan struct{})
	}
}

// pendingRead is a Barrier waiting for the leader's commit index, then
// for this node to apply up to it.
type pendingRead struct {
	index uint64 // 0 until the leader answered
	done  chan struct{}
}

// Barrier returns once this node has applied every change committed
// before the call, as the leader sees it (Raft's ReadIndex: the leader
// confirms it still leads a majority and names its commit index; no entry
// is written). Without a majority it returns ErrNoQuorum when ctx ends.
func (n *Node) Barrier(ctx context.Context) error {
	n.mu.Lock()
	n.seq++
	seq := n.seq
	r := &pendingRead{done: make(chan struct{})}
	n.reads[seq] = r
	n.mu.Unlock()
	forget := func() {
		n.mu.Lock()
		delete(n.reads, seq)
		n.mu.Unlock()
	}
	if err := n.raft.ReadIndex(ctx, binary.BigEndian.AppendUint64(nil, seq)); err != nil {
		forget()
		if errors.Is(err, raft.ErrStopped) {
			return ErrStopped
		}
		return ErrNoQuorum
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		forget()
		return ErrNoQuorum
	case <-n.done:
		forget()
		return ErrStopped
	}
}

// readsAnswered records the leader's answers to Barriers and releases
// those this node has applied far enough for; applied is the node's.
func (n *Node) readsAnswered(states []raft.ReadState, applied uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, rs := range states {
		if len(rs.RequestCtx) == 8 {
			if r := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; r != nil {
				r.index = rs.Index
			}
		}
	}
	for seq, r := range n.reads {
		if r.index != 0 && r.index <= applied {
			close(r.done)
			delete(n.reads, seq)
		}
	}
}

// answer is what a proposer hears: the index its command was applied
// at, and the state machine's answer.
type answer struct {
	index uint64
	err   error
}

func (n *Node) wait() (uint64, chan answer) {
	ch := make(chan answer, 1)
	n.mu.Lock()
	n.seq++
	seq := n.seq
	n.waiters[seq] = ch
	n.mu.Unlock()
	return seq, ch
}

func (n *Node) unwait(seq uint64) {
	n.mu.Lock()
	delete(n.waiters, seq)
	n.mu.Unlock()
}

// await waits for a proposal's answer. A proposal whose context ends may
// still be committed later: the caller cannot tell, and says so.
func (n *Node) await(ctx context.Context, seq uint64, ch chan answer) (answer, error) {
	select {
	case a := <-ch:
		return a, a.err
	case <-ctx.Done():
		n.unwait(seq)
		return answer{}, ErrNoQuorum
	case <-n.done:
		n.unwait(seq)
		return answer{}, ErrStopped
	}
}

// answer hands a proposal's answer to its waiter, if it was proposed here.
func (n *Node) answer(proposer, seq, index uint64, err error) {
	if proposer != n.id {
		return
	}
	n.mu.Lock()
	ch, ok := n.waiters[seq]
	delete(n.waiters, seq)
	n.mu.Unlock()
	if ok {
		ch <- answer{index, err}
	}
}

func (n *Node) receive(m *raftpb.Message) {
	if m.GetType() == raftpb.MsgHeartbeat {
		// A leader names in a heartbeat the commit index up to what it
		// counts this node to have; past the end of this node's log,
		// Raft panics (commitTo), on a goroutine nothing can recover.
		// The transport keeps messages for another incarnation away
		// (package doc); what is left is a leader wrong about this very
		// incarnation: its data directory was restored from a backup,
		// or lost its last writes to a machine crash under SyncNever.
		if last, err := n.cfg.Log.LastIndex(); err == nil && m.GetCommit() > last {
			n.log.Error().Str("leader", idString(m.GetFrom())).Uint64("commit", m.GetCommit()).Uint64("last_index", last).
				Msg("the leader counts this node to hold entries its log lacks (a data directory restored from a backup?); ignoring its heartbeat: wipe this node's data directory to bring it back as a new member")
			return
		}
	}
	n.raft.Step(context.Background(), m)
}

// Status is the node's view of the cluster now.
func (n *Node) Status() Status {
	st := n.raft.Status()
	n.mu.Lock()
	out := n.status
	n.mu.Unlock()
	out.ID, out.Name = n.id, n.cfg.Name
	out.Role = roleName(st.RaftState)
	out.Term, out.Leader, out.Commit = st.GetTerm(), st.Lead, st.GetCommit()
	out.Voters = len(st.Config.Voters.IDs())
	out.Members = n.Members()
	n.mu.Lock()
	for i := range out.Members {
		out.Members[i].Unseen = n.unseen[out.Members[i].ID]
	}
	n.mu.Unlock()
	for i := range out.Members {
		m := &out.Members[i]
		m.Alive = m.ID == n.id || n.tr.alive(m.ID)
		if m.ID != n.id {
			m.Latency = n.tr.latency(m.ID)
		}
	}
	if sized, ok := n.cfg.Log.(interface{ Size() (uint64, uint64) }); ok {
		out.LogBytes, out.LogEntries = sized.Size()
	}
	return out
}

func roleName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

// Block cuts the links between this node and another, both ways, or
// restores them: a partition for tests.
func (n *Node) Block(name string, cut bool) {
	if m, ok := n.memberNamed(name); ok {
		n.tr.block(m.ID, cut)
	}
}

// Stop stops the node; its log and state stay for a restart.
func (n *Node) Stop() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	<-n.done
	n.groups.stop()
	n.raft.Stop()
	n.tr.close()
}

// save persists a Ready. The metadata group's state machine records what
// it applied, durably, and must not find its log's commit behind that at
// a restart, so a commit index the log keeps back (storage.RaftLog's
// Save, for small groups' sake) is written at once here, as it was
// before Save kept it back: one synced write, as many as then.
func (n *Node) save(rd raft.Ready) error {
	if err := n.cfg.Log.Save(rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		return err
	}
	if f, ok := n.cfg.Log.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// run is the node's loop: it ticks Raft and handles each Ready in the
// order Raft requires (persist, send, apply, advance).
func (n *Node) run(campaign bool) {
	defer close(n.done)
	ticker := time.NewTicker(tickInterval)
	defer ticker.Stop()
	applied := n.cfg.State.Applied()
	snapIndex := uint64(0)
	if snap, err := n.cfg.Log.Snapshot(); err == nil {
		snapIndex = snap.GetMetadata().GetIndex()
	}
	var confState *raftpb.ConfState
	soleVoterChecked := false
	for {
		select {
		case <-n.stop:
			return
		case <-ticker.C:
			n.raft.Tick()
		case rd := <-n.raft.Ready():
			if err := n.save(rd); err != nil {
				n.log.Error().Err(err).Msg("cannot persist the Raft log; this node stops taking part")
				return
			}
			n.tr.send(0, rd.Messages)
			if snap := rd.Snapshot; snap != nil && !raft.IsEmptySnap(snap) && snap.GetMetadata().GetIndex() > applied {
				if err := n.restore(snap); errors.Is(err, ErrStopped) {
					n.log.Info().Msg("state machine closed; this node stops applying")
					return
				} else if err != nil {
					n.log.Error().Err(err).Msg("cannot restore a snapshot; this node stops taking part")
					return
				}
				applied, snapIndex = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetIndex()
				confState = snap.GetMetadata().GetConfState()
			}
			for _, e := range rd.CommittedEntries {
				if e.GetIndex() <= applied {
					// Applied before a restart: a configuration change
					// goes to Raft again (it rebuilds its configuration
					// from them), nothing goes to the state machine.
					if cs := n.reapplyConf(e); cs != nil {
						confState = cs
					}
					continue
				}
				cs, err := n.apply(e)
				if err != nil {
					// The state machine closed under the loop: what is
					// left is applied at the next start.
					n.log.Info().Uint64("index", e.GetIndex()).Msg("state machine closed; this node stops applying")
					return
				}
				if cs != nil {
					confState = cs
				}
				applied = e.GetIndex()
			}
			n.mu.Lock()
			moved := applied > n.status.Applied
			n.status.Applied = applied
			n.mu.Unlock()
			if moved {
				n.tr.sendApplied(applied)
			}
			n.readsAnswered(rd.ReadStates, applied)
			// A cluster of one, restarted, elects itself as soon as its
			// configuration is rebuilt rather than after a timeout.
			if !soleVoterChecked && len(rd.CommittedEntries) > 0 {
				soleVoterChecked = true
				if confState != nil && len(confState.GetVoters()) == 1 && confState.GetVoters()[0] == n.id {
					campaign = true
				}
			}
			if applied-snapIndex >= n.cfg.SnapshotEvery {
				if confState == nil {
					_, cs, _ := n.cfg.Log.InitialState()
					confState = cs
				}
				if err := n.snapshot(applied, confState); err != nil {
					n.log.Warn().Err(err).Msg("cannot take a snapshot; the log keeps growing")
				} else {
					snapIndex = applied
				}
			}
			n.raft.Advance()
			// Raft lets a node stand only once the configuration it
			// was handed is applied, which Advance has just told it.
			if campaign && confState != nil {
				campaign = false
				if n.raft.Status().Lead == raft.None {
					n.raft.Campaign(context.Background())
				}
			}
		}
	}
}

// apply applies one committed entry and returns the new configuration if
// it changed it. Its error is ErrStopped only: the state machine is
// closed, and the entry was not applied.
func (n *Node) apply(e *raftpb.Entry) (*raftpb.ConfState, error) {
	switch e.GetType() {
	case raftpb.EntryNormal:
		data := e.GetData()
		if len(data) < 16 {
			// Raft's empty entry at a new term: its index still reaches
			// the state machine, so that Applied moves past it.
			return nil, stoppedOnly(n.cfg.State.Apply(e.GetIndex(), nil))
		}
		proposer, seq := binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:])
		err := n.cfg.State.Apply(e.GetIndex(), data[16:])
		if errors.Is(err, ErrStopped) {
			return nil, ErrStopped
		}
		n.answer(proposer, seq, e.GetIndex(), err)
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			n.log.Error().Err(err).Msg("undecodable configuration change in the log")
			return nil, nil
		}
		cs := n.raft.ApplyConfChange(cc)
		proposer, seq, m, err := decodeMember(cc.GetContext())
		if err == nil {
			n.changeMember(cc.GetType(), m)
		}
		// The entry's index must still reach the state machine, so that
		// Applied moves past it.
		if stoppedOnly(n.cfg.State.Apply(e.GetIndex(), nil)) != nil {
			return nil, ErrStopped
		}
		if err == nil {
			n.answer(proposer, seq, e.GetIndex(), nil)
		}
		return cs, nil
	}
	return nil, nil
}

// stoppedOnly keeps an Apply's error if it says the state machine is
// closed, and drops any other (an entry without a command has nobody to
// answer).
func stoppedOnly(err error) error {
	if errors.Is(err, ErrStopped) {
		return ErrStopped
	}
	return nil
}

// reapplyConf hands a configuration change the state machine applied
// before a restart back to Raft.
func (n *Node) reapplyConf(e *raftpb.Entry) *raftpb.ConfState {
	if e.GetType() != raftpb.EntryConfChange {
		return nil
	}
	cc := &raftpb.ConfChange{}
	if err := proto.Unmarshal(e.GetData(), cc); err != nil {
		return nil
	}
	return n.raft.ApplyConfChange(cc)
}

// changeMember records a configuration change in the member table and the
// transport.
func (n *Node) changeMember(typ raftpb.ConfChangeType, m Member) {
	n.mu.Lock()
	if typ == raftpb.ConfChangeRemoveNode {
		delete(n.members, m.ID)
		if m.ID != n.id {
			n.removed[m.ID] = true
		}
	} else {
		n.members[m.ID] = m
		delete(n.removed, m.ID)
	}
	joinedNow := m.ID == n.id && typ != raftpb.ConfChangeRemoveNode && !n.isJoined
	if joinedNow {
		n.isJoined = true
	}
	n.mu.Unlock()
	if typ == raftpb.ConfChangeRemoveNode {
		n.tr.removePeer(m.ID)
	} else {
		n.tr.setPeer(m.ID, m.Addr)
	}
	n.tr.forbid(m.ID, typ == raftpb.ConfChangeRemoveNode && m.ID != n.id)
	if joinedNow {
		close(n.joined)
	}
}

// snapshot records the state as of applied, with the member table, and
// compacts the log behind it.
func (n *Node) snapshot(applied uint64, cs *raftpb.ConfState) error {
	data, err := n.cfg.State.Snapshot()
	if err != nil {
		return err
	}
	env := encodeSnapshot(n.Members(), data)
	if _, err := n.cfg.Log.CreateSnapshot(applied, cs, env); err != nil {
		return err
	}
	if applied > n.cfg.KeepAfterSnapshot {
		return n.cfg.Log.Compact(applied - n.cfg.KeepAfterSnapshot)
	}
	return nil
}

// restore replaces the state and member table with a snapshot's.
func (n *Node) restore(snap *raftpb.Snapshot) error {
	members, data, err := decodeSnapshot(snap.GetData())
	if err != nil {
		return err
	}
	if err := n.cfg.State.Restore(snap.GetMetadata().GetIndex(), data); err != nil {
		return err
	}
	keep := map[uint64]bool{}
	for _, m := range members {
		keep[m.ID] = true
		n.changeMember(raftpb.ConfChangeAddNode, m)
	}
	for _, m := range n.Members() {
		if !keep[m.ID] {
			n.changeMember(raftpb.ConfChangeRemoveNode, m)
		}
	}
	return nil
}

// recoverMembers rebuilds the member table at a restart: the snapshot's,
// then the configuration changes of the log up to applied (Raft does not
// hand back entries the state machine has applied).
func (n *Node) recoverMembers(applied uint64) error {
	snap, err := n.cfg.Log.Snapshot()
	if err != nil {
		return err
	}
	from := snap.GetMetadata().GetIndex() + 1
	if !raft.IsEmptySnap(snap) {
		members, _, err := decodeSnapshot(snap.GetData())
		if err != nil {
			return err
		}
		for _, m := range members {
			n.members[m.ID] = m
		}
	}
	if applied < from {
		return n.markJoined()
	}
	ents, err := n.cfg.Log.Entries(from, applied+1, 1<<62)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryConfChange {
			continue
		}
		cc := &raftpb.ConfChange{}
		if proto.Unmarshal(e.GetData(), cc) != nil {
			continue
		}
		if _, _, m, err := decodeMember(cc.GetContext()); err == nil {
			if cc.GetType() == raftpb.ConfChangeRemoveNode {
				delete(n.members, m.ID)
				if m.ID != n.id {
					n.removed[m.ID] = true
				}
			} else {
				n.members[m.ID] = m
				delete(n.removed, m.ID)
			}
		}
	}
	return n.markJoined()
}

func (n *Node) markJoined() error {
	if _, ok := n.members[n.id]; ok && !n.isJoined {
		n.isJoined = true
		close(n.joined)
	}
	return nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Alive reports whether the node named name is this one or was heard from
// lately.
func (n *Node) Alive(name string) bool {
	m, ok := n.memberNamed(name)
	return ok && (m.ID == n.id || n.tr.alive(m.ID))
}

// IsLeader reports whether this node leads the metadata group now.
func (n *Node) IsLeader() bool { return n.raft.Status().RaftState == raft.StateLeader }
