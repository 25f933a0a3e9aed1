package stream

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/storage"
)

// group stands in for a replicated stream's Raft group: a proposal is
// committed at the next index and applied, in order, by every replica
// that is up.
type group struct {
	mu       sync.Mutex
	index    uint64
	log      map[uint64][]byte
	replicas []*Stream
	down     map[int]bool
}

func (g *group) Propose(entry []byte, done func(uint64, error)) {
	g.mu.Lock()
	g.index++
	g.log[g.index] = entry
	var err error
	for i, r := range g.replicas {
		if g.down[i] {
			continue
		}
		if e := r.Apply(g.index, entry); i == 0 {
			err = e
		}
	}
	index := g.index
	g.mu.Unlock()
	done(index, err)
}

func newReplicas(t *testing.T, n int, cfg Config) (*group, []*storage.Store) {
	t.Helper()
	g := &group{log: map[uint64][]byte{}, down: map[int]bool{}}
	var stores []*storage.Store
	for range n {
		st := openStore(t, vfs.NewMem())
		c := cfg
		c.Name, c.VHost, c.ID, c.Store = "s", "/", 1, st
		s, err := Open(c)
		if err != nil {
			t.Fatal(err)
		}
		g.replicas = append(g.replicas, s)
		stores = append(stores, st)
	}
	for i, s := range g.replicas {
		s.SetReplica(g, g.fetchFor(i))
	}
	t.Cleanup(func() {
		for _, s := range g.replicas {
			s.Close()
		}
		for _, st := range stores {
			st.Close()
		}
	})
	return g, stores
}

// fetchFor copies from the first other replica that is up.
func (g *group) fetchFor(self int) Fetch {
	return func(from uint64, maxBytes int) ([]Fetched, error) {
		g.mu.Lock()
		var src *Stream
		for i, r := range g.replicas {
			if i != self && !g.down[i] {
				src = r
				break
			}
		}
		g.mu.Unlock()
		if src == nil {
			return nil, nil
		}
		return src.Copy(from, maxBytes)
	}
}

// catchUp hands replica i, which was down, the leader's snapshot, as Raft
// does for a follower behind the leader's log.
func (g *group) catchUp(t *testing.T, i int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	snap, err := g.replicas[0].Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.replicas[i].Restore(g.index, snap); err != nil {
		t.Fatal(err)
	}
	g.down[i] = false
}

func readAll(t *testing.T, s *Stream, want int) []string {
	t.Helper()
	k := &sink{credit: want}
	if err := s.Consume(k, Offset{Kind: First}, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Cancel(k)
	waitFor(t, fmt.Sprintf("%d deliveries", want), func() bool { return k.count() >= want })
	return bodies(k.settle(0))
}

func checkSequence(t *testing.T, got []string, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("got %d messages, want %d: %v", len(got), to-from, got)
	}
	for i, g := range got {
		if want := fmt.Sprintf("m%d@%d", from+i, from+i); g != want {
			t.Fatalf("message %d is %s, want %s", i, g, want)
		}
	}
}

// Every replica stores the same messages at the same offsets; a replica
// that was down while the others moved on takes a snapshot, copies the
// offsets it lacks from another, and its consumers read every offset in
// order, those applied while it copied included.
func TestReplicaCatchesUpThroughAHole(t *testing.T) {
	g, _ := newReplicas(t, 3, Config{SegmentBytes: 40})
	appendAll(t, g.replicas[0], 0, 10)
	for i := range 3 {
		checkSequence(t, readAll(t, g.replicas[i], 10), 0, 10)
	}

	g.mu.Lock()
	g.down[2] = true
	g.mu.Unlock()
	appendAll(t, g.replicas[1], 10, 30)
	g.catchUp(t, 2)
	appendAll(t, g.replicas[0], 30, 35) // applied while the hole fills
	for i := range 3 {
		checkSequence(t, readAll(t, g.replicas[i], 35), 0, 35)
	}
	if a, b := g.replicas[0].Segments(), g.replicas[2].Segments(); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("segments differ:\n%v\n%v", a, b)
	}
}

// The offsets a replica copies into its hole become readable only once
// their Txn is committed: the offsets after the hole are in the store
// already, so a reader let in before the commit skipped to them (a CI run
// of TestClusterStream read offset 4114 as the 601st message).
func TestReplicaHoleReadableOnlyOnceCommitted(t *testing.T) {
	g, _ := newReplicas(t, 3, Config{SegmentBytes: 40})
	appendAll(t, g.replicas[0], 0, 10)
	g.mu.Lock()
	g.down[2] = true
	g.mu.Unlock()
	appendAll(t, g.replicas[1], 10, 30)
	r := g.replicas[2]
	var fills atomic.Int32
	r.beforeFillCommit = func(from, to uint64) {
		fills.Add(1)
		r.mu.Lock()
		stable := r.stable
		r.mu.Unlock()
		if stable > from {
			t.Errorf("copies %d..%d not committed, and offsets up to %d readable", from, to-1, stable-1)
		}
	}
	g.catchUp(t, 2)
	appendAll(t, g.replicas[0], 30, 35)
	checkSequence(t, readAll(t, r, 35), 0, 35)
	if fills.Load() == 0 {
		t.Fatal("the replica copied nothing: the test did not make a hole")
	}
}

// A replica restarted replays the log after its snapshot: what it had
// stored is not stored twice.
func TestReplicaReplaysWithoutDuplicates(t *testing.T) {
	fs := vfs.NewMem()
	st := openStore(t, fs)
	g := &group{log: map[uint64][]byte{}, down: map[int]bool{}}
	s := openStream(t, st)
	g.replicas = []*Stream{s}
	s.SetReplica(g, nil)
	appendAll(t, s, 0, 20)
	snap, _ := s.Snapshot()
	s.Close()
	st.Close()

	st = openStore(t, fs)
	defer st.Close()
	s = openStream(t, st)
	defer s.Close()
	// The snapshot was taken at index 20: a start restores it, then
	// replays the entries after an earlier one (here all of them).
	if err := s.Restore(5, snap); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 20; i++ {
		if err := s.Apply(i, g.log[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkSequence(t, readAll(t, s, 20), 0, 20)
	if st := s.Stats(); st.Ready != 20 {
		t.Fatalf("%d messages after the replay, want 20", st.Ready)
	}
}

// A replica that lacks offsets the others dropped to retention starts
// at their oldest.
func TestReplicaHoleBelowRetention(t *testing.T) {
	g, _ := newReplicas(t, 2, Config{SegmentBytes: 20, MaxBytes: 60})
	appendAll(t, g.replicas[0], 0, 5)
	g.mu.Lock()
	g.down[1] = true
	g.mu.Unlock()
	appendAll(t, g.replicas[0], 5, 40)
	first := g.replicas[0].Segments()[0].First
	if first == 0 {
		t.Fatal("retention dropped nothing")
	}
	// Its own snapshot still names offsets above what it has.
	g.catchUp(t, 1)
	got := readAll(t, g.replicas[1], 40-int(first))
	checkSequence(t, got, int(first), 40)
}

func TestAppendEntryRoundTrip(t *testing.T) {
	m, _ := message.New("x", "rk", 0, nil, []byte("body"))
	ts, got, err := decodeAppend(encodeAppend(42, m))
	if err != nil || ts != 42 || got.Exchange != "x" || got.RoutingKey != "rk" || string(got.Body) != "body" {
		t.Fatalf("%v %d %+v", err, ts, got)
	}
	if _, _, err := decodeAppend([]byte{9, 1}); err == nil {
		t.Fatal("a malformed entry decoded")
	}
}

// heldGroup is a group that commits nothing until the test answers:
// proposals wait, in order, for answer.
type heldGroup struct {
	mu      sync.Mutex
	entries [][]byte
	dones   []func(uint64, error)
	applied int
	s       *Stream
}

func (g *heldGroup) Propose(entry []byte, done func(uint64, error)) {
	g.mu.Lock()
	g.entries, g.dones = append(g.entries, entry), append(g.dones, done)
	g.mu.Unlock()
}

func (g *heldGroup) proposed() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.entries)
}

// answer commits and applies the oldest proposal not answered yet.
func (g *heldGroup) answer(t *testing.T) logEntry {
	t.Helper()
	g.mu.Lock()
	i := g.applied
	g.applied++
	entry, done := g.entries[i], g.dones[i]
	g.mu.Unlock()
	e, err := decodeEntry(entry)
	if err != nil {
		t.Fatal(err)
	}
	done(uint64(i+1), g.s.Apply(uint64(i+1), entry))
	return e
}

// messagesIn counts an entry's messages.
func messagesIn(e logEntry) (n int) {
	for _, p := range e.parts {
		n += len(p.ms)
	}
	return n
}

// A replica's appends queued while two entries are in flight go to the
// group as one entry once one of the two is answered, in the order they
// were queued, up to proposalBytes an entry; each append's done runs
// once its entry is applied.
func TestReplicaProposesWhatQueuedWhileInFlight(t *testing.T) {
	s, _ := openFormed(t)
	g := &heldGroup{s: s}
	s.SetReplica(g, nil)
	var confirmed atomic.Int32
	appendOne := func(i int, w Writer, size int) {
		body := fmt.Sprint("m", i)
		if size > len(body) {
			body += string(make([]byte, size-len(body)))
		}
		m, err := message.New("", "s", 0, nil, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		s.AppendFrom(m, w, func(err error) {
			if err != nil {
				t.Error(err)
			}
			confirmed.Add(1)
		})
	}
	appendOne(0, Writer{}, 0)
	appendOne(1, Writer{}, 0)
	if g.proposed() != proposalsInFlight {
		t.Fatalf("%d entries proposed, want %d", g.proposed(), proposalsInFlight)
	}
	for i := 2; i < 10; i++ {
		appendOne(i, Writer{Name: "p", Seq: uint64(i)}, 0)
	}
	// Four bodies of 400 KB: two fit an entry.
	for i := 10; i < 14; i++ {
		appendOne(i, Writer{Name: "p", Seq: uint64(i)}, 400<<10)
	}
	if g.proposed() != 2 || confirmed.Load() != 0 {
		t.Fatalf("%d entries proposed, %d confirmed, before an answer", g.proposed(), confirmed.Load())
	}
	if e := g.answer(t); messagesIn(e) != 1 || confirmed.Load() != 1 {
		t.Fatalf("the first entry held %d messages, %d confirmed", messagesIn(e), confirmed.Load())
	}
	var sizes []int
	for g.applied < g.proposed() {
		sizes = append(sizes, messagesIn(g.answer(t)))
	}
	// The second entry (m1), then m2..m11 (m10 and m11 of 400 KB: m12
	// would pass 1 MiB), then m12 and m13.
	if fmt.Sprint(sizes) != "[1 10 2]" || confirmed.Load() != 14 {
		t.Fatalf("entries of %v messages, %d confirmed", sizes, confirmed.Load())
	}
	got := readAll(t, s, 14)
	for i, b := range got {
		if want := fmt.Sprintf("m%d", i); len(b) <= len(want) || b[:len(want)] != want || b[len(want)] >= '0' && b[len(want)] <= '9' {
			t.Fatalf("message %d is %.10q, want %s…", i, b, want)
		}
	}
}
