package queue

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// TestPagingByNodeMemory: queues sharing a node's Paging keep messages in
// memory until their total reaches its limit, whichever queue holds them;
// then each pages its new messages out, keeps its order, and reads them
// back once the node's total is under half the limit. Purging and deleting
// give the memory back.
func TestPagingByNodeMemory(t *testing.T) {
	st := memStore(t)
	const size = 64 << 10
	const limit = 4 << 20 // 64 messages of 64 KiB, give or take their overhead
	node := NewPaging(limit)
	mk := func() *Queue {
		q, _ := newQueue(t, nil, func(c *Config) {
			c.Store = st
			c.Memory = MemoryLimit{Node: node}
		})
		return q
	}
	a, b := mk(), mk()
	body := func(q string, i int) string { return fmt.Sprintf("%s%0*d", q, size-1, i) }
	// One queue alone may take the whole limit: no per-queue bound.
	const n = 100
	for i := range n {
		a.Enqueue(msg(t, body("a", i), 0, false))
	}
	held := func(q *Queue) (int, int64) {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.mem.msgs, q.mem.bytes
	}
	am, ab := held(a)
	if ab < limit-2*reportStep || ab > limit+2*size {
		t.Fatalf("queue a holds %d bytes (%d messages) in memory; the node's limit is %d", ab, am, limit)
	}
	// The node is at its limit: the other queue keeps one message and
	// pages the rest.
	for i := range 10 {
		b.Enqueue(msg(t, body("b", i), 0, false))
	}
	if bm, _ := held(b); bm != 1 {
		t.Fatalf("queue b holds %d messages with the node at its limit, want 1", bm)
	}
	if used := node.Used(); used > limit+2*reportStep+2*size {
		t.Fatalf("the node holds %d bytes, limit %d", used, limit)
	}
	// Everything comes back in order, and the node's memory goes with it.
	for _, c := range []struct {
		q    *Queue
		name string
		n    int
	}{{a, "a", n}, {b, "b", 10}} {
		for i := range c.n {
			d, _, ok := c.q.Get(true)
			if !ok || string(d.Entry.Msg.Body) != body(c.name, i) {
				t.Fatalf("queue %s message %d: %v", c.name, i, ok)
			}
			if used := node.Used(); used > limit+2*reportStep+2*size {
				t.Fatalf("queue %s after %d gets: the node holds %d bytes, limit %d", c.name, i+1, used, limit)
			}
		}
	}
	if used := node.Used(); used < -2*reportStep || used > 2*reportStep {
		t.Errorf("the node holds %d bytes with its queues empty", used)
	}
	// Purge and delete take back what their queues reported.
	for i := range 20 {
		a.Enqueue(msg(t, body("a", i), 0, false))
		b.Enqueue(msg(t, body("b", i), 0, false))
	}
	a.Purge()
	if _, err := b.Delete(false, false); err != nil {
		t.Fatal(err)
	}
	if used := node.Used(); used != 0 {
		t.Errorf("the node holds %d bytes after a purge and a delete", used)
	}
}

// TestStoredBoundsOnlyStoredMessages: StoredBytes and StoredMessages
// page out the persistent messages of a durable queue, which are in the
// store anyway, while transient ones (which paging would have to write)
// stay in memory up to the node's bound.
func TestStoredBoundsOnlyStoredMessages(t *testing.T) {
	const size = 64 << 10
	for _, c := range []struct {
		name  string
		limit MemoryLimit
		held  int // the most persistent messages kept in memory
	}{
		{"bytes", MemoryLimit{StoredBytes: 4 * size}, 4 + 1},
		{"messages", MemoryLimit{StoredMessages: 4}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := newQueue(t, nil, func(cfg *Config) {
				cfg.Store = memStore(t)
				cfg.Durable = true
				cfg.Memory = c.limit
				cfg.Memory.Node = NewPaging(64 << 20)
			})
			body := func(i int) string { return fmt.Sprintf("%0*d", size, i) }
			held := func() int {
				q.mu.Lock()
				defer q.mu.Unlock()
				return q.mem.msgs
			}
			for i := range 20 {
				q.Enqueue(msg(t, body(i), 0, true))
			}
			if n := held(); n > c.held {
				t.Fatalf("%d persistent messages in memory, want at most %d", n, c.held)
			}
			q.Purge()
			for i := range 20 {
				q.Enqueue(msg(t, body(i), 0, false))
			}
			if n := held(); n != 20 {
				t.Fatalf("%d of 20 transient messages in memory, with the node far from its bound", n)
			}
			for i := range 20 {
				if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != body(i) {
					t.Fatalf("message %d: %v", i, ok)
				}
			}
		})
	}
}

// TestTinyMessagesCountTowardsTheNodeBound: with no bound per queue, a
// backlog of tiny transient messages is bounded by the node's Paging,
// which counts each message's bookkeeping (entryMemory) and properties
// beside its body; counting bodies alone, a 1 MiB bound would hold 65,536
// 16-byte messages, whatever headers they carried.
func TestTinyMessagesCountTowardsTheNodeBound(t *testing.T) {
	const limit = 1 << 20
	for _, c := range []struct {
		name    string
		headers int // bytes of header value
	}{{"bare", 0}, {"with 2 KiB of headers", 2048}} {
		t.Run(c.name, func(t *testing.T) {
			node := NewPaging(limit)
			q, _ := newQueue(t, nil, func(cfg *Config) {
				cfg.Store = memStore(t)
				cfg.Memory = MemoryLimit{Node: node}
			})
			p := protocol.Properties{}
			if c.headers > 0 {
				p.Flags |= protocol.FlagHeaders
				p.Headers = protocol.Table{"h": strings.Repeat("x", c.headers)}
			}
			props, _ := p.Append(nil)
			each := int64(16 + len(props) + entryMemory)
			const n = 20000
			for i := range n {
				m, err := message.New("", "q", p.Flags, props, fmt.Appendf(nil, "%016d", i))
				if err != nil {
					t.Fatal(err)
				}
				q.Enqueue(m)
			}
			q.mu.Lock()
			held := q.mem.msgs
			q.mu.Unlock()
			if most := (limit + 2*reportStep) / each; int64(held) > most || int64(held) < limit/2/each {
				t.Fatalf("%d of %d 16-byte messages in memory; the node's bound of %d bytes holds about %d", held, n, limit, limit/each)
			}
			if got := q.MemoryBytes(); got != int64(held)*each {
				t.Fatalf("MemoryBytes %d for %d messages of %d bytes each", got, held, each)
			}
			for i := range n {
				if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != fmt.Sprintf("%016d", i) {
					t.Fatalf("message %d: %v", i, ok)
				}
			}
			if used := node.Used(); used != 0 {
				t.Fatalf("the node still counts %d bytes with the queue empty", used)
			}
		})
	}
}

// TestSpillWritesOutsideTheLock: transient bodies paged out while
// publishers and a consumer work the queue at once (the spill's writes
// are made after the queue's lock is released, and a read may come first)
// come back intact and in each publisher's order. Run under -race in CI.
func TestSpillWritesOutsideTheLock(t *testing.T) {
	const size, publishers, each = 64 << 10, 2, 150
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = memStore(t)
		c.Memory = MemoryLimit{Bytes: 4 * size}
	})
	body := func(p, i int) string { return fmt.Sprintf("%d-%0*d", p, size, i) }
	done := make(chan struct{})
	for p := range publishers {
		go func() {
			for i := range each {
				q.Enqueue(msg(t, body(p, i), 0, false))
			}
			done <- struct{}{}
		}()
	}
	next := make([]int, publishers)
	got, finished := 0, 0
	deadline := time.Now().Add(time.Minute)
	for got < publishers*each {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages after a minute", got, publishers*each)
		}
		select {
		case <-done:
			finished++
		default:
		}
		d, _, ok := q.Get(true)
		if !ok {
			if finished == publishers && q.Stats().Ready == 0 {
				t.Fatalf("the queue ran dry after %d of %d messages", got, publishers*each)
			}
			runtime.Gosched()
			continue
		}
		var p, i int
		if _, err := fmt.Sscanf(string(d.Entry.Msg.Body[:2]), "%d-", &p); err != nil || p < 0 || p >= publishers {
			t.Fatalf("message %d: a body that is no publisher's: %.20q", got, d.Entry.Msg.Body)
		}
		i = next[p]
		if string(d.Entry.Msg.Body) != body(p, i) {
			t.Fatalf("publisher %d: message %d came back as %.30q", p, i, d.Entry.Msg.Body)
		}
		next[p]++
		got++
	}
}
