package stream

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warrenmq/warren/core/message"
)

// appendFrom appends body as w's message and waits for its done.
func appendFrom(t *testing.T, s *Stream, w Writer, body string) {
	t.Helper()
	m, err := message.New("", "s", 0, nil, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	s.AppendFrom(m, w, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatalf("append %s: %v", body, err)
	}
}

// storeOffset stores an offset and waits until it is written.
func storeOffset(t *testing.T, s *Stream, name string, offset uint64) {
	t.Helper()
	done := make(chan error, 1)
	s.StoreOffset(name, offset, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A deduplicating publisher's resends are confirmed and stored as
// nothing, and its last sequence and a consumer's stored offset survive
// a reopen of the store.
func TestStreamTrackingSurvivesAReopen(t *testing.T) {
	fs := vfs.NewMem()
	st := openStore(t, fs)
	s := openStream(t, st)
	for _, seq := range []uint64{1, 2, 3, 2, 3, 4} {
		appendFrom(t, s, Writer{Name: "p", Seq: seq}, fmt.Sprintf("p%d", seq))
	}
	appendFrom(t, s, Writer{}, "anon") // no name: never a resend
	appendFrom(t, s, Writer{Name: "q", Seq: 1}, "q1")
	storeOffset(t, s, "reader", 3)
	if got := fmt.Sprint(readAll(t, s, 6)); got != "[p1@0 p2@1 p3@2 p4@3 anon@4 q1@5]" {
		t.Fatalf("stored %s", got)
	}
	s, _ = reopen(t, fs, s, st)
	if seq, ok := s.Sequence("p"); !ok || seq != 4 {
		t.Fatalf("p's sequence after a reopen: %d %v", seq, ok)
	}
	if off, ok := s.Offset("reader"); !ok || off != 3 {
		t.Fatalf("the stored offset after a reopen: %d %v", off, ok)
	}
	if _, ok := s.Offset("nobody"); ok {
		t.Fatal("an offset never stored was found")
	}
	appendFrom(t, s, Writer{Name: "p", Seq: 4}, "again")
	appendFrom(t, s, Writer{Name: "p", Seq: 5}, "p5")
	if got := fmt.Sprint(readAll(t, s, 7)); got != "[p1@0 p2@1 p3@2 p4@3 anon@4 q1@5 p5@6]" {
		t.Fatalf("after a reopen: %s", got)
	}
}

// In a replicated stream every replica drops the same resends, and a
// replica that catches up from a snapshot takes what is tracked with it:
// so a new leader deduplicates as the old one did.
func TestReplicasTrackAlike(t *testing.T) {
	g, _ := newReplicas(t, 3, Config{})
	for _, seq := range []uint64{1, 2, 2, 3} {
		appendFrom(t, g.replicas[0], Writer{Name: "p", Seq: seq}, fmt.Sprintf("p%d", seq))
	}
	storeOffset(t, g.replicas[0], "reader", 1)
	g.mu.Lock()
	g.down[2] = true
	g.mu.Unlock()
	appendFrom(t, g.replicas[1], Writer{Name: "p", Seq: 4}, "p4")
	storeOffset(t, g.replicas[1], "reader", 2)
	g.catchUp(t, 2)
	for i, r := range g.replicas {
		if got := fmt.Sprint(readAll(t, r, 4)); got != "[p1@0 p2@1 p3@2 p4@3]" {
			t.Fatalf("replica %d holds %s", i, got)
		}
		if seq, _ := r.Sequence("p"); seq != 4 {
			t.Fatalf("replica %d: p's sequence %d", i, seq)
		}
		if off, _ := r.Offset("reader"); off != 2 {
			t.Fatalf("replica %d: stored offset %d", i, off)
		}
	}
	// The replica that caught up is now the one proposing (a new
	// leader): a resend is dropped by every replica.
	appendFrom(t, g.replicas[2], Writer{Name: "p", Seq: 3}, "resent")
	appendFrom(t, g.replicas[2], Writer{Name: "p", Seq: 5}, "p5")
	for i, r := range g.replicas {
		if got := fmt.Sprint(readAll(t, r, 5)); got != "[p1@0 p2@1 p3@2 p4@3 p5@4]" {
			t.Fatalf("replica %d after the new leader's resend: %s", i, got)
		}
	}
}

// appendBatch appends bodies as one sub-batch of w and waits.
func appendBatch(t *testing.T, s *Stream, w Writer, bodies ...string) {
	t.Helper()
	var ms []*message.Message
	for _, b := range bodies {
		m, err := message.New("", "s", 0, nil, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	done := make(chan error, 1)
	s.AppendBatchFrom(ms, w, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// oneAndReplicated is a stream of one node and a group of two replicas,
// as the streams to append to by name ("one node", "replicated": the
// first replica).
func oneAndReplicated(t *testing.T) (*group, map[string]*Stream) {
	t.Helper()
	st := openStore(t, vfs.NewMem())
	t.Cleanup(func() { st.Close() })
	one := openStream(t, st)
	t.Cleanup(one.Close)
	g, _ := newReplicas(t, 2, Config{})
	return g, map[string]*Stream{"one node": one, "replicated": g.replicas[0]}
}

// A publisher's sub-batch is stored whole at consecutive offsets or, sent
// again, not at all: on a stream of one node and on every replica.
func TestBatchesAreStoredWholeOrNotAtAll(t *testing.T) {
	g, streams := oneAndReplicated(t)
	for name, s := range streams {
		appendBatch(t, s, Writer{Name: "p", Seq: 1}, "a", "b", "c")
		appendBatch(t, s, Writer{Name: "p", Seq: 1}, "a", "b", "c")
		appendBatch(t, s, Writer{Name: "p", Seq: 2}, "d")
		appendBatch(t, s, Writer{}, "e", "f")
		if got := fmt.Sprint(readAll(t, s, 6)); got != "[a@0 b@1 c@2 d@3 e@4 f@5]" {
			t.Fatalf("%s: %s", name, got)
		}
	}
	if got := fmt.Sprint(readAll(t, g.replicas[1], 6)); got != "[a@0 b@1 c@2 d@3 e@4 f@5]" {
		t.Fatalf("the other replica: %s", got)
	}
}

// Several publishers' appends at once (AppendAll, a Publish frame) are
// stored in order, each or, a resend (of before, or of one earlier in
// the same call), not; every append hears its done. On a stream of one
// node and on every replica, where they travel as one log entry and make
// one chunk.
func TestAppendAllStoresEachAppendOrDropsItsResend(t *testing.T) {
	g, streams := oneAndReplicated(t)
	for name, s := range streams {
		appendFrom(t, s, Writer{Name: "p", Seq: 1}, "p1")
		var as []Append
		done := make(chan error, 8)
		add := func(w Writer, bodies ...string) {
			var ms []*message.Message
			for _, b := range bodies {
				m, err := message.New("", "s", 0, nil, []byte(b))
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, m)
			}
			as = append(as, Append{Msgs: ms, Writer: w, Done: func(err error) { done <- err }})
		}
		add(Writer{Name: "p", Seq: 1}, "resent") // taken before
		add(Writer{Name: "p", Seq: 2}, "p2a", "p2b")
		add(Writer{}, "anon")
		add(Writer{Name: "p", Seq: 2}, "again") // taken earlier in this call
		add(Writer{Name: "q", Seq: 7}, "q7")
		s.AppendAll(as)
		for range as {
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if got := fmt.Sprint(readAll(t, s, 5)); got != "[p1@0 p2a@1 p2b@2 anon@3 q7@4]" {
			t.Fatalf("%s: %s", name, got)
		}
		if seq, _ := s.Sequence("p"); seq != 2 {
			t.Fatalf("%s: p's sequence %d", name, seq)
		}
	}
	if got := fmt.Sprint(readAll(t, g.replicas[1], 5)); got != "[p1@0 p2a@1 p2b@2 anon@3 q7@4]" {
		t.Fatalf("the other replica: %s", got)
	}
	if n := len(g.log); n != 2 {
		t.Fatalf("the replicated stream's log has %d entries, want 2 (an append, then the call's one)", n)
	}
}

// A write is stored as one chunk, and clients see it cut every
// chunkRecords: the offset specification last and the stats' last chunk
// name the start of the last such part, however many messages the write
// held, before and after a reopen; a smaller write after it is a chunk of
// its own.
func TestLastChunkIsBoundedByChunkRecords(t *testing.T) {
	fs := vfs.NewMem()
	st := openStore(t, fs)
	s := openStream(t, st)
	var bodies []string
	for i := range 1000 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	appendBatch(t, s, Writer{Name: "p", Seq: 1}, bodies...)
	if first, ok, err := st.StreamChunkStart(1, 999); err != nil || !ok || first != 0 {
		t.Fatalf("offset 999 is in a stored chunk from %d (%v, %v), want the write's one chunk from 0", first, ok, err)
	}
	check := func(when string, want uint64) {
		t.Helper()
		if at, err := s.Position(Offset{Kind: Last}); err != nil || at != want {
			t.Fatalf("%s: last is %d (%v), want %d", when, at, err, want)
		}
		if _, _, last := s.Bounds(); last != want {
			t.Fatalf("%s: the last chunk starts at %d, want %d", when, last, want)
		}
	}
	check("written", 768) // 1,000 cut every 256 (chunkRecords, a Deliver's bound)
	s, st = reopen(t, fs, s, st)
	check("reopened", 768)
	appendBatch(t, s, Writer{Name: "p", Seq: 2}, "a", "b")
	check("a write of two after it", 1000)
	s, _ = reopen(t, fs, s, st)
	check("reopened again", 1000)
}
