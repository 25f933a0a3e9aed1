// Package stats counts what happens to messages, per vhost, exchange,
// queue, connection and channel, and turns the counts into rates.
//
// A Meter is a set of monotonic counters, one per Kind, that the message
// path bumps with atomic adds: no lock, no allocation, a few nanoseconds
// per event, so counting costs nothing a benchmark can find. Each object
// that has message statistics embeds one Meter and owns it; aggregates (a
// connection over its channels, a vhost over everything in it) are either
// separate Meters bumped at the same place or sums taken when read.
//
// Rates are not computed on the message path. A sampler (the broker's,
// every SampleInterval) calls Sample on every live Meter; a Meter keeps its
// two latest samples, and a rate is the difference between them divided by
// the time between them, as RabbitMQ's management plugin reports
// details.rate. A History keeps a longer ring of samples for charts.
//
// Invariants: counters never decrease; a Meter's zero value is ready to
// use; Sample and the read methods may run concurrently with Add.
package stats

import (
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
)

// Kind is one counter. The names are the keys of RabbitMQ's message_stats
// object where RabbitMQ has the figure, and Warren's own otherwise.
type Kind uint8

const (
	// Publish: on a channel, connection or vhost, messages the clients
	// published; on a queue, messages enqueued into it.
	Publish Kind = iota
	// PublishIn and PublishOut are an exchange's: messages published to
	// it, and those of them it routed to at least one queue.
	PublishIn
	PublishOut
	// Confirm: publisher confirms sent (basic.ack to a publisher).
	Confirm
	// Routed: published messages that reached a queue or were held for
	// later. ReturnUnroutable and DropUnroutable: those that did not,
	// returned (mandatory) or dropped.
	Routed
	ReturnUnroutable
	DropUnroutable
	// Deliver, DeliverNoAck, Get, GetNoAck: messages handed to consumers
	// and to basic.get, needing an ack or not. GetEmpty: basic.get on an
	// empty queue.
	Deliver
	DeliverNoAck
	Get
	GetNoAck
	GetEmpty
	// Redeliver: deliveries (of any of the four kinds above) flagged
	// redelivered.
	Redeliver
	// Ack: deliveries acknowledged by the client. Reject: deliveries
	// rejected or nacked, requeued or not.
	Ack
	Reject
	// DeadLettered*: messages that left a queue for its dead-letter
	// exchange, by reason (x-death's words).
	DeadLetteredExpired
	DeadLetteredRejected
	DeadLetteredMaxLen
	DeadLetteredDeliveryLimit

	NumKinds = iota
)

var names = [NumKinds]string{
	Publish:                   "publish",
	PublishIn:                 "publish_in",
	PublishOut:                "publish_out",
	Confirm:                   "confirm",
	Routed:                    "routed",
	ReturnUnroutable:          "return_unroutable",
	DropUnroutable:            "drop_unroutable",
	Deliver:                   "deliver",
	DeliverNoAck:              "deliver_no_ack",
	Get:                       "get",
	GetNoAck:                  "get_no_ack",
	GetEmpty:                  "get_empty",
	Redeliver:                 "redeliver",
	Ack:                       "ack",
	Reject:                    "reject",
	DeadLetteredExpired:       "dead_lettered_expired",
	DeadLetteredRejected:      "dead_lettered_rejected",
	DeadLetteredMaxLen:        "dead_lettered_maxlen",
	DeadLetteredDeliveryLimit: "dead_lettered_delivery_limit",
}

// String is the counter's message_stats key.
func (k Kind) String() string { return names[k] }

// DeadLetterKind is the counter for a dead-letter reason as x-death names
// it ("expired", "rejected", "maxlen", "delivery_limit"); ok is false for
// any other reason.
func DeadLetterKind(reason string) (k Kind, ok bool) {
	switch reason {
	case "expired":
		return DeadLetteredExpired, true
	case "rejected":
		return DeadLetteredRejected, true
	case "maxlen":
		return DeadLetteredMaxLen, true
	case "delivery_limit":
		return DeadLetteredDeliveryLimit, true
	}
	return 0, false
}

// Values are counts, one per Kind.
type Values [NumKinds]uint64

// Add adds o into v.
func (v *Values) Add(o Values) { addInto((*[NumKinds]uint64)(v), o) }

func addInto[T uint64 | float64](dst *[NumKinds]T, src [NumKinds]T) {
	for i := range dst {
		dst[i] += src[i]
	}
}

// DeliverGet is RabbitMQ's deliver_get: every message handed out.
func (v Values) DeliverGet() uint64 {
	return v[Deliver] + v[DeliverNoAck] + v[Get] + v[GetNoAck]
}

// Rates are per-second rates, one per Kind.
type Rates [NumKinds]float64

// Add adds o into r.
func (r *Rates) Add(o Rates) { addInto((*[NumKinds]float64)(r), o) }

// DeliverGet is the rate of deliver_get.
func (r Rates) DeliverGet() float64 {
	return r[Deliver] + r[DeliverNoAck] + r[Get] + r[GetNoAck]
}

// Meter counts events of every Kind for one object and remembers its two
// latest samples for rates. The samples are allocated at the first sample
// that finds a count, so idle objects (most of 100,000 queues) cost only
// the counters.
type Meter struct {
	n [NumKinds]atomic.Uint64

	mu      lockorder.Mutex[lockorder.StatsMeter] // guards samples
	samples *Pair[Values]
}

// Pair is the two latest samples of some figures and when each was taken:
// what a rate between samples is computed from (a Meter's counters, a
// connection's traffic, a queue's depth).
type Pair[V any] struct {
	Prev, Last     V
	PrevAt, LastAt time.Time
}

// Push records v, taken at now, as the latest sample.
func (p *Pair[V]) Push(v V, now time.Time) {
	p.Prev, p.PrevAt = p.Last, p.LastAt
	p.Last, p.LastAt = v, now
}

// Seconds between the two samples; 0 until there are two.
func (p *Pair[V]) Seconds() float64 {
	if p.PrevAt.IsZero() {
		return 0
	}
	return max(p.LastAt.Sub(p.PrevAt).Seconds(), 0)
}

// Add counts n events of kind k. It is safe from any goroutine.
func (m *Meter) Add(k Kind, n uint64) { m.n[k].Add(n) }

// Inc counts one event of kind k.
func (m *Meter) Inc(k Kind) { m.n[k].Add(1) }

// CountDelivery counts one delivery as withAck or withoutAck (Deliver or
// DeliverNoAck, Get or GetNoAck), and as a redelivery when it is one.
func (m *Meter) CountDelivery(noAck, redelivered bool, withAck, withoutAck Kind) {
	if noAck {
		m.Inc(withoutAck)
	} else {
		m.Inc(withAck)
	}
	if redelivered {
		m.Inc(Redeliver)
	}
}

// AddValues counts every kind in v at once: how an aggregate absorbs a
// closed object's totals.
func (m *Meter) AddValues(v Values) {
	for k, n := range v {
		if n != 0 {
			m.n[k].Add(n)
		}
	}
}

// Values reads the counters now.
func (m *Meter) Values() Values {
	var v Values
	for k := range v {
		v[k] = m.n[k].Load()
	}
	return v
}

// Sample records the counters as of now, for Rates.
func (m *Meter) Sample(now time.Time) {
	v := m.Values()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == nil {
		if v == (Values{}) {
			return
		}
		m.samples = &Pair[Values]{}
	}
	m.samples.Push(v, now)
}

// Rates are the per-second rates between the two latest samples; zero
// until two samples were taken.
func (m *Meter) Rates() Rates {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == nil {
		return Rates{}
	}
	s := m.samples
	return rates(s.Prev, s.Last, s.Seconds())
}

// rates are the per-second rates from prev to last, dt seconds apart; a
// counter that went down (a reset) has rate 0.
func rates(prev, last Values, dt float64) Rates {
	var r Rates
	if dt <= 0 {
		return r
	}
	for k := range r {
		if last[k] >= prev[k] {
			r[k] = float64(last[k]-prev[k]) / dt
		}
	}
	return r
}
