package cluster

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/warren/storage"

	"github.com/warrenmq/warren/internal/poll"
)

// groupJournal is a journal that is a GroupMachine: it snapshots every
// `every` entries and records who it was told leads.
type groupJournal struct {
	journal
	every uint64

	lmu    sync.Mutex
	leader uint64
	self   bool
}

func (j *groupJournal) SnapshotDue(entries uint64) bool { return j.every > 0 && entries >= j.every }

func (j *groupJournal) LeaderChanged(leader, term uint64, self bool) {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	j.leader, j.self = leader, self
}

func (j *groupJournal) leads() bool {
	j.lmu.Lock()
	defer j.lmu.Unlock()
	return j.self
}

// proposeTo proposes and waits for the answer.
func proposeTo(g *Group, cmd string) (uint64, error) {
	type answer struct {
		index uint64
		err   error
	}
	ch := make(chan answer, 1)
	g.Propose([]byte(cmd), func(index uint64, err error) { ch <- answer{index, err} })
	a := <-ch
	return a.index, a.err
}

func openStore(t *testing.T, dir string) *storage.Store {
	t.Helper()
	st, err := storage.Open(filepath.Join(dir, "data"), storage.Options{Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A group of one on a node without a cluster: its proposals are applied
// in order and answered, and a restart rebuilds the machine from the
// snapshot and the log, on the store.
func TestGroupOfOne(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	start := func(st *storage.Store) (*Groups, *Group, *groupJournal) {
		h, g, m, _ := startGroupOfOne(t, st, 42)
		return h, g, m
	}
	h, g, m := start(st)
	var want []string
	last := uint64(0)
	for i := range 100 {
		cmd := fmt.Sprintf("c%d", i)
		index, err := proposeTo(g, cmd)
		if err != nil {
			t.Fatal(err)
		}
		if index <= last {
			t.Fatalf("%s answered at index %d after %d", cmd, index, last)
		}
		last = index
		want = append(want, cmd)
	}
	if _, err := proposeTo(g, "bad one"); err == nil {
		t.Fatal("the machine's refusal did not reach the proposer")
	}
	if got := m.commands(); !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
	if !m.leads() {
		t.Fatal("a group of one does not lead")
	}
	s := g.Status()
	if s.Role != "leader" || len(s.Members) != 1 || s.Applied < last || s.Match[h.Self()] < last {
		t.Fatalf("status %+v", s)
	}
	if s.LogEntries >= 90 {
		t.Fatalf("the log kept %d entries after snapshots every 7", s.LogEntries)
	}
	h.Stop()
	if _, err := proposeTo(g, "after stop"); err != ErrGroupStopped {
		t.Fatalf("a proposal to a stopped host: %v", err)
	}
	st.Close()

	st = openStore(t, dir)
	defer st.Close()
	h, g, m = start(st)
	defer h.Stop()
	proposeAfterRestart(t, g, m, want)
}

// Groups on three nodes share the transport: each group elects the node
// that campaigns, proposals through any member are applied on all, and
// when a leader's node stops another member takes over and the stopped
// one catches up when it returns.
func TestGroupsOnThreeNodes(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	const groups = 6
	logs := make([][]memLog, len(nodes)) // [node][group]
	machines := make([][]*groupJournal, len(nodes))
	members := make([][]*Group, len(nodes))
	startMember := func(ni, gi int, campaign bool) {
		m := &groupJournal{every: 5}
		g, err := nodes[ni].Groups().Start(GroupConfig{ID: uint64(100 + gi), Members: ids, Campaign: campaign, Log: logs[ni][gi], Machine: m})
		if err != nil {
			t.Fatal(err)
		}
		machines[ni][gi], members[ni][gi] = m, g
	}
	for ni := range nodes {
		logs[ni] = make([]memLog, groups)
		machines[ni] = make([]*groupJournal, groups)
		members[ni] = make([]*Group, groups)
		for gi := range groups {
			logs[ni][gi] = memLog{raft.NewMemoryStorage()}
			startMember(ni, gi, gi%3 == ni)
		}
	}
	wants := make([][]string, groups)
	for i := range 60 {
		gi, ni := i%groups, (i/groups)%3
		cmd := fmt.Sprintf("g%d-%d", gi, i)
		if _, err := proposeTo(members[ni][gi], cmd); err != nil {
			t.Fatalf("%s through %s: %v", cmd, nodes[ni].cfg.Name, err)
		}
		wants[gi] = append(wants[gi], cmd)
	}
	convergeGroups := func(live []int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for gi := range groups {
			for _, ni := range live {
				if !poll.Within(time.Until(deadline), func() bool { return slices.Equal(machines[ni][gi].commands(), wants[gi]) }) {
					t.Fatalf("group %d on %s applied %q, want %q", gi, nodes[ni].cfg.Name, machines[ni][gi].commands(), wants[gi])
				}
			}
		}
	}
	convergeGroups([]int{0, 1, 2})
	// One leader each (the node that campaigned, unless its first
	// campaign reached members not started yet).
	for gi := range groups {
		leaders := 0
		for ni := range nodes {
			if machines[ni][gi].leads() {
				leaders++
			}
		}
		if leaders != 1 {
			t.Fatalf("group %d has %d leaders", gi, leaders)
		}
	}

	// a stops: the groups it led elect b or c, and take proposals.
	nodes[0].Stop()
	for i := range 12 {
		gi := i % groups
		cmd := fmt.Sprintf("g%d-while-a-down-%d", gi, i)
		ni := 1 + i%2
		var err error
		for try := 0; try < 5; try++ {
			if _, err = proposeTo(members[ni][gi], cmd); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("%s with a down: %v", cmd, err)
		}
		wants[gi] = append(wants[gi], cmd)
	}
	convergeGroups([]int{1, 2})

	// a comes back with its logs and empty machines, and catches up.
	nodes[0].start(t)
	for gi := range groups {
		startMember(0, gi, false)
	}
	convergeGroups([]int{0, 1, 2})
	s := members[1][0].Status()
	if len(s.Members) != 3 {
		t.Fatalf("status %+v", s)
	}
}

// A group started on two of three nodes adds the third (which joins with
// an empty log and gets the group's history, through a snapshot since
// the log behind it was compacted), then removes its leader, which steps
// down; the two left go on.
func TestGroupMembership(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	machines := make([]*groupJournal, 3)
	members := make([]*Group, 3)
	start := func(ni int, cfg GroupConfig) {
		machines[ni] = &groupJournal{every: 4}
		cfg.ID, cfg.Log, cfg.Machine = 7, memLog{raft.NewMemoryStorage()}, machines[ni]
		g, err := nodes[ni].Groups().Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members[ni] = g
	}
	start(0, GroupConfig{Members: ids[:2], Campaign: true})
	start(1, GroupConfig{Members: ids[:2]})
	var want []string
	propose := func(ni int, cmd string) {
		t.Helper()
		var err error
		for try := 0; try < 5; try++ {
			if _, err = proposeTo(members[ni], cmd); err == nil {
				want = append(want, cmd)
				return
			}
		}
		t.Fatalf("%s through %s: %v", cmd, nodes[ni].cfg.Name, err)
	}
	for i := range 200 {
		propose(i%2, fmt.Sprint("before-", i))
	}
	converge := func(live ...int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for _, ni := range live {
			if !poll.Within(time.Until(deadline), func() bool { return slices.Equal(machines[ni].commands(), want) }) {
				t.Fatalf("%s applied %d commands, want %d", nodes[ni].cfg.Name, len(machines[ni].commands()), len(want))
			}
		}
	}

	change := func(g *Group, add bool, node uint64) error {
		ch := make(chan error, 1)
		if add {
			g.AddMember(node, func(err error) { ch <- err })
		} else {
			g.RemoveMember(node, func(err error) { ch <- err })
		}
		return <-ch
	}
	start(2, GroupConfig{Join: true})
	if err := change(members[1], true, ids[2]); err != nil {
		t.Fatal(err)
	}
	propose(2, "after-add")
	converge(0, 1, 2)
	if st := members[0].Status(); len(st.Members) != 3 {
		t.Fatalf("members after the add: %v", st.Members)
	}

	// Remove the leader, through another member.
	leader := -1
	for ni := range 3 {
		if machines[ni].leads() {
			leader = ni
		}
	}
	other := (leader + 1) % 3
	if err := change(members[other], false, ids[leader]); err != nil {
		t.Fatal(err)
	}
	members[leader].Stop()
	rest := []int{(leader + 1) % 3, (leader + 2) % 3}
	propose(rest[0], "after-remove")
	converge(rest...)
	if st := members[rest[1]].Status(); len(st.Members) != 2 || slices.Contains(st.Members, ids[leader]) {
		t.Fatalf("members after the remove: %v", st.Members)
	}
}

// When a leader's node stops (its port then refuses connections), the
// followers see it die and elect another leader at once: the election
// comes from leaderDied, not from an election timeout.
func TestGroupLeaderDiesFast(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	machines := make([]*groupJournal, 3)
	members := make([]*Group, 3)
	for ni := range nodes {
		machines[ni] = &groupJournal{}
		g, err := nodes[ni].Groups().Start(GroupConfig{ID: 9, Members: ids, Campaign: ni == 0,
			Log: memLog{raft.NewMemoryStorage()}, Machine: machines[ni]})
		if err != nil {
			t.Fatal(err)
		}
		members[ni] = g
	}
	poll.Until(t, 20*time.Second, "the first member leading", machines[0].leads)
	if _, err := proposeTo(members[1], "before"); err != nil {
		t.Fatal(err)
	}
	nodes[0].Stop()
	poll.Until(t, 20*time.Second, "a new leader", func() bool { return machines[1].leads() || machines[2].leads() })
	if n := nodes[1].Groups().fastElections.Load() + nodes[2].Groups().fastElections.Load(); n == 0 {
		t.Fatal("the new leader came from an election timeout, not from seeing the leader die")
	}
	survivor := members[1]
	if machines[2].leads() {
		survivor = members[2]
	}
	if _, err := proposeTo(survivor, "after"); err != nil {
		t.Fatal(err)
	}
}

// Proposals handed over together go to Raft as one message: through the
// leader and through a follower, a burst proposed without waiting is
// applied on every member in the order proposed, each answered with its
// own index (a refused one with its refusal, the others unaffected).
func TestGroupBatchesProposals(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	machines := make([]*groupJournal, 3)
	members := make([]*Group, 3)
	for ni := range nodes {
		machines[ni] = &groupJournal{}
		g, err := nodes[ni].Groups().Start(GroupConfig{ID: 7, Members: ids, Campaign: ni == 0, Log: memLog{raft.NewMemoryStorage()}, Machine: machines[ni]})
		if err != nil {
			t.Fatal(err)
		}
		members[ni] = g
	}
	if _, err := proposeTo(members[0], "first"); err != nil {
		t.Fatal(err)
	}
	want := []string{"first"}
	for _, ni := range []int{0, 1} {
		const n = 300
		type answer struct {
			index uint64
			err   error
		}
		answers := make([]chan answer, n)
		for i := range n {
			cmd := fmt.Sprintf("n%d-%d", ni, i)
			if i == n/2 {
				cmd = "bad " + cmd
			} else {
				want = append(want, cmd)
			}
			answers[i] = make(chan answer, 1)
			members[ni].Propose([]byte(cmd), func(index uint64, err error) { answers[i] <- answer{index, err} })
		}
		last := uint64(0)
		for i := range n {
			a := <-answers[i]
			if (a.err != nil) != (i == n/2) {
				t.Fatalf("through node %d, proposal %d: %v", ni, i, a.err)
			}
			if a.index <= last {
				t.Fatalf("through node %d, proposal %d answered at %d after %d", ni, i, a.index, last)
			}
			last = a.index
		}
	}
	for ni := range nodes {
		if !poll.Within(10*time.Second, func() bool { return slices.Equal(machines[ni].commands(), want) }) {
			t.Fatalf("node %d applied %d commands, want %d in order", ni, len(machines[ni].commands()), len(want))
		}
	}
}

// A member applies, and may snapshot, entries while it saves the next
// ones, so a crash can leave its snapshot past the commit its last saved
// hard state records. Raft refuses to start with an applied index past
// the commit; the group starts, and applies nothing twice.
func TestGroupRestartsWithSnapshotPastSavedCommit(t *testing.T) {
	dir := t.TempDir()
	want := runThenSaveCommit(t, dir, 43, func(snap, first, last uint64) (uint64, bool) {
		// The crash: the hard state saved before the snapshot's
		// entries were committed.
		return snap - 1, snap > first
	})
	st := openStore(t, dir)
	defer st.Close()
	h, g, m, _ := startGroupOfOne(t, st, 43)
	defer h.Stop()
	proposeAfterRestart(t, g, m, want)
}

// runThenSaveCommit runs group id of one on a store in dir, proposes 30
// commands, stops, and saves the commit index at(snapshot index, first
// and last index of the log) says, as a crash can leave it; ok false
// means the log is not as the test needs. It returns the commands.
func runThenSaveCommit(t *testing.T, dir string, id uint64, at func(snap, first, last uint64) (commit uint64, ok bool)) []string {
	t.Helper()
	st := openStore(t, dir)
	defer st.Close()
	h, g, _, log := startGroupOfOne(t, st, id)
	var want []string
	for i := range 30 {
		cmd := fmt.Sprintf("c%d", i)
		if _, err := proposeTo(g, cmd); err != nil {
			t.Fatal(err)
		}
		want = append(want, cmd)
	}
	h.Stop()
	snap, err := log.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	hs, _, err := log.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	first, err := log.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := log.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	commit, ok := at(snap.GetMetadata().GetIndex(), first, last)
	if !ok || commit >= hs.GetCommit() {
		t.Fatalf("saved commit %d, snapshot at %d, log from %d to %d: the test needs another log", hs.GetCommit(), snap.GetMetadata().GetIndex(), first, last)
	}
	hs.Commit = proto.Uint64(commit)
	if err := log.Save(hs, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(); err != nil { // a commit index alone is kept back
		t.Fatal(err)
	}
	return want
}

// A leader saves the commit index a round after the entries it covers,
// so a kill can leave a group's log with entries past the saved commit
// that were committed and answered. A group of one commits them again
// once it leads; its member is recovered only when it has applied them
// (a quorum queue would otherwise answer its first clients short of
// messages it had confirmed), whether the saved commit is past its
// snapshot or at it.
func TestGroupOfOneRecoversThePastCommitTail(t *testing.T) {
	for _, c := range []struct {
		name   string
		commit func(snap, last uint64) uint64
	}{
		{"commit at the snapshot", func(snap, last uint64) uint64 { return snap }},
		{"commit past the snapshot", func(snap, last uint64) uint64 { return max(snap+1, last-3) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			want := runThenSaveCommit(t, dir, 44, func(snap, _, last uint64) (uint64, bool) {
				commit := c.commit(snap, last)
				return commit, commit < last
			})
			st := openStore(t, dir)
			defer st.Close()
			h, g, m, _ := startGroupOfOne(t, st, 44)
			defer h.Stop()
			select {
			case <-g.Recovered():
			case <-time.After(20 * time.Second):
				t.Fatal("not recovered after 20 s")
			}
			if got := m.commands(); !slices.Equal(got, want) {
				t.Fatalf("recovered with %q applied, want %q", got, want)
			}
			proposeAfterRestart(t, g, m, want)
		})
	}
}

// proposeAfterRestart proposes once more to a restarted group and checks
// that its machine applied want and that, once each.
func proposeAfterRestart(t *testing.T, g *Group, m *groupJournal, want []string) {
	t.Helper()
	if _, err := proposeTo(g, "after restart"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "after restart")
	if got := m.commands(); !slices.Equal(got, want) {
		t.Fatalf("after a restart applied %q, want %q", got, want)
	}
}

// startGroupOfOne starts group id, of this node alone, on st's Raft log,
// with a journal that snapshots every 7 entries.
func startGroupOfOne(t *testing.T, st *storage.Store, id uint64) (*Groups, *Group, *groupJournal, *storage.RaftLog) {
	t.Helper()
	h := NewGroups(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	log, err := st.RaftLog(id)
	if err != nil {
		t.Fatal(err)
	}
	m := &groupJournal{every: 7}
	g, err := h.Start(GroupConfig{ID: id, Members: []uint64{h.Self()}, Log: log, Machine: m})
	if err != nil {
		t.Fatal(err)
	}
	return h, g, m, log
}

// keeperJournal is a LogKeeper: its state is the last keep commands, and
// its snapshots refer to them by index in the log, with those the log no
// longer holds (before floor) inline.
type keeperJournal struct {
	keep int

	mu     sync.Mutex
	cmds   map[uint64]string // the last keep commands, by index
	floor  uint64            // the log holds the commands from here on
	oldest uint64            // OldestNeeded, as of the last snapshot
	self   bool
}

func newKeeperJournal(keep int) *keeperJournal {
	return &keeperJournal{keep: keep, cmds: map[uint64]string{}}
}

func (j *keeperJournal) Apply(index uint64, cmd []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if cmd == nil {
		return nil
	}
	j.cmds[index] = string(cmd)
	if len(j.cmds) > j.keep {
		delete(j.cmds, slices.Min(slices.Collect(maps.Keys(j.cmds))))
	}
	return nil
}

// Snapshot: "floor;i=cmd,...;j,k,..." (inline, then those in the log).
func (j *keeperJournal) Snapshot() ([]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var inline, logged []string
	j.oldest = 0
	for _, i := range slices.Sorted(maps.Keys(j.cmds)) {
		if i < j.floor {
			inline = append(inline, fmt.Sprintf("%d=%s", i, j.cmds[i]))
			continue
		}
		if j.oldest == 0 {
			j.oldest = i
		}
		logged = append(logged, fmt.Sprint(i))
	}
	return fmt.Appendf(nil, "%d;%s;%s", j.floor, strings.Join(inline, ","), strings.Join(logged, ",")), nil
}

func (j *keeperJournal) OldestNeeded() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.oldest
}

func (j *keeperJournal) decode(index uint64, data []byte, entries EntryReader) (map[uint64]string, uint64, error) {
	parts := strings.Split(string(data), ";")
	if len(parts) != 3 {
		return nil, 0, fmt.Errorf("snapshot %q", data)
	}
	cmds := map[uint64]string{}
	floor, _ := strconv.ParseUint(parts[0], 10, 64)
	for _, kv := range strings.Split(parts[1], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			i, _ := strconv.ParseUint(k, 10, 64)
			cmds[i] = v
		}
	}
	want := map[uint64]bool{}
	lo := uint64(0)
	for _, s := range strings.Split(parts[2], ",") {
		if i, err := strconv.ParseUint(s, 10, 64); err == nil {
			want[i] = true
			if lo == 0 || i < lo {
				lo = i
			}
		}
	}
	if len(want) > 0 {
		if entries == nil {
			return nil, 0, fmt.Errorf("snapshot at %d refers to the log", index)
		}
		if err := entries(lo, index+1, func(i uint64, cmd []byte) error {
			if want[i] {
				cmds[i] = string(cmd)
				delete(want, i)
			}
			return nil
		}); err != nil {
			return nil, 0, err
		}
		if len(want) > 0 {
			return nil, 0, fmt.Errorf("snapshot at %d: %d commands not in the log", index, len(want))
		}
	}
	return cmds, floor, nil
}

func (j *keeperJournal) Restore(index uint64, data []byte) error {
	return j.RestoreFrom(index, data, nil)
}

func (j *keeperJournal) RestoreFrom(index uint64, data []byte, entries EntryReader) error {
	cmds, floor, err := j.decode(index, data, entries)
	if err != nil {
		return err
	}
	if len(strings.Split(string(data), ";")[2]) == 0 && entries == nil {
		floor = index + 1 // a completed snapshot: the log starts after it
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cmds, j.floor = cmds, floor
	return nil
}

func (j *keeperJournal) Complete(index uint64, data []byte, entries EntryReader) ([]byte, error) {
	cmds, _, err := j.decode(index, data, entries)
	if err != nil {
		return nil, err
	}
	var inline []string
	for _, i := range slices.Sorted(maps.Keys(cmds)) {
		inline = append(inline, fmt.Sprintf("%d=%s", i, cmds[i]))
	}
	return fmt.Appendf(nil, "%d;%s;", index+1, strings.Join(inline, ",")), nil
}

func (j *keeperJournal) SnapshotDue(entries uint64) bool { return entries >= 4 }

func (j *keeperJournal) LeaderChanged(leader, term uint64, self bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.self = self
}

func (j *keeperJournal) state() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, i := range slices.Sorted(maps.Keys(j.cmds)) {
		out = append(out, j.cmds[i])
	}
	return out
}

// TestLogKeeperGroup: a machine whose snapshots refer to its log keeps
// the entries they refer to (the log is compacted only up to the oldest
// it needs), restores its own snapshots from them after a restart, and a
// member that joins after the log was compacted gets a snapshot with
// them inlined.
func TestLogKeeperGroup(t *testing.T) {
	// More than the group keeps behind a snapshot (keepEntries), so
	// that what the state needs is what limits the compaction.
	const keep = 100
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	logs := []memLog{{raft.NewMemoryStorage()}, {raft.NewMemoryStorage()}, {raft.NewMemoryStorage()}}
	machines := make([]*keeperJournal, 3)
	members := make([]*Group, 3)
	start := func(ni int, cfg GroupConfig) {
		machines[ni] = newKeeperJournal(keep)
		cfg.ID, cfg.Log, cfg.Machine = 9, logs[ni], machines[ni]
		g, err := nodes[ni].Groups().Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		members[ni] = g
	}
	start(0, GroupConfig{Members: ids[:2], Campaign: true})
	start(1, GroupConfig{Members: ids[:2]})
	var want []string
	propose := func(ni int, cmd string) {
		t.Helper()
		var err error
		for try := 0; try < 5; try++ {
			if _, err = proposeTo(members[ni], cmd); err == nil {
				want = append(want, cmd)
				return
			}
		}
		t.Fatalf("%s through %s: %v", cmd, nodes[ni].cfg.Name, err)
	}
	converge := func(live ...int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for _, ni := range live {
			if !poll.Within(time.Until(deadline), func() bool { return slices.Equal(machines[ni].state(), want[len(want)-keep:]) }) {
				t.Fatalf("%s holds %q, want %q", nodes[ni].cfg.Name, machines[ni].state(), want[len(want)-keep:])
			}
		}
	}
	for i := range 300 {
		propose(0, fmt.Sprint("c", i))
	}
	converge(0, 1)
	first, _ := logs[0].FirstIndex()
	last, _ := logs[0].LastIndex()
	if first < 150 {
		t.Fatalf("the log was not compacted: entries %d to %d", first, last)
	}
	if oldest := machines[0].OldestNeeded(); oldest == 0 || first > oldest {
		t.Fatalf("the log was compacted to %d, past the oldest entry the state needs, %d", first, oldest)
	}

	// A member that joins now is sent a snapshot: completed, it stands
	// without the leader's log.
	start(2, GroupConfig{Join: true})
	ch := make(chan error, 1)
	members[0].AddMember(ids[2], func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	converge(0, 1, 2)
	propose(2, "after-add")
	converge(0, 1, 2)

	// A member restarted on its log restores its own snapshot from it.
	members[1].Stop()
	start(1, GroupConfig{})
	converge(1)
	for i := range 20 {
		propose(1, fmt.Sprint("after-restart-", i))
	}
	converge(0, 1, 2)
}

// batchJournal is a groupJournal that records what AppliedBatch was told.
type batchJournal struct {
	groupJournal
	bmu     sync.Mutex
	current []bool
}

func (j *batchJournal) AppliedBatch(current bool) {
	j.bmu.Lock()
	defer j.bmu.Unlock()
	j.current = append(j.current, current)
}

func (j *batchJournal) batches() []bool {
	j.bmu.Lock()
	defer j.bmu.Unlock()
	return slices.Clone(j.current)
}

// A member whose node stood still (its process stopped, as by SIGSTOP)
// takes itself for behind: the entries it applies next may have been
// taken back by later ones committed elsewhere meanwhile, even when it
// still takes itself for the leader. Its machine is told it is not
// current until the member has asked the leader how far the log is
// committed and applied that far.
func TestGroupResyncsAfterAStall(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	machines := make([]*batchJournal, len(nodes))
	members := make([]*Group, len(nodes))
	for ni := range nodes {
		machines[ni] = &batchJournal{}
		g, err := nodes[ni].Groups().Start(GroupConfig{ID: 300, Members: ids, Campaign: ni == 0,
			Log: memLog{raft.NewMemoryStorage()}, Machine: machines[ni]})
		if err != nil {
			t.Fatal(err)
		}
		members[ni] = g
	}
	if _, err := proposeTo(members[0], "before"); err != nil {
		t.Fatal(err)
	}
	a := machines[0]
	poll.Until(t, 10*time.Second, "a current, before the stall", func() bool {
		b := a.batches()
		return len(b) > 0 && b[len(b)-1]
	})
	seen := len(a.batches())
	// The loop's clock jumps past stallAfter, as after a stop.
	nodes[0].Groups().skew.Add(int64(stallAfter + 2*groupTickInterval))
	if _, err := proposeTo(members[0], "after"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a not current, then current again", func() bool {
		b := a.batches()[seen:]
		first := slices.Index(b, false)
		return first >= 0 && slices.Contains(b[first:], true)
	})
	if got := a.commands(); !slices.Equal(got, []string{"before", "after"}) {
		t.Fatalf("a applied %q", got)
	}
	// A node that did not stand still is not held back by a's stall: it
	// is current once its own start's resync is over.
	poll.Until(t, 2*resyncLimit, "b current", func() bool {
		b := machines[1].batches()
		return len(b) > 0 && b[len(b)-1]
	})
}

// savesLog is a memLog that records the commands of each Save.
type savesLog struct {
	memLog
	mu    sync.Mutex
	saves [][]string
}

func (l *savesLog) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	var cmds []string
	for _, e := range ents {
		if _, cmd, ok := entryTag(e); ok && len(cmd) > 0 {
			cmds = append(cmds, string(cmd))
		}
	}
	if len(cmds) > 0 {
		l.mu.Lock()
		l.saves = append(l.saves, cmds)
		l.mu.Unlock()
	}
	return l.memLog.Save(hs, ents, snap)
}

func (l *savesLog) saved() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.saves)
}

// A lazy proposal waits for the next input and is saved with it, in its
// place among its proposer's proposals; with nothing else coming, it is
// taken within lazyWithin.
func TestGroupProposeLazily(t *testing.T) {
	h := NewGroups(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	defer h.Stop()
	h.lazyWithin = time.Hour // nothing but the next proposal takes it
	log := &savesLog{memLog: memLog{raft.NewMemoryStorage()}}
	m := &groupJournal{}
	g, err := h.Start(GroupConfig{ID: 9, Members: []uint64{h.Self()}, Log: log, Machine: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proposeTo(g, "first"); err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	g.ProposeLazily([]byte("ack"), func(_ uint64, err error) { acked <- err })
	h.mu.Lock()
	waits := h.lazyArmed && len(h.inbox) == 1 // only the loop's ticker could take it meanwhile
	h.mu.Unlock()
	if !waits {
		t.Fatal("a lazy proposal woke the loop")
	}
	if _, err := proposeTo(g, "publish"); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if got, want := m.commands(), []string{"first", "ack", "publish"}; !slices.Equal(got, want) {
		t.Fatalf("applied %q, want %q", got, want)
	}
	if !slices.ContainsFunc(log.saved(), func(cmds []string) bool { return slices.Equal(cmds, []string{"ack", "publish"}) }) {
		t.Fatalf("the lazy proposal was not saved with the next: saves %q", log.saved())
	}

	h.mu.Lock()
	h.lazyWithin = 5 * time.Millisecond
	h.mu.Unlock()
	g.ProposeLazily([]byte("alone"), func(_ uint64, err error) { acked <- err })
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lazy proposal with nothing after it was never taken")
	}
}
