package vhost

import (
	"container/heap"
	"sync"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// holdQueue keeps messages an exchange type asked to hold (Result.Hold)
// and routes each through its exchange, with the type it named, when due.
// One timer serves the whole vhost, always set for the earliest message,
// and one goroutine at a time releases what is due: when releasing falls
// behind (a dead-letter cascade, a slow disk), due messages wait their
// turn instead of each timer firing a goroutine of its own to pile up on
// the same queue locks.
//
// A persistent message held by a durable exchange is also written to the
// store's delay store (ordered by due time), so it survives a restart;
// when it comes due, deleting it from there and storing it in its queues
// is one Txn, as with dead letters.
type holdQueue struct {
	v         *VHost
	mu        sync.Mutex
	items     holdHeap
	timer     *time.Timer
	stopped   bool
	releasing bool   // a goroutine is in fire's release loop
	seq       uint64 // orders items that are not stored
}

type held struct {
	due    int64 // unix ms
	seq    uint64
	x      string // exchange name: looked up when due, in case it went
	m      *message.Message
	via    string
	stored bool // in the store's delay store under (due, seq)
}

type holdHeap []*held

func (h holdHeap) Len() int { return len(h) }
func (h holdHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h holdHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *holdHeap) Push(x any)   { *h = append(*h, x.(*held)) }
func (h *holdHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

func newHoldQueue(v *VHost) *holdQueue { return &holdQueue{v: v} }

// add holds m for d, then routes it from x with type via. It reports
// whether the message was written to the store (the publisher's confirm
// then waits for a sync).
func (hq *holdQueue) add(x *Exchange, m *message.Message, via string, d time.Duration) (stored bool) {
	h := &held{due: time.Now().Add(d).UnixMilli(), x: x.Name, m: m, via: via}
	if st := hq.v.store; st != nil && m.Persistent && x.Durable {
		h.seq, h.stored = st.NewID(), true
		if rec, err := heldRecord(hq.v.Name, h); err == nil {
			t := st.Begin()
			t.PutHeld(h.due, h.seq, rec)
			t.Commit(false, nil)
		} else {
			h.stored = false
		}
	}
	hq.push(h)
	return h.stored
}

func (hq *holdQueue) push(h *held) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	if hq.stopped {
		return
	}
	if !h.stored {
		hq.seq++
		h.seq = hq.seq
	}
	heap.Push(&hq.items, h)
	hq.arm()
}

// arm sets the timer for the earliest item; hq.mu is held.
func (hq *holdQueue) arm() {
	if len(hq.items) == 0 {
		return
	}
	d := time.Until(time.UnixMilli(hq.items[0].due))
	if hq.timer == nil {
		hq.timer = time.AfterFunc(d, hq.fire)
	} else {
		hq.timer.Reset(d)
	}
}

// fire routes every due message, outside the lock, until none is due;
// then it sets the timer for the next. A fire while another goroutine is
// releasing leaves the work to that one.
func (hq *holdQueue) fire() {
	hq.mu.Lock()
	if hq.releasing {
		hq.mu.Unlock()
		return
	}
	hq.releasing = true
	for {
		now := time.Now().UnixMilli()
		var due []*held
		for !hq.stopped && len(hq.items) > 0 && hq.items[0].due <= now {
			due = append(due, heap.Pop(&hq.items).(*held))
		}
		if len(due) == 0 {
			hq.releasing = false
			if !hq.stopped {
				hq.arm()
			}
			hq.mu.Unlock()
			return
		}
		hq.mu.Unlock()
		for _, h := range due {
			hq.release(h)
		}
		hq.mu.Lock()
	}
}

// release routes a due message and moves it into its queues.
func (hq *holdQueue) release(h *held) {
	v := hq.v
	var txn *storage.Txn
	if h.stored && v.store != nil {
		txn = v.store.Begin()
		txn.DeleteHeld(h.due, h.seq)
	}
	var moves []move
	var targets []*queue.Queue
	if x, err := v.Exchange(h.x); err != nil {
		v.log.Warn().Str("exchange", h.x).Msg("held message's exchange is gone; message dropped")
	} else {
		var r Router
		if _, err := v.route(x, h.m, &r, h.via); err != nil {
			v.log.Warn().Err(err).Str("exchange", h.x).Msg("held message could not be routed; dropped")
		} else {
			v.holdPending(h.m, &r)
			v.forward(h.m, &r, false)
			if len(r.queues) > 0 {
				moves = []move{{m: h.m, queues: append([]*queue.Queue(nil), r.queues...)}}
				targets = moves[0].queues
			}
		}
	}
	v.moveDeadLetters(v.moveInto(moves, targets, txn, nil))
}

// Held reports how many messages are being held.
func (hq *holdQueue) len() int {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	return len(hq.items)
}

func (hq *holdQueue) stop() {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	hq.stopped = true
	if hq.timer != nil {
		hq.timer.Stop()
	}
}

// heldRecord encodes a held message for the delay store.
func heldRecord(vhost string, h *held) ([]byte, error) {
	return protocol.AppendTable(nil, protocol.Table{
		"vhost": vhost, "exchange": h.x, "via": h.via,
		"message_exchange": h.m.Exchange, "routing_key": h.m.RoutingKey,
		"flags": int32(h.m.Flags), "properties": h.m.Props, "body": h.m.Body,
	})
}

// HeldVHost reads which vhost a delay-store record belongs to.
func HeldVHost(rec []byte) (string, bool) {
	t, _, err := protocol.DecodeTable(rec)
	if err != nil {
		return "", false
	}
	name, ok := t["vhost"].(string)
	return name, ok
}

// RestoreHeld puts a message from the delay store back on hold.
func (v *VHost) RestoreHeld(due int64, seq uint64, rec []byte) error {
	t, _, err := protocol.DecodeTable(rec)
	if err != nil {
		return err
	}
	str := func(k string) string { s, _ := t[k].(string); return s }
	raw := func(k string) []byte { b, _ := t[k].([]byte); return b }
	flags, _ := queue.Integer(t["flags"])
	m, err := message.New(str("message_exchange"), str("routing_key"), uint16(flags), raw("properties"), raw("body"))
	if err != nil {
		return err
	}
	v.holds.push(&held{due: due, seq: seq, x: str("exchange"), m: m, via: str("via"), stored: true})
	return nil
}

// HeldCount reports how many messages the vhost is holding.
func (v *VHost) HeldCount() int { return v.holds.len() }
