package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// Reads see every Txn whose Commit was called before the read began: they
// first wait for the committer to apply those (without waiting for a sync,
// and without waiting for the CommitInterval).

// ScanQueue calls fn for the entries of queue qid at priority prio with
// seq >= from, in seq order, up to limit entries (0 = all), until fn returns
// false. Shared messages are read from their own key, so every Entry has
// its Msg. The Entry and everything it points to are fresh memory fn may
// keep (treat the byte slices as read-only).
//
// from is the iterator's lower bound: pass the seq of the queue's head, so
// the tombstones the consumed entries left behind are never walked.
func (s *Store) ScanQueue(qid uint64, prio uint8, from uint64, limit int, fn func(seq uint64, e *Entry) bool) error {
	return s.ScanQueueInto(qid, prio, from, limit, nil, fn)
}

// ScanQueueInto is ScanQueue reading bodies into buffers lend returns
// (Entry.Lent); with a nil lend it is ScanQueue.
func (s *Store) ScanQueueInto(qid uint64, prio uint8, from uint64, limit int, lend BodyLender, fn func(seq uint64, e *Entry) bool) error {
	return s.scanQueue(qid, prio, from, limit, lend, true, fn)
}

// ScanQueueDeletes is ScanQueue for a caller that deletes the entries it
// scans (a purge of paged messages): fn gets what DeleteEntry needs of
// each, and no body is read from the body log to learn its length.
func (s *Store) ScanQueueDeletes(qid uint64, prio uint8, from uint64, limit int, fn func(seq uint64, d Deleted) bool) error {
	return s.scanQueue(qid, prio, from, limit, nil, false, func(seq uint64, e *Entry) bool {
		return fn(seq, Deleted{MsgID: e.MsgID, Marked: e.Delivered, Size: e.bodyLen()})
	})
}

// bodyLen is the length of the body of an entry read back, wherever the
// body is.
func (e *Entry) bodyLen() int {
	switch {
	case e.Logged.Logged():
		return e.Logged.Len
	case e.Spill.Spilled():
		return e.Spill.Len
	case e.Msg != nil:
		return len(e.Msg.Body)
	}
	return 0
}

// scanQueue is ScanQueueInto; without bodies, a logged body is not read,
// and the entry's Logged (a shared message's too) says where it is.
func (s *Store) scanQueue(qid uint64, prio uint8, from uint64, limit int, lend BodyLender, bodies bool, fn func(seq uint64, e *Entry) bool) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	lo, hi := levelSpan(qid, prio, from)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	var mk [messageKeyLen]byte
	var ek [entryKeyLen]byte
	n := 0
	for ok := it.First(); ok; {
		if isMarkKey(it.Key()) { // its entry was deleted: not expected, harmless
			ok = it.Next()
			continue
		}
		_, _, seq, _ := parseEntryKey(it.Key())
		copy(ek[:], it.Key())
		v, err1 := it.ValueAndErr()
		if err1 != nil {
			err = err1
			break
		}
		var e *Entry
		if e, err = s.loadEntry(v, mk[:], lend, bodies); err != nil {
			err = fmt.Errorf("storage: queue %d entry %d/%d: %w", qid, prio, seq, err)
			break
		}
		// The entry's delivery mark, if any, is the next key.
		if ok = it.Next(); ok && markOf(it.Key(), ek[:]) {
			if err = applyMark(e, it); err != nil {
				err = fmt.Errorf("storage: queue %d entry %d/%d: %w", qid, prio, seq, err)
				break
			}
			ok = it.Next()
		}
		n++
		if !fn(seq, e) || (limit > 0 && n >= limit) {
			break
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// applyMark records the delivery mark under it in e.
func applyMark(e *Entry, it *pebble.Iterator) error {
	v, err := it.ValueAndErr()
	if err != nil {
		return err
	}
	n, size := binary.Uvarint(v)
	if size <= 0 || size != len(v) || n > math.MaxUint32 {
		return fmt.Errorf("delivery mark: %w", errBadValue)
	}
	e.Delivered = true
	e.Deliveries = max(e.Deliveries, uint32(n))
	return nil
}

// ErrMissingMessage is an entry whose shared message is not in the store.
var ErrMissingMessage = errors.New("shared message missing")

// loadEntry decodes entry value v, reading a shared message from the DB.
func (s *Store) loadEntry(v []byte, mk []byte, lend BodyLender, bodies bool) (*Entry, error) {
	h, err := decodeEntryHeader(v)
	if err != nil {
		return nil, err
	}
	if !h.shared() {
		e, err := decodeEntry(v, nil, lend)
		if err == nil && e.Logged.Logged() && bodies {
			err = s.readLogged(e, lend)
		}
		return e, err
	}
	putMessageKey(mk, h.msgID)
	mv, closer, err := s.db.Get(mk)
	if errors.Is(err, pebble.ErrNotFound) {
		return s.loadLoggedShared(v, mk, h.msgID, lend, bodies)
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeEntry(v, mv, lend)
}

// loadLoggedShared decodes shared entry value v whose message is not under
// 0x03: it may be under 0x0A, with its body in the body log.
func (s *Store) loadLoggedShared(v, mk []byte, msgID uint64, lend BodyLender, bodies bool) (*Entry, error) {
	putLoggedMessageKey(mk, msgID)
	mv, closer, err := s.db.Get(mk)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			err = fmt.Errorf("%w: message %d", ErrMissingMessage, msgID)
		}
		return nil, err
	}
	defer closer.Close()
	ref, enc, err := decodeLoggedMessage(mv)
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", msgID, err)
	}
	e, err := decodeEntry(v, enc, nil)
	if err != nil {
		return nil, err
	}
	e.Logged = ref
	if !bodies {
		return e, nil // Logged says where the body is, and its length
	}
	// The body is read as a logged entry's would be; the entry is still a
	// shared one (Logged stays zero: it is the message's record).
	err = s.readLogged(e, lend)
	e.Logged = BodyRef{}
	return e, err
}

// readLogged reads a logged entry's body from the body log into a buffer
// from lend, or one of its own.
func (s *Store) readLogged(e *Entry, lend BodyLender) error {
	n := e.Logged.Len
	var buf []byte
	lent := false
	if lend != nil {
		if b, ok := lend(n); ok && len(b) == n {
			buf, lent = b, true
		}
	}
	if !lent {
		buf = make([]byte, n)
	}
	if err := s.bodies.read(e.Logged, buf); err != nil {
		s.log.Error().Err(err).Msg("reading a logged body")
		return err
	}
	e.Msg.Body, e.Lent = buf, lent
	return nil
}

// Level describes one priority level of a queue: how many entries it holds,
// the total size of their bodies, and the seqs of its first and last entry.
type Level struct {
	Prio     uint8
	Count    int64
	Bytes    int64
	FirstSeq uint64
	LastSeq  uint64
}

// QueueLevels reports the priority levels of queue qid that have entries,
// in priority order. It reads every entry's value (not shared messages):
// Recover reports the same for every queue in one pass, so a broker
// starting up need not call it.
func (s *Store) QueueLevels(qid uint64) ([]Level, error) {
	done, err := s.read()
	if err != nil {
		return nil, err
	}
	defer done()
	s.c.waitApplied()
	lo, hi := queueSpan(prefixEntry, qid)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	var levels []Level
	for ok := it.First(); ok; ok = it.Next() {
		if isMarkKey(it.Key()) {
			continue
		}
		_, prio, seq, _ := parseEntryKey(it.Key())
		v, err1 := it.ValueAndErr()
		if err1 != nil {
			err = err1
			break
		}
		var size int
		if size, err = entryBodyLen(v); err != nil {
			err = fmt.Errorf("storage: queue %d entry %d/%d: %w", qid, prio, seq, err)
			break
		}
		levels = addToLevels(levels, prio, seq, size)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return levels, nil
}

// entryBodyLen returns the body length an entry value records.
func entryBodyLen(v []byte) (int, error) {
	h, err := decodeEntryHeader(v)
	if err != nil {
		return 0, err
	}
	if h.shared() {
		return h.bodyLen, nil
	}
	return h.inlineBodyLen()
}

// addToLevels counts an entry met in key order into levels.
func addToLevels(levels []Level, prio uint8, seq uint64, size int) []Level {
	if n := len(levels); n == 0 || levels[n-1].Prio != prio {
		levels = append(levels, Level{Prio: prio, FirstSeq: seq})
	}
	l := &levels[len(levels)-1]
	l.Count++
	l.Bytes += int64(size)
	l.LastSeq = seq
	return levels
}

// ScanHeld calls fn for every record of the delay store in (due, seq)
// order until fn returns false. rec is a copy fn may keep.
func (s *Store) ScanHeld(fn func(due int64, seq uint64, rec []byte) bool) error {
	done, err := s.read()
	if err != nil {
		return err
	}
	defer done()
	s.c.waitApplied()
	return s.iterate([]byte{prefixHeld}, []byte{prefixHeld + 1}, func(k, v []byte) (bool, error) {
		due, seq, ok := parseHeldKey(k)
		if !ok {
			return false, fmt.Errorf("storage: malformed held key %q", k)
		}
		return fn(due, seq, append([]byte(nil), v...)), nil
	})
}

// iterate calls fn with the keys in [lo, hi) and their values, in order,
// until fn returns false or an error; k and v are valid only during the
// call. The caller holds s.read().
func (s *Store) iterate(lo, hi []byte, fn func(k, v []byte) (bool, error)) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, verr := it.ValueAndErr()
		if verr != nil {
			err = verr
			break
		}
		var more bool
		if more, err = fn(it.Key(), v); err != nil || !more {
			break
		}
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}
