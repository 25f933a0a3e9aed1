package storage

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/cockroachdb/pebble/v2"
)

// The commit pipeline. See "Commit pipeline" in the package doc for the
// whole story; in short:
//
//   - A Txn records its writes in a private Pebble batch. Nothing is shared
//     until Commit, so an open Txn holds no lock and blocks no one.
//   - Commit appends the Txn's batch to the open commitBatch under c.mu (a
//     memcpy), applies the Txn's reference-count changes, and registers its
//     callback. Commit-call order is therefore the order of the writes in
//     the batches, and every Txn lands whole in exactly one batch.
//   - One committer goroutine takes the open batch (swapping in an empty one
//     under c.mu), applies it to Pebble (with an fsync when a durable waiter
//     is in it), and hands it to the callback goroutine. While it waits for
//     the disk, the next batch fills: that is the group commit.
//   - The callback goroutine runs the callbacks, batch after batch. The
//     committer never waits for it, so a slow callback delays other
//     callbacks but never a commit, and Commit may wait for the committer
//     (backpressure) without any risk of a deadlock through a callback.

// commitBatch is one Pebble batch being filled or committed, with the
// callbacks waiting for it.
type commitBatch struct {
	b       *pebble.Batch
	waiters []waiter
	durable bool      // some Txn in it asked for durability
	txns    int       // Txns appended
	first   time.Time // when the first Txn arrived (CommitInterval runs from here)
	lastSeq uint64    // commit sequence number of the last Txn appended
	// drops lists the queues deleted by the batch's first Txn: their shared
	// references are read from the DB (which then holds exactly the state
	// before that Txn) and dropped before the batch is applied.
	drops []uint64
	// deleted is the bytes of the entries its Txns deleted: once enough
	// are deleted, the memtable is flushed so compactions can give the
	// space back (see reclaim).
	deleted int64
	// bodies are the logged bodies of its Txns' entries, written by the
	// committer before the batch is applied (bodylog.go).
	bodies    []*pendingBody
	bodyBytes int // their size
	// chunks are the stream chunks its Txns put, written by the committer
	// before the batch is applied (streamlog.go); chunkBytes their size.
	chunks     []*pendingChunk
	chunkBytes int
	err        error // the result of applying it, for the callbacks
}

func (b *commitBatch) empty() bool { return b.txns == 0 && b.b.Empty() }

// size is what the batch will write: its Pebble batch and its logged
// bodies. Backpressure and the MaxBatchBytes trigger count both.
func (b *commitBatch) size() int { return b.b.Len() + b.bodyBytes + b.chunkBytes }

type waiter struct {
	done func(error)
	ch   chan error // instead of done: the committer sends the result (metadata writes)
	err  error      // non-nil: this Txn failed before it was written (runs with this error)
}

func (w *waiter) result(err error) error {
	if w.err != nil {
		return w.err
	}
	return err
}

// refState counts the references to one shared message: count entries
// exist (or are committed), promised more were announced by PutMessage and
// not yet added. The message is deleted when both are zero.
type refState struct {
	count    int32
	promised int32
}

type committer struct {
	s *Store

	mu          lockorder.Mutex[lockorder.StorageCommitter]
	open        *commitBatch   // the batch Commit appends to
	sealed      []*commitBatch // full batches waiting for the committer, oldest first
	sealedBytes int            // their size
	free        []*commitBatch
	seq         uint64 // number of Commit calls so far
	applied     uint64 // seq of the last Txn applied to the DB
	flushWant   uint64 // a reader waits for this seq to be applied
	appliedCond sync.Cond
	swapped     sync.Cond // broadcast when the open batch is replaced
	maxPending  int       // Commit waits while the open and sealed batches are larger
	closing     bool
	closed      bool
	refs        map[uint64]refState // shared messages' reference counts
	// logged is every logged entry, by queue, with where its body is
	// (bodylog.go). Entries of Options.BodyLogMin bytes or more only.
	logged map[uint64]map[entryPos]loggedEntry
	// loggedMsgs is every shared message whose body is logged.
	loggedMsgs map[uint64]loggedEntry

	kick chan struct{} // wakes the committer (buffered, 1)
	done chan struct{} // closed when the committer exits

	// unsyncedSince is when the committer first wrote a batch through to
	// the OS without an fsync since the last fsync (zero: everything
	// written is synced). Only the committer goroutine uses it.
	unsyncedSince time.Time
	// deletedUnflushed is the bytes of entries deleted since reclaim last
	// flushed. Only the committer goroutine uses it.
	deletedUnflushed int64
	// syncedAll says the last apply fsynced the WAL, so everything applied
	// is durable. Only the committer goroutine uses it.
	syncedAll bool

	// The callback goroutine's queue of applied batches.
	cb struct {
		mu      lockorder.Mutex[lockorder.StorageCallbacks]
		cond    sync.Cond
		queue   []*commitBatch
		closing bool
		done    chan struct{}
	}

	txnPool sync.Pool

	stats struct {
		commits, syncs, intervalSyncs, txns, bytes, errors atomic.Uint64
	}
}

func (c *committer) init(s *Store) {
	c.s = s
	c.appliedCond.L = &c.mu
	c.swapped.L = &c.mu
	c.maxPending = 4 * s.opts.MaxBatchBytes
	c.refs = make(map[uint64]refState)
	c.logged = make(map[uint64]map[entryPos]loggedEntry)
	c.loggedMsgs = make(map[uint64]loggedEntry)
	c.kick = make(chan struct{}, 1)
	c.done = make(chan struct{})
	c.cb.cond.L = &c.cb.mu
	c.cb.done = make(chan struct{})
	c.open = c.newBatchLocked()
	c.txnPool.New = func() any {
		return &Txn{s: s, b: s.db.NewBatch(pebble.WithMaxRetainedSizeBytes(1 << 20))}
	}
}

// reclaim flushes the memtable once the entries deleted since the last
// flush add up to reclaimAfter, so that compactions can drop the deleted
// messages and give their space back. Deletes are small (a consumed
// message leaves a tombstone and a delivery mark), so without it a
// drained queue's space could wait for unrelated writes to fill the
// memtable, and a disk alarm for space that is in fact free. The
// committer goroutine calls it.
func (s *Store) reclaim(deleted int64) {
	c := &s.c
	c.deletedUnflushed += deleted
	if c.deletedUnflushed < reclaimAfter {
		return
	}
	c.deletedUnflushed = 0
	if _, err := s.db.AsyncFlush(); err != nil {
		s.log.Debug().Err(err).Msg("flushing to reclaim the space of deleted messages")
	}
}

// reclaimAfter is the bytes of deleted messages that make reclaim flush.
const reclaimAfter = 16 << 20

// handOverBytes is the size from which a Txn's batch is committed as it
// is instead of being appended to the open commit batch.
const handOverBytes = 256 << 10

// maxFreeBatches is how many emptied batches are kept for reuse. More
// exist only while callbacks lag behind commits; they are left to the GC.
const maxFreeBatches = 4

func (c *committer) newBatchLocked() *commitBatch {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b
	}
	return &commitBatch{b: c.s.db.NewBatch(
		pebble.WithInitialSizeBytes(64<<10),
		pebble.WithMaxRetainedSizeBytes(2*c.s.opts.MaxBatchBytes),
	)}
}

// sealLocked moves the open batch to the sealed queue.
func (c *committer) sealLocked() {
	c.sealed = append(c.sealed, c.open)
	c.sealedBytes += c.open.size()
	c.open = c.newBatchLocked()
	c.swapped.Broadcast()
}

func (c *committer) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *committer) refCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.refs)
}

// nextLocked returns the batch to commit now, or nil and how long to wait
// for the open batch's CommitInterval (0: nothing to do until woken).
func (c *committer) nextLocked() (*commitBatch, time.Duration) {
	if len(c.sealed) > 0 {
		b := c.sealed[0]
		c.sealed[0] = nil
		c.sealed = c.sealed[1:]
		c.sealedBytes -= b.size()
		c.swapped.Broadcast()
		c.takeLocked(b)
		return b, 0
	}
	o := c.open
	if o.empty() {
		return nil, 0
	}
	if !o.durable && o.size() < c.s.opts.MaxBatchBytes && !c.closing && c.flushWant <= c.applied {
		if wait := time.Until(o.first.Add(c.s.opts.CommitInterval)); wait > 0 {
			return nil, wait
		}
	}
	c.open = c.newBatchLocked()
	c.swapped.Broadcast()
	c.takeLocked(o)
	return o, 0
}

// takeLocked marks the pending bodies of b, which the committer takes, as
// no longer cancellable: a delete committed from now on lands in a later
// batch, so b's entries need their bodies.
func (c *committer) takeLocked(b *commitBatch) {
	for _, p := range b.bodies {
		p.taken = true
		if p.msgID != 0 {
			if le, ok := c.loggedMsgs[p.msgID]; ok && le.pend == p {
				le.pend = nil
				c.loggedMsgs[p.msgID] = le
			}
			continue
		}
		if q := c.logged[p.qid]; q != nil {
			if le, ok := q[p.pos]; ok && le.pend == p {
				le.pend = nil
				q[p.pos] = le
			}
		}
	}
}

func (s *Store) commitLoop() {
	c := &s.c
	defer close(c.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c.mu.Lock()
		b, wait := c.nextLocked()
		if b == nil && wait == 0 && c.closing {
			c.closed = true
			c.appliedCond.Broadcast()
			c.swapped.Broadcast()
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if b != nil {
			s.commitBatch(b)
			continue
		}
		if s.opts.Sync == SyncAlways && !c.unsyncedSince.IsZero() {
			due := time.Until(c.unsyncedSince.Add(s.opts.SyncInterval))
			if due <= 0 {
				s.intervalSync()
				continue
			}
			if wait == 0 || due < wait {
				wait = due
			}
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-c.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// apply applies one batch to Pebble (nil: an empty batch, only to sync).
// Every batch is applied with pebble.Sync, so that Pebble's WAL writer
// writes it to the file rather than keeping it in its block buffer; fsync
// says whether that sync is a real fsync or only the write-through (see
// walFS). It records when written data was left unsynced.
func (s *Store) apply(b *pebble.Batch, fsync bool) error {
	c := &s.c
	if s.opts.Sync == SyncAlways && !c.unsyncedSince.IsZero() && time.Since(c.unsyncedSince) >= s.opts.SyncInterval {
		fsync = true // this batch carries the fsync the earlier ones are due
	}
	if fsync {
		// The bodies and chunks the WAL's entries point at are durable
		// first.
		if err := s.bodies.sync(); err != nil {
			return err
		}
		if !s.opts.skipStreamSync {
			if err := s.streams.sync(); err != nil {
				return err
			}
		}
	}
	var err error
	s.wal.fsync.Store(fsync)
	if b != nil {
		err = s.db.Apply(b, pebble.Sync)
	} else {
		err = s.db.LogData(nil, pebble.Sync)
	}
	s.wal.fsync.Store(true)
	if err == nil {
		err = s.wal.failure() // a WAL write or sync failed under Pebble (walFS)
	}
	if err != nil {
		return err
	}
	if fsync {
		c.stats.syncs.Add(1)
		c.unsyncedSince = time.Time{}
		c.syncedAll = true
	} else if c.unsyncedSince.IsZero() {
		c.unsyncedSince = time.Now()
	}
	return nil
}

// intervalSync fsyncs the WAL when written data has waited SyncInterval
// for it and no batch came to carry the fsync.
func (s *Store) intervalSync() {
	if s.failed.Load() != nil {
		s.c.unsyncedSince = time.Time{}
		return
	}
	if err := s.apply(nil, true); err != nil {
		s.fail(err)
		return
	}
	s.deleteBodySegments(s.c.applied)
	s.c.stats.intervalSyncs.Add(1)
	if f := s.opts.afterIntervalSync; f != nil {
		f()
	}
}

// fail makes err the store's sticky error: no more writes are applied.
func (s *Store) fail(err error) error {
	s.c.stats.errors.Add(1)
	err = fmt.Errorf("storage: commit failed; the store takes no more writes until it is reopened: %w", err)
	if s.failed.CompareAndSwap(nil, &err) {
		s.log.Error().Err(err).Msg("commit failed")
	}
	return *s.failed.Load()
}

// commitBatch applies one batch to Pebble, answers the metadata writes in
// it, and queues it for the callback goroutine.
func (s *Store) commitBatch(b *commitBatch) {
	c := &s.c
	if len(b.drops) > 0 {
		s.dropQueueRefs(b.drops)
	}
	var err error
	if p := s.failed.Load(); p != nil {
		err = *p
	} else if !b.b.Empty() || b.durable {
		err = s.waitForSpace(b.bodyBytes + b.chunkBytes) // the logged bodies and chunks are written first
	}
	if err == nil && s.failed.Load() == nil {
		err = s.writeBodies(b)
	}
	s.releaseBodies(b)
	if err == nil && s.failed.Load() == nil {
		err = s.writeChunks(b)
	} else {
		for _, p := range b.chunks {
			s.streams.release(p.file)
		}
	}
	if err == nil && s.failed.Load() == nil {
		sync := b.durable && s.opts.Sync == SyncAlways
		n := b.b.Len()
		c.syncedAll = false
		if !b.b.Empty() {
			err = s.apply(b.b, sync)
		} else if sync {
			// Only empty durable Txns: they wait for everything before them
			// to be synced. (With SyncNever every earlier batch is already
			// written through.)
			err = s.apply(nil, true)
		}
		c.stats.commits.Add(1)
		c.stats.txns.Add(uint64(b.txns))
		c.stats.bytes.Add(uint64(n))
		if err != nil {
			err = s.fail(err)
		} else {
			s.reclaim(b.deleted)
			if c.syncedAll || s.opts.Sync == SyncNever {
				s.deleteBodySegments(b.lastSeq)
			}
		}
	} else if err != nil && s.failed.Load() == nil {
		err = s.fail(err)
	}
	c.mu.Lock()
	c.applied = b.lastSeq
	c.appliedCond.Broadcast()
	c.mu.Unlock()

	// Metadata writes hear from the committer directly, so they never wait
	// behind callbacks; the rest go to the callback goroutine.
	b.err = err
	for i := range b.waiters {
		if w := &b.waiters[i]; w.ch != nil {
			w.ch <- w.result(err)
		}
	}
	c.cb.mu.Lock()
	c.cb.queue = append(c.cb.queue, b)
	c.cb.cond.Signal()
	c.cb.mu.Unlock()
}

// writeBodies writes the logged bodies of b's entries that no delete
// cancelled, before b is applied (bodylog.go).
func (s *Store) writeBodies(b *commitBatch) error {
	for _, p := range b.bodies {
		if p.cancelled {
			s.bodies.skipped.Add(1)
			continue
		}
		if err := s.bodies.write(p); err != nil {
			return err
		}
	}
	return nil
}

// releaseBodies lets go of b's pending bodies, written or not: the
// committer is done with them.
func (s *Store) releaseBodies(b *commitBatch) {
	for _, p := range b.bodies {
		if !p.cancelled && p.keep != nil {
			p.keep.Release()
		}
		p.keep, p.body = nil, nil
	}
}

// deleteBodySegments deletes the body log's segments emptied by Txns up
// to seq, which are applied and synced.
func (s *Store) deleteBodySegments(seq uint64) {
	for _, err := range s.bodies.deleteSynced(seq) {
		s.log.Warn().Err(err).Msg("deleting a body log segment")
	}
	for _, err := range s.streams.deleteSynced(seq) {
		s.log.Warn().Err(err).Msg("deleting a stream file")
	}
}

// writeChunks writes b's stream chunks before b is applied (streamlog.go);
// each write lets go of its file, written or not.
func (s *Store) writeChunks(b *commitBatch) error {
	var err error
	for i := 0; i < len(b.chunks); {
		j := i + 1
		for j < len(b.chunks) && j-i < maxChunkRun && contiguous(b.chunks[j-1], b.chunks[j]) {
			j++
		}
		if err != nil {
			for _, p := range b.chunks[i:j] {
				s.streams.release(p.file)
			}
		} else {
			err = s.streams.write(b.chunks[i:j])
		}
		i = j
	}
	return err
}

// maxChunkRun bounds the chunks one write gathers.
const maxChunkRun = 256

// callbackLoop runs the callbacks of applied batches in order, then
// recycles the batches.
func (c *committer) callbackLoop() {
	defer close(c.cb.done)
	var batches []*commitBatch
	for {
		c.cb.mu.Lock()
		for len(c.cb.queue) == 0 && !c.cb.closing {
			c.cb.cond.Wait()
		}
		if len(c.cb.queue) == 0 {
			c.cb.mu.Unlock()
			return
		}
		batches, c.cb.queue = c.cb.queue, batches[:0]
		c.cb.mu.Unlock()
		for i, b := range batches {
			for j := range b.waiters {
				if w := &b.waiters[j]; w.done != nil {
					w.done(w.result(b.err))
				}
				b.waiters[j] = waiter{}
			}
			b.b.Reset()
			clear(b.bodies)
			b.bodies, b.bodyBytes = b.bodies[:0], 0
			clear(b.chunks)
			b.chunks, b.chunkBytes = b.chunks[:0], 0
			b.waiters = b.waiters[:0]
			b.drops = b.drops[:0]
			b.durable, b.txns, b.lastSeq, b.err, b.deleted = false, 0, 0, nil, 0
			c.mu.Lock()
			if len(c.free) < maxFreeBatches {
				c.free = append(c.free, b)
			}
			c.mu.Unlock()
			batches[i] = nil
		}
	}
}

// waitApplied returns once every Txn committed before the call is applied
// to the DB (visible to reads), asking the committer not to wait for the
// CommitInterval.
func (c *committer) waitApplied() {
	c.mu.Lock()
	target := c.seq
	if c.applied >= target || c.closed {
		c.mu.Unlock()
		return
	}
	c.flushWant = max(c.flushWant, target)
	c.mu.Unlock()
	c.wake()
	c.mu.Lock()
	for c.applied < target && !c.closed {
		c.appliedCond.Wait()
	}
	c.mu.Unlock()
}

// close commits everything pending, stops the committer, and runs the
// last callbacks.
func (c *committer) close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.wake()
	<-c.done
	c.cb.mu.Lock()
	c.cb.closing = true
	c.cb.cond.Signal()
	c.cb.mu.Unlock()
	<-c.cb.done
}

// dropQueueRefs drops the shared-message references of deleted queues. It
// runs on the committer before the batch deleting them is applied, so the
// DB holds the queues' last state. Messages left without references are
// deleted in the open batch, which follows every Txn whose reference
// changes are already counted (so no entry can outlive its message).
func (s *Store) dropQueueRefs(qids []uint64) {
	c := &s.c
	ids := make([]uint64, 0, 4096)
	flush := func() {
		c.mu.Lock()
		o := c.open
		before := o.b.Len()
		for _, id := range ids {
			c.unrefLocked(id, o)
		}
		if o.b.Len() != before {
			// Count the deletions as a Txn, so reads wait for them.
			o.txns++
			c.seq++
			o.lastSeq = c.seq
		}
		c.mu.Unlock()
		ids = ids[:0]
	}
	for _, qid := range qids {
		lo, hi := queueSpan(prefixRef, qid)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err == nil {
			for ok := it.First(); ok; ok = it.Next() {
				if v := it.Value(); len(v) == 8 {
					ids = append(ids, binary.BigEndian.Uint64(v))
					if len(ids) == cap(ids) {
						flush()
					}
				}
			}
			err = it.Close()
		}
		if err != nil {
			// The references stay counted: the messages are kept until the
			// next Recover, which counts again from the entries.
			s.log.Error().Err(err).Uint64("queue", qid).Msg("reading a deleted queue's shared references")
		}
	}
	flush()
}

// unrefLocked drops one reference (or promise) of message id and deletes
// the message in batch o when none is left. Unknown ids are left alone: the
// message, if any, is Recover's to judge.
func (c *committer) unrefLocked(id uint64, o *commitBatch) {
	st, ok := c.refs[id]
	if !ok {
		return
	}
	if st.count > 0 {
		st.count--
	} else if st.promised > 0 {
		st.promised--
	}
	c.refs[id] = st
	c.deleteIfUnusedLocked(id, o)
}

func (c *committer) deleteIfUnusedLocked(id uint64, o *commitBatch) {
	st, ok := c.refs[id]
	if !ok || st.count > 0 || st.promised > 0 {
		return
	}
	delete(c.refs, id)
	if o.empty() {
		o.first = time.Now()
	}
	var k [messageKeyLen]byte
	if le, ok := c.loggedMsgs[id]; ok {
		delete(c.loggedMsgs, id)
		putLoggedMessageKey(k[:], id)
		o.b.Delete(k[:], nil)
		c.unlogLocked(le, o, c.seq+1)
		return
	}
	putMessageKey(k[:], id)
	o.b.Delete(k[:], nil)
}

// Txn groups writes that become durable together: all of a Txn's writes
// land in the same Pebble batch. A Txn is not safe for concurrent use, and
// must not be used after Commit or Abort.
type Txn struct {
	s     *Store
	b     *pebble.Batch
	pos   int32 // number of queue operations so far (orders refs and drops)
	index bool  // touches queue entries or messages (needs Recover)
	msgs  []newMsg
	refs  []refOp
	drops []dropOp
	cands []uint64 // scratch: messages whose references dropped
	// deleted is the body bytes of the entries it deletes.
	deleted int64
	// logOps are its operations on logged entries, in order: puts with
	// their pending bodies, deletes that may be of one, queue deletions.
	logOps []logOp
	// chunks are its pending stream chunks, streamDrops its deletions of
	// streams' chunks (stream.go).
	chunks      []*pendingChunk
	streamDrops []streamDrop
}

type logOp struct {
	kind logOpKind
	qid  uint64
	pos  entryPos
	pend *pendingBody // logPut
}

type logOpKind uint8

const (
	logPut        logOpKind = iota + 1 // an entry whose body is logged
	logPutMessage                      // a shared message whose body is logged
	logDelete                          // an entry deleted (logged or not: the committer knows)
	logDrop                            // every entry of a queue deleted
)

type newMsg struct {
	id   uint64
	refs int32
}

type refOp struct {
	qid, msgID uint64
	pos        int32
	put        bool // true: a reference added; false: dropped
	entry      bool // the op is on an entry of qid (false: ReleaseRef)
}

type dropOp struct {
	qid uint64
	pos int32
}

// Begin starts a Txn. It takes no lock and allocates nothing in the steady
// state (Txns are pooled).
func (s *Store) Begin() *Txn {
	return s.c.txnPool.Get().(*Txn)
}

// PutMessage stores a message shared by several queues under id (from
// NewID). refs is the number of PutEntry calls about to reference it: they
// may come in this Txn or later ones, and until they have all come (or been
// released with ReleaseRef) the message is kept even if its existing
// references are all deleted. Pass 0 when every reference is added in this
// same Txn.
//
// A body of Options.BodyLogMin bytes or more goes to the body log, and the
// message under its own key (0x0A instead of 0x03); the store holds m.Keep,
// when set, until the body is written.
func (t *Txn) PutMessage(id uint64, m *Message, refs int) {
	t.msgs = append(t.msgs, newMsg{id, int32(refs)})
	t.index = true
	if t.s.bodies.logs(len(m.Body)) {
		if ref, ok := t.reserveBody(m, 0, entryPos{}, id); ok {
			op := t.b.SetDeferred(messageKeyLen, loggedMessageLen(m, ref))
			putLoggedMessageKey(op.Key, id)
			putLoggedMessage(op.Value, m, ref)
			op.Finish()
			return
		}
	}
	op := t.b.SetDeferred(messageKeyLen, messageLen(m))
	putMessageKey(op.Key, id)
	putMessage(op.Value, m)
	op.Finish()
}

// PutEntry adds e at (qid, prio, seq). An entry of a shared message
// (e.MsgID != 0) counts a new reference to it (or fulfils one promised by
// PutMessage).
//
// The body of a persistent inline entry of Options.BodyLogMin bytes or more
// goes to the body log (bodylog.go) and e.Logged says where; the store
// holds e.Msg.Keep, when set, until the body is written. A Logged passed
// in is ignored: each logged entry has a record of its own.
func (t *Txn) PutEntry(qid uint64, prio uint8, seq uint64, e *Entry) {
	e.Logged = BodyRef{}
	if e.MsgID == 0 && e.Persistent && e.Msg != nil && !e.Spill.Spilled() && t.s.bodies.logs(len(e.Msg.Body)) {
		t.logBody(qid, entryPos{prio, seq}, e)
	}
	t.putEntry(qid, prio, seq, e)
	if e.MsgID != 0 {
		op := t.b.SetDeferred(entryKeyLen, 8)
		putEntryKey(op.Key, prefixRef, qid, prio, seq)
		binary.BigEndian.PutUint64(op.Value, e.MsgID)
		op.Finish()
		t.refs = append(t.refs, refOp{qid: qid, msgID: e.MsgID, pos: t.pos, put: true, entry: true})
	}
	t.pos++
}

// logBody reserves the body log record of e's body and keeps the body as
// a pending write; on an error the body stays in the entry, in Pebble.
func (t *Txn) logBody(qid uint64, pos entryPos, e *Entry) {
	if ref, ok := t.reserveBody(e.Msg, qid, pos, 0); ok {
		e.Logged = ref
	}
}

// reserveBody reserves the body log record of m's body, for the entry at
// (qid, pos) or the shared message msgID, and keeps the body as a pending
// write. It reports false, having logged why, when the body log refuses.
func (t *Txn) reserveBody(m *Message, qid uint64, pos entryPos, msgID uint64) (BodyRef, bool) {
	ref, err := t.s.bodies.reserve(len(m.Body))
	if err != nil {
		t.s.log.Error().Err(err).Msg("the body log refused a body; it goes to the index instead")
		return BodyRef{}, false
	}
	p := &pendingBody{ref: ref, qid: qid, pos: pos, msgID: msgID, body: m.Body, keep: m.Keep}
	if p.keep != nil {
		p.keep.Hold()
	}
	kind := logPut
	if msgID != 0 {
		kind = logPutMessage
	}
	t.logOps = append(t.logOps, logOp{kind: kind, qid: qid, pos: pos, pend: p})
	return ref, true
}

// chunkBytes is the size of the Txn's pending stream chunks.
func (t *Txn) chunkBytes() int {
	n := 0
	for _, p := range t.chunks {
		n += len(p.rec)
	}
	return n
}

// bodyBytes is the size of the Txn's pending logged bodies.
func (t *Txn) bodyBytes() int {
	n := 0
	for _, op := range t.logOps {
		if op.pend != nil {
			n += len(op.pend.body)
		}
	}
	return n
}

// dropPending gives back the reservations and holds of a Txn whose puts
// will not be committed.
func (t *Txn) dropPending() {
	for _, p := range t.chunks {
		t.s.streams.release(p.file) // its place stays a gap in the file
	}
	for _, op := range t.logOps {
		if op.kind == logPut || op.kind == logPutMessage {
			t.s.bodies.unreserve(op.pend.ref)
			if op.pend.keep != nil {
				op.pend.keep.Release()
			}
		}
	}
}

// UpdateEntry rewrites the entry at (qid, prio, seq) (delivery state,
// expiry). It counts no reference: the entry must exist, with the same
// MsgID.
func (t *Txn) UpdateEntry(qid uint64, prio uint8, seq uint64, e *Entry) {
	t.putEntry(qid, prio, seq, e)
	t.pos++
}

func (t *Txn) putEntry(qid uint64, prio uint8, seq uint64, e *Entry) {
	op := t.b.SetDeferred(entryKeyLen, entryLen(e))
	putEntryKey(op.Key, prefixEntry, qid, prio, seq)
	putEntry(op.Value, e)
	op.Finish()
	t.index = true
}

// MarkDelivered records that the entry at (qid, prio, seq) was delivered
// deliveries times, in a small key of its own beside the entry: a first
// delivery costs a few bytes, not a rewrite of the message. A later mark
// replaces an earlier one; ScanQueue reports the entry as delivered with
// the larger of the two counts.
func (t *Txn) MarkDelivered(qid uint64, prio uint8, seq uint64, deliveries uint32) {
	op := t.b.SetDeferred(markKeyLen, UvarintLen(uint64(deliveries)))
	putMarkKey(op.Key, qid, prio, seq)
	binary.PutUvarint(op.Value, uint64(deliveries))
	op.Finish()
	t.pos++
	t.index = true
}

// Deleted describes an entry DeleteEntry deletes.
type Deleted struct {
	MsgID  uint64 // the entry's MsgID (0 for an inline message)
	Marked bool   // it may have a delivery mark
	Size   int    // its body's length, for the space it gives back
}

// DeleteEntry deletes the entry at (qid, prio, seq), and its delivery mark
// when d.Marked says it may have one. For a shared message (d.MsgID != 0)
// the reference is dropped, and the last one deletes the message in the
// same batch.
func (t *Txn) DeleteEntry(qid uint64, prio uint8, seq uint64, d Deleted) {
	var k [markKeyLen]byte
	putMarkKey(k[:], qid, prio, seq)
	if d.Marked {
		t.b.Delete(k[:], nil)
	}
	t.b.Delete(k[:entryKeyLen], nil)
	t.deleted += int64(d.Size)
	if t.s.bodies.mayBeLogged(d.Size) {
		t.logOps = append(t.logOps, logOp{kind: logDelete, qid: qid, pos: entryPos{prio, seq}})
	}
	msgID := d.MsgID
	if msgID != 0 {
		k[0] = prefixRef
		t.b.Delete(k[:entryKeyLen], nil)
		t.refs = append(t.refs, refOp{qid: qid, msgID: msgID, pos: t.pos, entry: true})
	}
	t.pos++
	t.index = true
}

// ReleaseRef drops a reference to a shared message that has no entry: one
// promised to PutMessage that will not be added after all (the queue refused
// the message). The last reference deletes the message.
func (t *Txn) ReleaseRef(msgID uint64) {
	t.refs = append(t.refs, refOp{msgID: msgID, pos: t.pos})
	t.pos++
	t.index = true
}

// DeleteQueue deletes every entry of queue qid, all priorities, with two
// range deletions, and drops the queue's references to shared messages (the
// committer reads them from the queue's reference keys, which hold only the
// shared entries, before the batch is applied). Entries put into qid later
// in the same Txn, or in later Txns, are kept.
//
// Operations on qid earlier in the same Txn are void. A DeleteEntry of one
// of the deleted entries in a later Txn would drop a reference twice: after
// DeleteQueue, forget the queue's old entries.
func (t *Txn) DeleteQueue(qid uint64) {
	lo, hi := queueSpan(prefixEntry, qid)
	t.b.DeleteRange(lo, hi, nil)
	lo[0], hi[0] = prefixRef, prefixRef
	t.b.DeleteRange(lo, hi, nil)
	t.drops = append(t.drops, dropOp{qid, t.pos})
	t.logOps = append(t.logOps, logOp{kind: logDrop, qid: qid})
	t.pos++
	t.index = true
}

// PutHeld stores rec in the delay store at (due, seq): due is unix ms, seq
// breaks ties and makes the key unique.
func (t *Txn) PutHeld(due int64, seq uint64, rec []byte) {
	op := t.b.SetDeferred(heldKeyLen, len(rec))
	putHeldKey(op.Key, due, seq)
	copy(op.Value, rec)
	op.Finish()
}

// DeleteHeld deletes the held record at (due, seq).
func (t *Txn) DeleteHeld(due int64, seq uint64) {
	var k [heldKeyLen]byte
	putHeldKey(k[:], due, seq)
	t.b.Delete(k[:], nil)
}

// Abort discards the Txn without writing anything.
func (t *Txn) Abort() {
	t.dropPending()
	t.release()
}

func (t *Txn) release() {
	t.b.Reset()
	t.pos, t.index, t.deleted = 0, false, 0
	t.msgs, t.refs, t.drops, t.cands = t.msgs[:0], t.refs[:0], t.drops[:0], t.cands[:0]
	clear(t.logOps)
	t.logOps = t.logOps[:0]
	clear(t.chunks)
	t.chunks, t.streamDrops = t.chunks[:0], t.streamDrops[:0]
	t.s.c.txnPool.Put(t)
}

// Commit ends the Txn: its writes are appended to the pending batch, after
// those of every earlier Commit call.
//
// With durable, done runs once the batch holding the Txn is committed and
// synced (per Options.Sync); otherwise done (which may be nil) runs once
// the batch is committed (visible to reads) without waiting for a sync.
// Callbacks run on the store's callback goroutine, one at a time, in
// Commit-call order. They may call any method of the store, but while one
// runs no other does: a callback that blocks delays the confirms behind it
// (never a commit). After Close, done runs on a new goroutine with
// ErrClosed.
//
// Commit does not wait for the disk, except as backpressure: while the
// committer is behind by more than 4*MaxBatchBytes of pending writes,
// Commit waits until it takes them.
func (t *Txn) Commit(durable bool, done func(error)) {
	t.commit(durable, done, nil)
}

func (t *Txn) commit(durable bool, done func(error), ch chan error) {
	s := t.s
	c := &s.c
	c.mu.Lock()
	// Writes wait while those before them are more than maxPending: the
	// sealed batches count too, or a run of large Txns (each a batch of
	// its own) would queue in memory without bound while the DB lags.
	for !c.closed && (!c.open.empty() || len(c.sealed) > 0) && c.open.size()+c.sealedBytes+t.b.Len()+t.bodyBytes()+t.chunkBytes() > c.maxPending {
		c.swapped.Wait()
	}
	if c.closed {
		c.mu.Unlock()
		t.dropPending()
		t.release()
		if ch != nil {
			ch <- ErrClosed
		} else if done != nil {
			go done(ErrClosed)
		}
		return
	}
	var failed error
	if t.index && !s.recovered.Load() {
		failed = ErrNotRecovered
	}
	// A large Txn (a big message) becomes a commit batch as it is,
	// rather than being copied into the open one, which would grow to
	// hold it by doubling, copying again each time.
	handOver := failed == nil && t.b.Len() >= handOverBytes
	kick := (len(t.drops) > 0 || handOver) && !c.open.empty()
	if kick {
		// The committer reads the deleted queues' references from the DB:
		// it must hold every earlier write and none of this Txn's, so the
		// Txn starts a batch of its own.
		c.sealLocked()
	}
	o := c.open
	if o.empty() {
		o.first = time.Now()
		kick = true
	}
	if failed == nil {
		before := o.size()
		switch {
		case handOver:
			o.b, t.b = t.b, o.b // o is empty: the Txn keeps an empty batch
		case !t.b.Empty():
			o.b.Apply(t.b, nil)
		}
		o.deleted += t.deleted
		c.applyLoggedMessagesLocked(t, o)
		c.applyRefsLocked(t, o)
		c.applyLoggedLocked(t, o, c.seq+1)
		for _, p := range t.chunks {
			o.chunks = append(o.chunks, p)
			o.chunkBytes += len(p.rec)
		}
		for _, d := range t.streamDrops {
			s.streams.doom(d.sid, d.cut, d.whole, c.seq+1)
		}
		if len(t.drops) > 0 {
			for _, d := range t.drops {
				o.drops = append(o.drops, d.qid)
			}
		}
		if max := s.opts.MaxBatchBytes; before < max && o.size() >= max {
			kick = true
		}
	}
	if failed != nil {
		t.dropPending()
	}
	o.txns++
	c.seq++
	o.lastSeq = c.seq
	if done != nil || ch != nil {
		o.waiters = append(o.waiters, waiter{done: done, ch: ch, err: failed})
	}
	if durable && !o.durable {
		o.durable = true
		kick = true
	}
	c.mu.Unlock()
	if kick {
		c.wake()
	}
	t.release()
}

// applyRefsLocked applies a Txn's reference-count changes, in its order,
// and deletes (in o, after the Txn's writes) the shared messages left
// without references. A message is only judged at the end, so a Txn may
// move a message between queues by deleting one entry before putting the
// other.
func (c *committer) applyRefsLocked(t *Txn, o *commitBatch) {
	for _, m := range t.msgs {
		c.refs[m.id] = refState{promised: m.refs}
		t.cands = append(t.cands, m.id)
	}
	for i := range t.refs {
		r := &t.refs[i]
		if r.entry && t.droppedAfter(r.qid, r.pos) {
			continue // wiped by the Txn's own DeleteQueue, which counts it
		}
		st := c.refs[r.msgID]
		if r.put {
			st.count++
			if st.promised > 0 {
				st.promised--
			}
			c.refs[r.msgID] = st
			continue
		}
		if _, ok := c.refs[r.msgID]; !ok {
			continue
		}
		if st.count > 0 {
			st.count--
		} else if st.promised > 0 {
			st.promised--
		}
		c.refs[r.msgID] = st
		t.cands = append(t.cands, r.msgID)
	}
	for _, id := range t.cands {
		c.deleteIfUnusedLocked(id, o)
	}
}

// applyLoggedLocked applies a Txn's operations on logged entries, in its
// order: a put hangs its pending body on o and enters the index; a delete
// of a logged entry counts its body released, and cancels its write when
// the put is in o too (both then land in one Pebble batch); a queue
// deletion does that for each of the queue's logged entries. seq is the
// Txn's commit seq.
func (c *committer) applyLoggedLocked(t *Txn, o *commitBatch, seq uint64) {
	for _, op := range t.logOps {
		switch op.kind {
		case logPutMessage: // applyLoggedMessagesLocked's
		case logPut:
			p := op.pend
			p.batch = o
			o.bodies = append(o.bodies, p)
			o.bodyBytes += len(p.body)
			q := c.logged[op.qid]
			if q == nil {
				q = make(map[entryPos]loggedEntry)
				c.logged[op.qid] = q
			}
			if old, ok := q[op.pos]; ok {
				c.unlogLocked(old, o, seq) // the entry is written over
			}
			q[op.pos] = loggedEntry{ref: p.ref, pend: p}
		case logDelete:
			q := c.logged[op.qid]
			le, ok := q[op.pos]
			if !ok {
				continue
			}
			delete(q, op.pos)
			if len(q) == 0 {
				delete(c.logged, op.qid)
			}
			c.unlogLocked(le, o, seq)
		case logDrop:
			for _, le := range c.logged[op.qid] {
				c.unlogLocked(le, o, seq)
			}
			delete(c.logged, op.qid)
		}
	}
}

// applyLoggedMessagesLocked hangs the pending bodies of a Txn's logged
// shared messages on o and enters them in the index, before the Txn's
// references are counted (which may delete them at once).
func (c *committer) applyLoggedMessagesLocked(t *Txn, o *commitBatch) {
	for _, op := range t.logOps {
		if op.kind == logPutMessage {
			p := op.pend
			p.batch = o
			o.bodies = append(o.bodies, p)
			o.bodyBytes += len(p.body)
			c.loggedMsgs[p.msgID] = loggedEntry{ref: p.ref, pend: p}
		}
	}
}

// unlogLocked counts a logged entry's body released by the Txn of commit
// seq, cancelling its write if it is still pending in o.
func (c *committer) unlogLocked(le loggedEntry, o *commitBatch, seq uint64) {
	if p := le.pend; p != nil && !p.taken && p.batch == o && !p.cancelled {
		p.cancelled = true
		if p.keep != nil {
			p.keep.Release()
		}
	}
	c.s.bodies.released(le.ref, seq)
}

// droppedAfter reports whether the Txn deletes queue qid after position pos.
func (t *Txn) droppedAfter(qid uint64, pos int32) bool {
	for _, d := range t.drops {
		if d.qid == qid && d.pos > pos {
			return true
		}
	}
	return false
}

// CommitWait commits t durably and waits for the result, which the
// committer sends directly (not through the callback goroutine, so it is
// not ordered with Commit's callbacks).
func (t *Txn) CommitWait() error {
	ch := make(chan error, 1)
	t.commit(true, nil, ch)
	return <-ch
}
