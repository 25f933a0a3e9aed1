package cluster

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// entryCache keeps a small group's entries from when they are saved until
// they are applied, so that Raft reading them back to commit and apply
// them (its Ready hands committed entries out of the Storage) costs no
// store read. Raft calls a group's Storage only on the groups' loop, and
// Save runs while the loop waits for it, so the cache needs no lock.
// Entries it does not hold (older ones a lagging follower needs) come
// from the log underneath.
//
// Entries hands out slices of ents' array, which Raft keeps (in messages
// on their way to followers, in a Ready being applied): no slot of the
// array that was ever handed out is written again. Forgetting reslices
// or drops the array, and a rewrite of a suffix appends to a clipped
// slice, which copies.
type entryCache struct {
	LogStore
	ents []*raftpb.Entry // consecutive indexes; ents[0] is the oldest held
}

// Save saves through to the log, then holds the new entries.
func (c *entryCache) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	if err := c.LogStore.Save(hs, ents, snap); err != nil {
		c.ents = nil
		return err
	}
	if !raft.IsEmptySnap(snap) {
		c.ents = nil
	}
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	if len(c.ents) > 0 {
		held := c.ents[0].GetIndex()
		switch next := held + uint64(len(c.ents)); {
		case first < held || first > next:
			c.ents = nil // a gap, or a rewrite of what it no longer holds
		default:
			c.ents = slices.Clip(c.ents[:first-held]) // a conflicting suffix goes
		}
	}
	c.ents = append(c.ents, ents...)
	return nil
}

// held returns the held entries [lo, hi), if it holds them all.
func (c *entryCache) held(lo, hi uint64) ([]*raftpb.Entry, bool) {
	if len(c.ents) == 0 || lo >= hi {
		return nil, false
	}
	first := c.ents[0].GetIndex()
	if lo < first || hi > first+uint64(len(c.ents)) {
		return nil, false
	}
	return c.ents[lo-first : hi-first], true
}

// Entries serves [lo, hi) from what it holds, as raft.Storage: at least
// one entry, then as many as fit in maxSize.
func (c *entryCache) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	ents, ok := c.held(lo, hi)
	if !ok {
		return c.LogStore.Entries(lo, hi, maxSize)
	}
	size := uint64(proto.Size(ents[0]))
	n := 1
	for ; n < len(ents); n++ {
		size += uint64(proto.Size(ents[n]))
		if size > maxSize {
			break
		}
	}
	return ents[:n:n], nil
}

// Term answers from what it holds when it can.
func (c *entryCache) Term(i uint64) (uint64, error) {
	if ents, ok := c.held(i, i+1); ok {
		return ents[0].GetTerm(), nil
	}
	return c.LogStore.Term(i)
}

// forget lets go of the entries up to applied; not before Raft's Advance
// for the Ready that handed them out, which reads them.
func (c *entryCache) forget(applied uint64) {
	if len(c.ents) == 0 {
		return
	}
	first := c.ents[0].GetIndex()
	if applied < first {
		return
	}
	n := applied - first + 1
	if n >= uint64(len(c.ents)) {
		c.ents = nil
		return
	}
	c.ents = c.ents[n:]
}
