package storage

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Pebble picks compactions when something happens: a flush, a finished
// compaction, an open. Two kinds of garbage outlive the events, so a store
// that went idle after a burst of large messages kept hundreds of MiB for a
// few live MiB, for as long as it stayed idle:
//
//   - A blob file that a few live values keep alive becomes worth rewriting
//     by growing old (blobRewriteAge), and growing old is no event.
//   - The deletions of the last entries consumed sit in the memtable and in
//     small tables above the tables holding those entries, and levels that
//     small give Pebble no reason to compact; the entries keep their bodies'
//     blob files alive.
//
// So every nudgeInterval the store has Pebble pick compactions afresh while
// over blobGarbageRatio of the blob bytes are garbage (closing the only
// snapshot is the public call that does it; once a rewrite runs, its end is
// an event and the rewrites chain by themselves). And once per quiet
// spell (intervals that commit less than quietBytes each), and again every
// recompactIntervals while a trickle of writes goes on, it flushes the
// memtable and compacts the key ranges of the tables that hold deletions
// above the bottom level.

const (
	defaultBlobRewriteAge = 5 * time.Minute
	defaultNudgeInterval  = time.Minute
	// blobGarbageRatio is the share of blob bytes no key refers to above
	// which Pebble rewrites old blob files.
	blobGarbageRatio = 0.2
	// quietBytes is the most an interval may commit and still be quiet: a
	// trickle of writes (a message a second, a heartbeat's metadata) does
	// not keep the store from reclaiming what a burst left.
	quietBytes = 1 << 20
	// recompactIntervals is how many quiet intervals pass, while something
	// is still committed in them, before the deletions are compacted again.
	recompactIntervals = 10
)

// quietSpell decides, interval by interval, when to compact deletions:
// at the first quiet interval after a busy one, and then, once something
// is committed again, recompactIntervals quiet intervals after it.
type quietSpell struct {
	lastBytes uint64 // committed bytes at the last tick
	compacted bool   // in this quiet spell
	written   bool   // something was committed since the compaction
	since     int    // quiet intervals since the first such commit
}

// tick takes the store's committed bytes at the end of an interval and
// says whether to compact now; the caller reports the outcome to done.
func (q *quietSpell) tick(bytes uint64) bool {
	delta := bytes - q.lastBytes
	q.lastBytes = bytes
	if delta >= quietBytes {
		*q = quietSpell{lastBytes: bytes}
		return false
	}
	if !q.compacted {
		return true
	}
	if delta > 0 && !q.written {
		q.written, q.since = true, 0
	}
	if !q.written {
		return false
	}
	q.since++
	return q.since >= recompactIntervals
}

// done records a compaction's outcome: one that did not get to look at
// every table is tried again at the next tick.
func (q *quietSpell) done(ok bool) {
	if ok {
		q.compacted, q.since, q.written = true, 0, false
	}
}

// nudgeLoop runs the nudges every interval until the store closes.
func (s *Store) nudgeLoop(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	quiet := quietSpell{lastBytes: s.c.stats.bytes.Load()}
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if quiet.tick(s.c.stats.bytes.Load()) {
			_, ok := s.compactDeletions(ctx)
			quiet.done(ok)
		}
		s.nudgeCompactions()
	}
}

// nudgeCompactions has Pebble pick compactions afresh if its blob files
// hold garbage worth a rewrite; it reports whether it did.
func (s *Store) nudgeCompactions() bool {
	done, err := s.read()
	if err != nil {
		return false
	}
	defer done()
	m := s.db.Metrics()
	if float64(blobGarbage(m)) <= blobGarbageRatio*float64(m.BlobFiles.ValueSize) {
		return false
	}
	s.db.NewSnapshot().Close()
	return true
}

// blobGarbage is the bytes of blob-file values no key refers to any more.
func blobGarbage(m *pebble.Metrics) uint64 {
	return m.BlobFiles.ValueSize - min(m.BlobFiles.ReferencedValueSize, m.BlobFiles.ValueSize)
}

// compactDeletions flushes the memtable and compacts the key ranges of the
// tables above the bottom level that hold deletions, so that the deletions
// meet what they delete. It returns how many ranges it compacted, and false
// if it did not get to look at every table (a failure, or the tables'
// statistics, which count their deletions, not loaded in time).
func (s *Store) compactDeletions(ctx context.Context) (int, bool) {
	done, err := s.read()
	if err != nil {
		return 0, false
	}
	defer done()
	if err := s.db.Flush(); err != nil {
		if !isNoSpace(err) { // the disk alarm says so already
			s.log.Warn().Err(err).Msg("idle store: flush before compacting deletions")
		}
		return 0, false
	}
	// Pebble loads a new table's statistics in the background, after the
	// flush has returned; a table whose statistics count no entries has
	// not had them loaded yet.
	var levels [][]pebble.SSTableInfo
	for deadline := time.Now().Add(statsWait); ; {
		if levels, err = s.db.SSTables(); err != nil {
			s.log.Warn().Err(err).Msg("idle store: listing tables")
			return 0, false
		}
		if statsLoaded(levels) {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(10 * time.Millisecond)
	}
	bottom := len(levels) - 1
	for bottom > 0 && len(levels[bottom]) == 0 {
		bottom--
	}
	var spans []keySpan
	for _, tables := range levels[:bottom] {
		for _, t := range tables {
			if t.TableStats.NumDeletions > 0 {
				spans = append(spans, keySpan{t.Smallest.UserKey, t.Largest.UserKey})
			}
		}
	}
	n := 0
	for _, sp := range mergeSpans(spans) {
		// The successor of the last key: Compact wants start < end.
		end := append(slices.Clip(sp.last), 0)
		if err := s.db.Compact(ctx, sp.first, end, false); err != nil {
			if ctx.Err() == nil && !isNoSpace(err) {
				s.log.Warn().Err(err).Msg("idle store: compacting deletions")
			}
			return n, false
		}
		n++
	}
	return n, true
}

// statsWait is how long compactDeletions waits for table statistics.
const statsWait = 10 * time.Second

// statsLoaded reports whether every table's statistics are loaded.
func statsLoaded(levels [][]pebble.SSTableInfo) bool {
	for _, tables := range levels {
		for _, t := range tables {
			if t.TableStats.NumEntries == 0 {
				return false
			}
		}
	}
	return true
}

// keySpan is a range of user keys, both ends included.
type keySpan struct{ first, last []byte }

// mergeSpans returns the union of spans as disjoint spans in key order.
func mergeSpans(spans []keySpan) []keySpan {
	slices.SortFunc(spans, func(a, b keySpan) int { return bytes.Compare(a.first, b.first) })
	var out []keySpan
	for _, sp := range spans {
		if k := len(out) - 1; k >= 0 && bytes.Compare(sp.first, out[k].last) <= 0 {
			if bytes.Compare(sp.last, out[k].last) > 0 {
				out[k].last = sp.last
			}
			continue
		}
		out = append(out, sp)
	}
	return out
}
