package queue

import (
	"sort"

	"github.com/warrenmq/warren/storage"
)

// level is one priority's ready messages, in three parts by age:
//
//	returned  requeued entries, sorted by Seq: they go back to their place
//	fresh     entries in memory, in Seq order
//	paged     the newest entries, kept only in the store once the queue
//	          outgrew its memory bound: pagedCount of them from pagedFrom on
//
// Once a level pages, every new entry is paged too until the backlog is
// read back, so the three parts never overlap in Seq and FIFO holds.
type level struct {
	prio       uint8
	fresh      ring
	returned   []Entry
	pagedCount int
	pagedBytes int64
	pagedFrom  uint64 // seq to read the paged part from (the store's lower bound)
}

func (l *level) inMemory() int { return l.fresh.len() + len(l.returned) }
func (l *level) len() int      { return l.inMemory() + l.pagedCount }

// peek returns the entry in memory that leaves next: whichever of the two
// in-memory heads is older. The caller pages in first when memory is empty.
func (l *level) peek() *Entry {
	if len(l.returned) > 0 && (l.fresh.len() == 0 || l.returned[0].Seq < l.fresh.front().Seq) {
		return &l.returned[0]
	}
	if l.fresh.len() > 0 {
		return l.fresh.front()
	}
	return nil
}

func (l *level) pop() Entry {
	if len(l.returned) > 0 && (l.fresh.len() == 0 || l.returned[0].Seq < l.fresh.front().Seq) {
		e := l.returned[0]
		l.returned[0] = Entry{}
		l.returned = l.returned[1:]
		if len(l.returned) == 0 {
			l.returned = nil
		}
		return e
	}
	return l.fresh.pop()
}

func (l *level) putBack(e Entry) {
	i := sort.Search(len(l.returned), func(i int) bool { return l.returned[i].Seq >= e.Seq })
	l.returned = append(l.returned, Entry{})
	copy(l.returned[i+1:], l.returned[i:])
	l.returned[i] = e
}

// memory is what a queue keeps of its ready messages in memory.
type memory struct {
	msgs  int
	bytes int64
	// unreported is the change in bytes not yet told to the node's
	// Paging (paging.go).
	unreported int64
}

// MemoryLimit bounds the ready messages a queue keeps in memory; past it,
// further messages wait in the store (transient ones unsynced) until
// consumers have drained the queue enough to read them back. Zero fields
// mean no bound of that kind.
type MemoryLimit struct {
	Messages int   // per queue
	Bytes    int64 // per queue
	// StoredMessages and StoredBytes bound, per queue, the messages kept
	// in memory when the one in question is in the store already (a
	// persistent one, or one paged and read back): dropping it costs
	// nothing, and reading a large one back costs less than the fresh
	// memory that holding a growing backlog takes (BENCHMARKS.md, "Large
	// persistent bodies written once"). A transient message would have
	// to be written to be paged out, which at saturation cost more than
	// the rest of its way through the broker ("Transient messages page
	// by the node's memory"): those are bounded by Node alone.
	StoredMessages int
	StoredBytes    int64
	// Node, when set, bounds the bytes all the node's queues keep
	// (Paging).
	Node *Paging
}

// pageInBatch is how many entries one read from the store brings back.
const pageInBatch = 1024

// overMemory reports whether the queue's in-memory part is at its bound.
// stored says the message in question is in the store already. A queue
// holding nothing is never over the node's bound: it keeps one message
// rather than write it out to read it straight back.
func (q *Queue) overMemory(stored bool) bool {
	lim := q.memLimit
	return q.store != nil && ((lim.Messages > 0 && q.mem.msgs >= lim.Messages) ||
		(lim.Bytes > 0 && q.mem.bytes >= lim.Bytes) ||
		(stored && lim.StoredMessages > 0 && q.mem.msgs >= lim.StoredMessages) ||
		(stored && lim.StoredBytes > 0 && q.mem.bytes >= lim.StoredBytes) ||
		(lim.Node != nil && q.mem.msgs > 0 && lim.Node.over()))
}

// wantsPageIn reports whether a level should read back from the store: it
// has a paged part and the queue's memory has drained to half its bound,
// so reads come in batches rather than one by one.
func (q *Queue) wantsPageIn(l *level) bool {
	if l.pagedCount == 0 {
		return false
	}
	if l.inMemory() == 0 {
		return true
	}
	lim := q.memLimit
	return (lim.Messages == 0 || q.mem.msgs < lim.Messages/2) && (lim.Bytes == 0 || q.mem.bytes < lim.Bytes/2) &&
		(lim.StoredMessages == 0 || q.mem.msgs < lim.StoredMessages/2) &&
		(lim.StoredBytes == 0 || q.mem.bytes < lim.StoredBytes/2) && (lim.Node == nil || lim.Node.low())
}

// pageIn reads the oldest paged entries of l back into memory, at least
// one and at most up to the queue's memory bound. The queue's
// own pending writes are committed first, so the read sees them. A read
// error leaves the entries where they are and is logged by the caller's
// store; the queue then simply has fewer messages in memory.
func (q *Queue) pageIn(l *level) error {
	q.commit()
	want := pageInBatch
	for _, lim := range [...]int{q.memLimit.Messages, q.memLimit.StoredMessages} {
		if lim > 0 && lim/2 < want {
			want = max(1, lim/2)
		}
	}
	var read int
	err := q.store.ScanQueueInto(q.qid, l.prio, l.pagedFrom, want, q.lendBody, func(seq uint64, se *storage.Entry) bool {
		var body []byte
		pooled := se.Lent
		if se.Spill.Spilled() {
			var err error
			if body, pooled, err = q.readSpilled(se); err != nil {
				// The store has logged it. The body is lost: the entry
				// goes, rather than stop the queue at it for good.
				q.dropPaged(l, seq, se)
				read++
				return true
			}
		}
		e := q.entryFromStore(seq, l.prio, se, body, pooled)
		if e.Msg == nil {
			return true
		}
		if e.ExpiresAt != 0 {
			q.expiring = true
		}
		l.fresh.push(e)
		size := int64(e.Msg.Size())
		q.memAdd(&e)
		l.pagedCount--
		l.pagedBytes -= size
		l.pagedFrom = seq + 1
		read++
		// Up to the memory bound, in bytes as in messages: a batch of
		// 1 MiB messages is not read back 1,024 at a time.
		return !q.overMemory(true)
	})
	if err == nil && read == 0 {
		// The store holds none of what the count says: trust the store.
		q.ready -= l.pagedCount
		q.readyBytes -= l.pagedBytes
		l.pagedCount, l.pagedBytes = 0, 0
	}
	if l.pagedCount <= 0 {
		l.pagedCount, l.pagedBytes, l.pagedFrom = 0, 0, 0
	}
	return err
}

// dropPaged deletes paged entry seq of l, whose spilled body could not be
// read; q.mu is held.
func (q *Queue) dropPaged(l *level, seq uint64, se *storage.Entry) {
	q.txn().DeleteEntry(q.qid, l.prio, seq, storage.Deleted{Marked: se.Delivered})
	size := int64(se.Spill.Len)
	q.ready--
	q.readyBytes -= size
	l.pagedCount--
	l.pagedBytes -= size
	l.pagedFrom = seq + 1
}
