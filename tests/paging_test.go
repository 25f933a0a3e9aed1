package tests

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

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
