// Package losscheck drives publishers and consumers against a broker whose
// nodes fail, and records everything they see: every publish, confirm,
// nack, delivery and ack, with the node it went through and when. From
// that record, and the faults the test says it caused, it reports what a
// broker must never do with a replicated queue:
//
//   - Lost: a message confirmed and never delivered.
//   - DeliveredAsNewAgain: a message delivered a second time with the
//     redelivered flag unset.
//   - AckedThenRedelivered: a message delivered again after a consumer's
//     ack had settled: the ack was sent on a connection that stayed open
//     for Settle after it, through a node no fault touched meanwhile (an
//     ack through a node cut off from the majority, or lost with a
//     killed node, may be undone). A delivery through a node that was
//     paused (SIGSTOP) until just before it is not counted: the node may
//     have made it before the pause, and written it after.
//   - OutOfOrder: a consumer's first deliveries of one publisher's
//     messages (those from one connection) out of the order they were
//     published in.
//   - NackedDelivered: a message nacked, then delivered for the first
//     time: enqueued after the broker said it would not be, which a
//     publisher that resends on a nack, as RabbitMQ's docs advise,
//     duplicates. (One delivered before its nack came is counted apart,
//     as "nacked, delivered before": a node cut off from the majority
//     nacks what it proposed once it gives up, and the majority may have
//     committed some of it just before the cut.)
//   - MinorityConfirms: a message published through a node while it was
//     cut off from the others, and confirmed before the cut healed.
//   - NacksWithMajority: a nack for a message published through a node
//     no fault touched from its publish to its nack.
//   - NeverPublished: a delivery of a message nobody published.
//
// Publishers publish with mandatory set: a message the broker returns
// (no queue took it) and then confirms is counted returned, not
// confirmed, since a confirm says nothing of a message no queue holds.
//
// A message that was published but not confirmed may be delivered or not;
// one delivered again with the redelivered flag before its ack settled is
// not a fault either.
//
// Publishers and consumers reconnect through the URLs their function
// gives, so a test can kill any node, the one they use included, and pin
// a client to one node or let it use whichever is up.
package losscheck

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Settle is how long a connection must stay open after an ack for the
// ack to count as settled (AckedThenRedelivered).
const Settle = 2 * time.Second

// Checker is the record of one load.
type Checker struct {
	mu         sync.Mutex
	publishes  map[string]*publish // by body
	deliveries map[string][]delivery
	acks       map[string][]ack
	faults     []Fault
	arrivals   int // deliveries so far: their order of arrival
	nodeName   func(url string) string
	pace       time.Duration // Pace
	// problems are what is seen as it happens (NeverPublished).
	neverPublished []string
	// undelivered counts the confirmed messages not delivered yet, kept
	// as events come so that Drained costs nothing: a Report over
	// millions of messages holds mu for seconds, and asked in a loop it
	// starves the consumers it waits for.
	undelivered int
}

// publish is one message sent: body is publisher-epoch-seq.
type publish struct {
	publisher string
	epoch     int // the publisher's connection it went on, from 1
	seq       int
	node      string
	sent      time.Time
	answered  time.Time
	confirmed bool
	nacked    bool
	returned  bool // returned unroutable before its confirm
}

type delivery struct {
	consumer, node string
	redelivered    bool
	at             time.Time
	n              int // arrival order
}

type ack struct {
	consumer, node string
	sent           time.Time
	// open is how long the connection stayed open after the ack (set
	// when it closes; zero while it is open).
	closed time.Time
}

// Fault is something a test did to a node between From and To: the kind
// is the test's word ("kill", "pause", "partition"). A partition's node is
// the one cut off from the others.
type Fault struct {
	Node     string
	Kind     string
	From, To time.Time
}

// New returns an empty record.
func New() *Checker {
	return &Checker{publishes: map[string]*publish{}, deliveries: map[string][]delivery{}, acks: map[string][]ack{}}
}

// AddFault records a fault the test caused; To may be set later by
// calling EndFault with what AddFault returned.
func (c *Checker) AddFault(f Fault) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
	return len(c.faults) - 1
}

// EndFault sets when fault i ended.
func (c *Checker) EndFault(i int, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[i].To = to
}

// touched reports whether a fault of node overlapped [from, to]; one not
// ended yet lasts until now.
func (c *Checker) touched(node string, from, to time.Time, kinds ...string) bool {
	for _, f := range c.faults {
		if f.Node != node || (len(kinds) > 0 && !slices.Contains(kinds, f.Kind)) {
			continue
		}
		end := f.To
		if end.IsZero() {
			end = time.Now()
		}
		if !f.From.After(to) && !end.Before(from) {
			return true
		}
	}
	return false
}

// resumedJustBefore reports whether node was paused until at most
// flushAfterPause before at: a process stopped with deliveries in its
// buffers writes them when it goes on, after the others took back what
// it held (a stale first delivery, its ack ignored). Under the fault
// test's load that flush was seen to take 1.6 s, so the window is wide.
func (c *Checker) resumedJustBefore(node string, at time.Time) bool {
	for _, f := range c.faults {
		if f.Node == node && f.Kind == "pause" && !f.To.IsZero() && !f.To.After(at) && at.Sub(f.To) < flushAfterPause {
			return true
		}
	}
	return false
}

// cutOff reports whether node was cut off (a partition) for all of
// [from, to].
func (c *Checker) cutOff(node string, from, to time.Time) bool {
	for _, f := range c.faults {
		if f.Node == node && f.Kind == "partition" && !f.From.After(from) && (f.To.IsZero() || !f.To.Before(to)) {
			return true
		}
	}
	return false
}

func (c *Checker) sent(body, publisher string, epoch, seq int, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.publishes[body] = &publish{publisher: publisher, epoch: epoch, seq: seq, node: node, sent: time.Now()}
}

// answered records a publish's confirm (ok) or nack; returned says the
// broker returned it first, unroutable.
func (c *Checker) answered(body string, ok, returned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.publishes[body]; p != nil {
		if returned {
			p.answered, p.returned = time.Now(), true
			return
		}
		if ok && !p.confirmed && len(c.deliveries[body]) == 0 {
			c.undelivered++
		}
		p.answered, p.confirmed, p.nacked = time.Now(), ok, !ok
	}
}

func (c *Checker) delivered(consumer, node, body string, redelivered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.publishes[body] == nil && len(c.neverPublished) < 20 {
		c.neverPublished = append(c.neverPublished, fmt.Sprintf("%s delivered to %s, never published", body, consumer))
	}
	c.arrivals++
	if p := c.publishes[body]; p != nil && p.confirmed && len(c.deliveries[body]) == 0 {
		c.undelivered--
	}
	c.deliveries[body] = append(c.deliveries[body], delivery{consumer, node, redelivered, time.Now(), c.arrivals})
}

// Read records a message read from a log (a stream) by reader through
// node: a delivery, not flagged redelivered, so a message read twice is
// reported as delivered as new again.
func (c *Checker) Read(reader, node, body string) { c.delivered(reader, node, body, false) }

func (c *Checker) acked(consumer, node, body string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acks[body] = append(c.acks[body], ack{consumer: consumer, node: node, sent: time.Now()})
}

// closed records that consumer's connection closed: its acks without a
// close time get this one.
func (c *Checker) closed(consumer string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for _, as := range c.acks {
		for i := range as {
			if as[i].consumer == consumer && as[i].closed.IsZero() {
				as[i].closed = now
			}
		}
	}
}

// Report is what a load saw, and what went wrong: each list holds
// examples (at most maxExamples), Count how many of each there were.
type Report struct {
	Published, Confirmed, Nacked, Delivered int
	Returned                                int // unroutable: no queue took them
	Lost                                    []string
	Problems                                []string
	Count                                   map[string]int
}

const maxExamples = 10

// flushAfterPause bounds how long after a pause a node's buffered
// deliveries may still arrive (resumedJustBefore).
const flushAfterPause = 5 * time.Second

// OK reports whether nothing went wrong.
func (r Report) OK() bool { return len(r.Lost) == 0 && len(r.Problems) == 0 }

func (r Report) String() string {
	s := fmt.Sprintf("%d published, %d confirmed, %d nacked, %d delivered, %d lost", r.Published, r.Confirmed, r.Nacked, r.Delivered, r.Count["lost"])
	if len(r.Lost) > 0 {
		s += " (" + strings.Join(r.Lost, ", ") + ")"
	}
	if r.Returned > 0 {
		s += fmt.Sprintf("; %d returned unroutable", r.Returned)
	}
	var kinds []string
	for k, n := range r.Count {
		if k != "lost" && n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(kinds)
	if len(kinds) > 0 {
		s += "; " + strings.Join(kinds, ", ")
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
	r := Report{Published: len(c.publishes), Count: map[string]int{}}
	add := func(kind, format string, args ...any) {
		r.Count[kind]++
		if r.Count[kind] <= maxExamples {
			r.Problems = append(r.Problems, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	bodies := make([]string, 0, len(c.publishes))
	for body := range c.publishes {
		bodies = append(bodies, body)
	}
	slices.Sort(bodies)
	for _, body := range bodies {
		p := c.publishes[body]
		ds := c.deliveries[body]
		switch {
		case p.confirmed:
			r.Confirmed++
			if len(ds) == 0 {
				r.Count["lost"]++
				if len(r.Lost) < maxExamples {
					r.Lost = append(r.Lost, body)
				}
			}
			if c.cutOff(p.node, p.sent, p.answered) {
				add("minority confirm", "%s published through %s while it was cut off, confirmed after %v", body, p.node, p.answered.Sub(p.sent).Round(time.Millisecond))
			}
		case p.returned:
			r.Returned++
		case p.nacked:
			r.Nacked++
			switch {
			case len(ds) > 0 && ds[0].at.After(p.answered):
				add("nacked, delivered", "%s nacked through %s, then delivered to %s %v later", body, p.node, ds[0].consumer, ds[0].at.Sub(p.answered).Round(time.Millisecond))
			case len(ds) > 0:
				r.Count["nacked, delivered before"]++
			}
			if !c.touched(p.node, p.sent, p.answered) {
				add("nack with a majority", "%s nacked through %s after %v, no fault on it", body, p.node, p.answered.Sub(p.sent).Round(time.Millisecond))
			}
		}
		if len(ds) > 0 {
			r.Delivered++
		}
		asNew := 0
		for _, d := range ds {
			if !d.redelivered {
				if asNew++; asNew == 2 {
					add("delivered as new again", "%s delivered as new to %s after %s", body, d.consumer, ds[0].consumer)
				}
			}
		}
		for _, a := range c.acks[body] {
			settled := a.sent.Add(Settle)
			if (!a.closed.IsZero() && a.closed.Before(settled)) || c.touched(a.node, a.sent, settled) {
				continue // the ack may be undone
			}
			for _, d := range ds {
				if d.at.After(settled) && !c.resumedJustBefore(d.node, d.at) {
					add("acked, then redelivered", "%s acked by %s through %s, delivered again to %s through %s %v later (redelivered=%v)",
						body, a.consumer, a.node, d.consumer, d.node, d.at.Sub(a.sent).Round(time.Millisecond), d.redelivered)
					break
				}
			}
		}
	}
	c.outOfOrder(add)
	for _, p := range c.neverPublished {
		add("never published", "%s", p)
	}
	return r
}

// outOfOrder checks each consumer's first deliveries of each publisher
// connection's messages against their publish order.
func (c *Checker) outOfOrder(add func(kind, format string, args ...any)) {
	type stream struct {
		consumer, publisher string
		epoch               int
	}
	type first struct{ seq, n int }
	firsts := map[stream][]first{}
	for body, ds := range c.deliveries {
		p := c.publishes[body]
		if p == nil || len(ds) == 0 || ds[0].redelivered {
			continue
		}
		k := stream{ds[0].consumer, p.publisher, p.epoch}
		firsts[k] = append(firsts[k], first{p.seq, ds[0].n})
	}
	keys := make([]stream, 0, len(firsts))
	for k := range firsts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b stream) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	for _, k := range keys {
		fs := firsts[k]
		slices.SortFunc(fs, func(a, b first) int { return a.n - b.n })
		for i := 1; i < len(fs); i++ {
			if fs[i].seq < fs[i-1].seq {
				add("out of order", "%s got %s-%d-%d after %s-%d-%d", k.consumer, k.publisher, k.epoch, fs[i].seq, k.publisher, k.epoch, fs[i-1].seq)
			}
		}
	}
}

// History tells everything recorded of one message, for a failure's
// report.
func (c *Checker) History(body string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	at := func(t time.Time) string { return t.Format("15:04:05.000") }
	if p := c.publishes[body]; p != nil {
		fmt.Fprintf(&b, "%s: published through %s at %s, answered at %s (confirmed %v, nacked %v)", body, p.node, at(p.sent), at(p.answered), p.confirmed, p.nacked)
	}
	for _, d := range c.deliveries[body] {
		fmt.Fprintf(&b, "; delivered to %s through %s at %s (redelivered %v)", d.consumer, d.node, at(d.at), d.redelivered)
	}
	for _, a := range c.acks[body] {
		fmt.Fprintf(&b, "; acked by %s through %s at %s", a.consumer, a.node, at(a.sent))
	}
	return b.String()
}

// Confirms counts the messages publisher name had confirmed.
func (c *Checker) Confirms(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, p := range c.publishes {
		if p.publisher == name && p.confirmed {
			n++
		}
	}
	return n
}

// Drained reports whether every confirmed message was delivered.
func (c *Checker) Drained() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.undelivered == 0
}
