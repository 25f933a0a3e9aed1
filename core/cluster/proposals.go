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
//     at each start), and its proposals are numbered in the order it
//     hands them to Raft; a proposal sent again keeps its number.
//   - Every member keeps, per proposer, the highest number it applied,
//     and skips an entry whose number is not above it: a copy of one
//     applied, or one that an entry proposed after it overtook (lost on
//     its way, and sent again after the later one was appended).
//   - The proposer, seeing an entry of its own applied, knows that those
//     it proposed before and still waits for can no longer be: it
//     proposes them again, under new numbers (they come after the later
//     one: such a loss reorders, it never duplicates nor drops).
//   - The table is part of the group's state: a snapshot carries it
//     (snapshot envelope below), so a member restored from one skips
//     exactly what the others skip. It keeps the maxProposers proposers
//     applied last; one evicted has not proposed for longer than any
//     copy of its proposals can take to come back.
//
// An entry tag is node(8) | number(8) | run(8), the number's top bit set
// to tell it from the tags before runs (node(8) | number(8)), which are
// applied as they come, as they were.

// taggedFlag marks a tag that carries its proposer's run.
const taggedFlag = 1 << 63

// maxProposers bounds the proposer table of a group.
const maxProposers = 64

// proposer names the run of a node's groups that proposed an entry.
type proposer struct{ node, run uint64 }

// applied is a proposer's highest number applied, and the index of that
// entry (which decides evictions).
type appliedBy struct{ seq, index uint64 }

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
	if last, ok := g.proposers[k]; ok && t.seq <= last.seq {
		if mine {
			g.overtaken(func(seq uint64) bool { return seq == t.seq })
		}
		return false
	}
	if g.proposers == nil {
		g.proposers = map[proposer]appliedBy{}
	}
	g.proposers[k] = appliedBy{t.seq, index}
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
		if p.renumber {
			p.renumber = false
			g.host.mu.Lock()
			g.host.seq++
			p.seq = g.host.seq
			g.host.mu.Unlock()
		}
		g.propose(p)
	}
}

// A group's snapshot is the machine's behind an envelope that carries the
// proposer table:
//
//	0xF7 'W' 'G' 1 | uvarint n | n × (node(8) run(8) seq(8) index(8)) | machine's snapshot
//
// Machines' snapshots begin with a small version byte, never 0xF7; a
// snapshot without the envelope (taken before it) has an empty table.
var envelopeMagic = []byte{0xF7, 'W', 'G', 1}

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
		k := proposer{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
		table[k] = appliedBy{binary.BigEndian.Uint64(b[16:]), binary.BigEndian.Uint64(b[24:])}
		b = b[32:]
	}
	return table, b, nil
}
