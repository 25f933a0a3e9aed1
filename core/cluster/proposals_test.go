package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/internal/poll"
)

// entryOf is a normal entry at index carrying cmd under tag t (the
// format of before runs when t.run is 0).
func entryOf(index uint64, t tag, cmd string) *raftpb.Entry {
	var data []byte
	if t.run != 0 {
		data = appendTag(t, []byte(cmd))
	} else {
		data = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, t.node), t.seq)
		data = append(data, cmd...)
	}
	return &raftpb.Entry{Index: &index, Type: raftpb.EntryNormal.Enum(), Data: data}
}

// ord is an ordered tag of run, numbered seq, following prev.
func ord(node, run, seq, prev, round uint64) tag {
	return tag{node: node, seq: seq, run: run, ordered: true, prev: prev, round: round}
}

// lead is a tag of a leader's decision.
func lead(node, run, seq uint64) tag { return tag{node: node, seq: seq, run: run} }

// The proposer table's rules, entry by entry, on members that apply the
// same log: an ordered entry is applied only after the one it follows, a
// copy is skipped, a leader's decision is applied above the last one, a
// tag from before runs is always applied, and a snapshot's table skips
// on the member restored from it exactly what the others skip.
func TestProposerTableSkipsCopies(t *testing.T) {
	const me, other, run, run2 = 7, 9, 11, 12
	log := []struct {
		t     tag
		apply bool
	}{
		{ord(me, run, 1, 0, 0), true},
		{ord(me, run, 1, 0, 1), false}, // a copy, sent again after a leader change
		{ord(other, run2, 5, 0, 0), true},
		{ord(me, run, 3, 2, 0), false}, // ahead of 2, lost on its way
		{ord(me, run, 2, 1, 1), true},  // 2 sent again
		{ord(me, run, 3, 2, 1), true},  // and 3 behind it
		{ord(me, run, 4, 1, 0), false}, // follows one passed: sent when 2 and 3 were given up
		{ord(other, run2, 5, 0, 0), false},
		{lead(me, run, 9), true},         // a leader's decision: a sequence of its own
		{lead(me, run, 8), false},        // overtaken by 9
		{ord(me, run, 6, 3, 1), true},    // 4 and 5 given up
		{tag{node: other, seq: 4}, true}, // before runs: as it comes
		{tag{node: other, seq: 4}, true},
		{ord(me, run+100, 1, 0, 0), true}, // another run of the same node
		{lead(other, run2, 3), true},      // tagged before ordered entries: as a leader's decision
		{lead(other, run2, 2), false},
	}
	newGroup := func() *Group {
		return &Group{host: &Groups{self: 99, runID: 1}, waiters: map[uint64]*proposal{}}
	}
	const restoredAt = 6
	a, b := newGroup(), newGroup()
	for i, step := range log {
		e := entryOf(uint64(i+1), step.t, fmt.Sprint("c", i))
		got, cmd, ok := entryTag(e)
		if !ok || got != step.t || string(cmd) != fmt.Sprint("c", i) {
			t.Fatalf("entry %d: tag %+v and %q, want %+v", i+1, got, cmd, step.t)
		}
		if admitted := a.admit(got, uint64(i+1)); admitted != step.apply {
			t.Fatalf("entry %d (%+v): applied %v, want %v", i+1, step.t, admitted, step.apply)
		}
		if i == restoredAt {
			// b is restored from a's snapshot here, and goes on from it.
			table, data, err := unwrapSnapshot(a.wrapSnapshot([]byte("machine")))
			if err != nil || string(data) != "machine" {
				t.Fatalf("envelope: %v, %q", err, data)
			}
			b.proposers = table
			continue
		}
		if i > restoredAt {
			if admitted := b.admit(got, uint64(i+1)); admitted != step.apply {
				t.Fatalf("restored member, entry %d (%+v): applied %v, want %v", i+1, step.t, admitted, step.apply)
			}
		}
	}
	// A snapshot taken before proposer tables is the machine's alone.
	if table, data, err := unwrapSnapshot([]byte{3, 1, 2}); err != nil || table != nil || !slices.Equal(data, []byte{3, 1, 2}) {
		t.Fatalf("an old snapshot: %v %v %v", table, data, err)
	}
	damaged := a.wrapSnapshot(nil)[:len(envelopeMagic)+3]
	if _, _, err := unwrapSnapshot(damaged); err == nil {
		t.Fatal("a damaged table was read")
	}
	future := append(slices.Clone(envelopeMagic[:3]), 9, 0)
	if _, _, err := unwrapSnapshot(future); err == nil {
		t.Fatal("an envelope of a later version was read")
	}
}

// A table written before ordered entries (envelope version 2, with
// holes) reads as leaders' decisions, as its entries are read.
func TestProposerTableOfBeforeOrderedEntries(t *testing.T) {
	b := append([]byte{0xF7, 'W', 'G', 2}, 1)
	b = binary.BigEndian.AppendUint64(b, 7)  // node
	b = binary.BigEndian.AppendUint64(b, 11) // run
	b = binary.BigEndian.AppendUint64(b, 5)  // seq
	b = binary.BigEndian.AppendUint64(b, 40) // index
	b = append(b, 2, 2, 1)                   // holes 3 and 4
	b = append(b, "machine"...)
	table, data, err := unwrapSnapshot(b)
	if err != nil || string(data) != "machine" {
		t.Fatalf("%v, %q", err, data)
	}
	if got := table[proposer{7, 11, false}]; got != (appliedBy{5, 40}) || len(table) != 1 {
		t.Fatalf("table %v", table)
	}
	g := &Group{host: &Groups{self: 1, runID: 1}, waiters: map[uint64]*proposal{}, proposers: table}
	if g.admit(lead(7, 11, 5), 41) || !g.admit(lead(7, 11, 6), 42) {
		t.Fatal("the old table's sequence is not the leaders' decisions'")
	}
}

// chain is a proposer's side in the unit tests: proposals made and sent
// (tagged) without Raft, answered as members apply their entries.
type chain struct {
	t       *testing.T
	g       *Group
	answers map[uint64]error
}

func newChain(t *testing.T) *chain {
	c := &chain{t: t, g: &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}}, answers: map[uint64]error{}}
	return c
}

// make numbers a proposal and counts it waited for, as propose does.
func (c *chain) make(asLeader bool) *proposal {
	c.g.nextSeq++
	p := &proposal{seq: c.g.nextSeq, asLeader: asLeader}
	p.done = func(_ uint64, err error) { c.answers[p.seq] = err }
	c.g.enlist(p)
	c.g.waiters[p.seq] = p
	return p
}

// send is a copy of p as it goes to the leader now.
func (c *chain) send(p *proposal) tag {
	t, _, ok := parseTag(c.g.tagged(p, nil))
	if !ok {
		c.t.Fatal("a copy that does not parse")
	}
	return t
}

// apply applies a committed entry on the proposer's member, answering
// it, and says whether it was applied.
func (c *chain) apply(t tag, index uint64) bool {
	if !c.g.admit(t, index) {
		return false
	}
	c.g.answer(t, index, nil)
	return true
}

// resent is what a round put to be sent again, by number.
func (c *chain) resent() []uint64 {
	var out []uint64
	for _, p := range c.g.again {
		out = append(out, p.seq)
	}
	slices.Sort(out)
	return out
}

// A copy that comes ahead of one lost on its way is skipped, and starts
// a round: everything still waited for goes again, in order, and is
// applied in the order it was made. Copies of the earlier round that
// come ahead too start no other round, and late copies change nothing.
func TestALostProposalIsNotOvertaken(t *testing.T) {
	c := newChain(t)
	var ps []*proposal
	var first []tag
	for range 5 {
		p := c.make(false)
		ps, first = append(ps, p), append(first, c.send(p))
	}
	if first[2].prev != 2 || first[0].prev != 0 {
		t.Fatalf("prevs %+v", first)
	}
	index := uint64(1)
	next := func() uint64 { index++; return index }
	if !c.apply(first[0], next()) {
		t.Fatal("1 not applied")
	}
	// 2 is lost; 3, 4 and 5 come ahead of it.
	for _, cp := range first[2:] {
		if c.apply(cp, next()) {
			t.Fatalf("%d applied ahead of 2", cp.seq)
		}
	}
	if got := c.resent(); !slices.Equal(got, []uint64{2, 3, 4, 5}) || c.g.round != 1 || len(c.g.waiters) != 0 {
		t.Fatalf("a round of %v (round %d, %d waiting), want one of [2 3 4 5]", got, c.g.round, len(c.g.waiters))
	}
	again := c.g.again
	c.g.again = nil
	slices.SortFunc(again, func(a, b *proposal) int { return int(a.seq) - int(b.seq) })
	var second []tag
	for _, p := range again {
		c.g.waiters[p.seq] = p
		second = append(second, c.send(p))
	}
	// 3's second copy is lost too; 4's comes ahead: another round.
	if c.apply(second[0], next()) != true || c.apply(second[2], next()) {
		t.Fatal("round 1: 2 not applied, or 4 applied ahead of 3")
	}
	if got := c.resent(); !slices.Equal(got, []uint64{3, 4, 5}) || c.g.round != 2 {
		t.Fatalf("second round %v (round %d)", got, c.g.round)
	}
	for _, p := range c.g.again {
		c.g.waiters[p.seq] = p
	}
	c.g.again = nil
	if c.apply(second[3], next()) || len(c.g.again) != 0 {
		t.Fatal("a copy of an earlier round started a round")
	}
	for _, p := range ps[2:] {
		if !c.apply(c.send(p), next()) {
			t.Fatalf("%d, sent in round 2, not applied", p.seq)
		}
	}
	// Late copies of all of them.
	for _, cp := range append(first, second...) {
		if c.apply(cp, next()) {
			t.Fatalf("a late copy of %d applied", cp.seq)
		}
	}
	if len(c.answers) != 5 || len(c.g.live) != 0 || len(c.g.waiters) != 0 {
		t.Fatalf("answers %v, %d still live, %d waiting", c.answers, len(c.g.live), len(c.g.waiters))
	}
}

// A proposal given up on leaves the chain: what is sent after follows the
// one before it, and a copy of it that comes later is skipped.
func TestAProposalGivenUpOnLeavesTheChain(t *testing.T) {
	c := newChain(t)
	p1, p2 := c.make(false), c.make(false)
	t1 := c.send(p1)
	delete(c.g.waiters, p2.seq)
	c.g.finish(p2, 0, ErrNoQuorum)
	p3 := c.make(false)
	t3 := c.send(p3)
	if t3.prev != 1 {
		t.Fatalf("3 follows %d, want 1", t3.prev)
	}
	late := ord(1, 2, 2, 1, 0)
	if !c.apply(t1, 10) || !c.apply(t3, 11) || c.apply(late, 12) {
		t.Fatal("1 and 3 not applied in turn, or 2 applied after 3")
	}
	if !errors.Is(c.answers[2], ErrNoQuorum) || c.answers[1] != nil || c.answers[3] != nil {
		t.Fatalf("answers %v", c.answers)
	}
	// With nothing waited for, a copy follows the last applied here.
	p4 := c.make(false)
	if t4 := c.send(p4); t4.prev != 3 {
		t.Fatalf("4 follows %d, want 3", t4.prev)
	}
}

// A leader's decisions are a sequence of their own: one overtaken is
// answered ErrNotLeader, and ordered proposals around them are not
// affected.
func TestLeadersDecisionsAreNotInTheChain(t *testing.T) {
	c := newChain(t)
	p1, d2, d3, p4 := c.make(false), c.make(true), c.make(true), c.make(false)
	t1, t3, t4 := c.send(p1), c.send(d3), c.send(p4)
	if t4.prev != 1 || t3.ordered {
		t.Fatalf("4 follows %d; the decision is ordered: %v", t4.prev, t3.ordered)
	}
	for i, cp := range []tag{t1, t3, t4} {
		if !c.apply(cp, uint64(10+i)) {
			t.Fatalf("%d not applied", cp.seq)
		}
	}
	if !errors.Is(c.answers[d2.seq], ErrNotLeader) || len(c.answers) != 4 {
		t.Fatalf("answers %v", c.answers)
	}
}

// groupOnThree starts group id on three nodes, the first campaigning;
// its machines snapshot every `every` entries (0: never).
func groupOnThree(t *testing.T, id, every uint64) ([]*testNode, []*Group, []*groupJournal) {
	t.Helper()
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	var members []*Group
	var machines []*groupJournal
	for i, n := range nodes {
		m := &groupJournal{every: every}
		g, err := n.Groups().Start(GroupConfig{ID: id, Members: ids, Campaign: i == 0, Log: memLog{raft.NewMemoryStorage()}, Machine: m})
		if err != nil {
			t.Fatal(err)
		}
		members, machines = append(members, g), append(machines, m)
	}
	return nodes, members, machines
}

// A proposal handed to Raft twice (as a resend after a leader change
// does) is applied once on every member, and answered once.
func TestGroupAppliesAResendOnce(t *testing.T) {
	_, members, machines := groupOnThree(t, 200, 3)
	if _, err := proposeTo(members[1], "first"); err != nil {
		t.Fatal(err)
	}
	answers := make(chan error, 4)
	g := members[1]
	g.host.mu.Lock()
	g.nextSeq++
	p := &proposal{seq: g.nextSeq, cmd: []byte("sent twice"), deadline: time.Now().Add(proposeTimeout),
		done: func(_ uint64, err error) { answers <- err }}
	g.host.mu.Unlock()
	g.host.input(groupInput{g: g, prop: p})
	g.host.input(groupInput{g: g, prop: p})
	if err := <-answers; err != nil {
		t.Fatal(err)
	}
	if _, err := proposeTo(members[2], "after"); err != nil {
		t.Fatal(err)
	}
	want := []string{"first", "sent twice", "after"}
	for i, m := range machines {
		poll.Until(t, 10*time.Second, fmt.Sprintf("member %d to apply %q", i, want), func() bool { return slices.Equal(m.commands(), want) })
	}
	select {
	case err := <-answers:
		t.Fatalf("answered twice (second: %v)", err)
	default:
	}
}

// A proposal lost on its way from a follower to the leader is not
// overtaken by the one its proposer sent next: every member applies the
// two in the order they were made, each once, and both are answered.
func TestGroupKeepsAProposersOrderThroughALoss(t *testing.T) {
	nodes, members, machines := groupOnThree(t, 201, 0)
	if _, err := proposeTo(members[1], "first"); err != nil {
		t.Fatal(err)
	}
	lost := make(chan struct{})
	tr := nodes[1].tr
	tr.mu.Lock()
	tr.lose = func(group uint64, m *raftpb.Message) bool {
		if group != 201 || m.GetType() != raftpb.MsgProp || len(m.GetEntries()) == 0 || !bytes.HasSuffix(m.GetEntries()[0].GetData(), []byte("lost")) {
			return false
		}
		select {
		case <-lost:
			return false // its copies go
		default:
			close(lost)
			return true
		}
	}
	tr.mu.Unlock()
	answers := make(chan error, 2)
	members[1].Propose([]byte("lost"), func(_ uint64, err error) { answers <- err })
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the proposal was never sent")
	}
	members[1].Propose([]byte("after"), func(_ uint64, err error) { answers <- err })
	for range 2 {
		if err := <-answers; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"first", "lost", "after"}
	for i, m := range machines {
		poll.Until(t, 10*time.Second, fmt.Sprintf("member %d to apply %q", i, want), func() bool { return slices.Equal(m.commands(), want) })
	}
}

// At its deadline a proposal is answered "no quorum" only when the
// member knows no leader; a member that knows one and has committed
// entries left to apply waits on (the proposal may be among them), and
// one that has none sends it to the leader again.
func TestProposalDeadline(t *testing.T) {
	for _, c := range []struct {
		name            string
		lead            uint64
		lagging         bool
		answered, again bool
	}{
		{"no leader", 0, false, true, false},
		{"a leader, lagging", 2, true, false, false},
		{"a leader, caught up", 2, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := raft.NewMemoryStorage()
			if err := st.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(1), Term: proto.Uint64(1),
				ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}); err != nil {
				t.Fatal(err)
			}
			var ents []*raftpb.Entry
			for i := uint64(2); i <= 10; i++ {
				ents = append(ents, &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(1)})
			}
			if err := st.Append(ents); err != nil {
				t.Fatal(err)
			}
			applied := uint64(10)
			if c.lagging {
				applied = 5
			}
			if err := st.SetHardState(&raftpb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(10)}); err != nil {
				t.Fatal(err)
			}
			rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: memLog{st}, Applied: applied,
				MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 8, Logger: raftLogger{zerolog.Nop()}})
			if err != nil {
				t.Fatal(err)
			}
			h := newGroups(1, zerolog.Nop())
			g := &Group{id: 5, host: h, rn: rn, applied: applied, lead: c.lead, waiters: map[uint64]*proposal{}}
			var got []error
			p := &proposal{seq: 1, cmd: []byte("x"), deadline: time.Now().Add(-time.Second), done: func(_ uint64, err error) { got = append(got, err) }}
			g.waiters[1] = p
			h.tick(map[uint64]*Group{5: g}, map[*Group]bool{})
			if answered := len(got) > 0; answered != c.answered || (answered && !errors.Is(got[0], ErrNoQuorum)) {
				t.Fatalf("answered %v", got)
			}
			// Sent again: handed to Raft once more, which (this member
			// leading nothing and its Raft knowing no leader) holds it.
			if again := slices.Contains(g.held, p); again != c.again {
				t.Fatalf("sent again: %v, want %v", again, c.again)
			}
			if !c.answered && !p.deadline.After(time.Now()) {
				t.Fatal("a proposal waited on kept its passed deadline")
			}
		})
	}
}

// resendFixture is a member of a group of three whose Raft knows no
// leader (so what it proposes again waits in held, in the order it was
// sent), with waiters numbered 1 to 3 and one held proposal numbered 4.
func resendFixture(t *testing.T) (*Groups, *Group) {
	t.Helper()
	st := raft.NewMemoryStorage()
	if err := st.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: proto.Uint64(1), Term: proto.Uint64(1),
		ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: memLog{st}, Applied: 1,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 8, Logger: raftLogger{zerolog.Nop()}})
	if err != nil {
		t.Fatal(err)
	}
	h := newGroups(1, zerolog.Nop())
	g := &Group{id: 5, host: h, rn: rn, applied: 1, lead: 2, term: 1, waiters: map[uint64]*proposal{},
		cfg: GroupConfig{Machine: &groupJournal{}}}
	for seq := uint64(1); seq <= 3; seq++ {
		g.waiters[seq] = &proposal{seq: seq, cmd: []byte("x"), deadline: time.Now().Add(time.Minute), done: func(uint64, error) {}}
	}
	g.held = []*proposal{{seq: 4, cmd: []byte("x"), deadline: time.Now().Add(time.Minute), done: func(uint64, error) {}}}
	return h, g
}

func heldSeqs(g *Group) []uint64 {
	var out []uint64
	for _, p := range g.held {
		out = append(out, p.seq)
	}
	return out
}

// Whatever was handed over before a change of leader, or of term with
// the same leader (its node restarted and was elected again, or this
// member was cut off and forgot it), is sent again, and what was held
// for want of a leader after it: in the order of their numbers, so a
// publisher's messages keep their order.
func TestLeaderChangeSendsEverythingAgainInOrder(t *testing.T) {
	for _, c := range []struct {
		name       string
		lead, term uint64
	}{
		{"another leader", 3, 2},
		{"the same leader in a new term", 2, 2},
		{"the same leader, found again", 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, g := resendFixture(t)
			if c.lead == g.lead && c.term == g.term {
				g.lead = raft.None // it had lost its leader meanwhile
			}
			rd := raft.Ready{SoftState: &raft.SoftState{Lead: c.lead}, HardState: &raftpb.HardState{Term: proto.Uint64(c.term), Commit: proto.Uint64(1)}}
			if err := g.ready(rd); err != nil {
				t.Fatal(err)
			}
			g.proposeAgain()
			if len(g.waiters) != 0 {
				t.Fatalf("%d proposals still waiting on the old leader", len(g.waiters))
			}
			if got := heldSeqs(g); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
				t.Fatalf("sent again in the order %v", got)
			}
		})
	}
}

// At the deadline of one proposal, a round sends everything still
// waited for again, those sent before it too: what was sent after it
// must not overtake it, and what was sent before may have been lost the
// same way.
func TestProposalDeadlineStartsARound(t *testing.T) {
	h, g := resendFixture(t)
	g.held = nil
	g.waiters[2].deadline = time.Now().Add(-time.Second)
	h.tick(map[uint64]*Group{5: g}, map[*Group]bool{})
	if got := heldSeqs(g); !slices.Equal(got, []uint64{1, 2, 3}) || g.round != 1 {
		t.Fatalf("sent again %v in round %d, want [1 2 3] in round 1", got, g.round)
	}
	if !g.held[0].deadline.After(time.Now().Add(time.Minute/2)) || !g.held[1].deadline.After(time.Now()) {
		t.Fatal("deadlines: the one due was not given another, or another was changed")
	}
}

// A proposal on its way to a new leader (after a leader change) whose
// first copy the old leader had committed is answered when that copy is
// applied, and its second copy, skipped, makes nothing more of it.
func TestProposalAnsweredOnItsWayToANewLeader(t *testing.T) {
	g := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}, nextSeq: 10}
	var answers []error
	p := &proposal{seq: 7, done: func(_ uint64, err error) { answers = append(answers, err) }}
	g.enlist(p)
	g.again = append(g.again, p) // the leader changed
	first := ord(1, 2, 7, 0, 0)
	if !g.admit(first, 100) {
		t.Fatal("the first copy was not applied")
	}
	g.answer(first, 100, nil)
	if len(answers) != 1 || len(g.again) != 0 || len(g.live) != 0 {
		t.Fatalf("answers %v, still to send %d, %d live", answers, len(g.again), len(g.live))
	}
	if g.admit(ord(1, 2, 7, 0, 1), 101) {
		t.Fatal("the second copy was applied")
	}
	g.propose(p) // handed in again: answered, so not sent
	if len(answers) != 1 || len(g.again) != 0 || len(g.waiters) != 0 {
		t.Fatalf("answered %d times, %d to send again", len(answers), len(g.again))
	}
}

// A member restoring a snapshot applies none of the entries it covers:
// its own proposals among them are answered from the table, and those
// behind one lost, or not reached yet, still wait.
func TestSnapshotAnswersTheProposalsItCovers(t *testing.T) {
	a := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}}
	for _, e := range []struct {
		t     tag
		apply bool
	}{
		{ord(1, 2, 1, 0, 0), true},
		{ord(1, 2, 2, 1, 0), true},
		{ord(1, 2, 4, 3, 0), false}, // 3 lost on its way
		{lead(1, 2, 5), true},
	} {
		if a.admit(e.t, e.t.seq) != e.apply {
			t.Fatalf("%+v: applied %v", e.t, !e.apply)
		}
	}
	table, _, err := unwrapSnapshot(a.wrapSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := table[proposer{1, 2, true}]; got.seq != 2 {
		t.Fatalf("table after the envelope: %+v", table)
	}
	b := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}, proposers: table}
	answered := map[uint64]error{}
	for _, seq := range []uint64{2, 3, 4, 5, 6} {
		p := &proposal{seq: seq, asLeader: seq >= 5, done: func(_ uint64, err error) { answered[seq] = err }}
		b.enlist(p)
		b.waiters[seq] = p
	}
	b.answerCovered(5)
	if _, ok := answered[2]; !ok || answered[2] != nil || answered[5] != nil || len(answered) != 2 || len(b.waiters) != 3 {
		t.Fatalf("answered %v, still waiting %d", answered, len(b.waiters))
	}
	if len(b.live) != 2 || b.live[0].seq != 3 {
		t.Fatalf("live after the snapshot: %d", len(b.live))
	}
}

// A leader's own decision (ProposeAsLeader) is never sent to another
// leader: at a change of leader or term, at its deadline, or overtaken,
// it is answered ErrNotLeader, while the proposals around it go again;
// and a member that does not lead refuses one at once.
func TestLeadersProposalIsNotSentToAnother(t *testing.T) {
	answered := func(g *Group, seq uint64) *error {
		var got error
		p := g.waiters[seq]
		p.asLeader = true
		p.done = func(_ uint64, err error) { got = err }
		return &got
	}
	t.Run("leader change", func(t *testing.T) {
		_, g := resendFixture(t)
		got := answered(g, 2)
		rd := raft.Ready{SoftState: &raft.SoftState{Lead: 3}, HardState: &raftpb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(1)}}
		if err := g.ready(rd); err != nil {
			t.Fatal(err)
		}
		g.proposeAgain()
		if !errors.Is(*got, ErrNotLeader) {
			t.Fatalf("answered %v", *got)
		}
		if seqs := heldSeqs(g); !slices.Equal(seqs, []uint64{1, 3, 4}) {
			t.Fatalf("sent again %v, want [1 3 4]", seqs)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		h, g := resendFixture(t)
		g.held = nil
		got := answered(g, 2)
		g.waiters[2].deadline = time.Now().Add(-time.Second)
		h.tick(map[uint64]*Group{5: g}, map[*Group]bool{})
		if !errors.Is(*got, ErrNotLeader) || len(g.held) != 0 {
			t.Fatalf("answered %v, sent again %v", *got, heldSeqs(g))
		}
	})
	t.Run("overtaken", func(t *testing.T) {
		_, g := resendFixture(t)
		g.host.runID = 9
		got := answered(g, 2)
		g.admit(lead(g.host.self, 9, 3), 10)
		g.proposeAgain()
		if !errors.Is(*got, ErrNotLeader) {
			t.Fatalf("answered %v", *got)
		}
	})
	t.Run("not leading", func(t *testing.T) {
		_, g := resendFixture(t)
		var got error
		g.propose(&proposal{seq: 9, asLeader: true, done: func(_ uint64, err error) { got = err }})
		if !errors.Is(got, ErrNotLeader) || g.waiters[9] != nil {
			t.Fatalf("answered %v", got)
		}
	})
}
