package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// MemoryStorage panics on calls out of bounds; its logger writes the panic
// message first. The tests expect those panics.
func quietRaft(t *testing.T) {
	raft.SetLogger(&raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)})
	t.Cleanup(raft.ResetDefaultLogger)
}

// panics reports whether fn panicked.
func panics(fn func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	fn()
	return false
}

// raftModel drives one group: the same operations go to a MemoryStorage
// (the contract) and to the RaftLog, and every answer must be the same.
// Where MemoryStorage panics, the RaftLog must return an error and change
// nothing.
type raftModel struct {
	t     *testing.T
	r     *rand.Rand
	group uint64
	ms    *raft.MemoryStorage
	l     *RaftLog
	term  uint64 // the term new entries get
	// disk is the hard state as written (nil: none yet); unsaved says
	// the RaftLog holds a newer one that moved only its commit index,
	// which goes to disk with the next write.
	disk    *raftpb.HardState
	unsaved bool
}

func newRaftModel(t *testing.T, r *rand.Rand, s *Store, group uint64) *raftModel {
	m := &raftModel{t: t, r: r, group: group, ms: raft.NewMemoryStorage(), term: 1}
	m.open(s)
	return m
}

func (m *raftModel) open(s *Store) {
	l, err := s.RaftLog(m.group)
	if err != nil {
		m.t.Fatalf("RaftLog(%d): %v", m.group, err)
	}
	m.l = l
	if hs := m.reopened(); hs != nil {
		must(m.t, m.ms.SetHardState(hs))
		m.unsaved = false
	}
}

// reopened is the hard state a RaftLog opened from the disk holds: the
// one written, its commit index raised to the snapshot's.
func (m *raftModel) reopened() *raftpb.HardState {
	if m.disk == nil {
		return nil
	}
	hs := clone(m.disk)
	if _, _, snapIndex := m.bounds(); hs.GetCommit() < snapIndex {
		hs.Commit = proto.Uint64(snapIndex)
	}
	return hs
}

// wrote records that the RaftLog committed a write: the hard state it
// held is on disk.
func (m *raftModel) wrote() {
	if hs, _, _ := m.ms.InitialState(); m.unsaved || m.disk != nil || !raft.IsEmptyHardState(hs) {
		m.disk, m.unsaved = clone(hs), false
	}
}

// bounds are MemoryStorage's: the dummy's index, the last index, the
// snapshot's index.
func (m *raftModel) bounds() (offset, last, snap uint64) {
	first, _ := m.ms.FirstIndex()
	last, _ = m.ms.LastIndex()
	s, _ := m.ms.Snapshot()
	return first - 1, last, s.GetMetadata().GetIndex()
}

// pick returns a random index in [lo, max(lo, hi)], clamped at 0.
func (m *raftModel) pick(lo, hi int64) uint64 {
	return uint64(max(0, lo+m.r.Int64N(max(hi-lo, 0)+1)))
}

func (m *raftModel) data(max int) []byte {
	if m.r.IntN(8) == 0 {
		return nil
	}
	b := make([]byte, m.r.IntN(max+1))
	for i := range b {
		b[i] = byte(m.r.Uint32())
	}
	return b
}

func (m *raftModel) confState() *raftpb.ConfState {
	cs := &raftpb.ConfState{}
	for i := range m.r.IntN(4) {
		cs.Voters = append(cs.Voters, uint64(i+1))
	}
	if m.r.IntN(5) == 0 {
		cs.Learners = []uint64{9}
	}
	if m.r.IntN(2) == 0 {
		cs.AutoLeave = proto.Bool(m.r.IntN(2) == 0)
	}
	return cs
}

func clone[M proto.Message](msg M) M { return proto.Clone(msg).(M) }

func cloneEntries(ents []*raftpb.Entry) []*raftpb.Entry {
	out := make([]*raftpb.Entry, len(ents))
	for i, e := range ents {
		out[i] = clone(e)
	}
	return out
}

// sameErr requires got to be want (nil: no error), or, if the model
// panicked, any error.
func (m *raftModel) sameErr(what string, got, want error, panicked bool) {
	m.t.Helper()
	switch {
	case panicked && got == nil:
		m.t.Fatalf("group %d: %s: MemoryStorage panics, RaftLog returned no error", m.group, what)
	case panicked:
	case want == nil && got != nil, want != nil && !errors.Is(got, want):
		m.t.Fatalf("group %d: %s: error %v, MemoryStorage's %v", m.group, what, got, want)
	}
}

// save runs a random Save.
func (m *raftModel) save() {
	offset, last, snapIndex := m.bounds()
	var snap *raftpb.Snapshot
	if m.r.IntN(8) == 0 {
		if m.r.IntN(3) == 0 {
			m.term++
		}
		snap = &raftpb.Snapshot{Data: m.data(100), Metadata: &raftpb.SnapshotMetadata{
			Index:     proto.Uint64(m.pick(int64(snapIndex)-2, int64(last)+6)),
			Term:      proto.Uint64(m.term),
			ConfState: m.confState(),
		}}
		if i := snap.GetMetadata().GetIndex(); i != 0 && (snapIndex == 0 || snapIndex < i) {
			offset, last = i, i // the entries go after it
		}
	}
	var ents []*raftpb.Entry
	if m.r.IntN(5) != 0 {
		start := m.pick(int64(offset)-2, int64(last)+1)
		if snap == nil && m.r.IntN(20) == 0 {
			start = last + 2 // a gap: MemoryStorage panics before it changes anything
		}
		if m.r.IntN(4) == 0 {
			m.term++
		}
		for i := range uint64(m.r.IntN(6)) {
			ents = append(ents, &raftpb.Entry{
				Index: proto.Uint64(start + i), Term: proto.Uint64(m.term),
				Type: raftpb.EntryType(m.r.IntN(3)).Enum(), Data: m.data(300),
			})
		}
	}
	cur, _, _ := m.ms.InitialState()
	if cur != nil {
		cur = clone(cur)
	}
	var hs *raftpb.HardState
	switch m.r.IntN(5) {
	case 0:
		hs = &raftpb.HardState{}
	case 1, 2:
		hs = &raftpb.HardState{Term: proto.Uint64(m.term), Vote: proto.Uint64(m.r.Uint64N(4)), Commit: proto.Uint64(m.r.Uint64N(last + 1))}
	case 3:
		// Only the commit index moves, as Raft's commits do: kept back.
		if cur != nil && !raft.IsEmptyHardState(cur) {
			hs = clone(cur)
			hs.Commit = proto.Uint64(m.pick(int64(snapIndex), int64(last)))
		}
	}
	var want error
	panicked := false
	if !raft.IsEmptySnap(snap) {
		want = m.ms.ApplySnapshot(clone(snap))
	}
	if want == nil {
		panicked = panics(func() { m.ms.Append(cloneEntries(ents)) })
		if !panicked && !raft.IsEmptyHardState(hs) {
			m.ms.SetHardState(clone(hs))
		}
	}
	commitOnly := len(ents) == 0 && raft.IsEmptySnap(snap) && !raft.IsEmptyHardState(hs) && m.disk != nil &&
		hs.GetTerm() == cur.GetTerm() && hs.GetVote() == cur.GetVote()
	err := m.l.Save(hs, ents, snap)
	m.sameErr(fmt.Sprintf("Save(%v, %d entries from %d, snapshot %d)", hs, len(ents), firstIndex(ents), snap.GetMetadata().GetIndex()), err, want, panicked)
	switch {
	case err != nil:
	case commitOnly:
		m.unsaved = true
	default:
		m.wrote()
	}
}

func firstIndex(ents []*raftpb.Entry) uint64 {
	if len(ents) == 0 {
		return 0
	}
	return ents[0].GetIndex()
}

func (m *raftModel) createSnapshot() {
	offset, last, snapIndex := m.bounds()
	i := m.pick(int64(snapIndex)-1, int64(last)+2)
	var cs *raftpb.ConfState
	if m.r.IntN(2) == 0 {
		cs = m.confState()
	}
	data := m.data(200)
	got, err := m.l.CreateSnapshot(i, cs, data)
	if i > snapIndex && i < offset {
		// MemoryStorage half-updates its snapshot, then panics.
		if !errors.Is(err, raft.ErrCompacted) {
			m.t.Fatalf("group %d: CreateSnapshot(%d) below the dummy %d: %v, want ErrCompacted", m.group, i, offset, err)
		}
		return
	}
	var want *raftpb.Snapshot
	var wantErr error
	var mcs *raftpb.ConfState
	if cs != nil {
		mcs = clone(cs)
	}
	panicked := panics(func() { want, wantErr = m.ms.CreateSnapshot(i, mcs, data) })
	m.sameErr(fmt.Sprintf("CreateSnapshot(%d)", i), err, wantErr, panicked)
	if err == nil {
		m.wrote()
	}
	if err == nil && !sameSnapshot(got, want) {
		m.t.Fatalf("group %d: CreateSnapshot(%d) = %v, MemoryStorage's %v", m.group, i, got, want)
	}
}

// sameSnapshot compares snapshots taking a conf state's missing AutoLeave
// for false, as MemoryStorage does on its next read.
func sameSnapshot(a, b *raftpb.Snapshot) bool {
	return proto.Equal(raftpb.EnsureSnapshot(clone(a)), raftpb.EnsureSnapshot(clone(b)))
}

func (m *raftModel) compact() {
	offset, last, _ := m.bounds()
	i := m.pick(int64(offset)-1, int64(last)+1)
	var want error
	panicked := panics(func() { want = m.ms.Compact(i) })
	err := m.l.Compact(i)
	m.sameErr(fmt.Sprintf("Compact(%d)", i), err, want, panicked)
	if err == nil {
		m.wrote()
	}
}

// read calls one read method with random arguments.
func (m *raftModel) read() {
	offset, last, _ := m.bounds()
	switch m.r.IntN(2) {
	case 0:
		lo := m.pick(int64(offset)-1, int64(last)+2)
		hi := m.pick(int64(lo)-1, int64(last)+2)
		maxSize := []uint64{0, m.r.Uint64N(1000), math.MaxUint64}[m.r.IntN(3)]
		m.entries(lo, hi, maxSize)
	case 1:
		m.term1(m.pick(int64(offset)-2, int64(last)+2))
	}
}

func (m *raftModel) entries(lo, hi, maxSize uint64) {
	m.t.Helper()
	var want []*raftpb.Entry
	var wantErr error
	panicked := panics(func() { want, wantErr = m.ms.Entries(lo, hi, maxSize) })
	got, err := m.l.Entries(lo, hi, maxSize)
	what := fmt.Sprintf("Entries(%d, %d, %d)", lo, hi, maxSize)
	m.sameErr(what, err, wantErr, panicked)
	if err != nil {
		return
	}
	if len(got) != len(want) {
		m.t.Fatalf("group %d: %s: %d entries, MemoryStorage %d", m.group, what, len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			m.t.Fatalf("group %d: %s: entry %d is %v, MemoryStorage's %v", m.group, what, i, got[i], want[i])
		}
	}
}

func (m *raftModel) term1(i uint64) {
	m.t.Helper()
	want, wantErr := m.ms.Term(i)
	got, err := m.l.Term(i)
	m.sameErr(fmt.Sprintf("Term(%d)", i), err, wantErr, false)
	if got != want {
		m.t.Fatalf("group %d: Term(%d) = %d, MemoryStorage %d", m.group, i, got, want)
	}
}

// check compares everything: every method without random arguments, every
// entry and term, and Size.
func (m *raftModel) check(l *RaftLog) {
	m.t.Helper()
	saved := m.l
	m.l = l
	defer func() { m.l = saved }()
	offset, last, _ := m.bounds()
	if got, _ := l.FirstIndex(); got != offset+1 {
		m.t.Fatalf("group %d: FirstIndex %d, MemoryStorage %d", m.group, got, offset+1)
	}
	if got, _ := l.LastIndex(); got != last {
		m.t.Fatalf("group %d: LastIndex %d, MemoryStorage %d", m.group, got, last)
	}
	hs, cs, err := l.InitialState()
	whs, wcs, _ := m.ms.InitialState()
	if l != saved {
		// Opened from the disk (after a crash): what was written.
		if d := m.reopened(); d != nil {
			whs = d
		}
	}
	if err != nil || (hs == nil) != (whs == nil) || !proto.Equal(hs, whs) || !proto.Equal(cs, wcs) {
		m.t.Fatalf("group %d: InitialState %v %v %v, MemoryStorage %v %v", m.group, hs, cs, err, whs, wcs)
	}
	snap, err := l.Snapshot()
	wsnap, _ := m.ms.Snapshot()
	if err != nil || !proto.Equal(snap, wsnap) {
		m.t.Fatalf("group %d: Snapshot %v %v, MemoryStorage %v", m.group, snap, err, wsnap)
	}
	m.entries(offset+1, last+1, math.MaxUint64)
	for i := offset; i <= last; i++ {
		m.term1(i)
	}
	var wantBytes uint64
	if ents, err := m.ms.Entries(offset+1, last+1, math.MaxUint64); err == nil {
		for _, e := range ents {
			wantBytes += uint64(raftEntryKeyLen + proto.Size(e))
		}
	}
	if b, n := l.Size(); b != wantBytes || n != last-offset {
		m.t.Fatalf("group %d: Size %d bytes %d entries, want %d bytes %d entries", m.group, b, n, wantBytes, last-offset)
	}
}

// step runs one random operation.
func (m *raftModel) step() {
	switch op := m.r.IntN(20); {
	case op < 8:
		m.save()
	case op < 9:
		m.createSnapshot()
	case op < 11:
		m.compact()
	default:
		m.read()
	}
}

// The contract: a RaftLog answers as a MemoryStorage given the same
// operations, through reopenings of the store, with three groups at the
// edges of the key space interleaved.
func TestRaftLogMatchesMemoryStorage(t *testing.T) {
	quietRaft(t)
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			s, fs := openMem(t, nil)
			defer func() { s.Close() }()
			var models []*raftModel
			for _, g := range []uint64{0, 1, math.MaxUint64} {
				models = append(models, newRaftModel(t, r, s, g))
			}
			for step := range steps {
				m := models[r.IntN(len(models))]
				m.step()
				m.check(m.l)
				if step%250 == 249 {
					must(t, s.Close())
					s, _ = openMem(t, fs)
					if r.IntN(2) == 0 {
						_, err := s.Recover(nil)
						must(t, err)
					}
					for _, m := range models {
						m.open(s)
						m.check(m.l)
					}
				}
			}
		})
	}
}

// A log whose first entry is 1 (a new group's) and one compacted up to 1
// differ only by the dummy entry at 0 that the first Save writes.
func TestRaftLogReopenKeepsTheDummy(t *testing.T) {
	s, fs := openMem(t, nil)
	l, err := s.RaftLog(3)
	must(t, err)
	ents := []*raftpb.Entry{
		{Index: proto.Uint64(1), Term: proto.Uint64(1)},
		{Index: proto.Uint64(2), Term: proto.Uint64(2)},
		{Index: proto.Uint64(3), Term: proto.Uint64(2)},
	}
	must(t, l.Save(nil, ents, nil))
	reopen := func() *RaftLog {
		must(t, s.Close())
		s, _ = openMem(t, fs)
		l, err := s.RaftLog(3)
		must(t, err)
		return l
	}
	l = reopen()
	if first, _ := l.FirstIndex(); first != 1 {
		t.Fatalf("FirstIndex after reopening = %d, want 1", first)
	}
	must(t, l.Compact(1))
	l = reopen()
	defer s.Close()
	first, _ := l.FirstIndex()
	term, err := l.Term(1)
	if first != 2 || term != 1 || err != nil {
		t.Fatalf("after Compact(1) and reopening: FirstIndex %d, Term(1) %d %v; want 2, 1", first, term, err)
	}
}

// raftDump returns the lines of Dump about raft keys.
func raftDump(t *testing.T, s *Store) []string {
	t.Helper()
	var b bytes.Buffer
	must(t, s.Dump(&b))
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "raft ") {
			out = append(out, line)
		}
	}
	return out
}

func entry(index, term uint64, data string) *raftpb.Entry {
	return &raftpb.Entry{Index: proto.Uint64(index), Term: proto.Uint64(term), Data: []byte(data)}
}

// Groups share nothing: their entries, hard states and snapshots are apart,
// and deleting one leaves the others.
func TestRaftLogGroupsAreApart(t *testing.T) {
	s, _ := openMem(t, nil)
	defer s.Close()
	groups := []uint64{1, 2, 256}
	for _, g := range groups {
		l, err := s.RaftLog(g)
		must(t, err)
		var ents []*raftpb.Entry
		for i := uint64(1); i <= g%10+2; i++ {
			ents = append(ents, entry(i, g, fmt.Sprintf("g%d-%d", g, i)))
		}
		must(t, l.Save(&raftpb.HardState{Term: proto.Uint64(g), Commit: proto.Uint64(1)}, ents, nil))
	}
	check := func(g uint64) {
		t.Helper()
		l, err := s.RaftLog(g)
		must(t, err)
		last, _ := l.LastIndex()
		if last != g%10+2 {
			t.Fatalf("group %d: LastIndex %d, want %d", g, last, g%10+2)
		}
		ents, err := l.Entries(1, last+1, math.MaxUint64)
		must(t, err)
		for i, e := range ents {
			if string(e.GetData()) != fmt.Sprintf("g%d-%d", g, i+1) {
				t.Fatalf("group %d: entry %d is %q", g, i+1, e.GetData())
			}
		}
		if hs, _, _ := l.InitialState(); hs.GetTerm() != g {
			t.Fatalf("group %d: hard state %v", g, hs)
		}
	}
	for _, g := range groups {
		check(g)
	}

	old, err := s.RaftLog(2)
	must(t, err)
	if same, _ := s.RaftLog(2); same != old {
		t.Fatal("RaftLog returned a second RaftLog of a group")
	}
	must(t, s.DeleteRaftLog(2))
	if _, err := old.LastIndex(); !errors.Is(err, ErrRaftLogDeleted) {
		t.Fatalf("LastIndex of a deleted group: %v", err)
	}
	if err := old.Save(nil, []*raftpb.Entry{entry(4, 2, "")}, nil); !errors.Is(err, ErrRaftLogDeleted) {
		t.Fatalf("Save to a deleted group: %v", err)
	}
	for _, line := range raftDump(t, s) {
		if strings.HasPrefix(line, "raft g=2 ") {
			t.Fatalf("DeleteRaftLog left %s", line)
		}
	}
	fresh, err := s.RaftLog(2)
	must(t, err)
	first, _ := fresh.FirstIndex()
	last, _ := fresh.LastIndex()
	hs, _, _ := fresh.InitialState()
	if first != 1 || last != 0 || hs != nil {
		t.Fatalf("a deleted group reopened: FirstIndex %d LastIndex %d hard state %v, want empty", first, last, hs)
	}
	check(1)
	check(256)
}

// Recover deletes queue entries (of unknown queues, transient ones, those
// whose shared message is missing) and shared messages; raft keys are none
// of those and stay as they were.
func TestRecoverLeavesRaftKeysAlone(t *testing.T) {
	s, fs := openRecovered(t, nil)
	for g := uint64(0); g < 3; g++ {
		l, err := s.RaftLog(g)
		must(t, err)
		must(t, l.Save(&raftpb.HardState{Term: proto.Uint64(2), Vote: proto.Uint64(1), Commit: proto.Uint64(2)},
			[]*raftpb.Entry{entry(1, 1, "a"), entry(2, 2, "b"), entry(3, 2, "c")}, nil))
		_, err = l.CreateSnapshot(2, &raftpb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("state"))
		must(t, err)
	}
	txn := s.Begin()
	txn.PutEntry(5, 0, 1, &Entry{Persistent: true, Msg: &Message{Body: []byte("unknown queue")}})
	txn.PutEntry(6, 0, 1, &Entry{Msg: &Message{Body: []byte("transient")}})
	txn.PutEntry(6, 0, 2, &Entry{Persistent: true, MsgID: 999}) // its message is missing
	txn.PutMessage(1000, &Message{Body: []byte("unreferenced")}, 1)
	commit(t, txn)
	before := raftDump(t, s)
	if len(before) != 3*(4+2) {
		t.Fatalf("Dump lists %d raft keys, want %d:\n%s", len(before), 3*6, strings.Join(before, "\n"))
	}
	must(t, s.Close())

	s, _ = openMem(t, fs)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{6: true})
	must(t, err)
	if st.UnknownQueues != 1 || st.Transient != 1 || st.MissingMessages != 1 || st.Unreferenced != 1 {
		t.Fatalf("Recover did not delete what it should: %+v", st)
	}
	if after := raftDump(t, s); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("Recover changed raft keys:\nbefore\n%s\nafter\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	l, err := s.RaftLog(1)
	must(t, err)
	ents, err := l.Entries(1, 4, math.MaxUint64)
	if err != nil || len(ents) != 3 {
		t.Fatalf("Entries after Recover: %v %v", ents, err)
	}
}

// A Save that returned is on disk after a machine crash (only what was
// fsynced survives), while queue Txns that do not ask for durability share
// its batches.
func TestRaftLogSaveSurvivesAMachineCrash(t *testing.T) {
	quietRaft(t)
	s, fs := openCrashable(t, Options{Sync: SyncAlways, SyncInterval: time.Hour})
	r := rand.New(rand.NewPCG(3, 4))
	m := newRaftModel(t, r, s, 9)
	seq := uint64(1)
	for range 60 {
		putEntries(s, seq, seq+3, false)
		seq += 3
		switch r.IntN(6) {
		case 0:
			m.compact()
		case 1:
			m.createSnapshot()
		default:
			m.save()
		}
		image := machineCrash(fs)
		cs, err := Open("data", Options{FS: image, Logger: zerolog.Nop()})
		must(t, err)
		l, err := cs.RaftLog(9)
		must(t, err)
		m.check(l)
		must(t, cs.Close())
	}
}

// raft reads while the node saves: run with -race. The reader's answers
// must hang together whatever the writer does meanwhile.
func TestRaftLogConcurrentReads(t *testing.T) {
	s, _ := openMem(t, nil)
	defer s.Close()
	l, err := s.RaftLog(1)
	must(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			first, _ := l.FirstIndex()
			last, _ := l.LastIndex()
			if last < first {
				continue
			}
			ents, err := l.Entries(first, last+1, math.MaxUint64)
			if errors.Is(err, raft.ErrCompacted) {
				continue
			}
			if err != nil {
				t.Errorf("Entries(%d, %d): %v", first, last+1, err)
				return
			}
			// A tail half rewritten would show a newer term before an
			// older one.
			for i, e := range ents {
				if e.GetIndex() != first+uint64(i) || string(e.GetData()) != fmt.Sprint(e.GetIndex(), e.GetTerm()) ||
					(i > 0 && e.GetTerm() < ents[i-1].GetTerm()) {
					t.Errorf("entry %d of Entries(%d, %d) is %v after %v", i, first, last+1, e, ents[max(i, 1)-1])
					return
				}
			}
		}
	}()
	term := uint64(1)
	var last uint64
	for i := range 400 {
		// Mostly appends; some rewrite the tail in a new term; compactions.
		start := last + 1
		if i%7 == 6 && last > 3 {
			start, term = last-2, term+1
		}
		var ents []*raftpb.Entry
		for j := range uint64(3) {
			ents = append(ents, entry(start+j, term, fmt.Sprint(start+j, term)))
		}
		must(t, l.Save(&raftpb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(start)}, ents, nil))
		last = start + 2
		if i%20 == 19 {
			must(t, l.Compact(last-5))
		}
	}
	close(stop)
	wg.Wait()
}

// BenchmarkRaftLogSave is one Ready's persistence on the real disk: one
// entry of 200 bytes (a quorum queue's) or 1 MiB (a busy stream's) and
// the hard state, fsynced before Save returns.
func BenchmarkRaftLogSave(b *testing.B) {
	for _, size := range []int{200, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			s := openBench(b, benchDir(b), SyncAlways)
			defer s.Close()
			l, err := s.RaftLog(1)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, size)
			syncs0 := s.c.stats.syncs.Load()
			b.ReportAllocs()
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := uint64(1); i <= uint64(b.N); i++ {
				hs := &raftpb.HardState{Term: proto.Uint64(1), Vote: proto.Uint64(1), Commit: proto.Uint64(i - 1)}
				if err := l.Save(hs, []*raftpb.Entry{{Index: proto.Uint64(i), Term: proto.Uint64(1), Data: data}}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(s.c.stats.syncs.Load()-syncs0)/float64(b.N), "fsyncs/op")
		})
	}
}

// raftBenchSize is the number of entries of the read benchmarks' log.
const raftBenchSize = 10000

// benchRaftLog fills a log of raftBenchSize entries of 200 bytes, the term
// going up every 1000; flushed moves them from the memtable to an sstable,
// where a log's older entries live. It starts the timer.
func benchRaftLog(b *testing.B, flushed bool) (*RaftLog, *rand.Rand) {
	s := openBench(b, benchDir(b), SyncAlways)
	b.Cleanup(func() { s.Close() })
	l, err := s.RaftLog(1)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 200)
	for i := uint64(1); i <= raftBenchSize; i += 100 {
		var ents []*raftpb.Entry
		for j := i; j < i+100 && j <= raftBenchSize; j++ {
			ents = append(ents, &raftpb.Entry{Index: proto.Uint64(j), Term: proto.Uint64(1 + j/1000), Data: data})
		}
		if err := l.Save(nil, ents, nil); err != nil {
			b.Fatal(err)
		}
	}
	if flushed {
		if err := s.db.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	return l, rand.New(rand.NewPCG(1, 2))
}

// BenchmarkRaftLogEntries reads n consecutive entries at a random place of
// the log, as a leader does catching up a follower.
func BenchmarkRaftLogEntries(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		for _, n := range []uint64{1, 64} {
			b.Run(fmt.Sprintf("flushed=%v/n=%d", flushed, n), func(b *testing.B) {
				l, r := benchRaftLog(b, flushed)
				for range b.N {
					lo := 1 + r.Uint64N(raftBenchSize-n)
					ents, err := l.Entries(lo, lo+n, math.MaxUint64)
					if err != nil || uint64(len(ents)) != n {
						b.Fatal(len(ents), err)
					}
				}
			})
		}
	}
}

// BenchmarkRaftLogTerm is Term of an entry among the last 100 of the log
// (not the last, which is in memory), as raft asks when it matches a
// follower's log. It is why Term has no cache: it costs about a
// microsecond, against hundreds for the fsync of each Save.
func BenchmarkRaftLogTerm(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		b.Run(fmt.Sprintf("flushed=%v", flushed), func(b *testing.B) {
			l, r := benchRaftLog(b, flushed)
			for range b.N {
				i := raftBenchSize - 1 - r.Uint64N(100)
				if term, err := l.Term(i); err != nil || term != 1+i/1000 {
					b.Fatal(term, err)
				}
			}
		})
	}
}

// TestRaftLogApplied: the applied index is kept per group and read back
// when the store is opened again.
func TestRaftLogApplied(t *testing.T) {
	s, fs := openMem(t, nil)
	l, err := s.RaftLog(3)
	if err != nil {
		t.Fatal(err)
	}
	if l.Applied() != 0 {
		t.Fatalf("a new group's applied index is %d", l.Applied())
	}
	l.SetApplied(41)
	l.SetApplied(42)
	other, _ := s.RaftLog(4)
	if l.Applied() != 42 || other.Applied() != 0 {
		t.Fatalf("applied %d and %d, want 42 and 0", l.Applied(), other.Applied())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openMem(t, fs)
	defer s.Close()
	if l, _ = s.RaftLog(3); l.Applied() != 42 {
		t.Fatalf("after reopening: applied %d, want 42", l.Applied())
	}
	if err := s.DeleteRaftLog(3); err != nil {
		t.Fatal(err)
	}
	if l, _ = s.RaftLog(3); l.Applied() != 0 {
		t.Fatalf("after DeleteRaftLog: applied %d", l.Applied())
	}
}
