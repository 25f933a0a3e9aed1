package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// RecoveryStats reports what Recover found and did.
type RecoveryStats struct {
	Entries         int64 // entries kept
	Bytes           int64 // their body bytes
	Transient       int64 // transient entries deleted
	UnknownQueues   int   // queue ids not in keepQueues whose entries were deleted
	Messages        int64 // shared messages kept (referenced)
	Unreferenced    int64 // shared messages deleted for lack of references
	MissingMessages int64 // entries whose shared message is missing (should be 0)
	DamagedBodies   int64 // logged entries whose body log record is missing or damaged (should be 0)
	BodySegments    int   // body log segments kept
	UnusedSegments  int   // body log segments deleted for lack of references
	Held            int64 // records of the delay store's first format (0x06), which the broker moves to 0x09
	Queues          map[uint64][]Level
	Elapsed         time.Duration
}

// recoveryProgress is what the progress log reads while Recover runs.
type recoveryProgress struct {
	entries, messages atomic.Int64
}

// recoverProgressAfter is how long Recover runs before it logs progress,
// and recoverProgressEvery how often it does after that.
var (
	recoverProgressAfter = time.Second
	recoverProgressEvery = 5 * time.Second
)

// Recover runs once after Open and before any Txn that touches queue
// entries or messages. In one pass over the queue index it deletes the
// entries of every queue id not in keepQueues (the transient and exclusive
// queues of the last run; a nil map keeps none) and every entry with
// Persistent == false, counts the rest per queue and priority level, and
// rebuilds the shared messages' reference counts; then it deletes the
// shared messages nothing references. The deletions are committed and
// synced before it returns. A recovery that takes more than a second logs
// its progress every few seconds and a summary at the end.
func (s *Store) Recover(keepQueues map[uint64]bool) (RecoveryStats, error) {
	if s.recovered.Load() {
		return RecoveryStats{}, errors.New("storage: Recover already ran")
	}
	done, err := s.read()
	if err != nil {
		return RecoveryStats{}, err
	}
	defer done()
	start := time.Now()
	st, err := s.recover(keepQueues, start)
	if err != nil {
		return RecoveryStats{}, err
	}
	st.Elapsed = time.Since(start)
	if st.Elapsed > recoverProgressAfter {
		s.log.Info().Int64("entries", st.Entries).Int64("bytes", st.Bytes).Int("queues", len(st.Queues)).
			Int64("transient_deleted", st.Transient).Int("unknown_queues_deleted", st.UnknownQueues).
			Int64("shared_messages", st.Messages).Int64("unreferenced_deleted", st.Unreferenced).
			Int64("held", st.Held).Dur("elapsed", st.Elapsed).Msg("store recovered")
	}
	return st, nil
}

func (s *Store) recover(keepQueues map[uint64]bool, start time.Time) (RecoveryStats, error) {
	st := RecoveryStats{Queues: make(map[uint64][]Level)}
	var prog recoveryProgress
	stop := make(chan struct{})
	defer close(stop)
	// The threshold is read here, not in the goroutine, which may still be
	// starting when Recover returns.
	go s.logRecoveryProgress(&prog, start, recoverProgressAfter, stop)

	refs := make(map[uint64]refState)
	logged := make(map[uint64]map[entryPos]loggedEntry)
	live := make(map[uint32]int)  // logged bodies per body log segment
	smallest := 0                 // the smallest logged body
	damaged := map[string]int64{} // damaged logged bodies, by the first error of each segment
	b := s.db.NewBatch()
	flush := func(sync bool) error {
		if b.Empty() && !sync {
			return nil
		}
		opts := pebble.NoSync
		if sync {
			opts = pebble.Sync
		}
		err := b.Commit(opts)
		b.Reset()
		return err
	}

	// The queue index.
	lo, hi := []byte{prefixEntry}, []byte{prefixEntry + 1}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return st, err
	}
	var levels []Level
	curQ, haveQ := uint64(0), false
	endQueue := func() {
		if haveQ && len(levels) > 0 {
			st.Queues[curQ] = levels
		}
		levels = nil
	}
	var rk, lastEntry [entryKeyLen]byte
	transient := false // lastEntry is a transient entry, deleted
	for ok := it.First(); ok; {
		qid, prio, seq, kok := parseEntryKey(it.Key())
		if !kok {
			err = fmt.Errorf("storage: malformed entry key %q", it.Key())
			break
		}
		if !haveQ || qid != curQ {
			endQueue()
			curQ, haveQ = qid, true
		}
		if !keepQueues[qid] {
			qlo, qhi := queueSpan(prefixEntry, qid)
			b.DeleteRange(qlo, qhi, nil)
			rlo, rhi := queueSpan(prefixRef, qid)
			b.DeleteRange(rlo, rhi, nil)
			st.UnknownQueues++
			ok = it.SeekGE(qhi)
			continue
		}
		if isMarkKey(it.Key()) {
			// A delivery mark follows its entry, and goes with it.
			if transient && markOf(it.Key(), lastEntry[:]) {
				b.Delete(it.Key(), nil)
			}
			ok = it.Next()
			continue
		}
		copy(lastEntry[:], it.Key())
		v, verr := it.ValueAndErr()
		if verr != nil {
			err = verr
			break
		}
		h, herr := decodeEntryHeader(v)
		if herr != nil {
			err = fmt.Errorf("storage: queue %d entry %d/%d: %w", qid, prio, seq, herr)
			break
		}
		transient = !h.persistent()
		lost := false // a logged entry without its body
		if !transient && h.logged.Logged() {
			if cerr := s.bodies.check(h.logged); cerr != nil {
				// Gone for good: deleted like a transient entry (with
				// its mark), and reported below by segment.
				lost = true
				damaged[segmentError(cerr)]++
				st.DamagedBodies++
			} else {
				q := logged[qid]
				if q == nil {
					q = make(map[entryPos]loggedEntry)
					logged[qid] = q
				}
				q[entryPos{prio, seq}] = loggedEntry{ref: h.logged}
				live[h.logged.Seg]++
				if smallest == 0 || h.logged.Len < smallest {
					smallest = h.logged.Len
				}
			}
		}
		if transient || lost {
			b.Delete(it.Key(), nil)
			if h.shared() {
				putEntryKey(rk[:], prefixRef, qid, prio, seq)
				b.Delete(rk[:], nil)
			}
			if transient {
				st.Transient++
			}
			transient = true // its mark goes too
		} else {
			size := h.bodyLen
			if h.shared() {
				r := refs[h.msgID]
				r.count++
				refs[h.msgID] = r
			} else if size, err = h.inlineBodyLen(); err != nil {
				err = fmt.Errorf("storage: queue %d entry %d/%d: %w", qid, prio, seq, err)
				break
			}
			levels = addToLevels(levels, prio, seq, size)
			st.Entries++
			st.Bytes += int64(size)
		}
		prog.entries.Add(1)
		if b.Len() >= 1<<20 {
			if err = flush(false); err != nil {
				break
			}
		}
		ok = it.Next()
	}
	endQueue()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, err
	}

	// Shared messages: delete those nothing references, and those whose
	// logged body is gone (their entries are then dangling, below).
	found := make(map[uint64]bool, len(refs))
	loggedMsgs := make(map[uint64]loggedEntry)
	for _, prefix := range []byte{prefixMessage, prefixLoggedMessage} {
		if err = s.recoverMessages(prefix, b, flush, refs, found, loggedMsgs, live, &st, &prog, damaged); err != nil {
			return st, err
		}
	}
	for id, r := range refs {
		if !found[id] {
			st.MissingMessages += int64(r.count)
		}
	}
	if st.MissingMessages > 0 {
		// Entries whose message is gone cannot be delivered; left in place
		// they would stop their queue at the first one. The references
		// (0x05) are exactly the shared entries: find them there.
		s.log.Error().Int64("entries", st.MissingMessages).Msg("deleting entries whose shared message is missing")
		if err = flush(false); err != nil { // the transient entries' references go first
			return st, err
		}
		if err = s.deleteDangling(b, refs, found, &st); err != nil {
			return st, err
		}
	}

	// Streams whose queue is not kept (deleted while the process died
	// between the metadata and the data) go, as unknown queues' entries;
	// their files once that is synced.
	var unknownStreams []uint64
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStream}, UpperBound: []byte{prefixStream + 1}})
	if err != nil {
		return st, err
	}
	for ok := it.First(); ok; {
		sid, _, _, kok := parseStreamKey(it.Key())
		if !kok {
			err = fmt.Errorf("storage: malformed stream key %q", it.Key())
			break
		}
		lo, hi := queueSpan(prefixStream, sid)
		if !keepQueues[sid] {
			b.DeleteRange(lo, hi, nil)
			unknownStreams = append(unknownStreams, sid)
			st.UnknownQueues++
		}
		ok = it.SeekGE(hi)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, err
	}

	// The delay store is kept as it is; count its first format's records
	// (the broker moves them; HeldSpans counts the rest without values).
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixHeld}, UpperBound: []byte{prefixHeld + 1}})
	if err != nil {
		return st, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		st.Held++
	}
	if err = it.Close(); err != nil {
		return st, err
	}

	for first, n := range damaged {
		s.log.Error().Int64("entries", n).Str("first", first).Msg("deleting persistent entries whose body log record is missing or damaged")
	}

	if err := flush(true); err != nil {
		return st, err
	}
	b.Close()
	if s.opts.Sync == SyncAlways {
		// The committer may have been writing a batch through without an
		// fsync while the flush above synced (walFS): an empty durable Txn
		// makes sure the deletions are fsynced.
		if err := s.Begin().CommitWait(); err != nil {
			return st, err
		}
	}

	// Segments and stream files nothing refers to go once the deletions
	// are synced.
	for _, sid := range unknownStreams {
		if err := s.streams.remove(sid); err != nil {
			s.log.Warn().Err(err).Msg("deleting an unknown stream's files")
		}
	}
	unused, errs := s.bodies.recovered(live, smallest)
	for _, err := range errs {
		s.log.Warn().Err(err).Msg("deleting an unused body log segment")
	}
	st.UnusedSegments = unused
	st.BodySegments = len(s.bodies.segments())

	s.c.mu.Lock()
	s.c.refs = refs
	s.c.logged = logged
	s.c.loggedMsgs = loggedMsgs
	s.c.mu.Unlock()
	s.recovered.Store(true)
	return st, nil
}

// recoverMessages goes through the shared messages under prefix (0x03, or
// 0x0A with the body logged): it deletes those nothing references, and
// marks the rest found, but for a logged one whose body record is not in
// place, which it deletes and reports, leaving its entries dangling.
func (s *Store) recoverMessages(prefix byte, b *pebble.Batch, flush func(bool) error, refs map[uint64]refState,
	found map[uint64]bool, loggedMsgs map[uint64]loggedEntry, live map[uint32]int, st *RecoveryStats,
	prog *recoveryProgress, damaged map[string]int64) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != messageKeyLen {
			err = fmt.Errorf("storage: malformed message key %q", k)
			break
		}
		id := binary.BigEndian.Uint64(k[1:])
		prog.messages.Add(1)
		_, used := refs[id]
		if used && prefix == prefixLoggedMessage {
			ref, _, derr := decodeLoggedMessage(it.Value())
			if derr == nil {
				derr = s.bodies.check(ref)
			}
			if derr == nil {
				loggedMsgs[id] = loggedEntry{ref: ref}
				live[ref.Seg]++
			} else {
				damaged[segmentError(derr)]++
				st.DamagedBodies++
				used = false
			}
		}
		if used {
			found[id] = true
			st.Messages++
			continue
		}
		b.Delete(k, nil)
		if _, ref := refs[id]; !ref {
			st.Unreferenced++
		}
		if b.Len() >= 1<<20 {
			if err = flush(false); err != nil {
				break
			}
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// segmentError is the text of a body log check's error, as a key that
// groups the damaged entries of one segment (its name comes first).
func segmentError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, " offset "); i > 0 {
		return msg[:i]
	}
	return msg
}

func (s *Store) logRecoveryProgress(p *recoveryProgress, start time.Time, after time.Duration, stop chan struct{}) {
	t := time.NewTimer(after)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.log.Info().Int64("entries_read", p.entries.Load()).
			Int64("messages_read", p.messages.Load()).
			Dur("elapsed", time.Since(start).Round(time.Millisecond)).Msg("recovering store")
		t.Reset(recoverProgressEvery)
	}
}

// deleteDangling deletes (in b) the shared entries, and their references,
// whose message is not in found, and takes them out of st's counts.
func (s *Store) deleteDangling(b *pebble.Batch, refs map[uint64]refState, found map[uint64]bool, st *RecoveryStats) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRef}, UpperBound: []byte{prefixRef + 1}})
	if err != nil {
		return err
	}
	missing := map[uint64]bool{}
	for id := range refs {
		if !found[id] {
			missing[id] = true
			delete(refs, id)
		}
	}
	var ek [entryKeyLen]byte
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) != 8 || !missing[binary.BigEndian.Uint64(v)] {
			continue
		}
		qid, prio, seq, kok := parseEntryKey(it.Key())
		if !kok {
			continue
		}
		putEntryKey(ek[:], prefixEntry, qid, prio, seq)
		size := 0
		if ev, closer, err := s.db.Get(ek[:]); err == nil {
			size, _ = entryBodyLen(ev)
			closer.Close()
		}
		b.Delete(it.Key(), nil)
		b.Delete(ek[:], nil)
		st.Entries--
		st.Bytes -= int64(size)
		levels := st.Queues[qid]
		for i := range levels {
			if levels[i].Prio == prio {
				levels[i].Count--
				levels[i].Bytes -= int64(size)
			}
		}
	}
	for qid, levels := range st.Queues {
		levels = slices.DeleteFunc(levels, func(l Level) bool { return l.Count <= 0 })
		if len(levels) == 0 {
			delete(st.Queues, qid)
		} else {
			st.Queues[qid] = levels
		}
	}
	return it.Close()
}
