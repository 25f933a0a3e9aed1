// Package losscheck drives publishers and consumers against a broker whose
// nodes fail, and records everything they see: every publish, confirm,
// nack, delivery and ack. From that record it reports what a broker must
// never do with a quorum queue:
//
//   - lose a message it confirmed (confirmed, never delivered);
//   - deliver a message again as new (redelivered flag unset) once a
//     consumer acked it, or twice as new;
//   - deliver a message nobody published.
//
// A message that was published but not confirmed (nacked, or its
// connection lost first) may be delivered or not. A message delivered
// again with the redelivered flag after an ack is not a fault either: the
// ack may have been lost with the node that took it.
//
// Publishers and consumers reconnect through whichever node is up, so a
// test can kill any node, the one they use included.
package losscheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Checker is the record of one load.
type Checker struct {
	mu        sync.Mutex
	published map[string]bool
	confirmed map[string]bool
	nacked    int
	delivered map[string]int
	acked     map[string]string // by whom
	problems  []string
}

// New returns an empty record.
func New() *Checker {
	return &Checker{published: map[string]bool{}, confirmed: map[string]bool{}, delivered: map[string]int{}, acked: map[string]string{}}
}

func (c *Checker) problem(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// delivery records consumer's delivery of body.
func (c *Checker) delivery(consumer, body string, redelivered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.published[body]:
		c.problem("%s delivered to %s, never published", body, consumer)
	case c.acked[body] != "" && !redelivered:
		c.problem("%s delivered to %s as new after %s acked it", body, consumer, c.acked[body])
	case c.delivered[body] > 0 && !redelivered:
		c.problem("%s delivered to %s as new a second time", body, consumer)
	}
	c.delivered[body]++
}

func (c *Checker) ack(consumer, body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked[body] = consumer
}

// Report is what a load saw, and what went wrong.
type Report struct {
	Published, Confirmed, Nacked, Delivered int
	Lost                                    []string // confirmed, never delivered
	Problems                                []string
}

func (r Report) String() string {
	s := fmt.Sprintf("%d published, %d confirmed, %d nacked, %d delivered, %d lost", r.Published, r.Confirmed, r.Nacked, r.Delivered, len(r.Lost))
	if len(r.Lost) > 0 {
		n := min(len(r.Lost), 10)
		s += " (" + strings.Join(r.Lost[:n], ", ") + ")"
	}
	for _, p := range r.Problems {
		s += "\n  " + p
	}
	return s
}

// Report reports, as of now.
func (c *Checker) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Published: len(c.published), Confirmed: len(c.confirmed), Nacked: c.nacked, Delivered: len(c.delivered),
		Problems: append([]string(nil), c.problems...)}
	for body := range c.confirmed {
		if c.delivered[body] == 0 {
			r.Lost = append(r.Lost, body)
		}
	}
	sort.Strings(r.Lost)
	return r
}

// Confirms counts the messages publisher name had confirmed.
func (c *Checker) Confirms(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for body := range c.confirmed {
		if strings.HasPrefix(body, name+"-") {
			n++
		}
	}
	return n
}

// Drained reports whether every confirmed message was delivered.
func (c *Checker) Drained() bool { return len(c.Report().Lost) == 0 }

// URLs returns the AMQP URLs of the nodes that are up now.
type URLs func() []string

// dial connects to the first node up that answers.
func dial(urls URLs, stop <-chan struct{}) (*amqp.Connection, bool) {
	for {
		for _, u := range urls() {
			if conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(time.Second)}); err == nil {
				return conn, true
			}
		}
		select {
		case <-stop:
			return nil, false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Publish publishes persistent messages named name-N to queue, with up to
// inflight confirms outstanding, until stop is closed; a failed
// connection is replaced by one to a node that is up.
func (c *Checker) Publish(name, queue string, inflight int, urls URLs, stop <-chan struct{}) {
	seq := 0
	for {
		conn, ok := dial(urls, stop)
		if !ok {
			return
		}
		c.publishOn(conn, name, queue, inflight, &seq, stop)
		conn.Close()
		select {
		case <-stop:
			return
		default:
		}
	}
}

func (c *Checker) publishOn(conn *amqp.Connection, name, queue string, inflight int, seq *int, stop <-chan struct{}) {
	ch, err := conn.Channel()
	if err != nil || ch.Confirm(false) != nil {
		return
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, inflight))
	var mu sync.Mutex
	sent := map[uint64]string{}
	slots := make(chan struct{}, inflight)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for conf := range confirms {
			mu.Lock()
			body := sent[conf.DeliveryTag]
			delete(sent, conf.DeliveryTag)
			mu.Unlock()
			c.mu.Lock()
			if conf.Ack {
				c.confirmed[body] = true
			} else {
				c.nacked++
			}
			c.mu.Unlock()
			<-slots
		}
	}()
	// The confirms channel closes with the channel or its connection.
	defer func() {
		ch.Close()
		<-done
	}()
	for {
		select {
		case <-stop:
			return
		case <-done:
			return // the connection is gone: no more confirms free a slot
		case slots <- struct{}{}:
		}
		*seq++
		body := fmt.Sprintf("%s-%d", name, *seq)
		c.mu.Lock()
		c.published[body] = true
		c.mu.Unlock()
		mu.Lock()
		sent[ch.GetNextPublishSeqNo()] = body
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent})
		cancel()
		if err != nil {
			return
		}
	}
}

// Consume consumes queue with manual acks and the given prefetch until
// stop is closed, recording and acking every delivery as consumer name;
// a failed connection is replaced by one to a node that is up.
func (c *Checker) Consume(name, queue string, prefetch int, urls URLs, stop <-chan struct{}) {
	for {
		conn, ok := dial(urls, stop)
		if !ok {
			return
		}
		c.consumeOn(conn, name, queue, prefetch, stop)
		conn.Close()
		select {
		case <-stop:
			return
		default:
		}
	}
}

func (c *Checker) consumeOn(conn *amqp.Connection, name, queue string, prefetch int, stop <-chan struct{}) {
	ch, err := conn.Channel()
	if err != nil || ch.Qos(prefetch, 0, false) != nil {
		return
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	for {
		select {
		case <-stop:
			return
		case d, ok := <-ds:
			if !ok {
				return
			}
			body := string(d.Body)
			c.delivery(name, body, d.Redelivered)
			if d.Ack(false) == nil {
				c.ack(name, body)
			}
		}
	}
}
