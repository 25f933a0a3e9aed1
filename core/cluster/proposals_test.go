package cluster

import (
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

// entryOf is a normal entry at index carrying cmd under tag t (the new
// format when t.run is set, the one from before runs otherwise).
func entryOf(index uint64, t tag, cmd string) *raftpb.Entry {
	var data []byte
	if t.run != 0 {
		data = make([]byte, 24)
		putTag(data, t.node, t.seq|taggedFlag, t.run)
	} else {
		data = make([]byte, 16)
		putTag(data, t.node, t.seq, 0)
	}
	data = append(data, cmd...)
	return &raftpb.Entry{Index: &index, Type: raftpb.EntryNormal.Enum(), Data: data}
}

func putTag(b []byte, node, seq, run uint64) {
	for i := range 8 {
		b[7-i] = byte(node >> (8 * i))
		b[15-i] = byte(seq >> (8 * i))
		if len(b) >= 24 {
			b[23-i] = byte(run >> (8 * i))
		}
	}
}

// The proposer table's rules, entry by entry, on members that apply the
// same log: a copy is skipped, an overtaken one is skipped, a tag from
// before runs is always applied, and a snapshot's table skips on the
// member restored from it exactly what the others skip.
func TestProposerTableSkipsCopies(t *testing.T) {
	const me, other, run, run2 = 7, 9, 11, 12
	log := []struct {
		t     tag
		apply bool
	}{
		{tag{me, 1, run}, true},
		{tag{me, 1, run}, false}, // a copy, sent again after a leader change
		{tag{other, 5, run2}, true},
		{tag{me, 3, run}, true},
		{tag{me, 2, run}, false}, // overtaken by 3
		{tag{other, 5, run2}, false},
		{tag{other, 4, 0}, true}, // before runs: as it comes
		{tag{other, 4, 0}, true},
		{tag{me, 1, run + 100}, true}, // another run of the same node
		{tag{me, 4, run}, true},
	}
	newGroup := func() *Group {
		return &Group{host: &Groups{self: me, runID: run}, waiters: map[uint64]*proposal{}}
	}
	a, b := newGroup(), newGroup()
	for i, step := range log {
		e := entryOf(uint64(i+1), step.t, fmt.Sprint("c", i))
		got, _, ok := entryTag(e)
		if !ok || got != step.t {
			t.Fatalf("entry %d: tag %+v, want %+v", i+1, got, step.t)
		}
		if admitted := a.admit(got, uint64(i+1)); admitted != step.apply {
			t.Fatalf("entry %d (%+v): applied %v, want %v", i+1, step.t, admitted, step.apply)
		}
		if i == 4 {
			// b is restored from a's snapshot here, and goes on from it.
			table, data, err := unwrapSnapshot(a.wrapSnapshot([]byte("machine")))
			if err != nil || string(data) != "machine" {
				t.Fatalf("envelope: %v, %q", err, data)
			}
			b.proposers = table
			continue
		}
		if i > 4 {
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
}

// An entry of this run's applied makes the proposals it overtook
// proposed again, under new numbers; a waiter's own copy skipped is too.
func TestOvertakenProposalsAreProposedAgain(t *testing.T) {
	g := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}, nextSeq: 10}
	for _, seq := range []uint64{3, 4, 6} {
		g.waiters[seq] = &proposal{seq: seq}
	}
	if !g.admit(tag{1, 5, 2}, 1) {
		t.Fatal("5 not applied")
	}
	var again []uint64
	for _, p := range g.again {
		again = append(again, p.seq)
	}
	slices.Sort(again)
	if !slices.Equal(again, []uint64{3, 4}) || len(g.waiters) != 1 || g.waiters[6] == nil {
		t.Fatalf("overtaken %v, waiting %v", again, g.waiters)
	}
	for _, p := range g.again {
		if !p.renumber {
			t.Fatalf("%d overtaken and not renumbered", p.seq)
		}
	}
}

// A proposal handed to Raft twice (as a resend after a leader change
// does) is applied once on every member, and answered once.
func TestGroupAppliesAResendOnce(t *testing.T) {
	nodes := threeNodes(t, nil)
	ids := []uint64{nodes[0].ID(), nodes[1].ID(), nodes[2].ID()}
	var members []*Group
	var machines []*groupJournal
	for i, n := range nodes {
		m := &groupJournal{every: 3}
		g, err := n.Groups().Start(GroupConfig{ID: 200, Members: ids, Campaign: i == 0, Log: memLog{raft.NewMemoryStorage()}, Machine: m})
		if err != nil {
			t.Fatal(err)
		}
		members, machines = append(members, g), append(machines, m)
	}
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

// At the deadline of one proposal, those sent after it go again with it,
// behind it: at their own deadlines, what the proposer sent once the
// first was answered would overtake them.
func TestProposalDeadlineSendsTheLaterOnesAgainToo(t *testing.T) {
	h, g := resendFixture(t)
	g.held = nil
	g.waiters[2].deadline = time.Now().Add(-time.Second)
	h.tick(map[uint64]*Group{5: g}, map[*Group]bool{})
	if got := heldSeqs(g); !slices.Equal(got, []uint64{2, 3}) {
		t.Fatalf("sent again %v, want [2 3]", got)
	}
	if _, ok := g.waiters[1]; !ok {
		t.Fatal("the one sent before, not due, was sent again")
	}
}

// A proposal on its way to a new leader (after a leader change) whose
// first copy the old leader had committed is answered when that copy is
// applied, and its second copy, skipped, makes nothing more of it.
func TestProposalAnsweredOnItsWayToANewLeader(t *testing.T) {
	g := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}, nextSeq: 10}
	var answers []error
	p := &proposal{seq: 7, done: func(_ uint64, err error) { answers = append(answers, err) }}
	g.again = append(g.again, p) // the leader changed
	first := tag{1, 7, 2}
	if !g.admit(first, 100) {
		t.Fatal("the first copy was not applied")
	}
	g.answer(first, 100, nil)
	if len(answers) != 1 || len(g.again) != 0 {
		t.Fatalf("answers %v, still to send %d", answers, len(g.again))
	}
	if g.admit(first, 101) {
		t.Fatal("the second copy was applied")
	}
	if len(answers) != 1 || len(g.again) != 0 {
		t.Fatalf("answered %d times, %d to send again", len(answers), len(g.again))
	}
}

// A member restoring a snapshot applies none of the entries it covers:
// its own proposals among them are answered from the table, and those the
// table says were overtaken (holes) or not reached yet still wait.
func TestSnapshotAnswersTheProposalsItCovers(t *testing.T) {
	a := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}}
	for _, seq := range []uint64{1, 2, 4, 5} { // 3 lost on its way
		if !a.admit(tag{1, seq, 2}, seq) {
			t.Fatalf("%d not applied", seq)
		}
	}
	table, _, err := unwrapSnapshot(a.wrapSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := table[proposer{1, 2}]; got.seq != 5 || !slices.Equal(got.holes, []uint64{3}) {
		t.Fatalf("table after the envelope: %+v", got)
	}
	b := &Group{host: &Groups{self: 1, runID: 2}, waiters: map[uint64]*proposal{}, proposers: table}
	answered := map[uint64]bool{}
	for _, seq := range []uint64{2, 3, 4, 6} {
		b.waiters[seq] = &proposal{seq: seq, done: func(_ uint64, err error) {
			if err != nil {
				t.Fatalf("%d answered %v", seq, err)
			}
			answered[seq] = true
		}}
	}
	b.answerCovered(5)
	if !answered[2] || !answered[4] || answered[3] || answered[6] || len(b.waiters) != 2 {
		t.Fatalf("answered %v, still waiting %d", answered, len(b.waiters))
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
		g.admit(tag{g.host.self, 3, 9}, 10)
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
