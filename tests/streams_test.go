package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/protocol"
)

// Stream queues over AMQP 0-9-1, as RabbitMQ 3.10 serves them. The tests
// that need no Warren configuration run against the reference broker too.

var streamArgs = amqp.Table{"x-queue-type": "stream"}

func withStream(extra amqp.Table) amqp.Table {
	a := amqp.Table{"x-queue-type": "stream"}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// TestStreamDeclareRules: what a stream's declare refuses, with
// RabbitMQ's codes and texts.
func TestStreamDeclareRules(t *testing.T) {
	s := start(t)
	name := "warren-test.TestStreamDeclareRules"
	cases := []struct {
		name                           string
		durable, autoDelete, exclusive bool
		args                           amqp.Table
		code                           int
		text                           string
	}{
		{name + ".nd", false, false, false, nil, amqp.PreconditionFailed, "invalid property 'non-durable' for queue '" + name + ".nd'"},
		{name + ".ad", true, true, false, nil, amqp.PreconditionFailed, "invalid property 'auto-delete'"},
		{name + ".ex", true, false, true, nil, amqp.PreconditionFailed, "invalid property 'exclusive-owner'"},
		{"", true, false, false, nil, amqp.PreconditionFailed, "Cannot declare a server-named queue for type rabbit_stream_queue"},
		{name + ".ttl", true, false, false, amqp.Table{"x-message-ttl": int32(5)}, amqp.PreconditionFailed,
			"invalid arg 'x-message-ttl' for queue '" + name + ".ttl' in vhost '/' of queue type rabbit_stream_queue"},
		{name + ".ml", true, false, false, amqp.Table{"x-max-length": int32(5)}, amqp.PreconditionFailed, "invalid arg 'x-max-length'"},
		{name + ".sac", true, false, false, amqp.Table{"x-single-active-consumer": true}, amqp.PreconditionFailed, "invalid arg 'x-single-active-consumer'"},
		{name + ".age", true, false, false, amqp.Table{"x-max-age": "1x"}, amqp.PreconditionFailed, "invalid arg 'x-max-age' for queue '" + name + ".age' in vhost '/': invalid_max_age"},
		{name + ".age2", true, false, false, amqp.Table{"x-max-age": int32(5)}, amqp.PreconditionFailed, "{unacceptable_type,signedint}"},
		{name + ".mlb", true, false, false, amqp.Table{"x-max-length-bytes": "x"}, amqp.PreconditionFailed, `"expected integer, got longstr"`},
		{name + ".seg", true, false, false, amqp.Table{"x-stream-max-segment-size-bytes": int32(-1)}, amqp.PreconditionFailed, "{value_negative,-1}"},
	}
	conn := dial(t, s)
	for _, tc := range cases {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		s.ownQueue(tc.name)
		_, err = ch.QueueDeclare(tc.name, tc.durable, tc.autoDelete, tc.exclusive, false, withStream(tc.args))
		expectRefusal(t, err, tc.code, tc.text)
	}
	ch, _ := conn.Channel()
	ok := name + ".ok"
	s.ownQueue(ok)
	if _, err := ch.QueueDeclare(ok, true, false, false, false, withStream(amqp.Table{"x-max-age": "7D", "x-max-length-bytes": int64(1 << 30)})); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(ok, true, false, false, false, withStream(amqp.Table{"x-max-age": "7D", "x-max-length-bytes": int64(1 << 30)})); err != nil {
		t.Fatalf("the same redeclare: %v", err)
	}
	_, err := ch.QueueDeclare(ok, true, false, false, false, amqp.Table{"x-max-age": "7D", "x-max-length-bytes": int64(1 << 30)})
	expectRefusal(t, err, amqp.PreconditionFailed, "inequivalent arg 'x-queue-type'")
}

// TestStreamConsume: messages stay in a stream however they are
// consumed; each consumer starts where x-stream-offset says, and every
// delivery carries its offset; the calls a stream does not take get
// RabbitMQ's codes.
func TestStreamConsume(t *testing.T) {
	s := start(t)
	name := "warren-test.stream-consume"
	s.ownQueue(name)
	conn := dial(t, s)
	pub, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.QueueDeclare(name, true, false, false, false, streamArgs); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), "", name, false, false,
				amqp.Publishing{Body: []byte(fmt.Sprint(i)), Headers: amqp.Table{"h": "v"}})
			if err != nil {
				t.Fatal(err)
			}
			if i == to-1 {
				if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
					t.Fatalf("confirm of %d: %v %v", i, ok, err)
				}
			}
		}
	}
	publish(0, 100)
	// A timestamp offset is in whole seconds, so the test waits for time
	// itself here: until the clock is in a later second than the one the
	// first batch was confirmed in, and so stamped in (or before).
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	since := time.Now()
	publish(100, 200)

	// subscribe starts a consumer from offset; basic.consume-ok has come
	// back when it returns, so the stream has placed it.
	subscribe := func(offset any) (*amqp.Connection, <-chan amqp.Delivery) {
		t.Helper()
		c := dial(t, s)
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		args := amqp.Table{}
		if offset != nil {
			args["x-stream-offset"] = offset
		}
		ds, err := ch.Consume(name, "", false, false, false, false, args)
		if err != nil {
			t.Fatal(err)
		}
		return c, ds
	}
	// read reads n deliveries from a consumer from offset, acking each,
	// checks they follow one another from the first it gets, and closes
	// the consumer's connection.
	read := func(offset any, c *amqp.Connection, ds <-chan amqp.Delivery, n int) (first int64) {
		t.Helper()
		for i := range n {
			select {
			case d := <-ds:
				off, _ := d.Headers["x-stream-offset"].(int64)
				if i == 0 {
					first = off
				}
				if off != first+int64(i) || string(d.Body) != fmt.Sprint(off) || d.Headers["h"] != "v" || d.Redelivered {
					t.Fatalf("from %v, delivery %d: offset %v body %q headers %v", offset, i, d.Headers["x-stream-offset"], d.Body, d.Headers)
				}
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("from %v: %d of %d deliveries", offset, i, n)
			}
		}
		c.Close()
		return first
	}
	consume := func(offset any, n int) int64 {
		t.Helper()
		c, ds := subscribe(offset)
		return read(offset, c, ds, n)
	}
	if got := consume("first", 200); got != 0 {
		t.Fatalf("first starts at %d", got)
	}
	if got := consume("first", 200); got != 0 { // nothing was taken away
		t.Fatalf("first, again, starts at %d", got)
	}
	if got := consume(int64(150), 50); got != 150 {
		t.Fatalf("offset 150 starts at %d", got)
	}
	if got := consume(int32(150), 50); got != 150 {
		t.Fatalf("offset 150 (an int) starts at %d", got)
	}
	// Before the first, as RabbitMQ 3.10.8 takes it: from the first.
	if got := consume(int32(-1), 200); got != 0 {
		t.Fatalf("offset -1 starts at %d", got)
	}
	if got := consume(since, 100); got != 100 {
		t.Fatalf("the timestamp of the second batch starts at %d", got)
	}
	if got := consume("last", 1); got < 100 || got > 199 {
		t.Fatalf("last starts at %d", got)
	}
	// next: only what comes after the consumer.
	c, ds := subscribe("next")
	publish(200, 205)
	if got := read("next", c, ds, 5); got != 200 {
		t.Fatalf("next starts at %d", got)
	}

	// A stream's declare-ok counts its messages, as RabbitMQ's does once
	// its statistics have caught up (every 5 s: before that it gives 0, or
	// an older count).
	q, err := pub.QueueDeclarePassive(name, true, false, false, false, streamArgs)
	if err != nil || q.Messages > 205 || reference() == "" && q.Messages != 205 {
		t.Fatalf("declare-ok of a stream of 205 messages: %+v %v", q, err)
	}
	refused := func(what string, code int, text string, f func(ch *amqp.Channel) error) {
		t.Helper()
		ch, err := dial(t, s).Channel()
		if err != nil {
			t.Fatal(err)
		}
		err = f(ch)
		if err == nil {
			t.Fatalf("%s: accepted", what)
		}
		expectRefusal(t, err, code, text)
	}
	refused("get", amqp.NotImplemented, "basic.get not supported by stream queues queue '"+name+"' in vhost '/'", func(ch *amqp.Channel) error {
		_, _, err := ch.Get(name, false)
		return err
	})
	refused("purge", amqp.NotImplemented, "queue.purge not supported by stream queues", func(ch *amqp.Channel) error {
		_, err := ch.QueuePurge(name, false)
		return err
	})
	refused("no-ack", amqp.NotImplemented, "automatic acknowledgement not supported by stream queues", func(ch *amqp.Channel) error {
		_ = ch.Qos(10, 0, false)
		_, err := ch.Consume(name, "", true, false, false, false, nil)
		return err
	})
	refused("no prefetch", amqp.PreconditionFailed, "consumer prefetch count is not set for 'queue '"+name+"' in vhost '/''", func(ch *amqp.Channel) error {
		_, err := ch.Consume(name, "", false, false, false, false, nil)
		return err
	})
	refused("bad offset", amqp.PreconditionFailed, "invalid arg 'x-stream-offset' for queue '"+name+"'", func(ch *amqp.Channel) error {
		_ = ch.Qos(10, 0, false)
		_, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": "1x"})
		return err
	})
	// A delivery nacked or rejected: RabbitMQ closes the connection.
	settleRefused := func(settle func(d amqp.Delivery) error) func(ch *amqp.Channel) error {
		return func(ch *amqp.Channel) error {
			_ = ch.Qos(1, 0, false)
			closed := ch.NotifyClose(make(chan *amqp.Error, 1))
			ds, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
			if err != nil {
				return err
			}
			if err := settle(<-ds); err != nil {
				return err
			}
			select {
			case e := <-closed:
				if e == nil {
					return fmt.Errorf("the channel closed without an error")
				}
				return e
			case <-time.After(5 * time.Second):
				return nil
			}
		}
	}
	const nackText = "basic.nack and basic.reject not supported by stream queues queue '"
	refused("nack", amqp.NotImplemented, nackText+name+"' in vhost '/'",
		settleRefused(func(d amqp.Delivery) error { return d.Nack(false, true) }))
	refused("reject", amqp.NotImplemented, nackText+name+"' in vhost '/'",
		settleRefused(func(d amqp.Delivery) error { return d.Reject(false) }))
}

// TestStreamRetentionAndRestart: a stream keeps what x-max-length-bytes
// allows, dropping whole segments from the front, and holds its messages
// and offsets across a restart.
func TestStreamRetentionAndRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	name := "retained"
	if _, err := ch.QueueDeclare(name, true, false, false, false, withStream(amqp.Table{
		"x-max-length-bytes": int32(10_000), "x-stream-max-segment-size-bytes": int32(1_000)})); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 100)
	for i := range 500 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", name, false, false, amqp.Publishing{Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if i == 499 {
			dc.Wait()
		}
	}
	firstOffset := func(ch *amqp.Channel) int64 {
		t.Helper()
		if err := ch.Qos(10, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-ds:
			off, _ := d.Headers["x-stream-offset"].(int64)
			return off
		case <-time.After(5 * time.Second):
			t.Fatal("nothing from first")
		}
		return 0
	}
	_, c2 := dialProcess(t, p)
	first := firstOffset(c2)
	// 500 bodies of 100 bytes, 10 to a segment, 10,000 bytes kept: the
	// oldest segments went, the last 100 or so messages stay.
	if first < 380 || first > 410 || first%10 != 0 {
		t.Fatalf("the oldest message kept is at %d", first)
	}
	p.stop(syscall.SIGKILL)

	p = startProcess(t, dir)
	_, c3 := dialProcess(t, p)
	if got := firstOffset(c3); got != first {
		t.Fatalf("after a kill the oldest offset is %d, was %d", got, first)
	}
	_, c4 := dialProcess(t, p)
	if err := c4.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := c4.PublishWithDeferredConfirmWithContext(context.Background(), "", name, false, false, amqp.Publishing{Body: []byte("after")})
	if err != nil || !dc.Wait() {
		t.Fatal(err)
	}
	_, c5 := dialProcess(t, p)
	if err := c5.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := c5.Consume(name, "", false, false, false, false, amqp.Table{"x-stream-offset": int64(500)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		if string(d.Body) != "after" || d.Headers["x-stream-offset"] != int64(500) {
			t.Fatalf("offset 500 after the restart: %q %v", d.Body, d.Headers)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message published after the restart never came")
	}
}

// TestStreamKillLosesNoConfirmedMessage: publishers with confirms are
// killed with the broker; every confirmed message is in the stream after
// the restart, at one offset, in order per publisher.
func TestStreamKillLosesNoConfirmedMessage(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("killed", true, false, false, false, streamArgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	confirmed := map[string]bool{}
	for w := range 3 {
		go func() {
			c, err := amqp.Dial(p.url())
			if err != nil {
				return
			}
			ch, err := c.Channel()
			if err != nil || ch.Confirm(false) != nil {
				return
			}
			for i := 0; ; i++ {
				body := fmt.Sprintf("w%d-%06d", w, i)
				dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "killed", false, false, amqp.Publishing{Body: []byte(body)})
				if err != nil {
					return
				}
				go func() {
					if ok, err := dc.WaitContext(context.Background()); ok && err == nil {
						mu.Lock()
						confirmed[body] = true
						mu.Unlock()
					}
				}()
			}
		}()
	}
	waitUntil(t, "a few thousand confirms", func() bool { mu.Lock(); defer mu.Unlock(); return len(confirmed) > 3000 })
	p.stop(syscall.SIGKILL)
	mu.Lock()
	want := len(confirmed)
	mu.Unlock()

	p = startProcess(t, dir)
	_, c := dialProcess(t, p)
	if err := c.Qos(1000, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Consume("killed", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	found, last := 0, map[byte]string{}
	for found < want {
		select {
		case d := <-ds:
			body := string(d.Body)
			if prev := last[body[1]]; prev >= body {
				t.Fatalf("%s after %s", body, prev)
			}
			last[body[1]] = body
			mu.Lock()
			if confirmed[body] {
				found++
			}
			mu.Unlock()
			_ = d.Ack(false)
		case <-time.After(5 * time.Second):
			t.Fatalf("after the kill, %d of %d confirmed messages are in the stream", found, want)
		}
	}
}

// TestStreamPolicyRetention: a policy's max-length-bytes and
// stream-max-segment-size-bytes apply to a stream declared without them,
// from the next write.
func TestStreamPolicyRetention(t *testing.T) {
	s := startWarren(t)
	if err := s.b.SetPolicy("/", "keep-little", "^pol-", policy.Queues, 0,
		protocol.Table{"max-length-bytes": int64(2_000), "stream-max-segment-size-bytes": int64(500)}); err != nil {
		t.Fatal(err)
	}
	_, ch := channel(t, s)
	if _, err := ch.QueueDeclare("pol-events", true, false, false, false, streamArgs); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", "pol-events", false, false, amqp.Publishing{Body: make([]byte, 100)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 99 && !dc.Wait() {
			t.Fatal("not confirmed")
		}
	}
	_, c := channel(t, s)
	if err := c.Qos(1, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Consume("pol-events", "", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ds:
		// 10,000 bytes written, 2,000 kept in segments of 5 messages.
		if off, _ := d.Headers["x-stream-offset"].(int64); off < 70 || off%5 != 0 {
			t.Fatalf("the oldest message kept is at %d", off)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing from first")
	}
}

// An AMQP 0-9-1 consumer of a stream with x-stream-filter (RabbitMQ 3.13)
// is delivered the messages whose x-stream-filter-value it asks for, in
// offset order, and with x-stream-match-unfiltered those without a value
// too; the others spend none of its prefetch. A filter of another type
// is 406, naming the argument.
func TestStreamConsumerFilter(t *testing.T) {
	if reference() != "" {
		t.Skip("x-stream-filter for AMQP 0-9-1 consumers came with RabbitMQ 3.13; the reference is 3.10")
	}
	s := start(t)
	name := "warren-test.stream-filter"
	s.ownQueue(name)
	_, pub := channel(t, s)
	if _, err := pub.QueueDeclare(name, true, false, false, false, streamArgs); err != nil {
		t.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var last *amqp.DeferredConfirmation
	send := func(body, value string) {
		t.Helper()
		p := amqp.Publishing{Body: []byte(body)}
		if value != "" {
			p.Headers = amqp.Table{"x-stream-filter-value": value}
		}
		dc, err := pub.PublishWithDeferredConfirmWithContext(context.Background(), "", name, false, false, p)
		if err != nil {
			t.Fatal(err)
		}
		last = dc
	}
	for i := range 10 {
		send(fmt.Sprint("a", i), "a")
		send(fmt.Sprint("b", i), "b")
		send(fmt.Sprint("none", i), "")
	}
	send("end-a", "a")
	send("end", "")
	if ok, err := last.WaitContext(context.Background()); !ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}

	// consume reads from first until the body stop, and returns the
	// bodies in the order delivered, checking that offsets rise.
	consume := func(args amqp.Table, stop string) []string {
		t.Helper()
		_, ch := channel(t, s)
		if err := ch.Qos(2, 0, false); err != nil {
			t.Fatal(err)
		}
		args["x-stream-offset"] = "first"
		ds, err := ch.Consume(name, "", false, false, false, false, args)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		prev := int64(-1)
		for {
			select {
			case d := <-ds:
				off, _ := d.Headers["x-stream-offset"].(int64)
				if off <= prev {
					t.Fatalf("offset %d after %d", off, prev)
				}
				prev = off
				bodies = append(bodies, string(d.Body))
				if err := d.Ack(false); err != nil {
					t.Fatal(err)
				}
				if string(d.Body) == stop {
					return bodies
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%v: no %q after %v", args, stop, bodies)
			}
		}
	}
	want := func(prefixes ...string) []string {
		var w []string
		for i := range 10 {
			for _, p := range []string{"a", "b", "none"} {
				if slices.Contains(prefixes, p) {
					w = append(w, fmt.Sprint(p, i))
				}
			}
		}
		return w
	}
	for _, c := range []struct {
		args amqp.Table
		stop string
		want []string
	}{
		{amqp.Table{"x-stream-filter": "a"}, "end-a", append(want("a"), "end-a")},
		{amqp.Table{"x-stream-filter": []any{"b"}, "x-stream-match-unfiltered": true}, "end", append(want("b", "none"), "end")},
		{amqp.Table{"x-stream-filter": []any{"a", "b"}, "x-stream-match-unfiltered": false}, "end-a", append(want("a", "b"), "end-a")},
		{amqp.Table{}, "end", append(want("a", "b", "none"), "end-a", "end")},
	} {
		if got := consume(c.args, c.stop); !slices.Equal(got, c.want) {
			t.Errorf("%v:\n got %v\nwant %v", c.args, got, c.want)
		}
	}

	for _, args := range []amqp.Table{
		{"x-stream-filter": int32(5)},
		{"x-stream-filter": []any{"a", int32(5)}},
		{"x-stream-filter": "a", "x-stream-match-unfiltered": "yes"},
	} {
		_, ch := channel(t, s)
		if err := ch.Qos(2, 0, false); err != nil {
			t.Fatal(err)
		}
		closed := ch.NotifyClose(make(chan *amqp.Error, 1))
		_, err := ch.Consume(name, "", false, false, false, false, args)
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Fatalf("%v: %v, want 406", args, err)
		}
		if e := expectClose(t, closed, amqp.PreconditionFailed); !strings.Contains(e.Reason, "x-stream-") {
			t.Fatalf("%v: %q names no argument", args, e.Reason)
		}
	}
}
