package cluster

import (
	"cmp"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
)

// A small group's proposals are tagged with who proposed them, so that
// the proposer hears its answer, a proposal sent twice is applied once,
// and what one proposer sends is applied in the order it sent it. A
// proposal handed to a leader that then lost its place may or may not be
// in the log: the proposer sends it again to the next leader rather than
// answer "no quorum" while a majority is there (a publisher would get a
// nack for a message that may yet be enqueued). Applying both copies
// would enqueue the message twice, and applying a proposal made after a
// lost one before it would reorder a publisher's messages, so every
// member keeps, per proposer, where its sequence stands:
//
//   - A proposer is a node's run of its groups' host (Groups.runID, random
//     at each start). Its proposals to a group are numbered 1, 2, 3 ...
//     in the order they are made (Group.nextSeq); a proposal sent again
//     keeps its number.
//   - Proposals are ordered, but for a leader's own decisions and changes
//     of members. Each copy of an ordered proposal names the one it
//     follows (prev): the proposal before it that the proposer still
//     waits for, or, with none, the last of the proposer's this member
//     applied. Every member keeps the number of the proposer's last
//     ordered proposal it applied, and applies an entry only if the entry
//     follows it. One numbered at or below it is a copy of one applied;
//     one that follows a proposal not applied yet came ahead of a copy
//     lost on its way. Both are skipped.
//   - The proposer, applying a copy of its own skipped for coming ahead,
//     sends everything ordered it still waits for again, in order (a
//     round), each naming what it follows then. Each copy carries its
//     round, and only a copy of the current round skipped starts another:
//     one loss costs one round, not one per proposal behind it.
//   - A proposal the proposer gave up on (no leader until its deadline:
//     ErrNoQuorum) leaves the chain: copies sent after that follow the
//     one before it. It may yet be applied if a copy of it is committed
//     before any that passes over it; after one has, it never can be.
//   - A leader's own decision (ProposeAsLeader) is applied if its number
//     is above the last such one of its proposer applied, and is never
//     sent again: one overtaken is answered ErrNotLeader. A change of
//     members carries its tag for its answer alone.
//   - A member that restores a snapshot applies none of the entries the
//     snapshot covers: its own proposals among them are answered from the
//     table (an ordered one at or below the last applied, a leader's
//     decision at the last), with no error; the machine's answer to them
//     is not known.
//   - The table is part of the group's state: a snapshot carries it
//     (snapshot envelope below), so a member restored from one skips
//     exactly what the others skip. It keeps the maxProposers sequences
//     applied last; one evicted has not proposed for longer than any copy
//     of its proposals can take to come back.
//
// An entry tag is node(8) | number(8) | run(8), the number's top bit set
// to tell it from the tags before runs (node(8) | number(8)), which are
// applied as they come, as they were. An ordered entry sets the next bit
// too and adds prev(8) | round(8). Entries tagged before ordered ones
// existed are read as a leader's decisions were, and so applied as they
// were then: above the last applied, whatever came between. A member of
// an earlier release would read an ordered entry's bit as part of its
// number: the transport's protocol version (2) keeps such a node out.

// taggedFlag marks a tag that carries its proposer's run, orderedFlag one
// that carries prev and round too.
const (
	taggedFlag  = 1 << 63
	orderedFlag = 1 << 62
)

// maxProposers bounds the proposer table of a group; maxHoles is what
// tables written before ordered entries held per proposer.
const (
	maxProposers = 64
	maxHoles     = 256
)

// proposer names a sequence of proposals: a node's run of its groups, and
// whether its ordered proposals or its leader's decisions.
type proposer struct {
	node, run uint64
	ordered   bool
}

// appliedBy is a sequence's highest number applied and the index of that
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
	ordered        bool
	prev, round    uint64 // an ordered one's
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
	t.run = binary.BigEndian.Uint64(data[16:])
	if t.seq&orderedFlag == 0 {
		t.seq &^= taggedFlag
		return t, data[24:], true
	}
	if len(data) < 40 {
		return tag{}, nil, false
	}
	t.seq &^= taggedFlag | orderedFlag
	t.ordered = true
	t.prev, t.round = binary.BigEndian.Uint64(data[24:]), binary.BigEndian.Uint64(data[32:])
	return t, data[40:], true
}

// appendTag is t's encoding followed by cmd.
func appendTag(t tag, cmd []byte) []byte {
	n := 24
	seq := t.seq | taggedFlag
	if t.ordered {
		n, seq = 40, seq|orderedFlag
	}
	data := make([]byte, n, n+len(cmd))
	binary.BigEndian.PutUint64(data, t.node)
	binary.BigEndian.PutUint64(data[8:], seq)
	binary.BigEndian.PutUint64(data[16:], t.run)
	if t.ordered {
		binary.BigEndian.PutUint64(data[24:], t.prev)
		binary.BigEndian.PutUint64(data[32:], t.round)
	}
	return append(data, cmd...)
}

// ordered says whether p is sent again until applied, in its place.
func (p *proposal) ordered() bool { return !p.asLeader && p.conf == nil }

// tagged is cmd behind the tag that names its proposer and its proposal,
// and for an ordered one what it follows now.
func (g *Group) tagged(p *proposal, cmd []byte) []byte {
	t := tag{node: g.host.self, seq: p.seq, run: g.host.runID, ordered: p.ordered()}
	if t.ordered {
		t.prev, t.round = g.prevOf(p), g.round
	}
	return appendTag(t, cmd)
}

// mine is this run's sequence of ordered proposals, or of leader's
// decisions.
func (g *Group) mine(ordered bool) proposer {
	return proposer{g.host.self, g.host.runID, ordered}
}

// prevOf is what an ordered copy of p follows: the proposal before it
// still waited for, or the last of this run's applied here.
func (g *Group) prevOf(p *proposal) uint64 {
	if i, _ := g.liveAt(p.seq); i > 0 {
		return g.live[i-1].seq
	}
	return g.proposers[g.mine(true)].seq
}

func (g *Group) liveAt(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(g.live, seq, func(q *proposal, seq uint64) int { return cmp.Compare(q.seq, seq) })
}

// enlist counts an ordered proposal among those waited for, once.
func (g *Group) enlist(p *proposal) {
	if !p.ordered() {
		return
	}
	if i, found := g.liveAt(p.seq); !found {
		g.live = slices.Insert(g.live, i, p)
	}
}

// finish answers p and takes it out of the chain; every answer the loop
// gives goes through it.
func (g *Group) finish(p *proposal, index uint64, err error) {
	p.finished = true
	if i, found := g.liveAt(p.seq); found && g.live[i] == p {
		if i == 0 {
			g.live[0] = nil
			g.live = g.live[1:]
		} else {
			g.live = slices.Delete(g.live, i, i+1)
		}
	}
	p.done(index, err)
}

// admit says whether the entry at index, tagged t, is to be applied, and
// records it as its sequence's last if so. It decides from the log and
// the table alone, as every member does; what it does besides, for this
// run's own proposals, only this member does.
func (g *Group) admit(t tag, index uint64) bool {
	if t.run == 0 {
		return true
	}
	k := proposer{t.node, t.run, t.ordered}
	mine := t.node == g.host.self && t.run == g.host.runID
	last := g.proposers[k]
	if t.seq <= last.seq {
		// A copy of one applied, or a leader's decision overtaken.
		if mine && !t.ordered {
			g.overtaken(func(seq uint64) bool { return seq == t.seq })
		}
		return false
	}
	if t.ordered && t.prev != last.seq {
		// It came ahead of one lost on its way (or of what it follows
		// as this member had not applied it yet, when it was sent).
		if mine && t.round == g.round {
			g.resendAll()
		}
		return false
	}
	g.record(k, appliedBy{t.seq, index})
	if mine && !t.ordered {
		g.overtaken(func(seq uint64) bool { return seq < t.seq })
	}
	return true
}

// record makes a the last of sequence k, evicting the sequence applied
// longest ago past maxProposers.
func (g *Group) record(k proposer, a appliedBy) {
	if g.proposers == nil {
		g.proposers = map[proposer]appliedBy{}
	}
	g.proposers[k] = a
	if len(g.proposers) <= maxProposers {
		return
	}
	var oldest proposer
	first := true
	for p, a := range g.proposers {
		if first || a.index < g.proposers[oldest].index {
			oldest, first = p, false
		}
	}
	delete(g.proposers, oldest)
}

// overtaken answers this run's leader's decisions still waited for that
// can no longer be applied.
func (g *Group) overtaken(lost func(seq uint64) bool) {
	for seq, p := range g.waiters {
		if p.asLeader && lost(seq) {
			delete(g.waiters, seq)
			g.finish(p, 0, ErrNotLeader)
		}
	}
}

// resendAll starts a round: every ordered proposal this run still waits
// for goes again, in order, after this Ready (proposeAgain), with those
// held for want of a leader.
func (g *Group) resendAll() {
	g.round++
	for seq, p := range g.waiters {
		if p.ordered() {
			delete(g.waiters, seq)
			g.again = append(g.again, p)
		}
	}
	g.again = append(g.again, g.held...)
	g.held = nil
}

// proposeAgain proposes what a round or a leader change left to send
// again, in the order of their numbers; the loop's, after a Ready.
func (g *Group) proposeAgain() {
	if len(g.again) == 0 {
		return
	}
	again := g.again
	g.again = nil
	slices.SortFunc(again, func(a, b *proposal) int { return cmp.Compare(a.seq, b.seq) })
	again = slices.CompactFunc(again, func(a, b *proposal) bool { return a == b })
	g.proposeAll(again)
}

// answerCovered answers this run's proposals a restored snapshot covers:
// applied, by the table, at index (the snapshot's); the loop's.
func (g *Group) answerCovered(index uint64) {
	ordered, leaders := g.proposers[g.mine(true)], g.proposers[g.mine(false)]
	covered := func(p *proposal) (bool, error) {
		switch {
		case p.ordered():
			return p.seq <= ordered.seq, nil
		case p.asLeader && p.seq == leaders.seq:
			return true, nil
		case p.asLeader && p.seq < leaders.seq:
			return true, ErrNotLeader
		}
		return false, nil
	}
	for seq, p := range g.waiters {
		if ok, err := covered(p); ok {
			delete(g.waiters, seq)
			g.finish(p, index, err)
		}
	}
	for _, list := range []*[]*proposal{&g.again, &g.held} {
		*list = slices.DeleteFunc(*list, func(p *proposal) bool {
			ok, err := covered(p)
			if ok {
				g.finish(p, index, err)
			}
			return ok
		})
	}
}

// A group's snapshot is the machine's behind an envelope that carries the
// proposer table:
//
//	0xF7 'W' 'G' 3 | uvarint n | n × (node(8) run(8) ordered(1) seq(8) index(8))
//	               | machine's snapshot
//
// Machines' snapshots begin with a small version byte, never 0xF7; a
// snapshot without the envelope (taken before it) has an empty table.
// The envelope before ordered entries (version 2) had no ordered byte and
// a list of holes after each index (uvarint count | count × uvarint
// (seq - hole)); its sequences are leaders' decisions, as their entries
// are read.
var envelopeMagic = []byte{0xF7, 'W', 'G', 3}

// wrapSnapshot puts the proposer table in front of the machine's data.
func (g *Group) wrapSnapshot(data []byte) []byte { return wrapTable(g.proposers, data) }

func wrapTable(table map[proposer]appliedBy, data []byte) []byte {
	b := append([]byte(nil), envelopeMagic...)
	keys := make([]proposer, 0, len(table))
	for k := range table {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b proposer) int {
		return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.run, b.run), cmp.Compare(boolByte(a.ordered), boolByte(b.ordered)))
	})
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		a := table[k]
		b = binary.BigEndian.AppendUint64(b, k.node)
		b = binary.BigEndian.AppendUint64(b, k.run)
		b = append(b, boolByte(k.ordered))
		b = binary.BigEndian.AppendUint64(b, a.seq)
		b = binary.BigEndian.AppendUint64(b, a.index)
	}
	return append(b, data...)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

var errBadEnvelope = errors.New("cluster: a group snapshot's proposer table is damaged")

// unwrapSnapshot splits a group's snapshot into its proposer table and
// the machine's data.
func unwrapSnapshot(b []byte) (map[proposer]appliedBy, []byte, error) {
	magic := len(envelopeMagic)
	if len(b) < magic || string(b[:magic-1]) != string(envelopeMagic[:magic-1]) {
		return nil, b, nil
	}
	version := b[magic-1]
	if version != 2 && version != 3 {
		return nil, nil, fmt.Errorf("cluster: a group snapshot's envelope of version %d, which this release does not know", version)
	}
	b = b[magic:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b))/32 {
		return nil, nil, errBadEnvelope
	}
	b = b[w:]
	table := make(map[proposer]appliedBy, n)
	for range n {
		if len(b) < 32+int(version-2) {
			return nil, nil, errBadEnvelope
		}
		k := proposer{node: binary.BigEndian.Uint64(b), run: binary.BigEndian.Uint64(b[8:])}
		b = b[16:]
		if version == 3 {
			if b[0] > 1 {
				return nil, nil, errBadEnvelope
			}
			k.ordered = b[0] == 1
			b = b[1:]
		}
		a := appliedBy{seq: binary.BigEndian.Uint64(b), index: binary.BigEndian.Uint64(b[8:])}
		b = b[16:]
		if version == 2 {
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
				b = b[w:]
			}
		}
		table[k] = a
	}
	return table, b, nil
}
