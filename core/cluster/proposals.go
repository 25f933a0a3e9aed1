package cluster

import (
	"cmp"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// A small group's proposals are tagged with who proposed them, so that
// the proposer hears its answer and a proposal sent twice is applied
// once. A proposal handed to a leader that then lost its place may or
// may not be in the log: the proposer sends it again to the next leader
// rather than answer "no quorum" while a majority is there (a publisher
// would get a nack for a message that may yet be enqueued). Applying
// both copies would enqueue the message twice, so the group skips the
// second:
//
//   - A proposer is a node's run of its groups' host (Groups.runID, random
//     at each start), and its proposals to a group are numbered 1, 2, 3
//     ... in the order it hands them to Raft (Group.nextSeq); a proposal
//     sent again keeps its number.
//   - Every member keeps, per proposer, the highest number it applied and
//     the numbers below it it skipped over (holes: proposals lost on
//     their way, that a later one overtook), and skips an entry whose
//     number is not above the highest: a copy of one applied, or one
//     overtaken, which comes late.
//   - The proposer, seeing an entry of its own applied, knows that those
//     it proposed before and still waits for can no longer be: it
//     proposes them again, under new numbers (they come after the later
//     one: such a loss reorders, it never duplicates nor drops).
//   - A member that restores a snapshot applies none of the entries the
//     snapshot covers: its own proposals among them are answered from the
//     table (applied: at or below the highest and not a hole), with no
//     error; the machine's answer to them is not known.
//   - The table is part of the group's state: a snapshot carries it
//     (snapshot envelope below), so a member restored from one skips
//     exactly what the others skip. It keeps the maxProposers proposers
//     applied last, and each the maxHoles holes found last; one evicted
//     has not proposed for longer than any copy of its proposals can take
//     to come back.
//
// An entry tag is node(8) | number(8) | run(8), the number's top bit set
// to tell it from the tags before runs (node(8) | number(8)), which are
// applied as they come, as they were.

// taggedFlag marks a tag that carries its proposer's run.
const taggedFlag = 1 << 63

// maxProposers bounds the proposer table of a group, maxHoles a
// proposer's holes.
const (
	maxProposers = 64
	maxHoles     = 256
)

// proposer names the run of a node's groups that proposed an entry.
type proposer struct{ node, run uint64 }

// appliedBy is a proposer's highest number applied, the index of that
// entry (which decides evictions), and the numbers below it never
// applied, in order.
type appliedBy struct {
	seq, index uint64
	holes      []uint64
}

// applied says whether the proposal numbered seq was applied.
func (a appliedBy) applied(seq uint64) bool {
	_, hole := slices.BinarySearch(a.holes, seq)
	return seq <= a.seq && !hole
}

// newRun is a random, non-zero id for this run of a node's groups.
func newRun() uint64 {
	var b [8]byte
	for {
		_, _ = crand.Read(b[:])
		if r := binary.BigEndian.Uint64(b[:]); r != 0 {
			return r
		}
	}
}

// tag is what an entry says of its proposal.
type tag struct {
	node, seq, run uint64 // run 0: a tag from before runs
}

// entryTag parses a normal entry's tag and returns it with the machine's
// command; ok is false for Raft's own empty entries.
func entryTag(e *raftpb.Entry) (t tag, cmd []byte, ok bool) {
	if e.GetType() != raftpb.EntryNormal {
		return tag{}, nil, false
	}
	return parseTag(e.GetData())
}

// parseTag reads the tag at the front of data (an entry's, or a change
// of members' context) and returns it with what follows.
func parseTag(data []byte) (t tag, rest []byte, ok bool) {
	if len(data) < 16 {
		return tag{}, nil, false
	}
	t.node, t.seq = binary.BigEndian.Uint64(data), binary.BigEndian.Uint64(data[8:])
	if t.seq&taggedFlag == 0 {
		return t, data[16:], true
	}
	if len(data) < 24 {
		return tag{}, nil, false
	}
	t.seq &^= taggedFlag
	t.run = binary.BigEndian.Uint64(data[16:])
	return t, data[24:], true
}

// tagged is cmd behind the tag that names its proposer and its proposal.
func (g *Group) tagged(p *proposal, cmd []byte) []byte {
	data := make([]byte, 24, 24+len(cmd))
	binary.BigEndian.PutUint64(data, g.host.self)
	binary.BigEndian.PutUint64(data[8:], p.seq|taggedFlag)
	binary.BigEndian.PutUint64(data[16:], g.host.runID)
	return append(data, cmd...)
}

// admit says whether the entry at index, tagged t, is to be applied, and
// records it as its proposer's highest if so. One skipped that this run
// proposed and still waits for is proposed again under a new number;
// one applied makes the earlier ones still waited for proposed again.
func (g *Group) admit(t tag, index uint64) bool {
	if t.run == 0 {
		return true
	}
	k := proposer{t.node, t.run}
	mine := k == proposer{g.host.self, g.host.runID}
	last := g.proposers[k]
	if t.seq <= last.seq {
		if mine {
			g.overtaken(func(seq uint64) bool { return seq == t.seq })
		}
		return false
	}
	if g.proposers == nil {
		g.proposers = map[proposer]appliedBy{}
	}
	holes := last.holes
	for n := max(last.seq+1, t.seq-min(t.seq, maxHoles)); n < t.seq; n++ {
		holes = append(holes, n)
	}
	if len(holes) > maxHoles {
		holes = slices.Clone(holes[len(holes)-maxHoles:])
	}
	g.proposers[k] = appliedBy{t.seq, index, holes}
	if len(g.proposers) > maxProposers {
		var oldest proposer
		first := true
		for p, a := range g.proposers {
			if first || a.index < g.proposers[oldest].index {
				oldest, first = p, false
			}
		}
		delete(g.proposers, oldest)
	}
	if mine {
		g.overtaken(func(seq uint64) bool { return seq < t.seq })
	}
	return true
}

// overtaken takes the waiting proposals of this run that can no longer
// be applied out of the waiters, to be proposed again under new numbers.
func (g *Group) overtaken(lost func(seq uint64) bool) {
	for seq, p := range g.waiters {
		if lost(seq) {
			delete(g.waiters, seq)
			p.renumber = true
			g.again = append(g.again, p)
		}
	}
	for _, p := range g.again {
		if lost(p.seq) {
			p.renumber = true
		}
	}
}

// proposeAgain proposes what a leader change or an overtaking left to
// send again, in the order of their numbers; the loop's, after a Ready.
func (g *Group) proposeAgain() {
	if len(g.again) == 0 {
		return
	}
	again := g.again
	g.again = nil
	slices.SortFunc(again, func(a, b *proposal) int { return cmp.Compare(a.seq, b.seq) })
	for _, p := range again {
		if p.renumber && p.asLeader {
			// Overtaken, so lost: a leader's decision is made afresh.
			p.done(0, ErrNotLeader)
			continue
		}
		if p.renumber {
			p.renumber = false
			g.host.mu.Lock()
			g.nextSeq++
			p.seq = g.nextSeq
			g.host.mu.Unlock()
		}
		g.propose(p)
	}
}

// answerCovered answers this run's proposals a restored snapshot covers:
// applied, by the table, at index (the snapshot's); the loop's.
func (g *Group) answerCovered(index uint64) {
	a, ok := g.proposers[proposer{g.host.self, g.host.runID}]
	if !ok {
		return
	}
	for seq, p := range g.waiters {
		if a.applied(seq) {
			delete(g.waiters, seq)
			p.done(index, nil)
		}
	}
	for _, list := range []*[]*proposal{&g.again, &g.held} {
		*list = slices.DeleteFunc(*list, func(p *proposal) bool {
			if a.applied(p.seq) {
				p.done(index, nil)
				return true
			}
			return false
		})
	}
}

// A group's snapshot is the machine's behind an envelope that carries the
// proposer table:
//
//	0xF7 'W' 'G' 2 | uvarint n | n × (node(8) run(8) seq(8) index(8)
//	                 uvarint holes | holes × uvarint (seq - hole)) | machine's snapshot
//
// Machines' snapshots begin with a small version byte, never 0xF7; a
// snapshot without the envelope (taken before it) has an empty table.
var envelopeMagic = []byte{0xF7, 'W', 'G', 2}

// wrapSnapshot puts the proposer table in front of the machine's data.
func (g *Group) wrapSnapshot(data []byte) []byte { return wrapTable(g.proposers, data) }

func wrapTable(table map[proposer]appliedBy, data []byte) []byte {
	b := append([]byte(nil), envelopeMagic...)
	keys := make([]proposer, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b proposer) int { return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.run, b.run)) })
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		a := table[k]
		b = binary.BigEndian.AppendUint64(b, k.node)
		b = binary.BigEndian.AppendUint64(b, k.run)
		b = binary.BigEndian.AppendUint64(b, a.seq)
		b = binary.BigEndian.AppendUint64(b, a.index)
		b = binary.AppendUvarint(b, uint64(len(a.holes)))
		for _, h := range a.holes {
			b = binary.AppendUvarint(b, a.seq-h)
		}
	}
	return append(b, data...)
}

var errBadEnvelope = errors.New("cluster: a group snapshot's proposer table is damaged")

// unwrapSnapshot splits a group's snapshot into its proposer table and
// the machine's data.
func unwrapSnapshot(b []byte) (map[proposer]appliedBy, []byte, error) {
	if len(b) < len(envelopeMagic) || string(b[:len(envelopeMagic)]) != string(envelopeMagic) {
		return nil, b, nil
	}
	b = b[len(envelopeMagic):]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b))/32 {
		return nil, nil, errBadEnvelope
	}
	b = b[w:]
	table := make(map[proposer]appliedBy, n)
	for range n {
		if len(b) < 32 {
			return nil, nil, errBadEnvelope
		}
		k := proposer{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
		a := appliedBy{seq: binary.BigEndian.Uint64(b[16:]), index: binary.BigEndian.Uint64(b[24:])}
		b = b[32:]
		holes, w := binary.Uvarint(b)
		if w <= 0 || holes > maxHoles {
			return nil, nil, errBadEnvelope
		}
		b = b[w:]
		for range holes {
			d, w := binary.Uvarint(b)
			if w <= 0 || d == 0 || d > a.seq {
				return nil, nil, errBadEnvelope
			}
			a.holes = append(a.holes, a.seq-d)
			b = b[w:]
		}
		table[k] = a
	}
	return table, b, nil
}
