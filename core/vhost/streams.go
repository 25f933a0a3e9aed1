package vhost

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Stream queues (x-queue-type: stream), as RabbitMQ 3.10 serves them over
// AMQP 0-9-1: declared like quorum queues (durable, not exclusive or
// auto-delete), published to like any queue (confirmed once synced),
// consumed from an offset with a prefetch and manual acks, never emptied
// by consuming; core/stream holds the log. In a cluster a stream is
// replicated (streams_cluster.go).

// StreamQueue is a stream as the vhost holds it. In a cluster it is
// replicated (streams_cluster.go): this node's Stream is its replica when
// the node is a member, and unused otherwise.
type StreamQueue struct {
	*stream.Stream
	Args protocol.Table
	// Counters are the stream's message statistics.
	Counters stats.Meter

	// In a cluster: members are the nodes of its group, by name, the
	// first stood first for leader (nil on a node of its own); active
	// says this node's replica runs, in group.
	members   atomic.Pointer[[]string]
	active    atomic.Bool
	group     atomic.Pointer[cluster.Group]
	rejoining rejoining // a new incarnation's replica asking to be added (CheckMembers)
}

// streamArgsCompared are the arguments a stream's redeclare must repeat.
var streamArgsCompared = []string{"x-queue-type", "x-max-length-bytes", "x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size"}

// streamProperties refuses a new stream's flags the way RabbitMQ 3.10
// does; its arguments were checked with queue.CheckDeclareArgs.
func (v *VHost) streamProperties(def QueueDef) error {
	invalidProperty := func(p string) error {
		return reply.PreconditionFailed("invalid property '%s' for queue '%s' in vhost '%s'", p, def.Name, v.Name)
	}
	switch {
	case def.ServerNamed:
		return reply.PreconditionFailed("Cannot declare a server-named queue for type rabbit_stream_queue")
	case !def.Durable:
		return invalidProperty("non-durable")
	case def.AutoDelete:
		return invalidProperty("auto-delete")
	case def.Exclusive:
		return invalidProperty("exclusive-owner")
	}
	return nil
}

// streamConfig reads a stream's retention arguments. It checks nothing:
// a new stream's were checked at its declare, and a stored one keeps
// what an older Warren accepted (a value it cannot read, such as an
// x-max-age of "0s", is no limit).
func (v *VHost) streamConfig(def QueueDef) stream.Config {
	cfg := stream.Config{Name: def.Name, VHost: v.Name}
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

// declareStream is Declare's change for a stream; defMu is held.
func (v *VHost) declareStream(def QueueDef) (*StreamQueue, bool, error) {
	if s, _ := v.typed[def.Name].(*StreamQueue); s != nil {
		return s, false, v.equivalentStream(s, def)
	}
	if err := v.streamProperties(def); err != nil {
		return nil, false, err
	}
	cfg := v.streamConfig(def)
	st, ok := v.store.(*storage.Store)
	if !ok {
		return nil, false, reply.PreconditionFailed("stream queues need the message store; queue '%s' in vhost '%s'", def.Name, v.Name)
	}
	sq, err := v.openStream(def, cfg, st.NewID(), nil)
	if err != nil {
		return nil, false, err
	}
	v.registerTyped(sq)
	return sq, true, nil
}

// openStream opens a stream's log under id and records its declaration;
// defMu is held.
func (v *VHost) openStream(def QueueDef, cfg stream.Config, id uint64, members []string) (*StreamQueue, error) {
	st, ok := v.store.(*storage.Store)
	if !ok {
		return nil, reply.Internal("stream queue '%s' in vhost '%s' without the message store", def.Name, v.Name)
	}
	cfg.ID, cfg.Store, cfg.Log = id, st, v.log
	s, err := stream.Open(cfg)
	if err != nil {
		return nil, reply.Internal("%v", err)
	}
	sq := &StreamQueue{Stream: s, Args: def.Args}
	if members != nil {
		sq.members.Store(&members)
	}
	if err := v.store.PutMeta(storage.KindQueue, v.Name, def.Name, streamRecordOf(sq).Table()); err != nil {
		s.Close()
		return nil, stored(err)
	}
	v.applyStreamPolicy(sq)
	return sq, nil
}

// streamRecord is a stream's stored declaration; in a cluster its
// members and its incarnation (its group's id, and its log's) too.
func streamRecordOf(s *StreamQueue) QueueRecord {
	rec := QueueRecord{Durable: true, Args: s.Args, StoreID: s.ID()}
	if nodes := s.MemberNodes(); nodes != nil {
		rec.Members, rec.Incarnation, rec.Home = nodes, s.ID(), nodes[0]
	}
	return rec
}

// RestoreStream reopens a stored stream at start-up; in a cluster this
// node's replica rejoins its group.
func (v *VHost) RestoreStream(def QueueDef, id uint64) error {
	cfg := v.streamConfig(def)
	v.defMu.Lock()
	defer v.defMu.Unlock()
	sq, err := v.openStream(def, cfg, id, def.Members)
	if err != nil {
		return err
	}
	if slices.Contains(def.Members, v.self()) {
		// A replica whose log is empty gets the group's from the
		// leader: only a new stream's declare makes its first
		// configuration.
		if err := v.startStream(sq, false, true, nil); err != nil {
			sq.Close()
			return err
		}
	}
	v.registerTyped(sq)
	return nil
}

func (v *VHost) equivalentStream(s *StreamQueue, def QueueDef) error {
	if def.Exclusive {
		return v.locked(def.Name)
	}
	diff := func(field string, got, cur any) error {
		return reply.PreconditionFailed("inequivalent arg '%s' for queue '%s' in vhost '%s': received '%v' but current is '%v'",
			field, def.Name, v.Name, got, cur)
	}
	switch {
	case !def.Durable:
		return diff("durable", false, true)
	case def.AutoDelete:
		return diff("auto_delete", true, false)
	}
	for _, k := range streamArgsCompared {
		got, hasGot := def.Args[k]
		cur, hasCur := s.Args[k]
		if hasGot != hasCur || !exchange.ValuesEqual(got, cur) {
			return diff(k, describe(got, hasGot), describe(cur, hasCur))
		}
	}
	return nil
}

// applyStreamPolicies puts the policies in force on the streams' retention;
// defMu is held.
func (v *VHost) applyStreamPolicies() {
	for _, s := range v.streamList() {
		v.applyStreamPolicy(s)
	}
}

// streamList returns the streams, for work done without mu.
func (v *VHost) streamList() []*StreamQueue { return typedList[*StreamQueue](v) }

// applyStreamPolicy sets a stream's retention from its arguments and its
// policy's max-length-bytes, max-age and stream-max-segment-size-bytes:
// where both set one, the lower value is in force, as RabbitMQ's stream
// queues take it (and its classic queues their limits); defMu is held.
func (v *VHost) applyStreamPolicy(s *StreamQueue) {
	cfg := v.streamConfig(QueueDef{Name: s.Name, Durable: true, Args: s.Args})
	lower := func(cur *int64, set bool, x any) {
		if n, ok := queue.Integer(x); ok && (!set || n < *cur) {
			*cur = n
		}
	}
	if p := v.policies.For(policy.Queues, s.Name); p != nil {
		d := p.Definition
		_, set := s.Args["x-max-length-bytes"]
		lower(&cfg.MaxBytes, set, d["max-length-bytes"])
		_, set = s.Args["x-stream-max-segment-size-bytes"]
		lower(&cfg.SegmentBytes, set, d["stream-max-segment-size-bytes"])
		if a, ok := d["max-age"].(string); ok {
			if age, ok := queue.ParseInterval(a); ok && age > 0 && (cfg.MaxAge == 0 || age < cfg.MaxAge) {
				cfg.MaxAge = age
			}
		}
	}
	s.SetRetention(cfg.MaxBytes, cfg.MaxAge, cfg.SegmentBytes)
}

// streamQueue is the stream named name, or nil.
func (v *VHost) streamQueue(name string) *StreamQueue { return typedAs[*StreamQueue](v, name) }

// The stream's adapter (adapters.go).

func (s *StreamQueue) typeName() string          { return queue.Stream }
func (s *StreamQueue) arguments() protocol.Table { return s.Args }
func (s *StreamQueue) record() QueueRecord       { return streamRecordOf(s) }
func (s *StreamQueue) handleCall(v *VHost, op string, req protocol.Table) (protocol.Table, error) {
	return v.handleStreamCall(op, s, req)
}

func (s *StreamQueue) deleteChecks(v *VHost, ifUnused, ifEmpty bool) (int, error) {
	st := s.Stats()
	if ifUnused && st.Consumers > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' in use", s.Name, v.Name)
	}
	if ifEmpty && st.Ready > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' is not empty", s.Name, v.Name)
	}
	return st.Ready, nil
}

func (s *StreamQueue) source(v *VHost) (Source, error) { return v.streamSourceFor(s) }

func (s *StreamQueue) addTo(r *RouteBuffers) {
	if !slices.Contains(r.streams, s) {
		r.streams = append(r.streams, s)
	}
}

// checkArgs: a stream's arguments are compared, not parsed as a
// classic or quorum queue's are.
func (s *StreamQueue) checkArgs(*VHost, QueueDef) error { return nil }

func (s *StreamQueue) equivalent(v *VHost, def QueueDef) error { return v.equivalentStream(s, def) }

func (s *StreamQueue) deleteReplicated(v *VHost, ifUnused, ifEmpty bool) (int, error) {
	return v.deleteReplicatedStream(s, ifUnused, ifEmpty)
}

// touch: a stream does not expire.
func (s *StreamQueue) touch() {}

// declareCounts, as RabbitMQ's, count the messages in the stream (all of
// them, read or not). RabbitMQ's count lags by its statistics interval
// (5 s); this one does not.
func (s *StreamQueue) declareCounts(*VHost) (int, int, error) {
	st := s.Stats()
	return st.Ready, st.Consumers, nil
}

func (s *StreamQueue) figures(v *VHost) (queue.Stats, *stats.Meter, error) {
	st, err := v.streamStats(s)
	return st, &s.Counters, err
}

// status is a replicated stream's group; a stream of a node of its own
// has none.
func (s *StreamQueue) status(v *VHost) (QuorumView, bool) {
	if s.MemberNodes() == nil {
		return QuorumView{}, false
	}
	return v.streamStatus(s), true
}

// purge is refused: a stream is not emptied, as RabbitMQ's is not.
func (s *StreamQueue) purge(v *VHost) (int, error) {
	return 0, v.StreamRefuses("queue.purge", s.Name)
}

// release stops this node's replica and deletes the stream's data.
func (s *StreamQueue) release(v *VHost) {
	v.stopStreamReplica(s)
	if err := s.Delete(); err != nil {
		v.log.Error().Err(err).Str("queue", s.Name).Msg("could not delete the stream's messages; the next start deletes them")
	}
}

// enqueueStreams appends m to the streams routing reached; f hears when
// each has it synced.
func (v *VHost) enqueueStreams(m *message.Message, r *RouteBuffers, f *Forwarding) {
	for i, s := range r.streams {
		s.Counters.Inc(stats.PublishIn)
		s.Append(m, func(err error) {
			if err != nil {
				err = reply.Internal("stream '%s' in vhost '%s': %v", s.Name, v.Name, err)
			}
			f.done(err)
		})
		r.streams[i] = nil
	}
	r.streams = r.streams[:0]
}

// closeStreams stops the streams' goroutines (the vhost closing).
func (v *VHost) closeStreams() {
	for _, s := range v.streamList() {
		s.Close()
	}
}

// ---- consuming

// streamSource is what a channel reads a stream through.
type streamSource struct {
	v *VHost
	s *StreamQueue
}

// Consume attaches a consumer at its x-stream-offset. As RabbitMQ, a
// stream's consumer must acknowledge (540 otherwise) and set a prefetch
// (406 otherwise); an offset that does not parse is 406 (RabbitMQ 3.10
// answers some with 541).
func (src streamSource) Consume(c queue.Consumer, added func()) error {
	s := src.s
	if err := checkStreamConsumer(s, c); err != nil {
		return err
	}
	from, err := stream.ParseOffset(streamOffsetArg(c), time.Now())
	if err != nil {
		return reply.PreconditionFailed("invalid arg 'x-stream-offset' for queue '%s' in vhost '%s': %v", s.Name, s.VHost, err)
	}
	return s.Stream.Consume(c, from, added)
}

// checkStreamConsumer refuses a consumer a stream does not serve.
func checkStreamConsumer(s *StreamQueue, c queue.Consumer) error {
	if c.NoAck() {
		return reply.NotImplemented("automatic acknowledgement not supported by stream queues queue '%s' in vhost '%s'", s.Name, s.VHost)
	}
	if p, ok := c.(prefetcher); !ok || p.Prefetch() == 0 {
		return reply.PreconditionFailed("consumer prefetch count is not set for 'queue '%s' in vhost '%s''", s.Name, s.VHost)
	}
	return nil
}

// streamOffsetArg is the consumer's x-stream-offset argument, nil when
// it has none.
func streamOffsetArg(c queue.Consumer) any {
	if a, ok := c.(interface{ Arguments() protocol.Table }); ok {
		return a.Arguments()["x-stream-offset"]
	}
	return nil
}

func (src streamSource) Cancel(c queue.Consumer) { src.s.Stream.Cancel(c) }
func (src streamSource) Kick()                   { src.s.Stream.Kick() }
func (src streamSource) Ack(e []queue.Entry)     { src.s.Stream.Ack(e) }
func (src streamSource) Requeue(e []queue.Entry) { src.s.Stream.Requeue(e) }
func (src streamSource) Reject(e []queue.Entry)  { src.s.Stream.Reject(e) }

// Get is refused: a stream is read from an offset, not taken from.
func (src streamSource) Get(bool) (queue.Delivery, int, bool) { return queue.Delivery{}, 0, false }

// IsStream says whether src reads a stream.
func IsStream(src Source) bool {
	switch src.(type) {
	case streamSource, remoteStream:
		return true
	}
	return false
}

// StreamSettleRefused is RabbitMQ's answer (540, which closes the
// connection) to a nack or reject of a delivery src made, when src reads
// a stream; nil for any other source.
func (v *VHost) StreamSettleRefused(src Source) error {
	var s *StreamQueue
	switch t := src.(type) {
	case streamSource:
		s = t.s
	case remoteStream:
		s = t.s
	default:
		return nil
	}
	return v.StreamRefuses("basic.nack and basic.reject", s.Name)
}

// StreamRefuses is RabbitMQ's answer (540) to what a stream does not do:
// basic.get, queue.purge.
func (v *VHost) StreamRefuses(what, name string) error {
	return reply.NotImplemented("%s not supported by stream queues queue '%s' in vhost '%s'", what, name, v.Name)
}
