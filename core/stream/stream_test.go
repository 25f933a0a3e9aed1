package stream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/storage"
)

// sink is a consumer with a prefetch: it takes up to credit deliveries
// until settle gives credit back.
type sink struct {
	mu     sync.Mutex
	got    []queue.Delivery
	credit int
	gone   bool
}

func (k *sink) Deliver(d queue.Delivery) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.credit == 0 {
		return false
	}
	k.credit--
	k.got = append(k.got, d)
	return true
}
func (k *sink) Cancelled()      { k.mu.Lock(); k.gone = true; k.mu.Unlock() }
func (k *sink) NoAck() bool     { return false }
func (k *sink) Exclusive() bool { return false }

// settle gives back credit for every delivery so far and returns them.
func (k *sink) settle(n int) []queue.Delivery {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.credit += n
	return append([]queue.Delivery(nil), k.got...)
}

func (k *sink) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.got)
}

func openStore(t testing.TB, fs vfs.FS) *storage.Store {
	t.Helper()
	st, err := storage.Open("data", storage.Options{FS: fs, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recover(map[uint64]bool{1: true}); err != nil {
		t.Fatal(err)
	}
	return st
}

// openStream opens stream "s" (id 1) on st.
func openStream(t testing.TB, st *storage.Store) *Stream {
	t.Helper()
	s, err := Open(Config{Name: "s", VHost: "/", ID: 1, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// reopen closes s and its store and opens both again from fs, as a
// restart does; the test's end closes them.
func reopen(t *testing.T, fs vfs.FS, s *Stream, st *storage.Store) (*Stream, *storage.Store) {
	t.Helper()
	s.Close()
	st.Close()
	st = openStore(t, fs)
	t.Cleanup(func() { st.Close() })
	s = openStream(t, st)
	t.Cleanup(s.Close)
	return s, st
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func appendAll(t testing.TB, s *Stream, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, to-from)
	for i := from; i < to; i++ {
		m, err := message.New("", "s", 0, nil, []byte(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		s.Append(m, func(err error) {
			if err != nil {
				errs <- err
			}
			wg.Done()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// waitFor waits up to 10 s for cond.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 10*time.Second, what, cond)
}

// bodies are the deliveries' bodies and x-stream-offset headers.
func bodies(ds []queue.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s@%v", d.Entry.Msg.Body, d.Entry.Msg.Headers()["x-stream-offset"])
	}
	return out
}

// Consumers start where x-stream-offset says, get every message from
// there in order with its offset in a header, within their credit, and
// take nothing away from each other.
func TestStreamOffsets(t *testing.T) {
	st := openStore(t, vfs.NewMem())
	defer st.Close()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	s, err := Open(Config{Name: "s", VHost: "/", ID: 1, Store: st, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendAll(t, s, 0, 5)
	clk.add(time.Hour)
	appendAll(t, s, 5, 10) // one batch: "last" starts here

	attach := func(x any) *sink {
		t.Helper()
		from, err := ParseOffset(x, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		k := &sink{credit: 100}
		if err := s.Consume(k, from, nil); err != nil {
			t.Fatal(err)
		}
		return k
	}
	first := attach("first")
	at := attach(int64(7))
	past := attach(int64(99))
	byTime := attach(clk.Now().Add(-30 * time.Minute))
	byInterval := attach("90m")
	last := attach("last")
	next := attach("next")
	waitFor(t, "first's ten", func() bool { return first.count() == 10 })
	// last: the last batch written, which holds m9 and may hold more of
	// the five appended together (the writer may have taken them in two).
	waitFor(t, "the rest", func() bool {
		ds := last.settle(0)
		return at.count() == 3 && byTime.count() == 5 && byInterval.count() == 10 && len(ds) > 0 && ds[len(ds)-1].Entry.Seq == 9
	})
	if got := last.settle(0)[0].Entry.Seq; got < 5 {
		t.Fatalf("last started at %d, before the last batch", got)
	}
	if got := fmt.Sprint(bodies(first.settle(0))[:3]); got != "[m0@0 m1@1 m2@2]" {
		t.Fatalf("from first: %s", got)
	}
	if got := fmt.Sprint(bodies(at.settle(0))); got != "[m7@7 m8@8 m9@9]" {
		t.Fatalf("from 7: %s", got)
	}
	if got := fmt.Sprint(bodies(byTime.settle(0))[0]); got != "m5@5" {
		t.Fatalf("from half an hour ago: %s", got)
	}
	if past.count() != 0 || next.count() != 0 {
		t.Fatalf("past the end %d, next %d before anything new", past.count(), next.count())
	}
	appendAll(t, s, 10, 11)
	waitFor(t, "the new one", func() bool { return next.count() == 1 && past.count() == 1 && first.count() == 11 })

	for _, bad := range []any{"middle", 2.5, "5x", "0s", "1ms", true} {
		if _, err := ParseOffset(bad, clk.Now()); err == nil {
			t.Fatalf("offset %v accepted", bad)
		}
	}
	// Before the first message, as RabbitMQ's streams read it.
	if o, err := ParseOffset(int64(-1), clk.Now()); err != nil || o != (Offset{Kind: At}) {
		t.Fatalf("offset -1: %+v, %v", o, err)
	}
	if st := s.Stats(); st.Ready != 11 || st.Consumers != 7 {
		t.Fatalf("stats %+v", st)
	}
}

// A consumer gets no more than its credit; settling (Kick) lets the rest
// come.
func TestStreamCredit(t *testing.T) {
	st := openStore(t, vfs.NewMem())
	defer st.Close()
	s := openStream(t, st)
	defer s.Close()
	appendAll(t, s, 0, 10)
	k := &sink{credit: 3}
	if err := s.Consume(k, Offset{Kind: First}, nil); err != nil {
		t.Fatal(err)
	}
	// The sink refuses what it has no credit for, so the count cannot
	// show the stream going past it; the stream's own state can: once
	// the fourth is refused, the reader is held at offset 3 and nothing
	// is offered to it until a Kick.
	waitFor(t, "the fourth refused", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := s.readers[k]
		return r != nil && r.blocked
	})
	s.mu.Lock()
	pos := s.readers[k].pos
	s.mu.Unlock()
	if n := k.count(); n != 3 || pos != 3 {
		t.Fatalf("%d deliveries, the reader at %d: want 3 and 3 with a credit of 3", n, pos)
	}
	k.settle(7)
	s.Kick()
	waitFor(t, "all ten", func() bool { return k.count() == 10 })
	if got := fmt.Sprint(bodies(k.settle(0))[9]); got != "m9@9" {
		t.Fatalf("the tenth: %s", got)
	}
}

// Retention drops whole segments from the front, never the one being
// filled: by size (x-max-length-bytes) and by age (x-max-age). A
// consumer whose place was dropped goes on from the oldest retained.
func TestStreamRetention(t *testing.T) {
	st := openStore(t, vfs.NewMem())
	defer st.Close()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	// Bodies "m0".."m9" are 2 bytes, "m10".. 3: segments of 10 bytes hold 5
	// or 4 messages.
	s, err := Open(Config{Name: "s", VHost: "/", ID: 1, Store: st, SegmentBytes: 10, MaxBytes: 25, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	slow := &sink{credit: 1}
	if err := s.Consume(slow, Offset{Kind: First}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		appendAll(t, s, i, i+1)
	}
	segs := s.Segments()
	var total int64
	for _, seg := range segs {
		total += seg.Bytes
	}
	if total > 25+10 || segs[0].First == 0 {
		t.Fatalf("retention kept %d bytes in %+v", total, segs)
	}
	// The slow consumer had taken m0 (and may have read a few more ahead
	// before they were dropped); it goes on from the oldest kept, in
	// order, to the end.
	waitFor(t, "m0", func() bool { return slow.count() == 1 })
	slow.settle(100)
	s.Kick()
	waitFor(t, "the end", func() bool {
		got := slow.settle(0)
		return got[len(got)-1].Entry.Seq == 19
	})
	got := slow.settle(0)
	seen := map[uint64]bool{}
	for i, d := range got {
		if i > 0 && d.Entry.Seq <= got[i-1].Entry.Seq {
			t.Fatalf("out of order: %v", bodies(got))
		}
		seen[d.Entry.Seq] = true
	}
	for o := segs[0].First; o <= 19; o++ {
		if !seen[o] {
			t.Fatalf("offset %d, retained, was skipped: %v", o, bodies(got))
		}
	}
	s.Close()

	// By age: segments whose newest message is older than x-max-age go
	// at the next write.
	s, err = Open(Config{Name: "s", VHost: "/", ID: 1, Store: st, SegmentBytes: 10, MaxAge: time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Segments(); len(got) != len(segs) {
		t.Fatalf("reopened with %d segments, had %d", len(got), len(segs))
	}
	clk.add(2 * time.Hour)
	// With nothing appended, the age check drops all but the last segment.
	s.expire()
	if got := s.Segments(); len(got) != 1 || got[0].First != segs[len(segs)-1].First {
		t.Fatalf("after two idle hours, the segments are %+v; before, %+v", got, segs)
	}
	appendAll(t, s, 20, 30)
	// The segment holding the last old messages and the first new ones
	// stays (its newest message is new); all before it went.
	kept := s.Segments()
	for _, seg := range kept[1:] {
		if seg.Timestamp != clk.Now().UnixMilli() {
			t.Fatalf("old segments kept: %+v", kept)
		}
	}
	if kept[0].First != segs[len(segs)-1].First {
		t.Fatalf("after two hours, the segments are %+v; before, %+v", kept, segs)
	}
}

// A stream reopened from the store holds what it held, and its offsets
// go on; a deleted one leaves nothing in the store.
func TestStreamReopenAndDelete(t *testing.T) {
	fs := vfs.NewMem()
	st := openStore(t, fs)
	s := openStream(t, st)
	appendAll(t, s, 0, 100)
	s, st = reopen(t, fs, s, st)
	appendAll(t, s, 100, 101)
	k := &sink{credit: 1000}
	if err := s.Consume(k, Offset{Kind: At, N: 98}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "98 to 100", func() bool { return k.count() == 3 })
	if got := fmt.Sprint(bodies(k.settle(0))); got != "[m98@98 m99@99 m100@100]" {
		t.Fatalf("after a reopen: %s", got)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if !k.gone {
		t.Fatal("a consumer of a deleted stream was not told")
	}
	if segs, _ := st.StreamSegments(1); len(segs) != 0 {
		t.Fatalf("a deleted stream's segments stayed: %+v", segs)
	}
}

// Readers at different places in the same chunks share what the stream
// read (chunkAt): each still gets every message from its start, in
// order, within its own credit.
func TestStreamReadersShareChunks(t *testing.T) {
	st := openStore(t, vfs.NewMem())
	defer st.Close()
	s := openStream(t, st)
	defer s.Close()
	appendAll(t, s, 0, 3000) // one batch, a few chunks
	starts := []uint64{0, 0, 5, 1500}
	sinks := make([]*sink, len(starts))
	for i, at := range starts {
		sinks[i] = &sink{credit: 7 + i}
		if err := s.Consume(sinks[i], Offset{Kind: At, N: at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range sinks {
		want := 3000 - int(starts[i])
		waitFor(t, fmt.Sprintf("reader %d has all %d", i, want), func() bool {
			k.settle(50)
			s.Kick()
			return k.count() >= want
		})
		for j, b := range bodies(k.settle(0)) {
			o := int(starts[i]) + j
			if b != fmt.Sprintf("m%d@%d", o, o) {
				t.Fatalf("reader %d, delivery %d: %s, want m%d@%d", i, j, b, o, o)
			}
		}
	}
}
