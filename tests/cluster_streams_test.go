package tests

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Streams across three Warren processes: replicated, every node reads the
// same messages at the same offsets, a replica that was down catches up,
// and a node that is not a member publishes and reads through one.

// publishAllConfirmed publishes n messages named prefix-i to queue through
// node nd on a channel of its own, with confirms, and fails unless every
// one is acked.
func publishAllConfirmed(t *testing.T, nd *clusterNode, queue, prefix string, n int) {
	t.Helper()
	publishPadded(t, nd, queue, prefix, 0, n, 0)
}

// publishPastSnapshots publishes 6,000 confirmed messages that take a
// stream's members past a snapshot and past the entries kept behind it
// (core/cluster's keepEntries, 64), however the members batch appends
// into entries: the first 100 one at a time, each waited for (an entry
// each), then the rest, of 2 KiB, 12 MiB in all, past the bytes after
// which a member snapshots (core/stream's snapshotBytes, 8 MiB).
func publishPastSnapshots(t *testing.T, nd *clusterNode, queue, prefix string) {
	t.Helper()
	conn, ch := nd.dial(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{Body: fmt.Appendf(nil, "%s-%d", prefix, i)})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish %d of %s: acked %v, %v", i, prefix, ok, err)
		}
	}
	conn.Close()
	publishPadded(t, nd, queue, prefix, 100, 6000, 2<<10)
}

// publishPadded is publishAllConfirmed of the messages from to n, with
// bodies padded with dots to size bytes.
func publishPadded(t *testing.T, nd *clusterNode, queue, prefix string, from, n, size int) {
	t.Helper()
	conn, ch := nd.dial(t)
	defer conn.Close()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n-from))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := from; i < n; i++ {
		body := fmt.Appendf(nil, "%s-%d", prefix, i)
		for len(body) < size {
			body = append(body, '.')
		}
		if err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < n; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("publish %d of %s was nacked", i, prefix)
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d confirms", i-from, n-from)
		}
	}
}

// readStream reads want messages of a stream from offset first through
// node n and returns their bodies by offset.
func readStream(t *testing.T, n *clusterNode, queue string, want int) []string {
	t.Helper()
	_, ch := n.dial(t)
	out := readStreamOn(t, ch, n.name+": "+queue, queue, want)
	ch.Close()
	return out
}

// readStreamOn reads want messages of a stream from offset first on ch,
// checking that the offsets follow each other, and returns their bodies
// by offset.
func readStreamOn(t *testing.T, ch *amqp.Channel, what, queue string, want int) []string {
	t.Helper()
	if err := ch.Qos(200, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, want)
	timeout := time.After(30 * time.Second)
	for len(out) < want {
		select {
		case d := <-ds:
			off, _ := d.Headers["x-stream-offset"].(int64)
			if int(off) != len(out) {
				t.Fatalf("%s: delivery %d has offset %d", what, len(out), off)
			}
			out = append(out, string(d.Body))
			d.Ack(false)
		case <-timeout:
			t.Fatalf("%s: %d of %d messages", what, len(out), want)
		}
	}
	return out
}

func sameLog(t *testing.T, what string, a, b []string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d and %d messages", what, len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("%s: offset %d is %q and %q", what, i, a[i], b[i])
		}
	}
}

func TestClusterStream(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	args := amqp.Table{"x-queue-type": "stream"}
	if _, err := ch1.QueueDeclare("events", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	_, ch3 := n3.dial(t)
	if _, err := ch3.QueueDeclarePassive("events", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	publishAllConfirmed(t, n1, "events", "a", 300)
	publishAllConfirmed(t, n3, "events", "b", 300)
	logs := make([][]string, 3)
	for i, n := range nodes {
		logs[i] = readStream(t, n, "events", 600)
	}
	sameLog(t, "n1 and n2", logs[0], logs[1])
	sameLog(t, "n1 and n3", logs[0], logs[2])

	// n2 misses enough that the others' logs let its entries go: back,
	// it takes a snapshot and copies what it lacks.
	n2.stop(syscall.SIGKILL)
	publishPastSnapshots(t, n1, "events", "c")
	n2.restart(t)
	all := readStream(t, n1, "events", 6600)
	sameLog(t, "n1 and n2 after n2's restart", all, readStream(t, n2, "events", 6600))
	if !strings.Contains(n2.logText(), "stream replica caught up") {
		t.Fatal("n2 never copied what it lacked: the test did not make it fall behind the others' logs")
	}

	// Its leader's node killed, another member leads, and publishing
	// through it goes on; back, the old leader has every message.
	waitUntil(t, "n1 leading the stream (it declared it)", func() bool { return leaderOf(n3, "events") == "n1" })
	n1.stop(syscall.SIGKILL)
	waitUntil(t, "a new leader", func() bool { l := leaderOf(n3, "events"); return l != "" && l != "n1" })
	publishAllConfirmed(t, n3, "events", "d", 100)
	n1.restart(t)
	all = readStream(t, n3, "events", 6700)
	sameLog(t, "n3 and n1 after n1's restart", all, readStream(t, n1, "events", 6700))

	// Declared again with other arguments: 406, as a quorum queue.
	_, chx := n2.dial(t)
	_, err := chx.QueueDeclare("events", true, false, false, false, amqp.Table{"x-queue-type": "stream", "x-max-age": "1h"})
	if e, ok := err.(*amqp.Error); !ok || e.Code != 406 {
		t.Fatalf("a redeclare with x-max-age: %v", err)
	}

	// Deleted through n3: gone everywhere.
	_, ch3 = n3.dial(t)
	if _, err := ch3.QueueDelete("events", false, false, false); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitUntil(t, "the stream gone on "+n.name, func() bool {
			_, ch := n.dial(t)
			_, err := ch.QueueDeclarePassive("events", true, false, false, false, args)
			return err != nil
		})
	}
}

// A stream of two replicas: the third node publishes to it and reads it
// through a member.
func TestClusterStreamNotAMember(t *testing.T) {
	nodes := threeProcesses(t)
	_, ch1 := nodes[0].dial(t)
	args := amqp.Table{"x-queue-type": "stream", "x-initial-cluster-size": int32(2)}
	if _, err := ch1.QueueDeclare("pair", true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	// client-local: n1 leads; n2 and n3 hold nothing else, so by name
	// n2 is the other member.
	outsider := nodes[2]
	_, ch := outsider.dial(t)
	if _, err := ch.QueueDeclarePassive("pair", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishAllConfirmed(t, outsider, "pair", "x", 200)
	got := readStream(t, outsider, "pair", 200)
	sameLog(t, "n3 (no replica) and n1", got, readStream(t, nodes[0], "pair", 200))

	// A consumer's stream filter reaches the member: from first, the
	// one message with the value is the first delivered.
	_, ch = outsider.dial(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "pair", false, false,
		amqp.Publishing{Body: []byte("filtered"), Headers: amqp.Table{"x-stream-filter-value": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
	if err := ch.Qos(10, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("pair", "", false, false, false, false, amqp.Table{"x-stream-offset": "first", "x-stream-filter": "v"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		if string(d.Body) != "filtered" || d.Headers["x-stream-offset"] != int64(200) {
			t.Fatalf("a filtered consumer through a member was first delivered %q at %v", d.Body, d.Headers["x-stream-offset"])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a filtered consumer through a member was delivered nothing")
	}

	// What a stream refuses, it refuses through a member too.
	_, ch = outsider.dial(t)
	if _, _, err := ch.Get("pair", false); err == nil {
		t.Fatal("basic.get on a stream through a member")
	} else if e, ok := err.(*amqp.Error); !ok || e.Code != 540 {
		t.Fatalf("basic.get: %v", err)
	}
	_, ch = outsider.dial(t)
	if _, err := ch.Consume("pair", "", false, false, false, false, nil); err == nil {
		t.Fatal("a consumer without a prefetch")
	} else if e, ok := err.(*amqp.Error); !ok || e.Code != 406 {
		t.Fatalf("a consumer without a prefetch: %v", err)
	}
}

// TestClusterStreamReplicaCopiesPastOneFetch: a replica that was down
// while the others let their logs go copies what it lacks from another
// in runs of about 4 MiB, each from where it stands: with 5 MiB before
// its hole, a copy that started from the stream's beginning never reached
// the hole.
func TestClusterStreamReplicaCopiesPastOneFetch(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2 := nodes[0], nodes[1]
	_, ch := n1.dial(t)
	if _, err := ch.QueueDeclare("big-first", true, false, false, false, amqp.Table{"x-queue-type": "stream"}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	const big = 40
	body := make([]byte, 128<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range big {
		copy(body, fmt.Sprintf("big-%d", i))
		c, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", "big-first", false, false, amqp.Publishing{Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := c.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("big message %d: acked %v, %v", i, ok, err)
		}
	}
	n2.stop(syscall.SIGKILL)
	publishPastSnapshots(t, n1, "big-first", "small")
	n2.restart(t)
	want := readStream(t, n1, "big-first", big+6000)
	sameLog(t, "n1 and n2 after n2's restart", want, readStream(t, n2, "big-first", big+6000))
	if !strings.Contains(n2.logText(), "stream replica caught up") {
		t.Fatal("n2 never copied what it lacked: the test did not make it fall behind the others' logs")
	}
}
