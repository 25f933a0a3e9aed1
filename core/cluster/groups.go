package cluster

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Groups hosts this node's members of small Raft groups: one per quorum
// queue or replicated stream with a member here. The metadata group has a
// goroutine of its own (Node); small groups are many, so one loop drives
// them all:
//
//   - one ticker ticks every group;
//   - the groups that have something to persist in the same pass save it
//     at once, and the store's commit pipeline syncs their batches with
//     one fsync; a lazy proposal (ProposeLazily: a quorum queue's acks)
//     waits, lazyWithin at most, for another input to wake the loop, so
//     that it shares that pass's save rather than costing one of its own;
//   - their messages share each peer's connection (transport.go), so one
//     flush carries the heartbeats of every group that has one due.
//
// A group's state machine is in memory: at a start it is restored from
// the group's snapshot and the log after it (Raft is told only the
// snapshot's index as applied, so every later entry comes back). A
// machine that is a LogKeeper (a quorum queue) refers from its snapshots
// to entries the log still holds, and the group keeps them: see
// LogKeeper.
//
// # Settings, and why
//
// Small groups tick every 500 ms (the metadata group every 100 ms),
// heartbeat every tick and call an election after 6 (Raft randomizes it
// to 6–12): a thousand queues on three nodes then send 4,000 heartbeats
// a second between them, not 20,000, a leader that died is replaced in
// 3–6 s, the "few seconds" a quorum queue's failover may take, and an
// idle group costs its node two ticks a second, not ten. A leader whose
// process dies is replaced sooner: its connections end and its address
// refuses connections, which the transport reports (Transport.lost), and
// its followers elect another at once (leaderDied) rather than after the
// election timeout; a leader merely cut off by the network is still
// waited out. The node that
// declares a queue campaigns at once, so a declare need not wait for an
// election. MaxSizePerMsg is 1 MiB and 64 messages are in flight per
// follower: a queue's entries carry message bodies, and 64 MiB in flight
// is what a follower that fell behind may be sent before it answers.
// PreVote and CheckQuorum, as the metadata group: the minority side of a
// partition knows it cannot commit.
//
// A proposal is answered when it is applied on this node. When the
// leader or its term changes, every proposal still waiting is handed to
// the leader again, with those held for want of one, in the order they
// were made, and applied once whichever copy is committed, never ahead
// of one made before it (proposals.go): a leader change costs a
// publisher a delay, not a nack, and keeps its messages in order. One
// with no answer after
// proposeTimeout is answered ErrNoQuorum, and a publisher gets a nack,
// if the member then knows no leader (it is cut off from a majority, and
// has been for an election timeout); with a leader it waits on, or goes
// to the leader again, since it may be committed and not yet applied
// here, or lost on its way. Such a
// proposal may still be committed later if a majority's member had
// appended it before the cut: once a later proposal of its proposer's is
// applied, it never can be.
//
// Callbacks (a GroupMachine's methods, a proposal's done) run on the
// loop: they must not block, nor call back into Groups and wait.
//
// A panic in a member's Raft or machine on the loop (Raft panics when a
// peer's message breaks one of its invariants) stops that member alone,
// logged with the group and the peer (guard); the node and its other
// groups go on.
type Groups struct {
	self uint64
	// runID tells this run's proposals from an earlier run's
	// (proposals.go).
	runID uint64
	// tr carries the groups' messages; nil on a node of its own (its
	// groups have one member) and, on a cluster member, until the node
	// starts: groups restored before then send nothing, and Raft sends
	// again once it can.
	tr atomic.Pointer[Transport]
	// node is the cluster node the groups are hosted by, once it starts
	// (it names peers in the logs).
	node atomic.Pointer[Node]
	log  zerolog.Logger

	mu       lockorder.Mutex[lockorder.ClusterGroups]
	byID     map[uint64]*Group
	inbox    []groupInput
	running  bool
	stopping bool // Stop was called: the loop drains, then closes
	closed   bool // nothing more is taken
	// fastElections counts the campaigns started ahead of an election
	// timeout: a leader's process was seen to die (leaderDied), or a
	// group's first campaign went unheard.
	fastElections atomic.Uint64
	wake          chan struct{}
	// lazyPoke wakes the loop for lazy proposals (ProposeLazily) that
	// no other input brought it to take within lazyWithin; lazyArmed
	// (under mu) says it is set.
	lazyPoke   *time.Timer
	lazyArmed  bool
	lazyWithin time.Duration // lazyWithin; tests change it
	stopCh     chan struct{}
	done       chan struct{}

	batches map[*Group][]*proposal // the loop's, empty between steps
	// passStart is when the loop's current pass began (the loop's);
	// skew moves the loop's clock forward in tests, as a stop would.
	passStart time.Time
	skew      atomic.Int64
}

// Small groups' settings; the Groups doc says why.
const (
	groupTickInterval   = 500 * time.Millisecond
	groupElectionTicks  = 6
	groupHeartbeatTicks = 1
	groupMaxInflight    = 64
	proposeTimeout      = 10 * time.Second
	// resyncLimit bounds how long a member keeps its consumers'
	// deliveries back while it catches up (BatchApplier): one that never
	// quite does, under a load it applies more slowly than it gets,
	// hands them over anyway.
	resyncLimit = 10 * time.Second
	// stallAfter is how long the loop may go between passes, or take
	// over one, before it takes itself for stalled: its process was
	// stopped (SIGSTOP) or starved. A group's member may then have
	// applied entries that later ones, committed elsewhere meanwhile,
	// take back, while it still takes itself for current (a paused
	// leader does until it hears of the next term): it resyncs before its
	// machine acts for clients again. Longer than a pass takes, shorter
	// than an election timeout.
	stallAfter = 2 * time.Second
	// lazyWithin is how long a lazy proposal (ProposeLazily) may wait in
	// the inbox for another input to wake the loop: a quorum queue's
	// acks wait for the next publish, and share its entry's fsync.
	lazyWithin = 5 * time.Millisecond
)

// ErrGroupStopped answers what is proposed to a group this node no longer
// hosts (the queue was deleted, this member removed, the node stopping).
var ErrGroupStopped = errors.New("cluster: the group is not running on this node")

// ErrNotLeader answers a proposal made as the leader (ProposeAsLeader)
// once this member is not the leader it was made by: it is not sent to
// another.
var ErrNotLeader = errors.New("cluster: this member no longer leads the group; a leader's proposal is not sent to another")

// GroupMachine is one small group's replicated state machine.
type GroupMachine interface {
	// Apply applies the command committed at index: on every member, in
	// index order, once per run of the member. Its error is the answer
	// to whoever proposed it. cmd is nil for Raft's own entries.
	Apply(index uint64, cmd []byte) error
	// Snapshot is the state as of the last index applied.
	Snapshot() ([]byte, error)
	// Restore replaces the state with a snapshot's, taken at index.
	Restore(index uint64, data []byte) error
	// SnapshotDue says whether to take a snapshot now, entries having
	// been applied since the last one; the machine weighs them against
	// what a snapshot of it costs.
	SnapshotDue(entries uint64) bool
	// LeaderChanged tells the member who leads now (0: nobody it knows
	// of) and whether that is this node.
	LeaderChanged(leader, term uint64, self bool)
}

// BatchApplier is a GroupMachine told, after each batch of committed
// entries it applied, whether its member is current: caught up with what
// it knows committed since it last lost or changed its leader (or
// started, or restored a snapshot). A member that is not may be applying
// entries that later ones, which it has yet to apply, take back: a quorum
// queue keeps its consumers' deliveries back until it is current.
type BatchApplier interface {
	AppliedBatch(current bool)
}

// LogKeeper is a GroupMachine whose state refers to entries of its log
// rather than copying them into its snapshots: a quorum queue's message
// bodies stay in the entries that enqueued them, as RabbitMQ's quorum
// queues keep theirs, so a snapshot costs what the queue's bookkeeping
// costs, not what its messages weigh, and no body is on disk twice. The
// group keeps the entries such a machine refers to:
//
//   - a snapshot the member takes compacts the log only up to the oldest
//     entry the state still needs (OldestNeeded), so every entry a
//     stored snapshot refers to is in the log behind it;
//   - the member restores its own snapshot with RestoreFrom, which reads
//     those entries;
//   - a snapshot sent to a member that lacks them (one far behind, or
//     new) is Completed first, with the entries it refers to inlined, and
//     the receiver restores it as any GroupMachine restores a snapshot.
type LogKeeper interface {
	GroupMachine
	// OldestNeeded is the index of the oldest entry the state refers to,
	// 0 when it refers to none.
	OldestNeeded() uint64
	// RestoreFrom is Restore of a snapshot this member took, taken at
	// index; entries reads the log's entries from lo up to index.
	RestoreFrom(index uint64, data []byte, entries EntryReader) error
	// Complete returns a snapshot this member took, at index, made to
	// stand on its own: what it refers to in the log is inlined.
	Complete(index uint64, data []byte, entries EntryReader) ([]byte, error)
}

// EntryReader calls each with the index and command of every entry of
// the log from lo up to hi, in order, and stops at each's first error.
// (An alias, so that a machine's package need not import this one.)
type EntryReader = func(lo, hi uint64, each func(index uint64, cmd []byte) error) error

// GroupConfig describes a group to start on this node.
type GroupConfig struct {
	ID uint64 // the group's id; not 0, the metadata group's
	// Members are the nodes of a new group's first configuration (used
	// when the log is empty); Campaign makes this node stand for leader
	// at once rather than after an election timeout.
	Members  []uint64
	Campaign bool
	// Join starts a member the group is adding (AddMember): with an
	// empty log it waits for the leader to send the group's log or a
	// snapshot, rather than make a configuration of its own.
	Join bool
	// Bind, when set, is handed the member before it starts running:
	// a machine that proposes to its own group gets it here.
	Bind    func(*Group)
	Log     LogStore
	Machine GroupMachine
}

// GroupStatus is a member's view of its group.
type GroupStatus struct {
	ID      uint64
	Role    string
	Leader  uint64
	Term    uint64
	Commit  uint64
	Applied uint64
	Members []uint64
	// Match is, on the leader, how far each member's log is known to
	// match the leader's.
	Match map[uint64]uint64
	// LogBytes and LogEntries are the log's size since its last
	// compaction, when the LogStore can tell.
	LogBytes, LogEntries uint64
}

// Group is this node's member of one small group.
type Group struct {
	id   uint64
	host *Groups
	cfg  GroupConfig

	// Owned by the loop.
	cache     *entryCache // cfg.Log is it
	rn        *raft.RawNode
	applied   uint64
	tail      appliedTail // the sizes of the last entries applied
	snapIndex uint64
	conf      *raftpb.ConfState
	lead      uint64
	term      uint64 // the term of the last Ready's HardState
	waiters   map[uint64]*proposal
	held      []*proposal // waiting for a leader
	again     []*proposal // to propose again after this Ready (proposals.go)
	// live is the ordered proposals waited for, by number; round is
	// this run's current round of sending them again (proposals.go).
	live      []*proposal
	round     uint64
	proposers map[proposer]appliedBy
	checked   bool   // the sole-voter check after a restart is done
	alone     bool   // leadsAlone, as of the last Ready
	campaign  bool   // stand for leader once the configuration is applied
	hurry     int    // campaign in this many ticks if still leaderless (its leader died, or its first campaign went unheard)
	failed    bool   // its member stopped: its log or machine failed, or Raft panicked (guard)
	lastFrom  uint64 // the peer whose message it stepped last

	voter atomic.Bool // this node is a voter of conf (Voter)

	stopped bool   // guarded by host.mu
	nextSeq uint64 // the last proposal's number; guarded by host.mu

	resync resyncState // resync.go

	// recovered is closed once the member has applied what its log had
	// committed when it started (replayed is that index), and, in a
	// group of which it is the only voter, all its log held (lastAtStart).
	recovered   chan struct{}
	replayed    uint64
	lastAtStart uint64
}

type proposal struct {
	seq      uint64
	cmd      []byte
	conf     *raftpb.ConfChange // a change of members, rather than cmd
	done     func(index uint64, err error)
	deadline time.Time
	finished bool // answered: never sent again
	// asLeader: made on the strength of this member leading, in the term
	// it leads (ProposeAsLeader); never sent to another leader.
	asLeader bool
}

// groupInput is what other goroutines hand the loop.
type groupInput struct {
	g      *Group
	group  uint64          // for a message: its group (g unknown yet)
	msg    *raftpb.Message // a message from a peer
	prop   *proposal
	report *groupReport
	dead   uint64 // a peer whose process is gone (Transport.lost)
	lead   uint64 // a member the leader is to hand its leadership to
	start  bool
	stop   chan struct{} // closed once the group stopped
	status chan GroupStatus
}

type groupReport struct {
	peer     uint64
	snapshot *raft.SnapshotStatus // nil: unreachable
}

func newGroups(self uint64, log zerolog.Logger) *Groups {
	return &Groups{self: self, runID: newRun(), log: log.With().Str("component", "groups").Logger(),
		byID: map[uint64]*Group{}, wake: make(chan struct{}, 1), lazyWithin: lazyWithin, stopCh: make(chan struct{}), done: make(chan struct{}),
		batches: map[*Group][]*proposal{}}
}

// NewGroups hosts small groups on a node without a cluster: each has this
// node as its only member.
func NewGroups(log zerolog.Logger) *Groups { return newGroups(1, log) }

// NewNodeGroups hosts the small groups of the cluster node whose Raft id
// is id (its Identity), before the node starts (Config.Groups): a
// restarting broker restores its quorum queues first, and the node then
// carries their messages.
func NewNodeGroups(id uint64, log zerolog.Logger) *Groups { return newGroups(id, log) }

// Self is this node's id in its groups.
func (h *Groups) Self() uint64 { return h.self }

// Start starts this node's member of a group, restarting it from its log
// if it has one.
func (h *Groups) Start(cfg GroupConfig) (*Group, error) {
	if cfg.ID == 0 {
		return nil, errors.New("cluster: group 0 is the metadata group")
	}
	cache := &entryCache{LogStore: cfg.Log}
	cfg.Log = cache
	g := &Group{id: cfg.ID, host: h, cfg: cfg, cache: cache, waiters: map[uint64]*proposal{}, recovered: make(chan struct{})}
	g.startResync()
	if err := g.init(); err != nil {
		return nil, err
	}
	if cfg.Bind != nil {
		cfg.Bind(g)
	}
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return nil, ErrStopped
	}
	if _, ok := h.byID[cfg.ID]; ok {
		h.mu.Unlock()
		return nil, fmt.Errorf("cluster: group %d is already running", cfg.ID)
	}
	h.byID[cfg.ID] = g
	if !h.running {
		h.running = true
		go h.run()
	}
	h.mu.Unlock()
	h.input(groupInput{g: g, start: true})
	return g, nil
}

// init restores the machine from the log's snapshot and makes the Raft
// member; it runs before the loop knows the group.
func (g *Group) init() error {
	cfg := g.cfg
	snap, err := cfg.Log.Snapshot()
	if err != nil {
		return err
	}
	if !raft.IsEmptySnap(snap) {
		index := snap.GetMetadata().GetIndex()
		table, data, err := unwrapSnapshot(snap.GetData())
		if err != nil {
			return fmt.Errorf("cluster: group %d: %w", g.id, err)
		}
		g.proposers = table
		if keeper, ok := cfg.Machine.(LogKeeper); ok {
			err = keeper.RestoreFrom(index, data, g.readEntries)
		} else {
			err = cfg.Machine.Restore(index, data)
		}
		if err != nil {
			return fmt.Errorf("cluster: group %d: restoring its snapshot: %w", g.id, err)
		}
		g.applied = snap.GetMetadata().GetIndex()
		g.snapIndex = g.applied
		g.setConf(snap.GetMetadata().GetConfState())
	}
	hs, _, err := cfg.Log.InitialState()
	if err != nil {
		return err
	}
	last, err := cfg.Log.LastIndex()
	if err != nil {
		return err
	}
	// Raft refuses an applied index past the saved commit, and the
	// machine's may be (see below): Raft is told the commit, and hands
	// back entries up to the machine's applied index again, which the
	// loop skips (process).
	rc := &raft.Config{
		ID: g.host.self, ElectionTick: groupElectionTicks, HeartbeatTick: groupHeartbeatTicks,
		Storage: cfg.Log, Applied: min(g.applied, hs.GetCommit()), MaxSizePerMsg: maxSizePerMsg, MaxInflightMsgs: groupMaxInflight,
		MaxUncommittedEntriesSize: 1 << 30, CheckQuorum: true, PreVote: true, StepDownOnRemoval: true,
		Logger: raftLogger{g.host.log},
	}
	// Until Raft names a leader the member is a follower: a restarted
	// one replays its log acting on nothing.
	cfg.Machine.LeaderChanged(raft.None, hs.GetTerm(), false)
	// Nothing to replay when the machine's snapshot (or its applied
	// index) is at or past the saved commit: a member applies entries
	// while it saves the next ones, so it may have applied, and
	// snapshotted, past the commit its last saved hard state records.
	g.replayed, g.lastAtStart = hs.GetCommit(), last
	if g.replayed <= g.applied {
		g.replayed = 0
		if !g.waitsForTail() {
			close(g.recovered)
		}
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return fmt.Errorf("cluster: group %d: %w", g.id, err)
	}
	g.rn, g.term = rn, hs.GetTerm()
	fresh := raft.IsEmptyHardState(hs) && last == 0 && raft.IsEmptySnap(snap)
	if fresh && cfg.Join {
		g.checked = true
	} else if fresh {
		if len(cfg.Members) == 0 {
			return fmt.Errorf("cluster: group %d: a new group needs its members", g.id)
		}
		peers := make([]raft.Peer, len(cfg.Members))
		for i, id := range cfg.Members {
			peers[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("cluster: group %d: %w", g.id, err)
		}
		g.checked = true
		// Raft refuses to campaign before the first configuration is
		// applied: the loop does it then (see process).
		g.campaign = cfg.Campaign || len(cfg.Members) == 1
	} else if g.soleVoter() {
		// Restarted with its configuration in the snapshot: it may
		// stand at once (see handle) rather than after the entries it
		// replays, of which there may be none.
		g.checked, g.campaign = true, true
	}
	return nil
}

// setConf records the member's configuration; the loop's.
func (g *Group) setConf(cs *raftpb.ConfState) {
	g.conf = cs
	g.voter.Store(slices.Contains(cs.GetVoters(), g.host.self))
}

// Voter says whether this node is a voter of the group's configuration
// as this member knows it: false while a member the group is adding (or
// that a new incarnation of this node started) has not been sent its
// configuration yet. It costs an atomic read.
func (g *Group) Voter() bool { return g.voter.Load() }

// soleVoter says the member's configuration, as far as it is known, has
// this node as its only voter.
func (g *Group) soleVoter() bool {
	if g.conf == nil {
		return false
	}
	v := g.conf.GetVoters()
	return len(v) == 1 && v[0] == g.host.self && len(g.conf.GetLearners()) == 0
}

// readEntries is the EntryReader over the group's log: the entries from
// lo up to hi, read a bounded slice at a time.
func (g *Group) readEntries(lo, hi uint64, each func(index uint64, cmd []byte) error) error {
	const slice = 4 << 20
	for lo < hi {
		ents, err := g.cfg.Log.Entries(lo, hi, slice)
		if err != nil {
			return fmt.Errorf("cluster: group %d: reading entries %d to %d: %w", g.id, lo, hi, err)
		}
		if len(ents) == 0 {
			return fmt.Errorf("cluster: group %d: no entry at %d", g.id, lo)
		}
		for _, e := range ents {
			if _, cmd, ok := entryTag(e); ok {
				if err := each(e.GetIndex(), cmd); err != nil {
					return err
				}
			}
		}
		lo = ents[len(ents)-1].GetIndex() + 1
	}
	return nil
}

// completeSnapshots makes the snapshots a Ready sends stand on their own
// when the machine keeps entries its snapshots refer to (LogKeeper): the
// receiver lacks them. A snapshot that cannot be completed is not sent;
// Raft sends another when the member is still behind.
func (g *Group) completeSnapshots(rd *raft.Ready) {
	keeper, ok := g.cfg.Machine.(LogKeeper)
	if !ok {
		return
	}
	kept := rd.Messages[:0]
	for _, m := range rd.Messages {
		if m.GetType() == raftpb.MsgSnap && m.GetSnapshot() != nil {
			snap := proto.Clone(m.GetSnapshot()).(*raftpb.Snapshot)
			table, data, err := unwrapSnapshot(snap.GetData())
			if err == nil {
				data, err = keeper.Complete(snap.GetMetadata().GetIndex(), data, g.readEntries)
			}
			if err == nil {
				data = wrapTable(table, data)
			}
			if err != nil {
				g.host.log.Warn().Err(err).Uint64("group", g.id).Msg("cannot complete a snapshot for a member that is behind; it is sent again later")
				g.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
				continue
			}
			snap.Data = data
			m = proto.Clone(m).(*raftpb.Message)
			m.Snapshot = snap
		}
		kept = append(kept, m)
	}
	rd.Messages = kept
}

// ID is the group's id.
func (g *Group) ID() uint64 { return g.id }

// waitsForTail says whether a member that has applied what its saved
// hard state called committed must also wait for the rest of its log,
// and if so makes that the index replayed waits for. A leader saves the
// commit index a round after the entries it covers, so a group's log
// ends, after a kill, with entries that were committed (and answered:
// publishes confirmed) but are not known to be until a leader commits
// them again. A group whose only voter is this member will commit every
// one of them once it has elected itself, so the member is recovered
// only then: before, a client would find the queue short of messages
// that come back a moment later. In a group of several, a new leader
// may drop them, and the member does not wait.
func (g *Group) waitsForTail() bool {
	if g.lastAtStart <= g.applied || !g.soleVoter() {
		return false
	}
	g.replayed = g.lastAtStart
	return true
}

// Recovered is closed once the member has applied everything its log
// held committed when it started (in a group of which it is the only
// voter, everything its log held): its machine is then as it was when
// the member last stopped, or further on.
func (g *Group) Recovered() <-chan struct{} { return g.recovered }

// Propose replicates cmd; done gets the index it was applied at on this
// node and the machine's answer, or why it could not be committed.
func (g *Group) Propose(cmd []byte, done func(index uint64, err error)) {
	g.host.propose(g, &proposal{cmd: cmd, done: done})
}

// ProposeLazily is Propose for a command that may wait, lazyWithin at
// most, for something else to wake the loop: it is then saved in the
// same pass, with one fsync, as what came with it. A quorum queue's
// consumer acks this way while its publisher keeps it busy: a message
// then costs one save, not two (its publish and its ack), and nobody
// waits, since an ack has no answer to hear. It keeps its place among
// the proposer's other proposals, as any proposal does.
func (g *Group) ProposeLazily(cmd []byte, done func(index uint64, err error)) {
	g.host.proposeWith(g, &proposal{cmd: cmd, done: done}, true)
}

// ProposeAsLeader is Propose for a decision the leader makes from its own
// view (that a member's node is down, say): a member that is not the
// leader, or stops being the leader it was in that term before the
// entry is applied here, answers ErrNotLeader instead of sending it to
// another leader. A leader cut off from the others, and deposed while it
// was, would otherwise have its stale view carried out by the next one.
// (Such an entry may yet be committed, if a majority had it: the answer
// says only that it was not sent on.)
func (g *Group) ProposeAsLeader(cmd []byte, done func(index uint64, err error)) {
	g.host.propose(g, &proposal{cmd: cmd, done: done, asLeader: true})
}

// AddMember makes node a voting member of the group; done hears once the
// change is applied here. The node's member starts with Join. Raft takes
// one change of members at a time: one proposed while another is under
// way is dropped, and answered ErrNoQuorum at its deadline.
func (g *Group) AddMember(node uint64, done func(error)) {
	g.changeMember(raftpb.ConfChangeAddNode, node, done)
}

// RemoveMember removes node from the group's members; done hears once
// the change is applied here. A leader that removes itself steps down.
func (g *Group) RemoveMember(node uint64, done func(error)) {
	g.changeMember(raftpb.ConfChangeRemoveNode, node, done)
}

func (g *Group) changeMember(typ raftpb.ConfChangeType, node uint64, done func(error)) {
	cc := &raftpb.ConfChange{Type: typ.Enum(), NodeId: proto.Uint64(node)}
	g.host.propose(g, &proposal{conf: cc, done: func(_ uint64, err error) { done(err) }})
}

// TransferLeader asks the group's leader to hand its leadership to the
// member node (an incarnation's Raft id), as rabbitmq-queues rebalance
// moves a quorum queue's leader: a follower sends the request on to the
// leader. It returns at once; the leader catches node up, if it lags,
// and has it campaign, and gives up after an election timeout (the
// group's Status says who leads). A node that is not a voter, or is the
// leader, changes nothing.
func (g *Group) TransferLeader(node uint64) {
	g.host.input(groupInput{g: g, lead: node})
}

// Status is this member's view of the group. The loop makes it, so it
// costs nothing to the groups nobody asks about.
func (g *Group) Status() GroupStatus {
	ch := make(chan GroupStatus, 1)
	g.host.input(groupInput{g: g, status: ch})
	select {
	case st := <-ch:
		return st
	case <-g.host.done:
		return GroupStatus{ID: g.id, Role: "stopped"}
	}
}

// Stop stops this node's member; its log stays (deleting it is the
// caller's). Proposals waiting are answered ErrGroupStopped.
func (g *Group) Stop() {
	ch := make(chan struct{})
	g.host.mu.Lock()
	if g.stopped || g.host.closed {
		g.host.mu.Unlock()
		return
	}
	g.stopped = true
	if g.host.byID[g.id] == g {
		delete(g.host.byID, g.id)
	}
	g.host.mu.Unlock()
	g.host.input(groupInput{g: g, stop: ch})
	select {
	case <-ch:
	case <-g.host.done:
	}
}

func (h *Groups) propose(g *Group, p *proposal) { h.proposeWith(g, p, false) }

// proposeWith hands the loop a proposal, waking it at once or, for a
// lazy one, within lazyWithin.
func (h *Groups) proposeWith(g *Group, p *proposal, lazy bool) {
	h.mu.Lock()
	if h.closed || g.stopped {
		h.mu.Unlock()
		p.done(0, ErrGroupStopped)
		return
	}
	g.nextSeq++
	p.seq = g.nextSeq
	p.deadline = time.Now().Add(proposeTimeout)
	h.inbox = append(h.inbox, groupInput{g: g, prop: p})
	if lazy {
		if !h.lazyArmed {
			h.lazyArmed = true
			if h.lazyPoke == nil {
				h.lazyPoke = time.AfterFunc(h.lazyWithin, h.pokeLazy)
			} else {
				h.lazyPoke.Reset(h.lazyWithin)
			}
		}
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.poke()
}

// pokeLazy wakes the loop for the lazy proposals it has not taken.
func (h *Groups) pokeLazy() {
	h.mu.Lock()
	h.lazyArmed = false
	h.mu.Unlock()
	h.poke()
}

// input hands the loop something to do.
func (h *Groups) input(in groupInput) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.inbox = append(h.inbox, in)
	h.mu.Unlock()
	h.poke()
}

func (h *Groups) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// receive takes a message from a peer (the transport's goroutine).
func (h *Groups) receive(group uint64, m *raftpb.Message) {
	h.input(groupInput{group: group, msg: m})
}

// report tells a group that a message to peer was dropped, or how a
// snapshot's sending went.
func (h *Groups) report(group, peer uint64, snapshot *raft.SnapshotStatus) {
	h.input(groupInput{group: group, report: &groupReport{peer: peer, snapshot: snapshot}})
}

// peerDead hears that a peer's process is gone: the groups it led elect
// another leader now rather than after an election timeout.
func (h *Groups) peerDead(id uint64) {
	h.mu.Lock()
	var gs []*Group
	for _, g := range h.byID {
		gs = append(gs, g)
	}
	h.mu.Unlock()
	for _, g := range gs {
		h.input(groupInput{g: g, dead: id})
	}
}

// leaderDied is peerDead's work for one group, on the loop: every
// follower of the dead leader forgets it, so that it grants a pre-vote at
// once (with CheckQuorum a follower ignores votes while it believes in a
// leader), and the first live voter by id campaigns. A campaign can fail
// for want of votes from a follower that had not seen the death yet, or
// because the first voter's log is behind: the first tries again at its
// next tick and the others at their second, if still leaderless, so the
// group is not left to an election timeout.
func (g *Group) leaderDied(dead uint64) {
	if g.lead != dead || dead == g.host.self || g.conf == nil {
		return
	}
	_ = g.rn.ForgetLeader()
	first := true
	for _, v := range g.conf.GetVoters() {
		if v != dead && v < g.host.self {
			first = false
		}
	}
	g.hurry = 2
	if first {
		g.host.fastElections.Add(1)
		_ = g.rn.Campaign()
		g.hurry = 1
	}
}

// stop stops every group and the loop. What was proposed before is
// given up to drainTimeout to be committed (a clean shutdown keeps the
// acks that just arrived); what is left then is answered ErrStopped.
func (h *Groups) stop() {
	h.mu.Lock()
	if h.stopping {
		h.mu.Unlock()
		return
	}
	h.stopping = true
	running := h.running
	if !running {
		h.closed = true
	}
	h.mu.Unlock()
	if running {
		close(h.stopCh)
		<-h.done
	}
}

// drainTimeout bounds how long a stopping host waits for proposals made
// before it stopped.
const drainTimeout = time.Second

// drain runs the loop without ticking until no proposal waits, or for
// drainTimeout, then refuses new ones.
func (h *Groups) drain(live map[uint64]*Group, touched map[*Group]bool) {
	deadline := time.Now().Add(drainTimeout)
	for time.Now().Before(deadline) {
		handled := h.step(live, touched)
		waiting := handled > 0 || len(touched) > 0
		for _, g := range live {
			waiting = waiting || len(g.waiters) > 0 || len(g.held) > 0
		}
		if !waiting {
			break
		}
		select {
		case <-h.wake:
		case <-time.After(5 * time.Millisecond):
		}
	}
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

// Stop stops every group this host runs (NewGroups' hosts; a Node's stop
// with it).
func (h *Groups) Stop() { h.stop() }

// run is the loop: it ticks the groups, hands them what arrived, and
// handles their Readies in the order Raft requires (persist, send, apply,
// advance).
func (h *Groups) run() {
	defer close(h.done)
	ticker := time.NewTicker(groupTickInterval)
	defer ticker.Stop()
	live := map[uint64]*Group{}
	touched := map[*Group]bool{}
	// busy is always ready: with groups still to process the loop only
	// looks at its channels on its way.
	busy := make(chan struct{})
	close(busy)
	for {
		wake := h.wake
		if len(touched) > 0 {
			wake = busy
		}
		select {
		case <-h.stopCh:
			h.drain(live, touched)
			h.shutdown(live)
			return
		case <-ticker.C:
			h.tick(live, touched)
		case <-wake:
		}
		h.startPass(live, touched)
		h.step(live, touched)
	}
}

// startPass marks a pass of the loop, and resyncs every group that has
// other members when the loop stood still since the last one (stallAfter).
// The wait between passes is a tick at most when idle.
func (h *Groups) startPass(live map[uint64]*Group, touched map[*Group]bool) {
	now := h.now()
	stalled := !h.passStart.IsZero() && now.Sub(h.passStart) > stallAfter+groupTickInterval
	h.passStart = now
	if !stalled {
		return
	}
	for _, g := range live {
		if !g.failed && !g.alone && !g.resync.on {
			g.startResync()
			touched[g] = true
		}
	}
}

// stalledInPass says whether the loop has stood still within the current
// pass (stallAfter): its process stopped between taking entries and
// handing them to its machines.
func (h *Groups) stalledInPass() bool {
	return !h.passStart.IsZero() && h.now().Sub(h.passStart) > stallAfter
}

func (h *Groups) now() time.Time { return time.Now().Add(time.Duration(h.skew.Load())) }

// step hands the groups what arrived and handles their Readies; it says
// how many inputs there were.
func (h *Groups) step(live map[uint64]*Group, touched map[*Group]bool) int {
	h.mu.Lock()
	inbox := h.inbox
	h.inbox = nil
	if h.lazyArmed {
		// Taken now with the rest: the timer need not wake the loop.
		h.lazyArmed = false
		h.lazyPoke.Stop()
	}
	h.mu.Unlock()
	// A group's proposals that arrived together go to Raft as one
	// MsgProp: one append to each follower carries them all, rather
	// than one message (and one answer) per publish. Anything else for
	// the group is handled after the proposals before it, in order.
	batches := h.batches
	for _, in := range inbox {
		if g := in.g; in.prop != nil && in.prop.conf == nil && g != nil && live[g.id] == g {
			batches[g] = append(batches[g], in.prop)
			continue
		}
		g := in.g
		if g == nil {
			g = live[in.group]
		}
		if ps := batches[g]; g != nil && len(ps) > 0 {
			h.guard(g, 0, func() { g.proposeAll(ps) })
			touched[g] = true
			delete(batches, g)
		}
		h.handle(live, touched, in)
	}
	for g, ps := range batches {
		h.guard(g, 0, func() { g.proposeAll(ps) })
		touched[g] = true
		delete(batches, g)
	}
	h.process(live, touched)
	return len(inbox)
}

func (h *Groups) tick(live map[uint64]*Group, touched map[*Group]bool) {
	now := time.Now()
	for _, g := range live {
		if g.failed || g.alone && len(g.waiters) == 0 && len(g.held) == 0 {
			continue
		}
		if !h.guard(g, 0, func() {
			if !g.alone {
				g.rn.Tick()
				touched[g] = true
			}
			if g.resync.on {
				g.askLeader()
				touched[g] = true
			}
			if g.hurry > 0 {
				g.hurry--
				if g.hurry == 0 && g.rn.BasicStatus().Lead == raft.None {
					h.fastElections.Add(1)
					_ = g.rn.Campaign()
				}
			}
		}) {
			continue
		}
		if len(g.waiters) == 0 && len(g.held) == 0 {
			continue
		}
		lagging := g.rn.BasicStatus().GetCommit() > g.applied
		resend := false
		for seq, p := range g.waiters {
			if !now.After(p.deadline) {
				continue
			}
			switch {
			case g.lead == raft.None:
				// No leader for a while (an election timeout makes a
				// member cut off from a majority forget its leader):
				// the caller hears.
				delete(g.waiters, seq)
				g.finish(p, 0, ErrNoQuorum)
			case lagging:
				// It may be among the entries committed and not yet
				// applied here: a member catching up must not answer
				// "not committed" for what is.
				p.deadline = now.Add(proposeTimeout)
			case p.asLeader:
				// Not sent to a leader again: it decides afresh.
				delete(g.waiters, seq)
				g.finish(p, 0, ErrNotLeader)
			case p.ordered():
				// A leader, and nothing committed left to apply: it was
				// lost on its way, or waits in the leader's log. It goes
				// again, under its number (applied once), in a round
				// with what was sent after it, which must not overtake
				// it.
				p.deadline = now.Add(proposeTimeout)
				resend = true
			default:
				delete(g.waiters, seq)
				p.deadline = now.Add(proposeTimeout)
				g.again = append(g.again, p)
			}
		}
		if resend {
			g.resendAll()
		}
		h.guard(g, 0, g.proposeAgain)
		g.held = slices.DeleteFunc(g.held, func(p *proposal) bool {
			if now.After(p.deadline) {
				g.finish(p, 0, ErrNoQuorum)
				return true
			}
			return false
		})
	}
}

// leadsAlone says the member leads a group of which it is the only
// voter: it has nobody to heartbeat and no election to call, so it is
// not ticked (a thousand quorum queues on a node of its own idle at no
// cost). The loop keeps the answer in g.alone.
func (g *Group) leadsAlone() bool {
	return g.lead == g.host.self && g.conf != nil && len(g.conf.GetVoters()) == 1 && len(g.conf.GetLearners()) == 0
}

func (h *Groups) handle(live map[uint64]*Group, touched map[*Group]bool, in groupInput) {
	g := in.g
	if g == nil {
		g = live[in.group]
		if g == nil {
			return // a group this node does not run (yet, or any more)
		}
	}
	switch {
	case in.start:
		live[g.id] = g
		if g.campaign && g.conf != nil {
			g.campaign = false
			h.guard(g, 0, func() { _ = g.rn.Campaign() })
		}
	case in.status != nil && live[g.id] != g:
		in.status <- GroupStatus{ID: g.id, Role: "stopped"}
		return
	case in.stop != nil:
		if live[g.id] == g {
			delete(live, g.id)
			delete(touched, g)
			g.fail(ErrGroupStopped)
			g.flushLog()
		}
		close(in.stop)
		return
	case live[g.id] != g:
		if in.prop != nil {
			in.prop.done(0, ErrGroupStopped)
		}
		return
	case in.status != nil:
		in.status <- g.statusNow()
		return
	case in.prop != nil:
		h.guard(g, 0, func() { g.propose(in.prop) })
	case g.failed:
		return // its member stopped (guard): nothing reaches its Raft
	case in.msg != nil:
		// A message for a term or member this node has no part in is
		// Raft's to ignore; errors here mean nothing to act on. One that
		// breaks Raft's invariants (a leader counting entries this
		// member lacks) panics in Raft: guard stops this member alone.
		g.lastFrom = in.msg.GetFrom()
		h.guard(g, in.msg.GetFrom(), func() { _ = g.rn.Step(in.msg) })
	case in.dead != 0:
		h.guard(g, in.dead, func() { g.leaderDied(in.dead) })
	case in.lead != 0:
		h.guard(g, 0, func() { g.rn.TransferLeader(in.lead) })
	case in.report != nil:
		h.guard(g, in.report.peer, func() {
			if in.report.snapshot != nil {
				g.rn.ReportSnapshot(in.report.peer, *in.report.snapshot)
			} else {
				g.rn.ReportUnreachable(in.report.peer)
			}
		})
	}
	touched[g] = true
}

// guard runs fn, a step of g's member on the loop, and turns a panic in
// it into the failure of that member alone: Raft panics when a peer's
// message breaks one of its invariants (a leader that counts entries
// this member lacks: a data directory restored from a backup), and the
// node and its other groups must go on. The member takes nothing more
// until the node restarts (or the group is stopped and started again);
// peer is the peer whose message fn steps, 0 for none. It reports
// whether fn returned.
func (h *Groups) guard(g *Group, peer uint64, fn func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false
			ev := h.log.Error().Uint64("group", g.id).Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack()))
			if peer == 0 {
				peer = g.lastFrom
				ev = ev.Bool("peer_is_last_heard", true)
			}
			if peer != 0 {
				ev = ev.Str("peer", idString(peer))
				if n := h.node.Load(); n != nil {
					ev = ev.Str("peer_name", n.nameOf(peer))
				}
			}
			ev.Msg("a group's Raft member broke an invariant (a peer's message it cannot take); this member stops, the node and its other groups go on")
			g.failed = true
			g.fail(fmt.Errorf("cluster: group %d: this member stopped: %v", g.id, r))
		}
	}()
	fn()
	return true
}

// proposeAll hands Raft commands proposed together, as one message.
func (g *Group) proposeAll(ps []*proposal) {
	if len(ps) == 1 || g.failed || g.lead == raft.None || slices.ContainsFunc(ps, func(p *proposal) bool { return p.finished || !p.ordered() }) {
		for _, p := range ps {
			g.propose(p)
		}
		return
	}
	entries := make([]*raftpb.Entry, len(ps))
	for i, p := range ps {
		g.enlist(p)
		entries[i] = &raftpb.Entry{Data: g.tagged(p, p.cmd)}
	}
	err := g.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(g.host.self), Entries: entries})
	for _, p := range ps {
		if err != nil {
			// Dropped, all of them: as propose does with one.
			g.held = append(g.held, p)
			continue
		}
		g.waiters[p.seq] = p
	}
}

// tagged is cmd behind the tag that names its proposer (this node) and
// its proposal, for the answer.
// propose hands a proposal to Raft, or holds it until a leader is known.
func (g *Group) propose(p *proposal) {
	switch {
	case p.finished:
		return // a copy handed in twice, answered meanwhile
	case g.failed:
		g.finish(p, 0, ErrGroupStopped)
		return
	case p.asLeader && g.lead != g.host.self:
		g.finish(p, 0, ErrNotLeader)
		return
	}
	g.enlist(p)
	if g.lead == raft.None {
		g.held = append(g.held, p)
		return
	}
	var err error
	if p.conf != nil {
		// The change's context carries the tag, for its answer.
		cc := proto.Clone(p.conf).(*raftpb.ConfChange)
		cc.Context = g.tagged(p, nil)
		err = g.rn.ProposeConfChange(cc)
	} else {
		err = g.rn.Propose(g.tagged(p, p.cmd))
	}
	if err != nil {
		// Dropped: no leader after all, or a leader transfer under way.
		g.held = append(g.held, p)
		return
	}
	g.waiters[p.seq] = p
}

// fail answers every proposal waiting on the group.
func (g *Group) fail(err error) {
	for _, p := range g.again {
		g.finish(p, 0, err)
	}
	g.again = nil
	for seq, p := range g.waiters {
		delete(g.waiters, seq)
		g.finish(p, 0, err)
	}
	for _, p := range g.held {
		g.finish(p, 0, err)
	}
	g.held = nil
}

func (h *Groups) shutdown(live map[uint64]*Group) {
	for _, g := range live {
		g.fail(ErrStopped)
		g.flushLog()
	}
	h.mu.Lock()
	inbox := h.inbox
	h.inbox = nil
	h.mu.Unlock()
	for _, in := range inbox {
		if in.prop != nil {
			in.prop.done(0, ErrStopped)
		}
		if in.stop != nil {
			close(in.stop)
		}
	}
}

type groupReady struct {
	g  *Group
	rd raft.Ready
}

// process handles the Readies of the groups touched since the last pass.
func (h *Groups) process(live map[uint64]*Group, touched map[*Group]bool) {
	var readies []groupReady
	for g := range touched {
		delete(touched, g)
		h.guard(g, 0, func() {
			if !g.failed && g.rn.HasReady() {
				rd := g.rn.Ready()
				g.completeSnapshots(&rd)
				readies = append(readies, groupReady{g, rd})
			}
		})
	}
	if len(readies) == 0 {
		return
	}
	// Persist every group's part at once: the store's commit pipeline
	// gathers the batches that arrive together behind one fsync. While
	// the saves run, the loop applies the committed entries that were
	// stable before this Ready (a leader's always are): applying them
	// need not wait for the next entries' fsync, so an entry is answered
	// one fsync after it is proposed, not two.
	//
	// Messages that do not vouch for this member's disk (a leader's
	// appends and heartbeats) go out before the save, so followers write
	// while the leader does (Raft thesis 10.2.1); answers that do (append
	// and vote responses) wait for it. A leader counts its own entries
	// only once they are saved (Raft steps its self-ack in at Advance),
	// so a commit still means a majority has the entry on disk.
	tr := h.tr.Load()
	after := make([][]*raftpb.Message, len(readies))
	for i, r := range readies {
		now, later := splitBySave(r.rd.Messages)
		if tr != nil && len(now) > 0 {
			tr.send(r.g.id, now)
		}
		after[i] = later
	}
	errs := make([]error, len(readies))
	var wg sync.WaitGroup
	for i := range readies {
		if !readies[i].needsSave() {
			continue // a heartbeat's Ready, say: nothing to wait for
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = readies[i].g.save(readies[i].rd)
		}()
	}
	early := make([]bool, len(readies))
	for i, r := range readies {
		if r.g.applyEarly(r.rd) {
			early[i] = true
			h.guard(r.g, 0, func() {
				if err := r.g.ready(r.rd); err != nil {
					errs[i] = err
				}
			})
		}
	}
	wg.Wait()
	for i, r := range readies {
		g := r.g
		if g.failed {
			continue // guard stopped it: what it saved is its log's, nothing else is done
		}
		if errs[i] != nil {
			h.log.Error().Err(errs[i]).Uint64("group", g.id).Msg("cannot persist or apply a group's Raft log; this member stops taking part")
			g.failed = true
			g.fail(errs[i])
			continue
		}
		if tr != nil && len(after[i]) > 0 {
			tr.send(g.id, after[i])
		}
		h.guard(g, 0, func() { h.finish(g, r.rd, early[i], touched) })
	}
}

// finish applies what a saved Ready carries (unless that was done while
// it was saved) and hands it back to Raft.
func (h *Groups) finish(g *Group, rd raft.Ready, early bool, touched map[*Group]bool) {
	if !early {
		if err := g.ready(rd); err != nil {
			h.log.Error().Err(err).Uint64("group", g.id).Msg("cannot apply a group's entries; this member stops taking part")
			g.failed = true
			g.fail(err)
			return
		}
	}
	g.rn.Advance(rd)
	g.proposeAgain()
	g.askLeader()
	// Only now: Advance reads the committed entries it handed out.
	g.cache.forget(g.applied)
	g.alone = g.leadsAlone()
	if g.campaign && g.conf != nil {
		// The configuration is applied (Advance told Raft): now it
		// lets this member stand.
		g.campaign = false
		if g.rn.BasicStatus().Lead == raft.None {
			_ = g.rn.Campaign()
			// The other members may not run the group yet (they
			// start it when they apply the declare) and drop the
			// votes: standing again a tick or two later, well
			// before their election timeouts, keeps the leader
			// where it was meant to be.
			g.hurry = 2
		}
	}
	if g.rn.HasReady() {
		touched[g] = true
	}
}

// splitBySave parts a Ready's messages into those that may go before
// its entries and hard state are saved and those that must wait: the
// responses whose sender promises it has saved what they answer (Raft
// itself holds these back in the same way when storage writes are
// asynchronous).
func splitBySave(msgs []*raftpb.Message) (now, later []*raftpb.Message) {
	waits := func(m *raftpb.Message) bool {
		switch m.GetType() {
		case raftpb.MsgAppResp, raftpb.MsgVoteResp, raftpb.MsgPreVoteResp:
			return true
		}
		return false
	}
	n := 0
	for _, m := range msgs {
		if waits(m) {
			n++
		}
	}
	switch n {
	case 0:
		return msgs, nil
	case len(msgs):
		return nil, msgs
	}
	now, later = make([]*raftpb.Message, 0, len(msgs)-n), make([]*raftpb.Message, 0, n)
	for _, m := range msgs {
		if waits(m) {
			later = append(later, m)
		} else {
			now = append(now, m)
		}
	}
	return now, later
}

// applyEarly says whether a Ready's committed entries may be applied
// while its own entries are being saved: it carries no snapshot (which
// must be saved before the machine takes it), and none of its committed
// entries is among those it saves (a follower may be told an entry is
// committed in the Ready that appends it; Raft then expects it saved
// first).
func (g *Group) applyEarly(rd raft.Ready) bool {
	if !raft.IsEmptySnap(rd.Snapshot) {
		return false
	}
	if n := len(rd.CommittedEntries); n > 0 && len(rd.Entries) > 0 {
		return rd.CommittedEntries[n-1].GetIndex() < rd.Entries[0].GetIndex()
	}
	return true
}

func (r groupReady) needsSave() bool {
	rd := r.rd
	return !raft.IsEmptyHardState(rd.HardState) || len(rd.Entries) > 0 || !raft.IsEmptySnap(rd.Snapshot)
}

// flushLog writes what the member's log keeps back (the commit index
// of storage.RaftLog's Save), for a member that stops cleanly to restart
// knowing its commit. A log deleted with its group has nothing to keep.
func (g *Group) flushLog() {
	f, ok := g.cache.LogStore.(interface{ Flush() error })
	if !ok || g.failed {
		return
	}
	if err := f.Flush(); err != nil {
		g.host.log.Debug().Err(err).Uint64("group", g.id).Msg("cannot write a stopping group's commit index; it relearns it at its next start")
	}
}

func (g *Group) save(rd raft.Ready) error {
	return g.cfg.Log.Save(rd.HardState, rd.Entries, rd.Snapshot)
}

// ready applies what a persisted Ready carries: a snapshot, committed
// entries, a change of leader.
func (g *Group) ready(rd raft.Ready) error {
	m := g.cfg.Machine
	if snap := rd.Snapshot; !raft.IsEmptySnap(snap) && snap.GetMetadata().GetIndex() > g.applied {
		table, data, err := unwrapSnapshot(snap.GetData())
		if err != nil {
			return fmt.Errorf("cluster: group %d: %w", g.id, err)
		}
		if err := m.Restore(snap.GetMetadata().GetIndex(), data); err != nil {
			return err
		}
		g.proposers = table
		g.answerCovered(snap.GetMetadata().GetIndex())
		g.startResync()
		g.applied, g.snapIndex = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetIndex()
		g.setConf(snap.GetMetadata().GetConfState())
	}
	for _, e := range rd.CommittedEntries {
		if e.GetIndex() <= g.applied {
			continue
		}
		g.apply(e)
		g.applied = e.GetIndex()
		g.tail.note(e.GetIndex(), len(e.GetData()))
	}
	lead, term := g.lead, g.term
	if ss := rd.SoftState; ss != nil {
		lead = ss.Lead
	}
	if hs := rd.HardState; !raft.IsEmptyHardState(hs) {
		term = hs.GetTerm()
	}
	if lead != g.lead || term != g.term {
		g.startResync()
	}
	if !g.alone && !g.resync.on && g.host.stalledInPass() {
		g.startResync()
	}
	g.readStates(rd.ReadStates)
	if b, ok := m.(BatchApplier); ok && (len(rd.CommittedEntries) > 0 || g.resync.on) {
		b.AppliedBatch(g.current())
	}
	if g.replayed > 0 && g.applied >= g.replayed {
		g.replayed = 0
		if !g.waitsForTail() {
			close(g.recovered)
		}
	}
	// A group of one, restarted, elects itself as soon as its
	// configuration is rebuilt rather than after an election timeout.
	if !g.checked && len(rd.CommittedEntries) > 0 {
		g.checked = true
		if g.conf != nil && len(g.conf.GetVoters()) == 1 && g.conf.GetVoters()[0] == g.host.self {
			g.campaign = true
		}
	}
	if lead != g.lead || term != g.term {
		changed := lead != g.lead
		g.lead, g.term = lead, term
		if lead != raft.None {
			// What was handed over before may be lost: with another
			// leader (Raft drops a proposal a leader did not append,
			// and a new leader may overwrite what an old one did not
			// commit), with this one in an earlier term (its node
			// restarted and was elected again), or on the way to it
			// while this member had lost it (cut off, it forgets its
			// leader). Or it is committed yet. It all goes to the
			// leader again, under the same numbers, and is applied
			// once (proposals.go); deadlines stand. What was held for
			// want of a leader goes with it, all in the order of their
			// numbers (proposeAgain), so that a publisher's messages
			// keep their order.
			g.round++
			for seq, p := range g.waiters {
				delete(g.waiters, seq)
				g.again = append(g.again, p)
			}
			g.again = append(g.again, g.held...)
			g.held = nil
			g.again = slices.DeleteFunc(g.again, func(p *proposal) bool {
				if p.asLeader {
					g.finish(p, 0, ErrNotLeader)
					return true
				}
				return false
			})
		}
		if changed {
			m.LeaderChanged(lead, g.rn.BasicStatus().GetTerm(), lead == g.host.self)
		}
	}
	if g.applied > g.snapIndex && m.SnapshotDue(g.applied-g.snapIndex) {
		if err := g.snapshot(); err != nil {
			g.host.log.Warn().Err(err).Uint64("group", g.id).Msg("cannot take a group's snapshot; its log keeps growing")
		}
	}
	return nil
}

// apply applies one committed entry and answers its proposer if that is
// this node.
func (g *Group) apply(e *raftpb.Entry) {
	switch e.GetType() {
	case raftpb.EntryNormal:
		t, cmd, ok := entryTag(e)
		if !ok || !g.admit(t, e.GetIndex()) {
			// Raft's own entry, or a copy of a proposal applied
			// already: its index still reaches the machine.
			g.cfg.Machine.Apply(e.GetIndex(), nil)
			return
		}
		err := g.cfg.Machine.Apply(e.GetIndex(), cmd)
		g.answer(t, e.GetIndex(), err)
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			g.host.log.Error().Err(err).Uint64("group", g.id).Msg("undecodable configuration change in a group's log")
			g.cfg.Machine.Apply(e.GetIndex(), nil)
			return
		}
		g.setConf(g.rn.ApplyConfChange(cc))
		g.cfg.Machine.Apply(e.GetIndex(), nil)
		if t, _, ok := parseTag(cc.GetContext()); ok {
			g.answer(t, e.GetIndex(), nil)
		}
	}
}

// answer hands an entry's answer to its waiter when this run of this
// node proposed it (a tag from before runs: when this node did).
func (g *Group) answer(t tag, index uint64, err error) {
	if t.node != g.host.self || (t.run != 0 && t.run != g.host.runID) {
		return
	}
	if p := g.waiters[t.seq]; p != nil {
		delete(g.waiters, t.seq)
		g.finish(p, index, err)
		return
	}
	// On its way to a new leader (a copy of it was committed by the
	// old one, or another copy by the new), or held: answered all the
	// same, and sent no more.
	for _, list := range []*[]*proposal{&g.again, &g.held} {
		if i := slices.IndexFunc(*list, func(p *proposal) bool { return p.seq == t.seq }); i >= 0 {
			p := (*list)[i]
			*list = slices.Delete(*list, i, i+1)
			g.finish(p, index, err)
			return
		}
	}
}

// snapshot records the machine's state as of applied and compacts the
// log behind it.
func (g *Group) snapshot() error {
	data, err := g.cfg.Machine.Snapshot()
	if err != nil {
		return err
	}
	data = g.wrapSnapshot(data)
	cs := g.conf
	if cs == nil {
		_, cs, _ = g.cfg.Log.InitialState()
	}
	if _, err := g.cfg.Log.CreateSnapshot(g.applied, cs, data); err != nil {
		return err
	}
	g.snapIndex = g.applied
	to := g.compactTo()
	if keeper, ok := g.cfg.Machine.(LogKeeper); ok {
		// The snapshot refers to the entries from the oldest it needs.
		if needed := keeper.OldestNeeded(); needed > 0 && needed <= to {
			to = needed - 1
		}
	}
	if to == 0 {
		return nil
	}
	if err := g.cfg.Log.Compact(to); err != nil && !errors.Is(err, raft.ErrCompacted) {
		return err // (compacted that far already: an old message pins the log)
	}
	return nil
}

// Compacting after a snapshot keeps a few entries, so a follower just
// behind needs no snapshot, and on a leader the entries a follower that
// is keeping up has still to get (a busy group's followers may be
// hundreds behind), up to lagKept of them: a snapshot costs a follower
// more than the entries do (a stream's replica copies the messages it
// lacks). The few are keepEntries, or fewer when they would pass
// keepBytes: a stream's entries carry up to 1 MiB of messages each, and
// 64 of them outlived the store's memtable, to be flushed and compacted
// away for nothing.
const (
	keepEntries = 64
	keepBytes   = 4 << 20
	lagKept     = 16384
)

// appliedTail is the indexes and sizes of the last keepEntries entries
// applied, in a ring: the newest at next-1; the loop's.
type appliedTail struct {
	index [keepEntries]uint64
	size  [keepEntries]int
	next  int // where the next entry goes
	held  int // how many it holds, up to keepEntries
}

func (t *appliedTail) note(index uint64, size int) {
	t.index[t.next], t.size[t.next] = index, size
	t.next = (t.next + 1) % keepEntries
	t.held = min(t.held+1, keepEntries)
}

// keptFrom is the first of the last entries applied that keepBytes
// holds, 0 when it holds them all.
func (t *appliedTail) keptFrom() uint64 {
	bytes := 0
	for k := 1; k <= t.held; k++ {
		i := (t.next - k + keepEntries) % keepEntries
		if bytes += t.size[i]; bytes > keepBytes {
			return t.index[i] + 1
		}
	}
	return 0
}

// compactTo is the index the log may be compacted to after a snapshot
// at applied (0: none); the loop's.
func (g *Group) compactTo() uint64 {
	to := uint64(0)
	if g.applied > keepEntries {
		to = g.applied - keepEntries
	}
	if from := g.tail.keptFrom(); from > to+1 {
		to = from - 1
	}
	if to == 0 {
		return 0
	}
	if g.rn.BasicStatus().RaftState != raft.StateLeader {
		return to
	}
	for id, pr := range g.rn.Status().Progress {
		if id != g.host.self && pr.State == tracker.StateReplicate && pr.Match+lagKept > g.applied && pr.Match < to {
			to = pr.Match
		}
	}
	return to
}

// statusNow is the member's status; the loop's.
func (g *Group) statusNow() GroupStatus {
	if g.failed {
		return GroupStatus{ID: g.id, Role: "failed", Applied: g.applied}
	}
	st := g.rn.Status()
	out := GroupStatus{ID: g.id, Role: roleName(st.RaftState), Leader: st.Lead, Term: st.GetTerm(),
		Commit: st.GetCommit(), Applied: g.applied}
	for id := range st.Config.Voters.IDs() {
		out.Members = append(out.Members, id)
	}
	slices.Sort(out.Members)
	if st.RaftState == raft.StateLeader {
		out.Match = make(map[uint64]uint64, len(st.Progress))
		for id, pr := range st.Progress {
			out.Match[id] = pr.Match
		}
	}
	if sized, ok := g.cache.LogStore.(interface{ Size() (uint64, uint64) }); ok {
		out.LogBytes, out.LogEntries = sized.Size()
	}
	return out
}
