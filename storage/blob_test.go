package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

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
	body := func(seq uint64) []byte {
		b := make([]byte, size)
		r := rand.New(rand.NewPCG(seq, 1))
		for i := 0; i < size; i += 8 {
			binary.LittleEndian.PutUint64(b[i:], r.Uint64())
		}
		return b
	}
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
