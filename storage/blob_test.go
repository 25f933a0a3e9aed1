package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/internal/poll"
)

// randomBody is size random bytes, the same for the same seq and stream:
// bodies that do not compress, so the bytes written are the bodies' size.
func randomBody(seq, stream uint64, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(seq, stream))
	for i := 0; i+8 <= size; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}

// TestCompactionsDoNotCopyBodies runs a queue the way a paged backlog does
// (each flush holds new bodies at the tail and deletions at the head, so the
// flushed tables overlap and stack in L0), compacts everything, and checks
// that the bodies were written to blob files once, at flush, and never again:
// not by a compaction into new blob files, nor inline into sstables. Then it
// reads what is left, before and after a reopen.
func TestCompactionsDoNotCopyBodies(t *testing.T) {
	const (
		q        = 7
		perRound = 8
		rounds   = 24
		size     = 64 << 10
	)
	s, fs := openMem(t, nil)
	keep := map[uint64]bool{q: true}
	if _, err := s.Recover(keep); err != nil {
		t.Fatal(err)
	}
	// Random bodies, so that the bytes written are the bodies' size.
	body := func(seq uint64) []byte { return randomBody(seq, 1, size) }
	var next, head uint64 = 1, 1
	for r := 0; r < rounds; r++ {
		txn := s.Begin()
		for i := 0; i < perRound; i++ {
			txn.PutEntry(q, 0, next, &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Body: body(next)}})
			next++
		}
		// Consume half as many from the head: the queue grows, and every
		// flush spans from its head to its tail.
		for i := 0; i < perRound/2; i++ {
			txn.DeleteEntry(q, 0, head, Deleted{Size: size})
			head++
		}
		commit(t, txn)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 32), false); err != nil {
		t.Fatal(err)
	}
	// Pebble counts a flush's blob files in BlobBytesCompacted too.
	var flushed, compactedBlobs, compactedTables uint64
	for _, l := range s.db.Metrics().Levels {
		flushed += l.BlobBytesFlushed
		compactedBlobs += l.BlobBytesCompacted - l.BlobBytesFlushed
		compactedTables += l.TableBytesCompacted
	}
	written := uint64(rounds * perRound * size)
	if flushed < written*9/10 {
		t.Errorf("flushes wrote %d bytes to blob files, want the bodies' %d", flushed, written)
	}
	if compactedBlobs != 0 {
		t.Errorf("compactions copied %d bytes of bodies into new blob files", compactedBlobs)
	}
	if compactedTables > written/8 {
		t.Errorf("compactions wrote %d bytes of sstables for %d bytes of bodies: the bodies are inline", compactedTables, written)
	}

	check := func(when string) {
		want := head
		err := s.ScanQueue(q, 0, 0, 0, func(seq uint64, e *Entry) bool {
			if seq != want || e.Msg == nil || !bytes.Equal(e.Msg.Body, body(seq)) {
				t.Errorf("%s: entry %d (want %d) is wrong", when, seq, want)
				return false
			}
			want++
			return true
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if want != next {
			t.Errorf("%s: read up to %d, want %d", when, want, next)
		}
	}
	check("after compaction")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openMem(t, fs)
	if _, err := s.Recover(keep); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("after reopening")
}

// TestIdleStoreRewritesBlobFiles leaves blob files that are mostly garbage
// (a few live bodies each) in a store that then goes idle, and checks that
// they are still there once old enough to be rewritten (Pebble picks
// compactions only on events), and that a nudge gets them rewritten and
// the garbage deleted, the live bodies intact.
func TestIdleStoreRewritesBlobFiles(t *testing.T) {
	const (
		q        = 3
		rounds   = 4
		perRound = 16
		size     = 64 << 10
	)
	fs := vfs.NewMem()
	opts := Options{FS: fs, Logger: zerolog.Nop(), blobRewriteAge: 3 * time.Second, nudgeInterval: -1}
	s, err := Open("data", opts)
	if err != nil {
		t.Fatal(err)
	}
	keep := map[uint64]bool{q: true}
	if _, err := s.Recover(keep); err != nil {
		t.Fatal(err)
	}
	body := func(seq uint64) []byte { return randomBody(seq, 2, size) }
	// One blob file per round; every body but the round's last is consumed.
	seq := uint64(1)
	var live []uint64
	for r := 0; r < rounds; r++ {
		txn := s.Begin()
		for i := 0; i < perRound; i++ {
			txn.PutEntry(q, 0, seq+uint64(i), &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Body: body(seq + uint64(i))}})
		}
		commit(t, txn)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		txn = s.Begin()
		for i := 0; i < perRound-1; i++ {
			txn.DeleteEntry(q, 0, seq+uint64(i), Deleted{Size: size})
		}
		commit(t, txn)
		live = append(live, seq+perRound-1)
		seq += perRound
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 32), false); err != nil {
		t.Fatal(err)
	}
	garbage := func() (files, garbage, values uint64) {
		m := s.db.Metrics()
		return m.BlobFiles.LiveCount, m.BlobFiles.ValueSize - m.BlobFiles.ReferencedValueSize, m.BlobFiles.ValueSize
	}
	files, g, v := garbage()
	if files < rounds || g < v*9/10 {
		t.Fatalf("after consuming: %d blob files, %d of %d bytes garbage; want %d files, nearly all garbage", files, g, v, rounds)
	}

	// Loading the new tables' statistics is the last event that makes
	// Pebble pick compactions; wait for it, then until the blob files are
	// old enough to be rewritten (their ages are kept in whole seconds).
	// The age is long enough that none is old enough at those events, even
	// under the race detector.
	waitForStats(t, s)
	time.Sleep(opts.blobRewriteAge + 1100*time.Millisecond)
	if files, g, v := garbage(); g < v*9/10 {
		t.Fatalf("an idle store rewrote its blob files by itself (%d files, %d of %d bytes garbage): the nudge is not needed", files, g, v)
	}
	if !s.nudgeCompactions() {
		t.Fatal("nudgeCompactions saw no garbage")
	}
	// The rewrites run in the background, one blob file after another.
	var filesLeft, garbageLeft, valuesLeft uint64
	if !poll.Within(30*time.Second, func() bool {
		filesLeft, garbageLeft, valuesLeft = garbage()
		return float64(garbageLeft) <= blobGarbageRatio*float64(valuesLeft)
	}) {
		t.Fatalf("after a nudge: %d blob files, %d of %d bytes still garbage", filesLeft, garbageLeft, valuesLeft)
	}
	if s.nudgeCompactions() {
		t.Error("nudgeCompactions still sees garbage worth a rewrite")
	}

	check := func(when string) {
		var got []uint64
		err := s.ScanQueue(q, 0, 0, 0, func(seq uint64, e *Entry) bool {
			if e.Msg == nil || !bytes.Equal(e.Msg.Body, body(seq)) {
				t.Errorf("%s: entry %d is wrong", when, seq)
			}
			got = append(got, seq)
			return true
		})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(live) {
			t.Errorf("%s: entries %v, want %v", when, got, live)
		}
	}
	check("after the rewrites")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open("data", opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Recover(keep); err != nil {
		t.Fatal(err)
	}
	check("after reopening")
}

// TestIdleStoreCompactsDeletions consumes a queue whose bodies have reached
// the bottom level, so the deletions stay in the memtable, above them, and
// checks that once the store is idle the deletions are compacted with the
// entries and the bodies' blob files deleted: by compactDeletions itself,
// and by the store's own loop.
func TestIdleStoreCompactsDeletions(t *testing.T) {
	for _, tc := range []struct{ loop, trickle bool }{{false, false}, {true, false}, {true, true}} {
		loop := tc.loop
		t.Run(fmt.Sprintf("loop=%v,trickle=%v", loop, tc.trickle), func(t *testing.T) {
			const (
				q    = 5
				n    = 32
				size = 64 << 10
			)
			opts := Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), nudgeInterval: -1}
			if loop {
				opts.nudgeInterval = 20 * time.Millisecond
			}
			s, err := Open("data", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Recover(map[uint64]bool{q: true}); err != nil {
				t.Fatal(err)
			}
			txn := s.Begin()
			for seq := uint64(1); seq <= n; seq++ {
				txn.PutEntry(q, 0, seq, &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Body: randomBody(seq, 3, size)}})
			}
			commit(t, txn)
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 32), false); err != nil {
				t.Fatal(err)
			}
			txn = s.Begin()
			for seq := uint64(1); seq <= n; seq++ {
				txn.DeleteEntry(q, 0, seq, Deleted{Size: size})
			}
			commit(t, txn)
			if m := s.db.Metrics(); m.BlobFiles.LiveCount == 0 || m.BlobFiles.ReferencedValueSize < n*size {
				t.Fatalf("consumed, before compacting: %d blob files, %d bytes referenced; want the bodies still there",
					m.BlobFiles.LiveCount, m.BlobFiles.ReferencedValueSize)
			}

			if !loop {
				if spans, ok := s.compactDeletions(context.Background()); spans == 0 || !ok {
					t.Fatalf("compactDeletions: %d ranges, %v", spans, ok)
				}
				if m := s.db.Metrics(); m.BlobFiles.LiveCount != 0 {
					t.Fatalf("after compacting the deletions: %d blob files (%d bytes referenced) left",
						m.BlobFiles.LiveCount, m.BlobFiles.ReferencedValueSize)
				}
				if spans, ok := s.compactDeletions(context.Background()); spans != 0 || !ok {
					t.Fatalf("compactDeletions again: %d ranges, %v; want nothing left to do", spans, ok)
				}
				return
			}
			// A trickle of small writes, one every few milliseconds, is
			// quiet enough.
			trickle := uint64(1000)
			if !poll.Within(30*time.Second, func() bool {
				if s.db.Metrics().BlobFiles.LiveCount == 0 {
					return true
				}
				if tc.trickle {
					trickle++
					txn := s.Begin()
					txn.PutEntry(q, 0, trickle, &Entry{Persistent: true, Msg: &Message{Body: []byte("trickle")}})
					commit(t, txn)
				}
				return false
			}) {
				t.Fatalf("the idle store kept %d blob files", s.db.Metrics().BlobFiles.LiveCount)
			}
		})
	}
}

// waitForStats waits until Pebble has loaded every table's statistics.
func waitForStats(t *testing.T, s *Store) {
	t.Helper()
	poll.Until(t, 30*time.Second, "table statistics loaded", func() bool {
		levels, err := s.db.SSTables()
		if err != nil {
			t.Fatal(err)
		}
		return statsLoaded(levels)
	})
}

func TestMergeSpans(t *testing.T) {
	sp := func(a, b string) keySpan { return keySpan{[]byte(a), []byte(b)} }
	got := mergeSpans([]keySpan{sp("m", "p"), sp("a", "c"), sp("b", "d"), sp("d", "f"), sp("x", "z"), sp("n", "o")})
	want := []keySpan{sp("a", "f"), sp("m", "p"), sp("x", "z")}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("mergeSpans: %q, want %q", got, want)
	}
}

// The deletions are compacted at the first quiet interval after a busy
// one, again every recompactIntervals while a trickle goes on, and not
// again while nothing is written.
func TestQuietSpell(t *testing.T) {
	var q quietSpell
	var bytes uint64
	step := func(wrote uint64, ok bool) bool {
		bytes += wrote
		if q.tick(bytes) {
			q.done(ok)
			return true
		}
		return false
	}
	expect := func(when string, got, want bool) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: compact %v, want %v", when, got, want)
		}
	}
	expect("busy", step(quietBytes, true), false)
	expect("first quiet interval, statistics not loaded", step(0, false), true)
	expect("tried again", step(0, true), true)
	for i := 1; i < 3*recompactIntervals; i++ {
		expect("idle", step(0, true), false)
	}
	for i := 1; i < recompactIntervals; i++ {
		expect("trickle", step(1000, true), false)
	}
	expect("trickle, recompactIntervals on", step(1000, true), true)
	expect("trickle after", step(1000, true), false)
	expect("busy again", step(5*quietBytes, true), false)
	expect("quiet again", step(quietBytes-1, true), true)
}
