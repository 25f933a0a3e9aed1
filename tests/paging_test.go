package tests

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
)

// A queue past its memory bound keeps the rest in the store and hands it
// out in order.

func smallMemory(c *config.Config) {
	c.Storage.QueueMemoryMessages = 100
	c.Storage.QueueMemoryBytes = 64 << 10
}

func TestBacklogBeyondMemoryBoundDrainsInOrder(t *testing.T) {
	s := startWarren(t, smallMemory)
	_, ch := confirmChannel(t, s)
	for _, durable := range []bool{false, true} {
		q := declareQueue(t, s, ch, fmt.Sprint("backlog-", durable), nil)
		if durable {
			q = uniq(t, "durable-backlog")
			if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		const n = 3000
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
		for i := 0; i < n; i++ {
			mode := amqp.Transient
			if i%2 == 0 {
				mode = amqp.Persistent
			}
			if err := ch.PublishWithContext(context.Background(), "", q, false, false,
				amqp.Publishing{DeliveryMode: mode, Body: []byte(strconv.Itoa(i))}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			if c := <-confirms; !c.Ack {
				t.Fatal("nack")
			}
		}
		if got := count(t, ch, q); got != n {
			t.Fatalf("queue reports %d messages, want %d", got, n)
		}
		d := consume(t, ch, q, false)
		for i := 0; i < n; i++ {
			m := receive(t, d)
			if string(m.Body) != strconv.Itoa(i) {
				t.Fatalf("durable=%v: message %d is %q", durable, i, m.Body)
			}
			if err := m.Ack(false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPagedPriorityQueueKeepsPriorityOrder(t *testing.T) {
	s := startWarren(t, smallMemory)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", amqp.Table{"x-max-priority": int32(3)})
	const n = 600
	for i := 0; i < n; i++ {
		publishConfirmed(t, ch, "", q, amqp.Publishing{Priority: uint8(i % 4), Body: []byte(strconv.Itoa(i))})
	}
	last := map[uint8]int{}
	prev := uint8(3)
	for i := 0; i < n; i++ {
		m := get(t, ch, q)
		if m.Priority > prev {
			t.Fatalf("priority %d after %d", m.Priority, prev)
		}
		prev = m.Priority
		v, _ := strconv.Atoi(string(m.Body))
		if l, ok := last[m.Priority]; ok && v < l {
			t.Fatalf("FIFO broken within priority %d: %d after %d", m.Priority, v, l)
		}
		last[m.Priority] = v
	}
}

// TestPagedBacklogSurvivesRestart restarts with most of a durable queue's
// backlog only in the store.
func TestPagedBacklogSurvivesRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	const memory = "[storage]\nqueue_memory_messages = 50\n"
	p := startProcessWith(t, dir, memory)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("paged", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishPersistent(t, ch, "", "paged", "m", 1000)
	// A few delivered before the restart come back redelivered, first.
	for i := 0; i < 3; i++ {
		if _, ok, err := ch.Get("paged", false); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	// Delivery marks are ordinary (unsynced) writes, committed within a few
	// milliseconds; a clean stop commits them all.
	p.stop(syscall.SIGTERM)

	p = startProcessWith(t, dir, memory)
	_, ch = dialProcess(t, p)
	got := getAll(t, ch, "paged")
	if len(got) != 1000 {
		t.Fatalf("got %d messages after the restart, want 1000", len(got))
	}
	for i, m := range got {
		if string(m.Body) != "m-"+strconv.Itoa(i) || m.Redelivered != (i < 3) {
			t.Fatalf("message %d: %q redelivered=%v", i, m.Body, m.Redelivered)
		}
	}
}

// Large bodies paged out of a transient queue, or transient ones out of a
// durable queue, go to the queue's spill file and come back intact, into
// pooled buffers, in order; once the queues are drained no spill file is
// left.
func TestPagedLargeBodiesStayIntact(t *testing.T) {
	var dataDir string
	s := startWarren(t, smallMemory, func(c *config.Config) { dataDir = c.Storage.DataDir })
	_, ch := confirmChannel(t, s)
	durable := uniq(t, "spilled-durable")
	if _, err := ch.QueueDeclare(durable, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	spillFiles := func() []os.DirEntry {
		names, err := os.ReadDir(filepath.Join(dataDir, "spill"))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return names
	}
	for _, q := range []string{declareQueue(t, s, ch, "spilled", nil), durable} {
		const n = 120
		for i := 0; i < n; i++ {
			mode := amqp.Transient
			if i%3 == 0 {
				mode = amqp.Persistent
			}
			publishConfirmed(t, ch, "", q, amqp.Publishing{DeliveryMode: mode, Body: pooledBody(i)})
		}
		if len(spillFiles()) == 0 {
			t.Fatalf("%s: no spill file with 80 transient bodies paged out", q)
		}
		_, cch := channel(t, s)
		if err := cch.Qos(1, 0, false); err != nil { // a requeued message is next
			t.Fatal(err)
		}
		d := consume(t, cch, q, false)
		next, requeued := 0, map[int]bool{}
		for next < n {
			m := receive(t, d)
			if why := checkPooledBody(m.Body); why != "" {
				t.Fatalf("%s: %s", q, why)
			}
			i := int(binary.BigEndian.Uint64(m.Body))
			if i != next {
				t.Fatalf("%s: message %d, want %d", q, i, next)
			}
			if i%7 == 0 && !requeued[i] {
				requeued[i] = true // back to its place at the head
				if err := m.Nack(false, true); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := m.Ack(false); err != nil {
				t.Fatal(err)
			}
			next++
		}
		if err := cch.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if names := spillFiles(); len(names) > 0 {
		t.Fatalf("spill files left after draining: %v", names)
	}
}

// TestPagingByNodeMemory: with resources.memory_paging_ratio bounding the
// bodies all queues keep to 8 MiB and no bound per queue, one queue holds
// up to the node's bound, further messages (in it or in another queue) go
// to the store, and everything drains in order, intact.
func TestPagingByNodeMemory(t *testing.T) {
	const bound = 8 << 20
	s := startWarren(t, func(c *config.Config) {
		c.Storage.QueueMemoryBytes = 0
		c.Resources.MemoryHighWatermark = 0 // paging takes its fraction of a watermark of 0.4
		c.Resources.MemoryPagingRatio = bound / (0.4 * float64(broker.SystemMemory()))
	})
	if _, limit := s.b.QueuedMemory(); limit < bound-1024 || limit > bound+1024 {
		t.Fatalf("the paging bound is %d bytes, want %d", limit, bound)
	}
	_, ch := confirmChannel(t, s)
	const size, n = 256 << 10, 60 // 15 MiB per queue
	body := func(q string, i int) []byte {
		b := make([]byte, size)
		copy(b, fmt.Sprintf("%s-%d-", q, i))
		b[size-1] = byte(i)
		return b
	}
	queues := []string{declareQueue(t, s, ch, "node-paging-a", nil), declareQueue(t, s, ch, "node-paging-b", nil)}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 2*n))
	for _, q := range queues {
		for i := range n {
			if err := ch.PublishWithContext(context.Background(), "", q, false, false, amqp.Publishing{Body: body(q, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 2 * n {
		if c := <-confirms; !c.Ack {
			t.Fatal("nacked")
		}
	}
	// The bound holds give or take what the queues have not reported yet
	// (256 KiB each) and a message each.
	if used, _ := s.b.QueuedMemory(); used > bound+2*(256<<10)+2*size {
		t.Fatalf("the queues keep %d bytes in memory, bound %d", used, bound)
	}
	for _, q := range queues {
		deliveries := consume(t, ch, q, true)
		for i := range n {
			d := receive(t, deliveries)
			if string(d.Body) != string(body(q, i)) {
				t.Fatalf("%s: message %d came back as %.20q (%d bytes)", q, i, d.Body, len(d.Body))
			}
		}
	}
}
