package vhost

import (
	"slices"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/replyto"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// RouteBuffers are one publisher's scratch space for routing: reused
// across its messages, they keep routing free of allocation. They must not
// be shared between goroutines. (exchange.Router is what routes.)
type RouteBuffers struct {
	holds    []pendingHold // Via with Hold: to hold once routing is done
	result   exchange.Result
	variants []*message.Message // the message under each CC/BCC key
	work     []*Exchange
	visited  []*Exchange
	queues   []queuetype.Local            // taken in the publisher's goroutine (Local)
	seen     map[queuetype.Local]struct{} // only for fan-outs too wide to scan
	others   []queuetype.Queue            // every other queue (core/queuetype)
	remote   []*queuetype.RemoteQueue     // forward's: where others not Here go
	// Writes, when set, is the publishing goroutine's run: deliveries to
	// local queues' consumers leave their socket writes to it.
	Writes *queue.Writes
}

type pendingHold struct {
	x       *Exchange
	via     string
	hold    time.Duration
	headers protocol.Table // headers the exchange sets on the held message
}

// Outcome is what became of a published message.
type Outcome struct {
	Queues   int  // queues that took the message
	Held     bool // held for delayed routing; counts as routed
	Rejected bool // a queue refused it (overflow reject-publish): nack the publisher
	Stored   bool // written to a durable queue's store: confirm after AfterSync
	// Forwarded, when the message went to queues homed on other nodes,
	// says when they have it (and stored it, if it is persistent).
	Forwarded *Forwarding
	// HomesDown counts the queues routing reached whose home node is
	// down: as in RabbitMQ they are left out, so a message that reached
	// only such queues is unroutable (returned if mandatory).
	HomesDown int
}

// Routed reports whether the message reached a queue or is held for later.
func (o Outcome) Routed() bool { return o.Queues > 0 || o.Held || o.Forwarded != nil }

// Publish routes m from exchange x and enqueues it. An error (a plugin
// type failing, say) fails this publish only.
//
// A message may name further routing keys in its CC and BCC headers
// (sender-selected distribution, as in RabbitMQ): it is routed under all of
// them, and the BCC header is removed before any queue sees it.
func (v *VHost) Publish(x *Exchange, m *message.Message, r *RouteBuffers) (Outcome, error) {
	if x.Name == "" && replyto.IsToken(m.RoutingKey) {
		// A direct reply-to reply: to its channel, no queue (replyto.go).
		out := v.publishReply(m.RoutingKey, m)
		x.Counters.Inc(stats.PublishIn)
		if out.Routed() {
			x.Counters.Inc(stats.PublishOut)
		}
		return out, nil
	}
	held, err := v.route(x, m, r, "")
	if err != nil {
		return Outcome{}, err
	}
	if len(r.variants) > 0 {
		if m, err = m.WithoutHeaders("BCC"); err != nil {
			return Outcome{}, err
		}
	}
	if len(r.holds)+len(r.remote)+len(r.others) > 0 {
		// A hold, another node or a queue not Local keeps the
		// message beyond this call without counting as its holder: a
		// pooled body must not be reused (message.Bodies).
		m.Pin()
	}
	heldStored := v.holdPending(m, r)
	homesDown := v.leaveOutHomesDown(r)
	out := v.enqueue(m, r)
	out.Forwarded = v.forward(m, r, true)
	out.Held = held
	out.HomesDown = homesDown
	out.Stored = out.Stored || heldStored
	x.Counters.Inc(stats.PublishIn)
	if out.Routed() {
		x.Counters.Inc(stats.PublishOut)
	}
	return out, nil
}

// leaveOutHomesDown drops from r.others the queues homed on another node
// that is down, and counts them. RabbitMQ routes past such a queue (a
// mandatory message that reached nothing else comes back NO_ROUTE, then
// its confirm), where forwarding would hold the message until the node's
// backlog failed.
func (v *VHost) leaveOutHomesDown(r *RouteBuffers) int {
	if len(r.others) == 0 {
		return 0
	}
	before := len(r.others)
	r.others = slices.DeleteFunc(r.others, func(t queuetype.Queue) bool {
		home := t.Elsewhere()
		return home != "" && !v.cluster.Up(home)
	})
	clear(r.others[len(r.others):before])
	return before - len(r.others)
}

// route fills r.queues with every queue m reaches from x. via, when set,
// routes x itself with another type (a held message coming due). It reports
// whether the message was held instead.
//
// Each exchange is routed under its own lock, held shared, and released
// before the next: a slow router (a plugin near its deadline) holds up
// changes to its own exchange only, and no vhost lock is held meanwhile.
func (v *VHost) route(x *Exchange, m *message.Message, r *RouteBuffers, via string) (held bool, err error) {
	r.queues = r.queues[:0]
	clear(r.remote)
	r.remote = r.remote[:0]
	clear(r.others)
	r.others = r.others[:0]
	r.visited = r.visited[:0]
	clear(r.holds)
	r.holds = r.holds[:0]
	r.work = append(r.work[:0], x)
	clear(r.seen)
	clear(r.variants)
	r.variants = r.variants[:0]
	if cc, bcc := m.SenderKeys(); len(cc)+len(bcc) > 0 {
		r.variants = append(r.variants, m)
		for _, k := range append(cc, bcc...) {
			r.variants = append(r.variants, m.WithRoutingKey(k))
		}
	}

	for len(r.work) > 0 {
		x := r.work[len(r.work)-1]
		r.work = r.work[:len(r.work)-1]
		if r.wasVisited(x) {
			continue
		}
		r.visited = append(r.visited, x)

		viaType := ""
		if via != "" && x == r.visited[0] {
			viaType = via
		}
		alternate, deleted, err := r.routeExchange(v, x, m, viaType)
		if err != nil {
			return false, err
		}
		if deleted {
			continue
		}
		if r.result.Via != "" && r.result.Hold > 0 {
			// Held after routing is done.
			r.holds = append(r.holds, pendingHold{x: x, via: r.result.Via, hold: r.result.Hold, headers: r.result.SetHeaders})
			held = true
			continue
		}
		if len(r.result.Bindings) == 0 {
			if alternate != "" {
				if ae, _ := v.Exchange(alternate); ae != nil {
					r.work = append(r.work, ae)
				}
			}
			continue
		}
		for _, b := range r.result.Bindings {
			switch t := b.Target.(type) {
			case queuetype.Local:
				r.addQueue(t)
			case *Exchange:
				r.work = append(r.work, t)
			case queuetype.Queue:
				if !slices.Contains(r.others, t) {
					r.others = append(r.others, t)
				}
			}
		}
	}
	return held, nil
}

// routeExchange fills r.result with the bindings m matches at x, under
// x's lock held shared. viaType, when set, routes with that type instead of
// x's own. A Via answer without a hold is followed at once: x's bindings
// are routed again by the type it names. It returns x's alternate exchange
// and whether x was deleted.
func (r *RouteBuffers) routeExchange(v *VHost, x *Exchange, m *message.Message, viaType string) (alternate string, deleted bool, err error) {
	r.result.Reset()
	if x.Name != "" {
		// The default exchange never changes: its router reads the queue
		// map under the vhost's lock alone.
		x.mu.RLock()
		defer x.mu.RUnlock()
	}
	if x.deleted {
		return "", true, nil
	}
	router := x.router
	if viaType != "" {
		if router, err = x.viaRouter(v, viaType); err != nil {
			return "", false, err
		}
	}
	if err := r.routeAll(router, m); err != nil {
		return "", false, err
	}
	if r.result.Via != "" && r.result.Hold == 0 {
		vr, err := x.viaRouter(v, r.result.Via)
		if err != nil {
			return "", false, err
		}
		r.result.Reset()
		if err := r.routeAll(vr, m); err != nil {
			return "", false, err
		}
	}
	return x.alternate, false, nil
}

// routeAll asks router for the bindings m matches under its routing key
// and each CC/BCC key.
func (r *RouteBuffers) routeAll(router exchange.Router, m *message.Message) error {
	if len(r.variants) == 0 {
		if err := router.Route(m, &r.result); err != nil {
			return reply.As(err)
		}
		return nil
	}
	for _, variant := range r.variants {
		if err := router.Route(variant, &r.result); err != nil {
			return reply.As(err)
		}
	}
	return nil
}

// holdPending puts m on hold for each exchange that asked for it during
// routing. It reports whether any hold was written to the store.
func (v *VHost) holdPending(m *message.Message, r *RouteBuffers) (stored bool) {
	for _, h := range r.holds {
		held := m
		if len(h.headers) > 0 {
			var err error
			if held, err = m.WithHeaders(h.headers); err != nil {
				// The broker decoded these properties when the message
				// came in, so this cannot happen; hold it unchanged.
				v.log.Warn().Err(err).Str("exchange", h.x.Name).Msg("could not set the headers of a held message")
				held = m
			}
		}
		stored = v.holds.Add(h.x.Name, h.x.Durable, held, h.via, h.hold) || stored
	}
	clear(r.holds)
	r.holds = r.holds[:0]
	return stored
}

func (r *RouteBuffers) wasVisited(x *Exchange) bool {
	for _, y := range r.visited {
		if y == x {
			return true
		}
	}
	return false
}

// wideFanout is where scanning the collected queues for duplicates gives
// way to a set.
const wideFanout = 16

func (r *RouteBuffers) addQueue(q queuetype.Local) {
	if len(r.queues) < wideFanout {
		for _, x := range r.queues {
			if x == q {
				return
			}
		}
		r.queues = append(r.queues, q)
		return
	}
	if r.seen == nil {
		r.seen = make(map[queuetype.Local]struct{})
	}
	if len(r.seen) == 0 {
		for _, x := range r.queues {
			r.seen[x] = struct{}{}
		}
	}
	if _, dup := r.seen[q]; dup {
		return
	}
	r.seen[q] = struct{}{}
	r.queues = append(r.queues, q)
}

// enqueue hands m to the queues route collected. A persistent message bound
// for several durable queues is stored once and shared: its id is set
// before any queue sees it, and each queue's entry refers to it.
func (v *VHost) enqueue(m *message.Message, r *RouteBuffers) Outcome {
	var out Outcome
	if m.Persistent && v.store != nil {
		durable := 0
		for _, q := range r.queues {
			if q.Persists() {
				durable++
			}
		}
		if durable > 1 {
			queue.StoreShared(v.store, m, durable)
		}
	}
	for i, q := range r.queues {
		accepted, rejected, stored := q.Take(m, r.Writes)
		if accepted {
			out.Queues++
		}
		out.Rejected = out.Rejected || rejected
		out.Stored = out.Stored || stored
		r.queues[i] = nil
	}
	r.queues = r.queues[:0]
	return out
}
