package tests

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// pooledBody is message i's body: large enough that Warren reads it into a
// pooled buffer (message.Bodies) and writes it from where it lies, in one
// of several size classes, each byte a function of i and its offset.
func pooledBody(i int) []byte {
	b := make([]byte, 100<<10+(i%2)*37<<10)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i*131 + j*7)
	}
	return b
}

// checkPooledBody reports what is wrong with b, "" when it is pooledBody's.
func checkPooledBody(b []byte) string {
	if len(b) < 8 {
		return fmt.Sprintf("%d bytes", len(b))
	}
	i := int(binary.BigEndian.Uint64(b))
	if i < 0 || i > 1<<20 || len(b) != len(pooledBody(i)) {
		return fmt.Sprintf("%d bytes claiming to be message %d", len(b), i)
	}
	for j := 8; j < len(b); j++ {
		if b[j] != byte(i*131+j*7) {
			return fmt.Sprintf("message %d: byte %d is %#x, want %#x", i, j, b[j], byte(i*131+j*7))
		}
	}
	return ""
}

// TestPooledBodiesStayIntact sends large messages, each down one path that
// holds a body after its publisher is done with it: a consumer that acks
// (with requeues), one that does not ack, fan-out to both, a copy the
// broker makes (the BCC header taken off), a dead-letter move, basic.get
// without ack, a mandatory return, a quorum queue, a stream. A buffer given back to the pool too
// early shows as the wrong bytes: in race builds a returned buffer is
// overwritten at once (message.Bodies), otherwise the next message's body
// may overwrite it in time.
func TestPooledBodiesStayIntact(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	paths := declareExchange(t, s, ch, "paths", "direct", nil)
	acked := declareQueue(t, s, ch, "acked", nil)
	noAck := declareQueue(t, s, ch, "noack", nil)
	dead := declareQueue(t, s, ch, "dead", nil)
	rejected := declareQueue(t, s, ch, "rejected", amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead})
	got := declareQueue(t, s, ch, "got", nil)
	// A quorum queue and a stream keep the message in their own form.
	quorum, stream := uniq(t, "quorum"), uniq(t, "stream")
	for name, kind := range map[string]string{quorum: "quorum", stream: "stream"} {
		s.ownQueue(name)
		if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": kind}); err != nil {
			t.Fatalf("queue.declare %s: %v", name, err)
		}
	}
	for q, keys := range map[string][]string{acked: {"acked", "fan"}, noAck: {"noack", "fan"}, rejected: {"rejected"}, got: {"got"}, quorum: {"quorum"}, stream: {"stream"}} {
		for _, k := range keys {
			bind(t, ch, q, k, paths, nil)
		}
	}
	keys := []string{"acked", "noack", "rejected", "got", "fan", "bcc", "quorum", "stream", "nowhere"}

	const publishers, each = 2, 243
	const total = publishers * each
	perPath := total / len(keys)
	var mu sync.Mutex
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	check := func(path string, b []byte) {
		if why := checkPooledBody(b); why != "" {
			problem("%s: %s", path, why)
		}
	}

	// Consumers, each on its own connection so their acks and rejects
	// race with the publishes. handle reports whether the delivery
	// counts towards want (a requeued one does not).
	consume := func(queue string, autoAck bool, want int, handle func(amqp.Delivery) bool) *sync.WaitGroup {
		_, cch := channel(t, s)
		if err := cch.Qos(50, 0, false); err != nil {
			t.Fatal(err)
		}
		var args amqp.Table
		if queue == stream {
			args = amqp.Table{"x-stream-offset": "first"}
		}
		ds, err := cch.Consume(queue, "", autoAck, false, false, false, args)
		if err != nil {
			t.Fatalf("consume %s: %v", queue, err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < want; {
				select {
				case d, ok := <-ds:
					if !ok {
						return
					}
					if handle(d) {
						n++
					}
				case <-time.After(20 * time.Second):
					problem("%s: %d of %d messages, then nothing for 20 s", queue, n, want)
					return
				}
			}
		}()
		return &wg
	}
	var done []*sync.WaitGroup
	requeued := map[int]bool{}
	done = append(done, consume(acked, false, 3*perPath, func(d amqp.Delivery) bool {
		check("acked", d.Body)
		i := int(binary.BigEndian.Uint64(d.Body))
		if !d.Redelivered && !requeued[i] && i%4 == 0 {
			requeued[i] = true
			_ = d.Nack(false, true)
			return false
		}
		_ = d.Ack(false)
		return true
	}))
	done = append(done, consume(noAck, true, 3*perPath, func(d amqp.Delivery) bool { check("no-ack", d.Body); return true }))
	done = append(done, consume(rejected, false, perPath, func(d amqp.Delivery) bool {
		check("rejected", d.Body)
		_ = d.Reject(false)
		return true
	}))
	for _, q := range []string{quorum, stream} {
		done = append(done, consume(q, false, perPath, func(d amqp.Delivery) bool {
			check(q, d.Body)
			_ = d.Ack(false)
			return true
		}))
	}
	done = append(done, consume(dead, false, perPath, func(d amqp.Delivery) bool {
		check("dead-lettered", d.Body)
		_ = d.Ack(false)
		return true
	}))

	// basic.get without ack, drained while the publishers run.
	var getter sync.WaitGroup
	getter.Add(1)
	go func() {
		defer getter.Done()
		_, gch := channel(t, s)
		n := 0
		var failed error
		poll.Within(30*time.Second, func() bool {
			for n < perPath {
				d, ok, err := gch.Get(got, true)
				if err != nil {
					failed = err
					return true
				}
				if !ok {
					return false // none ready yet: ask again
				}
				check("get", d.Body)
				n++
			}
			return true
		})
		switch {
		case failed != nil:
			problem("get: %v", failed)
		case n < perPath:
			problem("get: %d of %d messages", n, perPath)
		}
	}()

	// Publishers: message i down path i mod 9. "bcc" goes to the acked
	// queue, and to the no-ack one by its BCC header, which the broker
	// takes off with a copy of the message; "nowhere" is a mandatory
	// publish that nothing is bound for.
	var pubs sync.WaitGroup
	for p := range publishers {
		pubs.Add(2)
		_, pch := channel(t, s)
		back := pch.NotifyReturn(make(chan amqp.Return, each))
		go func() {
			defer pubs.Done()
			for n := 0; n < each/len(keys); n++ {
				select {
				case r := <-back:
					check("returned", r.Body)
				case <-time.After(20 * time.Second):
					problem("publisher %d: %d of %d returns", p, n, each/len(keys))
					return
				}
			}
		}()
		go func() {
			defer pubs.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for k := range each {
				i := p*each + k
				key, msg := keys[k%len(keys)], amqp.Publishing{Body: pooledBody(i)}
				if key == "bcc" {
					key, msg.Headers = "acked", amqp.Table{"BCC": []any{"noack"}}
				}
				if err := pch.PublishWithContext(ctx, paths, key, true, false, msg); err != nil {
					problem("publish: %v", err)
					return
				}
			}
		}()
	}
	pubs.Wait()
	for _, wg := range done {
		wg.Wait()
	}
	getter.Wait()
	for _, p := range problems {
		t.Error(p)
	}
}
