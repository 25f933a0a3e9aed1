// Package hold keeps the messages an exchange type asked to hold
// (exchange.Result.Hold: the delayed-message exchange) until they are due,
// then hands them back to their vhost to be routed through their exchange
// with the type they named.
//
// One timer serves a vhost's Queue, always set for the earliest message
// (or for the next read of the store, below), and one goroutine at a time
// releases what is due: when releasing falls behind (a dead-letter
// cascade, a slow disk), due messages wait their turn instead of each
// timer firing a goroutine of its own to pile up on the same queue locks.
//
// # The window
//
// A Queue without a store keeps every held message in memory (items, a
// heap by due time). One with a store writes every held message to the
// store's delay store (storage/held.go: per exchange and kind, in due
// order): a persistent message held by a durable exchange to the durable
// span, with the publisher's confirm after the sync, as any stored
// message; every other one to the transient span, without a sync, so that
// memory does not have to hold it. In memory it keeps only a window, the
// earliest messages, and reads the next ones from the store as the window
// advances. Messages are ordered by key (due, seq); seq is a store id, so
// keys are unique in the vhost.
//
// Invariants, under mu (windowed):
//
//   - Every held message is in the store until its release (or the purge
//     of its exchange) deletes it there.
//   - w is the window's end: every stored message with key <= w is in
//     items, or popped for release; none with key > w is in items.
//   - more is false only when the store holds no message with key > w.
//   - While loading, the store is read after w with mu released; adds with
//     key > w go to pending (at most batch of them; the window then ends
//     before the earliest left out) as well as to the store, and the merge
//     takes the union of what was read and pending (by seq) up to the new
//     w. So memory holds at most 1.5*capacity + batch held messages.
//   - w never falls below a key popped for release (popped): a message
//     popped and not yet deleted from the store is never read again.
//   - An exchange's messages are counted in its heldExchange (n), whether
//     in memory or not; deleting or purging an exchange replaces it, and
//     whatever of the old one is read or found later is dropped.
//
// A load reads up to batch messages per span after w, and the window ends
// at the earliest last key of a span that filled its batch (all spans
// read to their end: the window holds everything). The fire loop loads
// when the window holds fewer than batch messages or ends within
// lookahead of now, and never grows it past capacity that way; adds inside
// the window can, and past 1.5*capacity the latest messages are evicted
// (they are in the store) and w moves back.
package hold

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/storage"
)

// Store is what a Queue keeps held messages in.
type Store interface {
	NewID() uint64
	Begin() *storage.Txn
	ScanHeldAt(sp storage.HeldSpan, from *storage.HeldAfter, limit int, fn func(due int64, seq uint64, rec []byte) bool) error
}

// Queue is one vhost's held messages, in due order.
type Queue struct {
	vhost    string
	store    Store // nil: every held message is in memory
	log      *zerolog.Logger
	release  func(due []*Held)
	windowed bool // there is a store: every held message is in it

	capacity  int           // most messages a load fills the window to
	batch     int           // messages read per span and load
	lookahead time.Duration // the window reaches at least this far ahead

	mu      lockorder.Mutex[lockorder.HoldQueue]
	items   holdHeap
	byX     map[string]*heldExchange
	total   int
	w       heldKey
	popped  heldKey // the latest key popped for release
	more    bool
	loading bool
	pending []*Held
	// overflow: adds during a load beyond pending's batch were left to the
	// store; the load's window ends before the earliest, overflowMin.
	overflow    bool
	overflowMin heldKey
	retryAt     time.Time // after a failed read of the store
	timer       *time.Timer
	stopped     bool
	releasing   bool   // a goroutine is in fire's release loop
	seq         uint64 // orders items that are not stored

	dropped [dropReasons]atomic.Uint64
}

// Why held messages were dropped rather than routed.
const (
	DropRouteFailed     = iota // routing failed when due (the via type refused, an error)
	DropUnroutable             // routed when due, reached no queue
	DropExchangeDeleted        // their exchange was deleted
	DropPurged                 // purged by an operator
	dropReasons
)

// DropReasonNames names the reasons, for metrics.
var DropReasonNames = [dropReasons]string{"route_failed", "unroutable", "exchange_deleted", "purged"}

type heldKey struct {
	due int64 // unix ms
	seq uint64
}

func (a heldKey) less(b heldKey) bool {
	if a.due != b.due {
		return a.due < b.due
	}
	return a.seq < b.seq
}

// heldExchange is one exchange's held messages; replaced when they are
// purged or the exchange is deleted (gone).
type heldExchange struct {
	name string
	n    int
	gone bool
}

// Held is a held message.
type Held struct {
	heldKey
	xh      *heldExchange
	Msg     *message.Message
	Via     string // the exchange type to route it with when due
	stored  bool   // in the store's delay store under (due, seq)
	durable bool   // in its durable span
}

// Exchange is the exchange it is held by.
func (h *Held) Exchange() string { return h.xh.name }

func (h *Held) span(vhost string) storage.HeldSpan {
	return storage.HeldSpan{VHost: vhost, Exchange: h.xh.name, Transient: !h.durable}
}

type holdHeap []*Held

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].less(h[j].heldKey) }
func (h holdHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *holdHeap) Push(x any)        { *h = append(*h, x.(*Held)) }
func (h *holdHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// The window's default shape: 100,000 small messages are some 30 MB.
const (
	holdCapacity  = 100_000
	holdBatch     = 1024
	holdLookahead = 2 * time.Second
)

// Config is what a Queue needs from its vhost.
type Config struct {
	VHost string
	Store Store // nil: nothing persists, every held message is in memory
	Log   *zerolog.Logger
	// Release routes due messages (Queue.Unstore deletes each from the
	// store in the routing's Txn); it runs on the queue's timer, one call
	// at a time, with no lock of the queue held.
	Release func(due []*Held)
	// The window's shape; zero: the defaults.
	Capacity  int
	Batch     int
	Lookahead time.Duration
}

// New returns an empty Queue; Restore counts what the store holds.
func New(c Config) *Queue {
	hq := &Queue{vhost: c.VHost, store: c.Store, log: c.Log, release: c.Release, windowed: c.Store != nil,
		capacity: cmp.Or(c.Capacity, holdCapacity), batch: cmp.Or(c.Batch, holdBatch),
		lookahead: cmp.Or(c.Lookahead, holdLookahead), byX: make(map[string]*heldExchange),
		w: heldKey{due: math.MinInt64}, popped: heldKey{due: math.MinInt64}}
	return hq
}

// dueAt is when a message held for d from now is due, in unix ms rounded
// up: never before now+d.
func dueAt(now time.Time, d time.Duration) int64 {
	t := now.Add(d)
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// Add holds m for d, then has it routed from exchange (durable or not)
// with type via. It reports whether the publisher's confirm must wait for
// the store's sync (a persistent message held by a durable exchange).
func (hq *Queue) Add(exchange string, durable bool, m *message.Message, via string, d time.Duration) (stored bool) {
	h := &Held{heldKey: heldKey{due: dueAt(time.Now(), d)}, Msg: m, Via: via, durable: m.Persistent && durable}
	var rec []byte
	st := hq.store
	if st != nil {
		h.seq = st.NewID()
		var err error
		if rec, err = encode(h); err != nil {
			hq.log.Error().Err(err).Str("exchange", exchange).Msg("held message could not be encoded for the store; it is kept in memory only")
		}
	}
	hq.mu.Lock()
	defer hq.mu.Unlock()
	if hq.stopped {
		return false
	}
	h.xh = hq.exchange(exchange)
	if rec != nil {
		// Committed under mu: a load that starts after this add finds the
		// message in the store, one under way finds it in pending.
		t := st.Begin()
		t.PutHeldAt(h.span(hq.vhost), h.due, h.seq, rec)
		t.Commit(false, nil)
		h.stored = true
	} else if st == nil {
		hq.seq++
		h.seq = hq.seq
	}
	h.xh.n++
	hq.total++
	hq.place(h)
	return h.stored && h.durable
}

// exchange returns the current heldExchange of name; mu is held.
func (hq *Queue) exchange(name string) *heldExchange {
	xh := hq.byX[name]
	if xh == nil {
		xh = &heldExchange{name: name}
		hq.byX[name] = xh
	}
	return xh
}

// place puts a new held message in the window or leaves it to the store;
// mu is held.
func (hq *Queue) place(h *Held) {
	switch {
	case !hq.windowed || !h.stored:
		heap.Push(&hq.items, h)
	case hq.loading && hq.w.less(h.heldKey):
		if len(hq.pending) < hq.batch {
			hq.pending = append(hq.pending, h)
		} else if !hq.overflow || h.less(hq.overflowMin) {
			// Left to the store: the window will end before it.
			hq.overflow, hq.overflowMin = true, h.heldKey
		}
	case !hq.w.less(h.heldKey):
		heap.Push(&hq.items, h)
		hq.evictOver()
	case !hq.more && len(hq.items) < hq.capacity:
		// The store holds nothing after w: the window grows.
		heap.Push(&hq.items, h)
		hq.w = h.heldKey
	default:
		hq.more = true
	}
	hq.arm()
}

// evictOver drops the latest messages from memory once the window holds
// over 1.5*capacity, keeping capacity of them and those up to popped, and
// moves w back; mu is held.
func (hq *Queue) evictOver() {
	if !hq.windowed || hq.loading || len(hq.items) <= hq.capacity+hq.capacity/2 {
		return
	}
	items := []*Held(hq.items)
	slices.SortFunc(items, func(a, b *Held) int {
		if a.less(b.heldKey) {
			return -1
		}
		return 1
	})
	cut := hq.capacity
	for cut < len(items) && !hq.popped.less(items[cut].heldKey) {
		cut++
	}
	kept := items[:cut]
	for _, h := range items[cut:] {
		if !h.stored { // cannot be read back: kept
			kept = append(kept, h)
		}
	}
	hq.w = items[cut-1].heldKey
	clear(items[len(kept):])
	hq.items = kept
	heap.Init(&hq.items) // a sorted slice is a heap, but for the unstored ones
	hq.more = true
}

// loadAt says when the window must be read further from the store; mu is
// held.
func (hq *Queue) loadAt() (time.Time, bool) {
	if !hq.windowed || !hq.more || hq.loading || len(hq.items) >= hq.capacity {
		return time.Time{}, false
	}
	var at time.Time // at once
	if len(hq.items) >= hq.batch {
		at = time.UnixMilli(hq.w.due).Add(-hq.lookahead)
	}
	if hq.retryAt.After(at) {
		at = hq.retryAt
	}
	return at, true
}

// arm sets the timer for the earliest item or the next load; mu is held.
func (hq *Queue) arm() {
	if hq.stopped {
		return
	}
	at, ok := hq.loadAt()
	if len(hq.items) > 0 {
		if due := time.UnixMilli(hq.items[0].due); !ok || due.Before(at) {
			at, ok = due, true
		}
	}
	if !ok {
		return
	}
	d := time.Until(at)
	if hq.timer == nil {
		hq.timer = time.AfterFunc(d, hq.fire)
	} else {
		hq.timer.Reset(d)
	}
}

// releaseBatch is how many due messages are routed and moved into their
// queues in one Txn.
const releaseBatch = 256

// fire routes every due message, outside the lock, until none is due,
// reading the store further whenever the window runs short; then it sets
// the timer for the next. A fire while another goroutine is releasing
// leaves the work to that one.
func (hq *Queue) fire() {
	hq.mu.Lock()
	if hq.releasing {
		hq.mu.Unlock()
		return
	}
	hq.releasing = true
	var due []*Held
	for !hq.stopped {
		now := time.Now()
		if at, ok := hq.loadAt(); ok && !now.Before(at) {
			hq.load()
			continue
		}
		nowMs := now.UnixMilli()
		due = due[:0]
		for len(hq.items) > 0 && hq.items[0].due <= nowMs && len(due) < releaseBatch {
			h := heap.Pop(&hq.items).(*Held)
			if h.stored && hq.popped.less(h.heldKey) {
				hq.popped = h.heldKey
			}
			if h.xh.gone {
				continue
			}
			h.xh.n--
			hq.total--
			due = append(due, h)
		}
		if len(due) == 0 {
			break
		}
		hq.mu.Unlock()
		hq.release(due)
		clear(due)
		hq.mu.Lock()
	}
	hq.releasing = false
	hq.arm()
	hq.mu.Unlock()
}

// load reads the window further from the store; mu is held, and released
// while the store is read.
func (hq *Queue) load() {
	type span struct {
		sp storage.HeldSpan
		xh *heldExchange
	}
	var spans []span
	for name, xh := range hq.byX {
		if xh.n > 0 {
			spans = append(spans,
				span{storage.HeldSpan{VHost: hq.vhost, Exchange: name}, xh},
				span{storage.HeldSpan{VHost: hq.vhost, Exchange: name, Transient: true}, xh})
		}
	}
	w0 := hq.w
	hq.loading = true
	hq.mu.Unlock()

	var read []*Held
	full := false // a span filled its batch: the window ends at end
	end := heldKey{due: math.MaxInt64, seq: math.MaxUint64}
	var from *storage.HeldAfter
	if w0.due != math.MinInt64 {
		from = &storage.HeldAfter{Due: w0.due, Seq: w0.seq}
	}
	var err error
	for _, s := range spans {
		n := 0
		var last heldKey
		err = hq.store.ScanHeldAt(s.sp, from, hq.batch, func(due int64, seq uint64, rec []byte) bool {
			n++
			last = heldKey{due: due, seq: seq}
			h, derr := decode(rec)
			if derr != nil {
				hq.log.Error().Err(derr).Str("exchange", s.sp.Exchange).Int64("due", due).Msg("held message in the store cannot be read; skipped")
				return true
			}
			h.heldKey, h.xh, h.stored, h.durable = last, s.xh, true, !s.sp.Transient
			read = append(read, h)
			return true
		})
		if err != nil {
			break
		}
		if n == hq.batch {
			full = true
			if last.less(end) {
				end = last
			}
		}
	}

	hq.mu.Lock()
	hq.loading = false
	pending := hq.pending
	hq.pending = nil
	if err != nil {
		hq.log.Error().Err(err).Msg("could not read held messages from the store; trying again in a second")
		hq.retryAt = time.Now().Add(time.Second)
		// What was added meanwhile is in the store, after w.
		hq.more = hq.more || len(pending) > 0 || hq.overflow
		hq.overflow = false
		return
	}
	hq.retryAt = time.Time{}
	if hq.overflow {
		if lim := (heldKey{due: hq.overflowMin.due, seq: hq.overflowMin.seq - 1}); lim.less(end) {
			end = lim
		}
		full, hq.overflow = true, false
	}
	seen := make(map[uint64]bool, len(read))
	w := w0
	take := func(h *Held) {
		if (full && end.less(h.heldKey)) || h.xh.gone || seen[h.seq] {
			return
		}
		seen[h.seq] = true
		heap.Push(&hq.items, h)
		if w.less(h.heldKey) {
			w = h.heldKey
		}
	}
	for _, h := range read {
		take(h)
	}
	for _, h := range pending {
		take(h)
	}
	if full {
		w = end
	}
	hq.w, hq.more = w, full
	hq.evictOver()
}

// Unstore deletes h from the delay store in txn (begun when nil, and
// returned), as its release routes it.
func (hq *Queue) Unstore(txn *storage.Txn, h *Held) *storage.Txn {
	if !h.stored {
		return txn
	}
	if txn == nil {
		txn = hq.store.Begin()
	}
	txn.DeleteHeldAt(h.span(hq.vhost), h.due, h.seq)
	return txn
}

// Unroutable counts a released message that reached no queue.
func (hq *Queue) Unroutable() { hq.dropped[DropUnroutable].Add(1) }

// Drop counts and logs a held message that could not be routed when due,
// with what finds it: exchange, via type, routing key, message id and due
// time (the vhost is in the logger).
func (hq *Queue) Drop(h *Held, reason int, err error) {
	hq.dropped[reason].Add(1)
	ev := hq.log.Warn().Err(err).Str("exchange", h.xh.name).Str("via", h.Via).Str("routing_key", h.Msg.RoutingKey).
		Time("due", time.UnixMilli(h.due)).Str("reason", DropReasonNames[reason])
	if view, verr := h.Msg.View(); verr == nil {
		if id, ok := view.MessageID(); ok {
			ev = ev.Str("message_id", id)
		}
	}
	ev.Msg("held message dropped when due")
}

// DropExchange forgets every message held for exchange name, in memory
// and in the store (one range deletion), and reports how many there were.
func (hq *Queue) DropExchange(name string, reason int) int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	xh := hq.byX[name]
	if xh == nil {
		return 0
	}
	delete(hq.byX, name)
	xh.gone = true
	n := xh.n
	hq.total -= n
	hq.dropped[reason].Add(uint64(n))
	hq.items = slices.DeleteFunc(hq.items, func(h *Held) bool { return h.xh == xh })
	heap.Init(&hq.items)
	hq.pending = slices.DeleteFunc(hq.pending, func(h *Held) bool { return h.xh == xh })
	if st := hq.store; st != nil {
		// Under mu, after every put of this exchange's old messages and
		// before any of a new one.
		t := st.Begin()
		t.DeleteHeldOf(hq.vhost, name)
		t.Commit(false, nil)
	}
	hq.arm()
	return n
}

// Restore counts n messages of exchange name that are in the store (the
// broker found them at start); the window reads them when due.
func (hq *Queue) Restore(name string, n int) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.exchange(name).n += n
	hq.total += n
	hq.more = true
	hq.arm()
}

// Len is how many messages are held.
func (hq *Queue) Len() int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return hq.total
}

// Counts returns the held messages per exchange.
func (hq *Queue) Counts() map[string]int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	out := make(map[string]int, len(hq.byX))
	for name, xh := range hq.byX {
		if xh.n > 0 {
			out[name] = xh.n
		}
	}
	return out
}

// InMemory reports how many held messages are in memory (the window).
func (hq *Queue) InMemory() int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return len(hq.items) + len(hq.pending)
}

// Stop stops the timer; nothing is released or held after it.
func (hq *Queue) Stop() {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.stopped = true
	if hq.timer != nil {
		hq.timer.Stop()
	}
}

// Dropped is, per reason (DropReasonNames), how many held messages were
// dropped rather than routed.
func (hq *Queue) Dropped() [dropReasons]uint64 {
	var out [dropReasons]uint64
	for i := range out {
		out[i] = hq.dropped[i].Load()
	}
	return out
}

// Message is a held message as an operator lists it.
type Message struct {
	Due     time.Time
	Via     string
	Message *message.Message
	Durable bool // survives a restart
}

// errNoStore stands in for a store read when there is none.
var errNoStore = errors.New("no store")

// List lists the messages exchange holds, in due order, skipping the
// first offset and returning at most limit; total is how many it holds.
// With a store they are read from it.
func (hq *Queue) List(exchange string, offset, limit int) (list []Message, total int, err error) {
	hq.mu.Lock()
	if xh := hq.byX[exchange]; xh != nil {
		total = xh.n
	}
	var all []*Held
	if !hq.windowed {
		for _, h := range hq.items {
			if h.xh.name == exchange {
				all = append(all, h)
			}
		}
	}
	hq.mu.Unlock()
	if hq.windowed {
		if all, err = hq.read(exchange, offset+limit); err != nil {
			return nil, total, err
		}
	}
	slices.SortFunc(all, func(a, b *Held) int {
		if a.less(b.heldKey) {
			return -1
		}
		return 1
	})
	if offset >= len(all) {
		return nil, total, nil
	}
	for _, h := range all[offset:min(len(all), offset+limit)] {
		list = append(list, Message{Due: time.UnixMilli(h.due), Via: h.Via, Message: h.Msg, Durable: h.durable})
	}
	return list, total, nil
}

// read reads the first n messages of both of an exchange's spans.
func (hq *Queue) read(exchange string, n int) ([]*Held, error) {
	if hq.store == nil {
		return nil, errNoStore
	}
	var out []*Held
	for _, transient := range []bool{false, true} {
		err := hq.store.ScanHeldAt(storage.HeldSpan{VHost: hq.vhost, Exchange: exchange, Transient: transient}, nil, n,
			func(due int64, seq uint64, rec []byte) bool {
				if h, err := decode(rec); err == nil {
					h.heldKey, h.durable = heldKey{due: due, seq: seq}, !transient
					out = append(out, h)
				}
				return true
			})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
