package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ErrRaftLogDeleted is what a RaftLog answers once DeleteRaftLog removed
// its group: the group's raft node must be stopped by then.
var ErrRaftLogDeleted = errors.New("storage: raft log deleted")

// RaftLog is one Raft group's log, hard state and snapshot in the store. It
// implements raft.Storage with raft.MemoryStorage's semantics (the dummy
// entry at the compaction point, ErrCompacted, ErrUnavailable,
// ErrSnapOutOfDate, maxSize), and Save persists what a raft.Ready asks to
// persist. Where MemoryStorage panics (an index past the last one, a gap
// in appended entries) a RaftLog returns an error instead.
//
// The first and last index, their terms, the hard state, the snapshot's
// index and conf state and the size are held in memory, so those answers
// cost no disk read; entries, the other terms and the snapshot's data are
// read from Pebble.
//
// Locking. raft calls the Storage methods on its own goroutine while the
// node's goroutine runs Save, so:
//
//   - Writers (Save, CreateSnapshot, Compact, DeleteRaftLog) hold wmu: they
//     run one at a time, and each computes the next state from the current
//     one, which only they change.
//   - mu guards the in-memory state. Readers hold it shared for the whole
//     call, Pebble reads included, so what they read from disk matches the
//     bounds they checked. A writer takes it exclusively to publish the new
//     state once its batch is durable; and for its whole commit when the
//     batch changes entries that exist (a conflicting suffix, a snapshot, a
//     compaction), so that no reader sees them half-changed.
//   - A Save that only appends after the last index and sets the hard state
//     (raft's usual Ready) commits without mu: readers never look past the
//     last index they know, so raft's reads do not wait for its fsync.
type RaftLog struct {
	s     *Store
	group uint64

	wmu     lockorder.Mutex[lockorder.StorageRaftLogWriters]
	mu      lockorder.RWMutex[lockorder.StorageRaftLog]
	st      raftState
	deleted bool // by DeleteRaftLog (set under wmu and mu)

	applied atomic.Uint64 // SetApplied's last index
}

// The raft node takes a RaftLog as its Storage.
var _ raft.Storage = (*RaftLog)(nil)

// raftState is a RaftLog's in-memory state: what the disk holds once every
// write that returned is applied.
type raftState struct {
	// offset is the index of the dummy entry (MemoryStorage's ents[0]): the
	// snapshot's index or the last compacted one. Entries are offset+1..last.
	offset, offsetTerm uint64
	last, lastTerm     uint64
	// dummyStored: the dummy entry is on disk. A new group's dummy (index
	// 0, term 0) is written with its first entries; without it a log
	// starting at 1 could not be told from one compacted up to 1.
	dummyStored bool
	hs          *raftpb.HardState // nil: none saved
	// hsUnsaved: hs moved only its commit index since it was written,
	// and goes to disk with the log's next write (Save).
	hsUnsaved bool
	snapIndex uint64
	conf      *raftpb.ConfState // the snapshot's; never nil
	bytes     uint64            // keys and values of the entries offset+1..last
}

// raftLogs are the RaftLogs a store handed out: one per group, so that no
// two in-memory states of a group can drift apart.
type raftLogs struct {
	mu lockorder.Mutex[lockorder.StorageRaftLogs]
	m  map[uint64]*RaftLog
}

// RaftLog returns group's log, reading its state from disk the first time
// (a group never written is empty). Later calls return the same RaftLog
// until DeleteRaftLog.
func (s *Store) RaftLog(group uint64) (*RaftLog, error) {
	s.raftLogs.mu.Lock()
	defer s.raftLogs.mu.Unlock()
	if l := s.raftLogs.m[group]; l != nil {
		return l, nil
	}
	l := &RaftLog{s: s, group: group}
	if err := l.load(); err != nil {
		return nil, fmt.Errorf("storage: raft group %d: %w", group, err)
	}
	if s.raftLogs.m == nil {
		s.raftLogs.m = make(map[uint64]*RaftLog)
	}
	s.raftLogs.m[group] = l
	return l, nil
}

// DeleteRaftLog removes every key of group with one durable range deletion.
// A RaftLog of the group answers ErrRaftLogDeleted afterwards; RaftLog
// opens the group anew, empty.
func (s *Store) DeleteRaftLog(group uint64) error {
	s.raftLogs.mu.Lock()
	defer s.raftLogs.mu.Unlock()
	l := s.raftLogs.m[group]
	if l != nil {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	t := s.Begin()
	lo, hi := raftGroupSpan(group)
	t.b.DeleteRange(lo, hi, nil)
	if err := t.CommitWait(); err != nil {
		return err
	}
	if l != nil {
		l.deleted = true
		delete(s.raftLogs.m, group)
	}
	return nil
}

// load reads the group's state from disk.
func (l *RaftLog) load() error {
	st := &l.st
	hs := &raftpb.HardState{}
	if found, err := l.getProto(raftHardState, hs); err != nil {
		return fmt.Errorf("hard state: %w", err)
	} else if found {
		st.hs = hs
	}
	snap, err := l.readSnapshot()
	if err != nil {
		return err
	}
	if _, err := l.get(raftKey(l.group, raftApplied), func(v []byte) error {
		if len(v) != 8 {
			return errors.New("applied index: not 8 bytes")
		}
		l.applied.Store(binary.BigEndian.Uint64(v))
		return nil
	}); err != nil {
		return err
	}
	md := snap.GetMetadata()
	st.snapIndex, st.conf = md.GetIndex(), md.GetConfState()
	if st.hs != nil && st.hs.GetCommit() < st.snapIndex {
		// The commit index is written late (Save), and a snapshot holds
		// only what was committed: Raft refuses a commit index below it.
		c := st.snapIndex
		st.hs.Commit = &c
	}
	st.offset, st.offsetTerm = md.GetIndex(), md.GetTerm()
	st.last, st.lastTerm = st.offset, st.offsetTerm
	return l.scan(0, 1<<64-1, func(index uint64, v []byte) (bool, error) {
		term, err := entryTerm(v)
		if err != nil {
			return false, fmt.Errorf("entry %d: %w", index, err)
		}
		switch {
		case !st.dummyStored:
			st.offset, st.offsetTerm, st.dummyStored = index, term, true
		case index != st.last+1:
			return false, fmt.Errorf("entries %d to %d are missing", st.last+1, index-1)
		default:
			st.bytes += entryBytes(v)
		}
		st.last, st.lastTerm = index, term
		return true, nil
	})
}

// get calls fn with the value of key; found is false if there is none.
func (l *RaftLog) get(key []byte, fn func(v []byte) error) (found bool, err error) {
	done, err := l.s.read()
	if err != nil {
		return false, err
	}
	defer done()
	v, closer, err := l.s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	return true, fn(v)
}

// getProto reads the group's key of kind (raftHardState or raftSnapshot)
// into m.
func (l *RaftLog) getProto(kind byte, m proto.Message) (found bool, err error) {
	return l.get(raftKey(l.group, kind), func(v []byte) error { return proto.Unmarshal(v, m) })
}

func (l *RaftLog) readSnapshot() (*raftpb.Snapshot, error) {
	snap := &raftpb.Snapshot{}
	if _, err := l.getProto(raftSnapshot, snap); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return raftpb.EnsureSnapshot(snap), nil
}

// scan calls fn with the entries of index lo <= i < hi in order until fn
// returns false or an error. v is valid only during the call.
func (l *RaftLog) scan(lo, hi uint64, fn func(index uint64, v []byte) (bool, error)) error {
	done, err := l.s.read()
	if err != nil {
		return err
	}
	defer done()
	return l.s.iterate(raftEntryKey(l.group, lo), l.entriesEnd(hi), func(k, v []byte) (bool, error) {
		_, _, index, ok := parseRaftKey(k)
		if !ok {
			return false, fmt.Errorf("storage: malformed raft key %q", k)
		}
		return fn(index, v)
	})
}

// entriesEnd is the upper bound of the entries below index hi; hi of 1<<64-1
// means all of them.
func (l *RaftLog) entriesEnd(hi uint64) []byte {
	if hi == 1<<64-1 {
		return raftKey(l.group, raftEntries+1)
	}
	return raftEntryKey(l.group, hi)
}

// entryBytes is what an entry counts in Size: its key and value.
func entryBytes(v []byte) uint64 { return uint64(raftEntryKeyLen + len(v)) }

// entryTerm reads the Term field (2) of a marshalled raftpb.Entry without
// decoding the rest.
func entryTerm(v []byte) (uint64, error) {
	var term uint64
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		v = v[n:]
		if num == 2 && typ == protowire.VarintType {
			term, n = protowire.ConsumeVarint(v)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, v)
		}
		if n < 0 {
			return 0, protowire.ParseError(n)
		}
		v = v[n:]
	}
	return term, nil
}

// rlock takes mu shared unless the group was deleted.
func (l *RaftLog) rlock() error {
	l.mu.RLock()
	if l.deleted {
		l.mu.RUnlock()
		return ErrRaftLogDeleted
	}
	return nil
}

// InitialState returns the saved hard state (nil if none was) and the conf
// state of the snapshot (empty if there is none).
func (l *RaftLog) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	if err := l.rlock(); err != nil {
		return nil, nil, err
	}
	defer l.mu.RUnlock()
	var hs *raftpb.HardState
	if l.st.hs != nil {
		hs = proto.Clone(l.st.hs).(*raftpb.HardState)
	}
	return hs, raftpb.EnsureConfState(proto.Clone(l.st.conf).(*raftpb.ConfState)), nil
}

// Entries returns the entries [lo, hi), read from disk, as many as fit in
// maxSize bytes (marshalled) but at least one. The caller owns them.
func (l *RaftLog) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	if err := l.rlock(); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	st := &l.st
	switch {
	case lo <= st.offset:
		return nil, raft.ErrCompacted
	case hi > st.last+1:
		return nil, fmt.Errorf("storage: raft group %d: entries [%d, %d) past the last index %d", l.group, lo, hi, st.last)
	case st.last == st.offset:
		return nil, raft.ErrUnavailable
	case lo > hi:
		return nil, fmt.Errorf("storage: raft group %d: entries [%d, %d): bounds reversed", l.group, lo, hi)
	}
	ents := make([]*raftpb.Entry, 0, min(hi-lo, 64))
	var size uint64
	full := false
	err := l.scan(lo, hi, func(index uint64, v []byte) (bool, error) {
		if want := lo + uint64(len(ents)); index != want {
			return false, fmt.Errorf("storage: raft group %d: entry %d is missing: %w", l.group, want, raft.ErrUnavailable)
		}
		// As raft's limitSize: the first entry whatever its size.
		if size += uint64(len(v)); size > maxSize && len(ents) > 0 {
			full = true
			return false, nil
		}
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return false, fmt.Errorf("storage: raft group %d: entry %d: %w", l.group, index, err)
		}
		ents = append(ents, e)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if n := lo + uint64(len(ents)); n < hi && !full {
		return nil, fmt.Errorf("storage: raft group %d: entry %d is missing: %w", l.group, n, raft.ErrUnavailable)
	}
	return ents, nil
}

// Term returns the term of entry i, for offset <= i <= last.
func (l *RaftLog) Term(i uint64) (uint64, error) {
	if err := l.rlock(); err != nil {
		return 0, err
	}
	defer l.mu.RUnlock()
	return l.term(&l.st, i)
}

// term answers Term from st: from memory at either end of the log, from
// disk in between.
func (l *RaftLog) term(st *raftState, i uint64) (uint64, error) {
	switch {
	case i < st.offset:
		return 0, raft.ErrCompacted
	case i > st.last:
		return 0, raft.ErrUnavailable
	case i == st.offset:
		return st.offsetTerm, nil
	case i == st.last:
		return st.lastTerm, nil
	}
	var term uint64
	found, err := l.get(raftEntryKey(l.group, i), func(v []byte) (err error) {
		term, err = entryTerm(v)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("storage: raft group %d: entry %d is missing: %w", l.group, i, raft.ErrUnavailable)
	}
	return term, err
}

// LastIndex returns the index of the last entry (the dummy's if none).
func (l *RaftLog) LastIndex() (uint64, error) {
	if err := l.rlock(); err != nil {
		return 0, err
	}
	defer l.mu.RUnlock()
	return l.st.last, nil
}

// FirstIndex returns the index of the first entry that may be available:
// the dummy's plus one.
func (l *RaftLog) FirstIndex() (uint64, error) {
	if err := l.rlock(); err != nil {
		return 0, err
	}
	defer l.mu.RUnlock()
	return l.st.offset + 1, nil
}

// Snapshot returns the latest snapshot, read from disk (an empty one if
// none was saved or created).
func (l *RaftLog) Snapshot() (*raftpb.Snapshot, error) {
	if err := l.rlock(); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	snap, err := l.readSnapshot()
	if err != nil {
		return nil, fmt.Errorf("storage: raft group %d: %w", l.group, err)
	}
	return snap, nil
}

// Size reports the bytes (keys and values) and the number of the group's
// log entries, for metrics. It is approximate in that Pebble compresses
// them and keeps deleted ones until compaction.
func (l *RaftLog) Size() (bytes uint64, entries uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.bytes, l.st.last - l.st.offset
}

// raftWrite is a write being built: the Txn and the state it leads to.
type raftWrite struct {
	l    *RaftLog
	t    *Txn
	next raftState
	// rewrites: the Txn changes entries that exist, so readers wait for it.
	rewrites bool
}

// SetApplied records index as the last entry the group's state machine
// has applied, for Applied after a restart. It is not synced on its own:
// it reaches the disk with the store's next durable write, so after a crash
// Applied may be behind the state machine's durable effects, and the
// entries since are applied again; a state machine that uses it makes its
// commands idempotent.
func (l *RaftLog) SetApplied(index uint64) {
	t := l.s.Begin()
	t.b.Set(raftKey(l.group, raftApplied), binary.BigEndian.AppendUint64(nil, index), nil)
	t.Commit(false, nil)
	l.applied.Store(index)
}

// Applied is the index SetApplied last recorded (0 if never).
func (l *RaftLog) Applied() uint64 { return l.applied.Load() }

// begin starts a write; the caller holds wmu. A hard state kept back
// (Save) is written with it.
func (l *RaftLog) begin() (*raftWrite, error) {
	if l.deleted {
		return nil, ErrRaftLogDeleted
	}
	w := &raftWrite{l: l, t: l.s.Begin(), next: l.st}
	if w.next.hsUnsaved {
		if _, err := w.set(raftKey(l.group, raftHardState), w.next.hs); err != nil {
			return nil, w.abort(err)
		}
		w.next.hsUnsaved = false
	}
	return w, nil
}

func (w *raftWrite) abort(err error) error {
	w.t.Abort()
	return err
}

// commit commits the Txn durably and publishes the new state.
func (w *raftWrite) commit() error {
	l := w.l
	if w.t.b.Empty() {
		w.t.Abort()
		return nil
	}
	if w.rewrites {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	if err := w.t.CommitWait(); err != nil {
		return err
	}
	if !w.rewrites {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	l.st = w.next
	return nil
}

// set puts m's encoding under key in the write's batch and returns its
// length. m is encoded straight into the batch: a stream's entries carry up to a
// MiB of messages, which proto.Marshal would allocate, zero and copy once
// more on their way in.
func (w *raftWrite) set(key []byte, m proto.Message) (int, error) {
	size := proto.Size(m)
	op := w.t.b.SetDeferred(len(key), size)
	copy(op.Key, key)
	v, err := proto.MarshalOptions{}.MarshalAppend(op.Value[:0], m)
	if err == nil && (len(v) != size || size > 0 && &v[0] != &op.Value[0]) {
		err = fmt.Errorf("encoded %d bytes, sized %d", len(v), size)
	}
	if err != nil {
		// The batch holds the key with a value never written: the
		// caller aborts the write, which drops the batch.
		return 0, fmt.Errorf("storage: raft group %d: %w", w.l.group, err)
	}
	if err := op.Finish(); err != nil {
		return 0, fmt.Errorf("storage: raft group %d: %w", w.l.group, err)
	}
	return size, nil
}

// setDummy writes the dummy entry at index: only its index and term, as
// MemoryStorage keeps it.
func (w *raftWrite) setDummy(index, term uint64) error {
	_, err := w.set(raftEntryKey(w.l.group, index), &raftpb.Entry{Index: &index, Term: &term})
	w.next.dummyStored = true
	return err
}

// Save durably persists what a raft.Ready asks to persist, in one batch
// synced before it returns (per Options.Sync: raft's safety needs
// SyncAlways). In order, like MemoryStorage's ApplySnapshot, Append and
// SetHardState: a non-empty snapshot replaces the whole log (an older one
// than the current is ErrSnapOutOfDate, and nothing is written); entries are
// appended, replacing any entries from the first one's index on (those
// before the dummy are skipped); a non-empty hard state replaces the saved
// one. Any argument may be nil or empty.
//
// A hard state that moves only the commit index, with nothing else to
// save, is not written at once: it goes to disk with the log's next
// write, as etcd leaves such a state unsynced (raft.MustSync). A group
// that commits what it appended would otherwise sync twice per round of
// proposals, once for the entries and once more when they commit. A
// commit index on disk behind the truth is safe: a member relearns it
// from its leader, a sole member at its next election, and load raises
// one below the snapshot's index to it.
func (l *RaftLog) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if len(ents) == 0 && raft.IsEmptySnap(snap) && !raft.IsEmptyHardState(hs) && l.movesCommitOnly(hs) {
		if l.deleted {
			return ErrRaftLogDeleted
		}
		l.mu.Lock()
		l.st.hs, l.st.hsUnsaved = proto.Clone(hs).(*raftpb.HardState), true
		l.mu.Unlock()
		return nil
	}
	w, err := l.begin()
	if err != nil {
		return err
	}
	if !raft.IsEmptySnap(snap) {
		if err := w.applySnapshot(snap); err != nil {
			return w.abort(err)
		}
	}
	if err := w.append(ents); err != nil {
		return w.abort(err)
	}
	if !raft.IsEmptyHardState(hs) {
		w.next.hs = proto.Clone(hs).(*raftpb.HardState)
		if _, err := w.set(raftKey(l.group, raftHardState), w.next.hs); err != nil {
			return w.abort(err)
		}
	}
	return w.commit()
}

// Flush writes a hard state Save kept back, durably: a member stopping
// cleanly flushes, so that it restarts knowing its commit index.
func (l *RaftLog) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if !l.st.hsUnsaved {
		return nil
	}
	w, err := l.begin()
	if err != nil {
		return err
	}
	return w.commit()
}

// movesCommitOnly says hs differs from the saved hard state in its
// commit index alone; the caller holds wmu.
func (l *RaftLog) movesCommitOnly(hs *raftpb.HardState) bool {
	cur := l.st.hs
	return cur != nil && hs.GetTerm() == cur.GetTerm() && hs.GetVote() == cur.GetVote()
}

func (w *raftWrite) applySnapshot(snap *raftpb.Snapshot) error {
	n := &w.next
	index := snap.GetMetadata().GetIndex()
	if n.snapIndex != 0 && n.snapIndex >= index {
		return raft.ErrSnapOutOfDate
	}
	snap = raftpb.EnsureSnapshot(proto.Clone(snap).(*raftpb.Snapshot))
	term := snap.GetMetadata().GetTerm()
	g := w.l.group
	w.t.b.DeleteRange(raftKey(g, raftEntries), raftKey(g, raftEntries+1), nil)
	if err := w.setDummy(index, term); err != nil {
		return err
	}
	if _, err := w.set(raftKey(g, raftSnapshot), snap); err != nil {
		return err
	}
	n.offset, n.offsetTerm, n.last, n.lastTerm, n.bytes = index, term, index, term, 0
	n.snapIndex, n.conf = index, snap.GetMetadata().GetConfState()
	w.rewrites = true
	return nil
}

func (w *raftWrite) append(ents []*raftpb.Entry) error {
	n := &w.next
	g := w.l.group
	first := n.offset + 1
	if len(ents) == 0 || ents[0].GetIndex()+uint64(len(ents))-1 < first {
		return nil
	}
	if start := ents[0].GetIndex(); start < first {
		ents = ents[first-start:]
	}
	start := ents[0].GetIndex()
	if start > n.last+1 {
		return fmt.Errorf("storage: raft group %d: appending at index %d would leave a gap after the last index %d", g, start, n.last)
	}
	for i, e := range ents {
		if e.GetIndex() != start+uint64(i) {
			return fmt.Errorf("storage: raft group %d: appended entries are not consecutive (index %d after %d)", g, e.GetIndex(), start+uint64(i)-1)
		}
	}
	if start <= n.last {
		// The conflicting suffix goes, in the same batch.
		freed, err := w.l.entriesBytes(start, n.last+1)
		if err != nil {
			return err
		}
		n.bytes -= freed
		w.t.b.DeleteRange(raftEntryKey(g, start), raftKey(g, raftEntries+1), nil)
		w.rewrites = true
	}
	if !n.dummyStored {
		if err := w.setDummy(n.offset, n.offsetTerm); err != nil {
			return err
		}
	}
	for _, e := range ents {
		size, err := w.set(raftEntryKey(g, e.GetIndex()), e)
		if err != nil {
			return err
		}
		n.bytes += uint64(raftEntryKeyLen + size)
	}
	last := ents[len(ents)-1]
	n.last, n.lastTerm = last.GetIndex(), last.GetTerm()
	return nil
}

// entriesBytes adds up what the entries [lo, hi) count in Size.
func (l *RaftLog) entriesBytes(lo, hi uint64) (uint64, error) {
	var n uint64
	err := l.scan(lo, hi, func(_ uint64, v []byte) (bool, error) {
		n += entryBytes(v)
		return true, nil
	})
	return n, err
}

// CreateSnapshot durably records a snapshot at applied index i holding data
// and conf state cs (nil: the current snapshot's), as MemoryStorage does,
// and returns it. It does not compact the log: call Compact for that. An
// index at or below the current snapshot's is ErrSnapOutOfDate, one below
// the compaction point ErrCompacted.
func (l *RaftLog) CreateSnapshot(i uint64, cs *raftpb.ConfState, data []byte) (*raftpb.Snapshot, error) {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	w, err := l.begin()
	if err != nil {
		return nil, err
	}
	n := &w.next
	switch {
	case i <= n.snapIndex:
		return nil, w.abort(raft.ErrSnapOutOfDate)
	case i > n.last:
		return nil, w.abort(fmt.Errorf("storage: raft group %d: snapshot at %d is past the last index %d", l.group, i, n.last))
	}
	term, err := l.term(n, i)
	if err != nil {
		return nil, w.abort(err)
	}
	if cs == nil {
		cs = n.conf
	}
	snap := raftpb.EnsureSnapshot(&raftpb.Snapshot{
		Data:     data,
		Metadata: &raftpb.SnapshotMetadata{Index: &i, Term: &term, ConfState: proto.Clone(cs).(*raftpb.ConfState)},
	})
	if _, err := w.set(raftKey(l.group, raftSnapshot), snap); err != nil {
		return nil, w.abort(err)
	}
	n.snapIndex, n.conf = i, snap.GetMetadata().GetConfState()
	// Snapshot reads the key whole, so this write need not keep readers out.
	if err := w.commit(); err != nil {
		return nil, err
	}
	return proto.Clone(snap).(*raftpb.Snapshot), nil
}

// Compact discards the entries before compactIndex with one range deletion,
// durably; the entry at compactIndex becomes the dummy, as in
// MemoryStorage. compactIndex at or below the dummy's is ErrCompacted.
func (l *RaftLog) Compact(compactIndex uint64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	w, err := l.begin()
	if err != nil {
		return err
	}
	n := &w.next
	switch {
	case compactIndex <= n.offset:
		return w.abort(raft.ErrCompacted)
	case compactIndex > n.last:
		return w.abort(fmt.Errorf("storage: raft group %d: compacting to %d, past the last index %d", l.group, compactIndex, n.last))
	}
	term, err := l.term(n, compactIndex)
	if err != nil {
		return w.abort(err)
	}
	freed, err := l.entriesBytes(n.offset+1, compactIndex+1)
	if err != nil {
		return w.abort(err)
	}
	w.t.b.DeleteRange(raftKey(l.group, raftEntries), raftEntryKey(l.group, compactIndex), nil)
	if err := w.setDummy(compactIndex, term); err != nil {
		return w.abort(err)
	}
	n.offset, n.offsetTerm, n.bytes = compactIndex, term, n.bytes-freed
	w.rewrites = true
	return w.commit()
}
