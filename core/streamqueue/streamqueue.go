// Package streamqueue is the stream (x-queue-type stream) as a vhost holds
// it over AMQP 0-9-1, as RabbitMQ 3.10 serves it: a queuetype.Type and
// its queuetype.Queue.
//
// A stream is declared like a quorum queue (durable, not exclusive or
// auto-delete), published to like any queue (confirmed once synced),
// consumed from an offset with a prefetch and manual acks, never emptied
// by consuming; core/stream holds the log. In a cluster a stream is
// replicated (cluster.go).
//
// Invariants:
//
//   - A stream's record is stored when its log opens; deleting it deletes
//     both, the data last (a start after a crash deletes what is left).
//   - Its retention in force is the lower of its argument and its
//     policy's, for each of max-length-bytes, max-age and the segment
//     size.
package streamqueue

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/membership"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A stream is a queue of a Raft group in a cluster, whose members
// core/membership changes.
var (
	_ queuetype.GroupQueue = (*Queue)(nil)
	_ membership.Queue     = (*Queue)(nil)
)

// Type is the stream type, for queuetype.NewTypes.
type Type struct{}

// Name is its x-queue-type.
func (Type) Name() string { return queue.Stream }

// Check refuses a new stream's flags the way RabbitMQ 3.10 does; its
// arguments were checked with queue.CheckDeclareArgs.
func (Type) Check(h queuetype.Host, def topology.QueueDef) error {
	return topology.RefuseFlags(h.Name(), def, "rabbit_stream_queue")
}

// Declare makes a stream on a node of its own, or checks the one there
// is; defMu is held.
func (t Type) Declare(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if s, _ := h.Lookup(def.Name).(*Queue); s != nil {
		return s, false, s.Equivalent(def)
	}
	if err := t.Check(h, def); err != nil {
		return nil, false, err
	}
	st, ok := h.Store().(*storage.Store)
	if !ok {
		return nil, false, reply.PreconditionFailed("stream queues need the message store; queue '%s' in vhost '%s'", def.Name, h.Name())
	}
	s, err := open(h, def, st.NewID(), nil)
	if err != nil {
		return nil, false, err
	}
	h.Register(s)
	return s, true, nil
}

// Restore reopens a stored stream at start-up; in a cluster this node's
// replica rejoins its group. defMu is held.
func (Type) Restore(h queuetype.Host, def topology.QueueDef, id uint64, _ []storage.Level) error {
	s, err := open(h, def, id, def.Members)
	if err != nil {
		return err
	}
	if slices.Contains(def.Members, h.Self()) {
		// A replica whose log is empty gets the group's from the
		// leader: only a new stream's declare makes its first
		// configuration.
		if err := s.start(false, true, nil); err != nil {
			s.s.Close()
			return err
		}
	}
	h.Register(s)
	return nil
}

// argsCompared are the arguments a stream's redeclare must repeat.
var argsCompared = []string{"x-queue-type", "x-max-length-bytes", "x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size"}

// config reads a stream's retention arguments. It checks nothing: a new
// stream's were checked at its declare, and a stored one keeps what an
// older Warren accepted (a value it cannot read, such as an x-max-age of
// "0s", is no limit).
func config(h queuetype.Host, def topology.QueueDef) stream.Config {
	cfg := stream.Config{Name: def.Name, VHost: h.Name(), Form: deliverForm}
	if n, ok := queue.Integer(def.Args["x-max-length-bytes"]); ok && n > 0 {
		cfg.MaxBytes = n
	}
	if n, ok := queue.Integer(def.Args["x-stream-max-segment-size-bytes"]); ok && n > 0 {
		cfg.SegmentBytes = n
	}
	if s, ok := def.Args["x-max-age"].(string); ok {
		if age, ok := queue.ParseInterval(s); ok {
			cfg.MaxAge = age
		}
	}
	return cfg
}

// open opens a stream's log under id and records its declaration; defMu
// is held.
func open(h queuetype.Host, def topology.QueueDef, id uint64, members []string) (*Queue, error) {
	st, ok := h.Store().(*storage.Store)
	if !ok {
		return nil, reply.Internal("stream queue '%s' in vhost '%s' without the message store", def.Name, h.Name())
	}
	cfg := config(h, def)
	cfg.ID, cfg.Store, cfg.Log = id, st, *h.Logger()
	log, err := stream.Open(cfg)
	if err != nil {
		return nil, reply.Internal("%v", err)
	}
	s := &Queue{h: h, s: log, name: def.Name, args: def.Args}
	s.members.Set(members)
	if err := h.Store().PutMeta(storage.KindQueue, h.Name(), def.Name, s.Record().Table()); err != nil {
		log.Close()
		return nil, queuetype.Stored(err)
	}
	s.PolicyChanged()
	return s, nil
}

// Queue is a stream as a vhost holds it. In a cluster it is replicated
// (cluster.go): this node's log is its replica when the node is a member,
// and unused otherwise.
type Queue struct {
	h        queuetype.Host
	s        *stream.Stream
	name     string
	args     protocol.Table
	counters stats.Meter

	// In a cluster: members are the nodes of its group, by name, the
	// first stood first for leader (nil on a node of its own); active
	// says this node's replica runs, in group.
	members   membership.Members
	active    atomic.Bool
	group     atomic.Pointer[cluster.Group]
	rejoining membership.Rejoining
}

func (s *Queue) Name() string              { return s.name }
func (s *Queue) Type() string              { return queue.Stream }
func (s *Queue) Kind() string              { return "stream" }
func (s *Queue) Arguments() protocol.Table { return s.args }
func (s *Queue) Incarnation() uint64       { return s.s.ID() }
func (s *Queue) Group() *cluster.Group     { return s.group.Load() }

// ChangeMember adds node to the group or removes it (core/membership).
func (s *Queue) ChangeMember(node string, add bool) error {
	return membership.Change(s.h, s, node, add)
}

func (s *Queue) Lead(node string) error { return membership.Lead(s.h, s, node) }

// Rejoin has this node's replica ask to be added back, when its group
// does not count it (core/membership).
func (s *Queue) Rejoin() { membership.Rejoin(s.h, s, &s.rejoining) }

// Record is its stored declaration; in a cluster its members and its
// incarnation (its group's id, and its log's) too.
func (s *Queue) Record() topology.QueueRecord {
	return membership.Record(s.args, s.s.ID(), s.MemberNodes())
}

// Equivalent refuses a redeclare that differs from the stream (406).
func (s *Queue) Equivalent(def topology.QueueDef) error {
	return s.h.EquivalentDurable(s.args, def, argsCompared...)
}

// CheckArgs: a stream's arguments are compared, not parsed as a classic
// or quorum queue's are.
func (s *Queue) CheckArgs(topology.QueueDef) error { return nil }

// PolicyChanged sets the stream's retention from its arguments and its
// policy's max-length-bytes, max-age and stream-max-segment-size-bytes:
// where both set one, the lower value is in force, as RabbitMQ's stream
// queues take it (and its classic queues their limits); defMu is held.
func (s *Queue) PolicyChanged() {
	cfg := config(s.h, topology.QueueDef{Name: s.name, Durable: true, Args: s.args})
	lower := func(cur *int64, set bool, x any) {
		if n, ok := queue.Integer(x); ok && (!set || n < *cur) {
			*cur = n
		}
	}
	if p := s.h.Policy(s.name); p != nil {
		d := p.Definition
		_, set := s.args["x-max-length-bytes"]
		lower(&cfg.MaxBytes, set, d["max-length-bytes"])
		_, set = s.args["x-stream-max-segment-size-bytes"]
		lower(&cfg.SegmentBytes, set, d["stream-max-segment-size-bytes"])
		if a, ok := d["max-age"].(string); ok {
			if age, ok := queue.ParseInterval(a); ok && age > 0 && (cfg.MaxAge == 0 || age < cfg.MaxAge) {
				cfg.MaxAge = age
			}
		}
	}
	s.s.SetRetention(cfg.MaxBytes, cfg.MaxAge, cfg.SegmentBytes)
}

// DeleteChecks refuses a delete whose conditions do not hold.
func (s *Queue) DeleteChecks(ifUnused, ifEmpty bool) (int, error) {
	st := s.s.Stats()
	return st.Ready, queue.DeleteConditions(s.name, s.h.Name(), st.Consumers, st.Ready, ifUnused, ifEmpty)
}

// Touch: a stream does not expire.
func (s *Queue) Touch() {}

// DeclareCounts, as RabbitMQ's, count the messages in the stream (all of
// them, read or not). RabbitMQ's count lags by its statistics interval
// (5 s); this one does not.
func (s *Queue) DeclareCounts() (int, int, error) {
	st := s.s.Stats()
	return st.Ready, st.Consumers, nil
}

// Figures are its depth from its replica here or a member, and its
// message statistics.
func (s *Queue) Figures() (queue.Stats, *stats.Meter, error) {
	st, err := s.stats()
	return st, &s.counters, err
}

// Status is a replicated stream's group; a stream of a node of its own
// has none.
func (s *Queue) Status() (queuetype.QuorumView, bool) {
	if s.MemberNodes() == nil {
		return queuetype.QuorumView{}, false
	}
	return membership.View(s.h, s, s.leader), true
}

// Purge is refused: a stream is not emptied, as RabbitMQ's is not.
func (s *Queue) Purge() (int, error) { return 0, s.refuses("queue.purge") }

// Release stops this node's replica and deletes the stream's data.
func (s *Queue) Release() {
	s.stop()
	if err := s.s.Delete(); err != nil {
		s.h.Logger().Error().Err(err).Str("queue", s.name).Msg("could not delete the stream's messages; the next start deletes them")
	}
}

// Close stops the stream's goroutines (the vhost closing).
func (s *Queue) Close(time.Time) { s.s.Close() }

// Log is the stream's log on this node, for the stream protocol's
// readers; nil when this node holds no replica of it.
func (s *Queue) Log() *stream.Stream {
	if !s.Here() {
		return nil
	}
	return s.s
}

// Enqueue appends m; done hears once it is synced.
func (s *Queue) Enqueue(m *message.Message, done func(error)) {
	s.AppendAll([]stream.Append{{Msgs: []*message.Message{m}, Done: done}})
}

// AppendAll appends a stream-protocol Publish frame's messages: each
// publishing id's, or a sub-batch's, of a publisher that may deduplicate
// (stream.Writer), a resend being confirmed and not stored; a replicated
// stream proposes them as one log entry. Each Done hears once its
// messages are synced.
func (s *Queue) AppendAll(as []stream.Append) {
	for i, a := range as {
		s.counters.Add(stats.PublishIn, uint64(len(a.Msgs)))
		done := a.Done
		as[i].Done = func(err error) {
			if err != nil {
				err = reply.Internal("stream '%s' in vhost '%s': %v", s.name, s.h.Name(), err)
			}
			done(err)
		}
	}
	s.s.AppendAll(as)
}

// refuses is RabbitMQ's answer (540) to what a stream does not do.
func (s *Queue) refuses(what string) error {
	return reply.NotImplemented("%s not supported by stream queues queue '%s' in vhost '%s'", what, s.name, s.h.Name())
}

// ---- consuming

// Source is its replica here, or a member on another node.
func (s *Queue) Source() (queuetype.Source, error) {
	if s.Here() {
		return local{s}, nil
	}
	rq := s.Via()
	if rq == nil {
		return nil, membership.Down(s.h, s)
	}
	return elsewhere{Source: s.h.RemoteSource(rq), s: s}, nil
}

// local is what a channel reads a stream's log on this node through.
type local struct{ s *Queue }

// Consume attaches a consumer at its x-stream-offset. As RabbitMQ, a
// stream's consumer must acknowledge (540 otherwise) and set a prefetch
// (406 otherwise); an offset that does not parse is 406 (RabbitMQ 3.10
// answers some with 541).
func (src local) Consume(c queue.Consumer, added func()) error {
	from, err := src.s.checkConsumer(c)
	if err != nil {
		return err
	}
	f, err := src.s.filterArgs(c)
	if err != nil {
		return err
	}
	return src.s.s.ConsumeFiltered(c, from, f, added)
}

func (src local) Cancel(c queue.Consumer)         { src.s.s.Cancel(c) }
func (src local) Kick()                           { src.s.s.Kick() }
func (src local) Ack(e []queue.Entry)             { src.s.s.Ack(e) }
func (src local) Requeue(e []queue.Entry)         { src.s.s.Requeue(e) }
func (src local) Reject(e []queue.Entry)          { src.s.s.Reject(e) }
func (src local) Refuses(a queuetype.Asked) error { return src.s.refusesAsked(a) }

// Get is refused: a stream is read from an offset, not taken from.
func (src local) Get(bool) (queue.Delivery, int, bool) { return queue.Delivery{}, 0, false }

// elsewhere is a stream this node has no replica of, as a channel of this
// node reads it: through a member, the stream's checks made here.
type elsewhere struct {
	*remote.Source
	s *Queue
}

// Consume checks what a stream's consumer must set, then consumes through
// the member with the consumer's x-stream-offset.
func (src elsewhere) Consume(c queue.Consumer, added func()) error {
	if _, err := src.s.checkConsumer(c); err != nil {
		return err
	}
	if _, err := src.s.filterArgs(c); err != nil {
		return err
	}
	args := protocol.Table{}
	for _, k := range []string{"x-stream-offset", "x-stream-filter", "x-stream-match-unfiltered"} {
		if x := consumerArg(c, k); x != nil {
			args[k] = x
		}
	}
	return src.Source.ConsumeWith(c, added, args)
}

// Get is refused, as on a member.
func (src elsewhere) Get(bool) (queue.Delivery, int, bool) { return queue.Delivery{}, 0, false }

func (src elsewhere) Refuses(a queuetype.Asked) error { return src.s.refusesAsked(a) }

// refusesAsked is what a stream refuses of a channel: basic.get, and a
// nack or reject (540, which closes the connection).
func (s *Queue) refusesAsked(a queuetype.Asked) error {
	switch a {
	case queuetype.AskGet:
		return s.refuses("basic.get")
	case queuetype.AskNackOrReject:
		return s.refuses("basic.nack and basic.reject")
	}
	return nil
}

// checkConsumer refuses a consumer a stream does not serve, and reads the
// offset it starts from.
func (s *Queue) checkConsumer(c queue.Consumer) (stream.Offset, error) {
	if c.NoAck() {
		return stream.Offset{}, reply.NotImplemented("automatic acknowledgement not supported by stream queues queue '%s' in vhost '%s'", s.name, s.h.Name())
	}
	if p, ok := c.(interface{ Prefetch() int }); !ok || p.Prefetch() == 0 {
		return stream.Offset{}, reply.PreconditionFailed("consumer prefetch count is not set for 'queue '%s' in vhost '%s''", s.name, s.h.Name())
	}
	from, err := stream.ParseOffset(offsetArg(c), time.Now())
	if err != nil {
		return stream.Offset{}, reply.PreconditionFailed("invalid arg 'x-stream-offset' for queue '%s' in vhost '%s': %v", s.name, s.h.Name(), err)
	}
	return from, nil
}

// offsetArg is the consumer's x-stream-offset argument, nil when it has
// none.
func offsetArg(c queue.Consumer) any { return consumerArg(c, "x-stream-offset") }

// consumerArg is the consumer's argument k, nil when it has none.
func consumerArg(c queue.Consumer, k string) any {
	if a, ok := c.(interface{ Arguments() protocol.Table }); ok {
		return a.Arguments()[k]
	}
	return nil
}

// filterArgs reads the filter a consumer asks for, as RabbitMQ 3.13 does:
// x-stream-filter, a string or an array of strings (the values wanted),
// and x-stream-match-unfiltered, a boolean (messages without a value as
// well), which counts only with x-stream-filter. nil when it asks for
// none. Where RabbitMQ overlooks a value of another type, it is 406 here,
// naming the argument: such a consumer would read every message.
// RabbitMQ filters by chunk and its clients filter again; Warren passes
// over each message the filter does not want.
func (s *Queue) filterArgs(c queue.Consumer) (*stream.Filter, error) {
	bad := func(k string, v any, want string) error {
		return reply.PreconditionFailed("invalid arg '%s' for queue '%s' in vhost '%s': %v is not %s", k, s.name, s.h.Name(), v, want)
	}
	x := consumerArg(c, "x-stream-filter")
	if x == nil {
		return nil, nil
	}
	f := &stream.Filter{Values: map[string]bool{}}
	switch v := x.(type) {
	case string:
		f.Values[v] = true
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return nil, bad("x-stream-filter", e, "a string")
			}
			f.Values[str] = true
		}
	default:
		return nil, bad("x-stream-filter", x, "a string or an array of strings")
	}
	switch v := consumerArg(c, "x-stream-match-unfiltered").(type) {
	case nil:
	case bool:
		f.MatchUnfiltered = v
	default:
		return nil, bad("x-stream-match-unfiltered", v, "a boolean")
	}
	return f, nil
}
