package vhost

import (
	"container/heap"
	"sync"
	"time"

	"github.com/warrenmq/warren/core/message"
)

// holdQueue keeps messages an exchange type asked to hold (Result.Hold) and
// routes each through its exchange, with the type it named, when due. One
// timer serves the whole vhost: it is always set for the earliest message.
type holdQueue struct {
	v       *VHost
	mu      sync.Mutex
	items   holdHeap
	timer   *time.Timer
	stopped bool
	seq     uint64 // breaks ties so equal due times keep publish order
}

type held struct {
	due time.Time
	seq uint64
	x   *Exchange
	m   *message.Message
	via string
}

type holdHeap []*held

func (h holdHeap) Len() int { return len(h) }
func (h holdHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
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

func (hq *holdQueue) add(x *Exchange, m *message.Message, via string, d time.Duration) {
	hq.mu.Lock()
	defer hq.mu.Unlock()
	if hq.stopped {
		return
	}
	hq.seq++
	heap.Push(&hq.items, &held{due: time.Now().Add(d), seq: hq.seq, x: x, m: m, via: via})
	hq.arm()
}

// arm sets the timer for the earliest item; hq.mu is held.
func (hq *holdQueue) arm() {
	if len(hq.items) == 0 {
		return
	}
	d := time.Until(hq.items[0].due)
	if hq.timer == nil {
		hq.timer = time.AfterFunc(d, hq.fire)
	} else {
		hq.timer.Reset(d)
	}
}

// fire routes every due message, outside the lock.
func (hq *holdQueue) fire() {
	now := time.Now()
	var due []*held
	hq.mu.Lock()
	for len(hq.items) > 0 && !hq.items[0].due.After(now) {
		due = append(due, heap.Pop(&hq.items).(*held))
	}
	hq.arm()
	hq.mu.Unlock()

	var r Router
	for _, h := range due {
		if _, err := hq.v.route(h.x, h.m, &r, h.via); err != nil {
			hq.v.log.Warn().Err(err).Str("exchange", h.x.Name).Msg("held message could not be routed; dropped")
			continue
		}
		hq.v.enqueue(h.m, &r)
	}
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
