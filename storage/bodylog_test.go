package storage

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// countingHolder is a BodyHolder that counts its holds.
type countingHolder struct{ holds atomic.Int32 }

func (h *countingHolder) Hold()    { h.holds.Add(1) }
func (h *countingHolder) Release() { h.holds.Add(-1) }

func largeBody(seed byte, n int) []byte {
	b := bytes.Repeat([]byte{seed}, n)
	copy(b, "large body ")
	b[n-1] = seed + 1
	return b
}

func bodyLogFiles(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(fs.PathJoin("data", bodyLogDirName))
	if err != nil {
		return nil
	}
	return names
}

func openBodyLog(t *testing.T, fs vfs.FS, o Options) *Store {
	t.Helper()
	o.FS, o.Logger = fs, zerolog.Nop()
	s, err := Open("data", o)
	must(t, err)
	if _, err := s.Recover(map[uint64]bool{1: true, 2: true, 7: true}); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s
}

func putLarge(t *testing.T, s *Store, qid, seq uint64, body []byte, keep BodyHolder) BodyRef {
	t.Helper()
	txn := s.Begin()
	e := &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Body: body, Keep: keep}}
	txn.PutEntry(qid, 0, seq, e)
	commit(t, txn)
	return e.Logged
}

func deleteLarge(t *testing.T, s *Store, qid, seq uint64, n int) {
	t.Helper()
	txn := s.Begin()
	txn.DeleteEntry(qid, 0, seq, Deleted{Size: n})
	commit(t, txn)
}

// TestBodyLogWritesOnce: a large persistent body goes to the body log, not
// to Pebble's WAL, and reads back whole.
func TestBodyLogWritesOnce(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	defer s.Close()
	body := largeBody('a', 1<<20)
	walBefore := s.db.Metrics().WAL.BytesWritten
	h := &countingHolder{}
	ref := putLarge(t, s, 1, 1, body, h)
	if !ref.Logged() || ref.Len != len(body) {
		t.Fatalf("the entry was not logged: %+v", ref)
	}
	if h.holds.Load() != 0 {
		t.Errorf("%d holds left on the body after its write", h.holds.Load())
	}
	if wal := s.db.Metrics().WAL.BytesWritten - walBefore; wal > 64<<10 {
		t.Errorf("the WAL grew by %d bytes for a 1 MiB logged body", wal)
	}
	if got := bodyLogFiles(t, fs); len(got) != 1 || got[0] != segmentName(1) {
		t.Errorf("body log files %v, want [%s]", got, segmentName(1))
	}
	var read []byte
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
		read = e.Msg.Body
		if e.Logged != ref || e.Msg.Exchange != "x" || e.Msg.RoutingKey != "k" {
			t.Errorf("entry read back: %+v %+v", e, e.Msg)
		}
		return true
	}))
	if !bytes.Equal(read, body) {
		t.Fatalf("body read back differs (%d bytes)", len(read))
	}
	// Smaller bodies stay in the index.
	txn := s.Begin()
	small := &Entry{Persistent: true, Msg: &Message{Body: largeBody('b', DefaultBodyLogMin-1)}}
	txn.PutEntry(1, 0, 2, small)
	commit(t, txn)
	if small.Logged.Logged() {
		t.Error("a body under BodyLogMin was logged")
	}
	// So do transient ones (paged out of memory; Recover deletes them).
	txn = s.Begin()
	transient := &Entry{Msg: &Message{Body: body}}
	txn.PutEntry(1, 0, 3, transient)
	commit(t, txn)
	if transient.Logged.Logged() {
		t.Error("a transient body was logged")
	}
}

// TestBodyLogSkipsAckedBodies: an entry deleted in the batch that puts it
// never has its body written, and the hold on it ends at the delete.
func TestBodyLogSkipsAckedBodies(t *testing.T) {
	fs := vfs.NewMem()
	// A long CommitInterval keeps non-durable Txns in the open batch until
	// the durable commit below takes it.
	s := openBodyLog(t, fs, Options{CommitInterval: time.Hour})
	defer s.Close()
	h := &countingHolder{}
	body := largeBody('c', 512<<10)
	txn := s.Begin()
	txn.PutEntry(7, 0, 1, &Entry{Persistent: true, Msg: &Message{Body: body, Keep: h}})
	txn.Commit(false, nil)
	if h.holds.Load() != 1 {
		t.Fatalf("%d holds while the write is pending, want 1", h.holds.Load())
	}
	txn = s.Begin()
	txn.DeleteEntry(7, 0, 1, Deleted{Size: len(body)})
	txn.Commit(false, nil)
	if h.holds.Load() != 0 {
		t.Errorf("%d holds after the delete cancelled the write, want 0", h.holds.Load())
	}
	commit(t, s.Begin())
	if w, sk := s.bodies.writes.Load(), s.bodies.skipped.Load(); w != 0 || sk != 1 {
		t.Errorf("writes %d, skipped %d; want 0 and 1", w, sk)
	}
	n := 0
	must(t, s.ScanQueue(7, 0, 0, 0, func(uint64, *Entry) bool { n++; return true }))
	if n != 0 {
		t.Errorf("%d entries left", n)
	}
	// A delete in a later batch does not cancel: the put's batch may be
	// applied alone.
	ref := putLarge(t, s, 7, 2, body, h)
	deleteLarge(t, s, 7, 2, len(body))
	if w := s.bodies.writes.Load(); w != 1 {
		t.Errorf("writes %d after a put and a delete in separate batches, want 1", w)
	}
	if !ref.Logged() {
		t.Error("not logged")
	}
}

// TestBodyLogSegments: segments fill and roll; one whose bodies are all
// deleted is deleted once the deletes are synced, the active one is kept;
// an aborted Txn gives its reservation back.
func TestBodyLogSegments(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	defer s.Close()
	s.bodies.mu.Lock()
	s.bodies.segSize = 3 << 20
	s.bodies.mu.Unlock()
	const n = 1 << 20
	var refs []BodyRef
	for i := range 5 {
		refs = append(refs, putLarge(t, s, 1, uint64(i), largeBody(byte('a'+i), n), nil))
	}
	// 1 MiB and a header: two records per 3 MiB segment.
	for i, r := range refs {
		if want := uint32(1 + i/2); r.Seg != want {
			t.Errorf("body %d in segment %d, want %d", i, r.Seg, want)
		}
	}
	if got := s.bodies.segments(); len(got) != 3 {
		t.Fatalf("segments %v, want 3", got)
	}
	deleteLarge(t, s, 1, 0, n)
	deleteLarge(t, s, 1, 1, n)
	commit(t, s.Begin()) // the deletes are synced by the batch after them at the latest
	if got := s.bodies.segments(); len(got) != 2 || got[0] != 2 {
		t.Errorf("segments %v after segment 1's bodies went, want [2 3]", got)
	}
	if got := bodyLogFiles(t, fs); len(got) != 2 {
		t.Errorf("files %v", got)
	}
	// The active segment stays, empty or not.
	deleteLarge(t, s, 1, 4, n)
	commit(t, s.Begin())
	if got := s.bodies.segments(); len(got) != 2 {
		t.Errorf("segments %v after the active segment's body went, want [2 3]", got)
	}
	// An aborted put gives its reservation back.
	before := s.bodies.bodies.Load()
	h := &countingHolder{}
	txn := s.Begin()
	txn.PutEntry(1, 0, 9, &Entry{Persistent: true, Msg: &Message{Body: largeBody('z', n), Keep: h}})
	txn.Abort()
	if got := s.bodies.bodies.Load(); got != before || h.holds.Load() != 0 {
		t.Errorf("after an abort: %d live bodies (was %d), %d holds", got, before, h.holds.Load())
	}
	// An entry written over releases the body it had.
	before = s.bodies.bodies.Load()
	putLarge(t, s, 1, 20, largeBody('o', n), nil)
	putLarge(t, s, 1, 20, largeBody('p', n), nil)
	if got := s.bodies.bodies.Load(); got != before+1 {
		t.Errorf("%d live bodies after an entry was put twice, want %d", got, before+1)
	}
	// Deleting the queue releases the rest.
	txn = s.Begin()
	txn.DeleteQueue(1)
	commit(t, txn)
	commit(t, s.Begin())
	if got := s.bodies.bodies.Load(); got != 0 {
		t.Errorf("%d live bodies after the queue's deletion", got)
	}
}

// TestBodyLogRecover: after a restart the logged entries read back, the
// segments nothing refers to (emptied, or left by a crash) are deleted,
// and new bodies go to a new segment.
func TestBodyLogRecover(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	s.bodies.mu.Lock()
	s.bodies.segSize = 3 << 20
	s.bodies.mu.Unlock()
	const n = 1 << 20
	for i := range 4 {
		putLarge(t, s, 1, uint64(i), largeBody(byte('a'+i), n), nil)
	}
	deleteLarge(t, s, 1, 0, n)
	deleteLarge(t, s, 1, 1, n) // segment 1 is empty, and not yet deleted if its deletes are not synced
	putLarge(t, s, 2, 0, largeBody('q', n), nil)
	must(t, s.Close())
	// A segment no entry refers to, as a crash between a body's write and
	// its entry's apply leaves.
	stray, err := fs.Create(fs.PathJoin("data", bodyLogDirName, segmentName(40)), vfs.WriteCategoryUnspecified)
	must(t, err)
	stray.Write(largeBody('s', 100))
	stray.Close()

	s, err = Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	must(t, err)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{1: true}) // queue 2 is gone
	must(t, err)
	if st.DamagedBodies != 0 || st.Entries != 2 {
		t.Errorf("recovery: %+v", st)
	}
	// Segment 2 holds bodies 2 and 3; segment 3 only queue 2's; 40 nothing.
	if got := s.bodies.segments(); len(got) != 1 || got[0] != 2 {
		t.Errorf("segments after recovery %v, want [2]", got)
	}
	if got := bodyLogFiles(t, fs); len(got) != 1 || got[0] != segmentName(2) {
		t.Errorf("files after recovery %v", got)
	}
	var seqs []uint64
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
		seqs = append(seqs, seq)
		if !bytes.Equal(e.Msg.Body, largeBody(byte('a'+seq), n)) {
			t.Errorf("entry %d: body differs", seq)
		}
		return true
	}))
	if len(seqs) != 2 {
		t.Errorf("entries %v", seqs)
	}
	// New bodies never go into an old segment.
	if ref := putLarge(t, s, 1, 10, largeBody('n', n), nil); ref.Seg != 41 {
		t.Errorf("a new body went to segment %d, want 41", ref.Seg)
	}
	// And the recovered entries are counted: deleting them empties segment 2.
	deleteLarge(t, s, 1, 2, n)
	deleteLarge(t, s, 1, 3, n)
	commit(t, s.Begin())
	if got := s.bodies.segments(); len(got) != 1 || got[0] != 41 {
		t.Errorf("segments %v, want [41]", got)
	}
}

// TestBodyLogDamage is the self-check of the body log's checks: a body
// changed on disk is refused by its read with the segment's name, and a
// segment cut short loses its entries at recovery, reported, never
// delivered as something else.
func TestBodyLogDamage(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	const n = 300 << 10
	ref := putLarge(t, s, 1, 1, largeBody('d', n), nil)
	putLarge(t, s, 1, 2, largeBody('e', n), nil)
	must(t, s.Close())
	name := fs.PathJoin("data", bodyLogDirName, segmentName(ref.Seg))

	// One byte of the first body flipped.
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.WriteAt([]byte{'X'}, ref.Off+bodyHeaderLen+1000)
	must(t, err)
	must(t, f.Close())
	s = openBodyLog(t, fs, Options{})
	err = s.ScanQueue(1, 0, 0, 0, func(uint64, *Entry) bool { return true })
	if !errors.Is(err, ErrBodyDamaged) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("reading a damaged body: %v", err)
	}
	must(t, s.Close())

	// The byte put back, and the file cut in the middle of the second body.
	f, err = fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.WriteAt([]byte{'d'}, ref.Off+bodyHeaderLen+1000)
	must(t, err)
	must(t, f.Close())
	f, err = fs.Open(name)
	must(t, err)
	whole, err := io.ReadAll(f)
	must(t, err)
	must(t, f.Close())
	must(t, fs.Remove(name))
	f, err = fs.Create(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.Write(whole[:ref.Off+2*bodyHeaderLen+n+10])
	must(t, err)
	must(t, f.Close())
	var logged bytes.Buffer
	s, err = Open("data", Options{FS: fs, Logger: zerolog.New(&logged)})
	must(t, err)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{1: true})
	must(t, err)
	if st.DamagedBodies != 1 || st.Entries != 1 {
		t.Errorf("recovery of a cut segment: %+v", st)
	}
	if !strings.Contains(logged.String(), name) {
		t.Errorf("the log does not name %s: %s", name, logged.String())
	}
	var seqs []uint64
	_ = s.ScanQueue(1, 0, 0, 0, func(seq uint64, _ *Entry) bool { seqs = append(seqs, seq); return true })
	if len(seqs) != 1 || seqs[0] != 1 {
		t.Errorf("entries after recovery %v, want [1]", seqs)
	}
}

// TestBodyLogShared: a large message shared by several queues is logged
// once, read back through each entry, survives a restart, and its record
// is released with its last reference.
func TestBodyLogShared(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	body := largeBody('m', 2<<20)
	h := &countingHolder{}
	txn := s.Begin()
	txn.PutMessage(50, &Message{Exchange: "fan", Body: body, Keep: h}, 0)
	txn.PutEntry(1, 0, 1, &Entry{Persistent: true, MsgID: 50})
	txn.PutEntry(2, 0, 1, &Entry{Persistent: true, MsgID: 50})
	commit(t, txn)
	if h.holds.Load() != 0 || s.bodies.writes.Load() != 1 {
		t.Fatalf("holds %d, writes %d", h.holds.Load(), s.bodies.writes.Load())
	}
	var dump strings.Builder
	must(t, s.Dump(&dump))
	if !strings.Contains(dump.String(), "message 50 = logged="+segmentName(1)) {
		t.Errorf("dump: %s", dump.String())
	}
	must(t, s.Close())
	s, err := Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	must(t, err)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{1: true, 2: true})
	must(t, err)
	if st.Messages != 1 || st.DamagedBodies != 0 || st.MissingMessages != 0 {
		t.Errorf("recovery: %+v", st)
	}
	for _, q := range []uint64{1, 2} {
		n := 0
		must(t, s.ScanQueue(q, 0, 0, 0, func(_ uint64, e *Entry) bool {
			n++
			if !bytes.Equal(e.Msg.Body, body) || e.Msg.Exchange != "fan" || e.MsgID != 50 {
				t.Errorf("queue %d: the shared message read back differs", q)
			}
			return true
		}))
		if n != 1 {
			t.Errorf("queue %d: %d entries", q, n)
		}
	}
	deleteShared := func(q uint64) {
		txn := s.Begin()
		txn.DeleteEntry(q, 0, 1, Deleted{MsgID: 50, Size: len(body)})
		commit(t, txn)
	}
	deleteShared(1)
	if got := s.bodies.bodies.Load(); got != 1 {
		t.Errorf("%d live bodies with one reference left", got)
	}
	deleteShared(2)
	commit(t, s.Begin())
	if got := s.bodies.bodies.Load(); got != 0 {
		t.Errorf("%d live bodies after the last reference went", got)
	}
	if got := s.bodies.segments(); len(got) != 0 {
		t.Errorf("segments %v: the old run's segment outlived its last body", got)
	}
	// A shared message put and dropped in one open batch is never written.
	writes := s.bodies.writes.Load()
	txn = s.Begin()
	txn.PutMessage(60, &Message{Body: body}, 1)
	txn.Commit(false, nil)
	txn = s.Begin()
	txn.ReleaseRef(60)
	commit(t, txn)
	if s.bodies.writes.Load() != writes && s.bodies.skipped.Load() == 0 {
		t.Errorf("a message dropped before its batch was taken was written")
	}
}

// TestScanQueueDeletesReadsNoBody: what a purge of paged entries needs of
// them (Deleted) comes without reading their bodies from the body log:
// with every logged body damaged, ScanQueue refuses the queue (the
// self-check) and ScanQueueDeletes gives each entry's id, mark and size,
// which then delete them and free the log.
func TestScanQueueDeletesReadsNoBody(t *testing.T) {
	fs := vfs.NewMem()
	s := openBodyLog(t, fs, Options{})
	const n, m = 300 << 10, 400 << 10
	ref := putLarge(t, s, 1, 1, largeBody('a', n), nil)
	txn := s.Begin()
	txn.PutEntry(1, 0, 2, &Entry{Persistent: true, Msg: &Message{Body: []byte("small")}})
	txn.MarkDelivered(1, 0, 2, 1)
	txn.PutMessage(50, &Message{Exchange: "fan", Body: largeBody('b', m)}, 0)
	txn.PutEntry(1, 0, 3, &Entry{Persistent: true, MsgID: 50})
	commit(t, txn)
	must(t, s.Close())
	name := fs.PathJoin("data", bodyLogDirName, segmentName(ref.Seg))
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	for _, at := range []int64{ref.Off + bodyHeaderLen + 1000, ref.Off + 2*bodyHeaderLen + n + 1000} {
		_, err = f.WriteAt([]byte{'X'}, at)
		must(t, err)
	}
	must(t, f.Close())

	s = openBodyLog(t, fs, Options{})
	defer s.Close()
	if err := s.ScanQueue(1, 0, 0, 0, func(uint64, *Entry) bool { return true }); !errors.Is(err, ErrBodyDamaged) {
		t.Fatalf("ScanQueue over damaged bodies: %v, want ErrBodyDamaged", err)
	}
	var got []Deleted
	must(t, s.ScanQueueDeletes(1, 0, 0, 0, func(_ uint64, d Deleted) bool { got = append(got, d); return true }))
	want := []Deleted{{Size: n}, {Marked: true, Size: len("small")}, {MsgID: 50, Size: m}}
	if !slices.Equal(got, want) {
		t.Fatalf("ScanQueueDeletes: %+v, want %+v", got, want)
	}
	if live := s.bodies.bodies.Load(); live != 2 {
		t.Fatalf("%d live bodies before the deletes, want 2", live)
	}
	txn = s.Begin()
	for i, d := range got {
		txn.DeleteEntry(1, 0, uint64(i+1), d)
	}
	commit(t, txn)
	commit(t, s.Begin())
	if live := s.bodies.bodies.Load(); live != 0 {
		t.Errorf("%d live bodies after deleting with what ScanQueueDeletes gave", live)
	}
}
