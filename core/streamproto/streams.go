package streamproto

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/stream"
)

// createArguments maps Create's arguments to a stream's declare
// arguments, as RabbitMQ's stream plugin does; numeric says whether the
// value is a number.
var createArguments = map[string]struct {
	arg     string
	numeric bool
}{
	"max-length-bytes":                {"x-max-length-bytes", true},
	"max-age":                         {"x-max-age", false},
	"stream-max-segment-size-bytes":   {"x-stream-max-segment-size-bytes", true},
	"initial-cluster-size":            {"x-initial-cluster-size", true},
	"queue-leader-locator":            {"x-queue-leader-locator", false},
	"stream-filter-size-bytes":        {"x-stream-filter-size-bytes", true},
	"x-queue-type":                    {"x-queue-type", false},
	"x-max-length-bytes":              {"x-max-length-bytes", true},
	"x-max-age":                       {"x-max-age", false},
	"x-stream-max-segment-size-bytes": {"x-stream-max-segment-size-bytes", true},
	"x-initial-cluster-size":          {"x-initial-cluster-size", true},
	"x-queue-leader-locator":          {"x-queue-leader-locator", false},
}

// declareArgs turns Create's arguments into a stream's; an unknown key or
// a number that does not parse is refused, naming it.
func declareArgs(in map[string]string) (protocol.Table, error) {
	args := protocol.Table{"x-queue-type": queue.Stream}
	for k, v := range in {
		a, ok := createArguments[k]
		switch {
		case !ok:
			return nil, errors.New("unknown argument " + k)
		case a.arg == "x-queue-type":
			if v != queue.Stream {
				return nil, errors.New("x-queue-type must be stream")
			}
		case a.numeric:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, errors.New("argument " + k + " is not a number: " + v)
			}
			args[a.arg] = n
		default:
			args[a.arg] = v
		}
	}
	return args, nil
}

// codeOf is the response code for a declare's or a delete's error.
func codeOf(err error) stream.ResponseCode {
	var re *reply.Error
	if errors.As(err, &re) {
		switch re.Code {
		case protocol.AccessRefused:
			return stream.CodeAccessRefused
		case protocol.PreconditionFailed, protocol.NotAllowed:
			return stream.CodePreconditionFailed
		case protocol.NotFound:
			return stream.CodeStreamDoesNotExist
		}
	}
	return refusal(err)
}

func (c *Conn) create(m *stream.Create) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.CreateResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	if m.Stream == "" {
		answer(stream.CodePreconditionFailed)
		return
	}
	args, err := declareArgs(m.Arguments)
	if err != nil {
		c.log.Info().Str("stream", m.Stream).Err(err).Msg("stream create refused")
		answer(stream.CodePreconditionFailed)
		return
	}
	if err := c.grant.DeclareQueue(m.Stream, args, true); err != nil {
		answer(refusal(err))
		return
	}
	if topology.ReservedName(m.Stream) {
		// amq.* is the broker's; RabbitMQ's stream plugin answers as for
		// an empty name (rabbit_stream_utils:enforce_correct_name).
		answer(stream.CodePreconditionFailed)
		return
	}
	// A stream of that name with the same arguments already exists; with
	// others, the declare's 406 is PRECONDITION_FAILED, as RabbitMQ
	// answers.
	d, err := c.vh.Declare(topology.QueueDef{Name: m.Stream, Durable: true, Args: args}, false)
	switch {
	case err != nil:
		c.log.Info().Str("stream", m.Stream).Err(err).Msg("stream create refused")
		answer(codeOf(err))
	case !d.Created:
		answer(stream.CodeStreamAlreadyExists)
	default:
		answer(stream.CodeOK)
	}
}

func (c *Conn) delete(m *stream.Delete) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.DeleteResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	if err := c.grant.DeleteQueue(m.Stream); err != nil {
		answer(refusal(err))
		return
	}
	q, err := c.vh.Queue(m.Stream, nil)
	if err != nil || q.Type() != queue.Stream {
		answer(stream.CodeStreamDoesNotExist)
		return
	}
	if _, err := c.vh.DeleteQueue(m.Stream, nil, false, false); err != nil {
		answer(codeOf(err))
		return
	}
	answer(stream.CodeOK)
}

// self is this node as metadata names it.
func (c *Conn) self() stream.Broker {
	return stream.Broker{Reference: 0, Host: c.srv.Settings.AdvertisedHost, Port: c.srv.Settings.AdvertisedPort}
}

// metadata names each stream's leader and replicas by the host and
// port their nodes advertise, as RabbitMQ answers: a publisher connects
// to the leader, a consumer to a replica. A stream of a node of its own
// has this node for its leader and no replicas; a replicated one has its
// Raft group's leader and its other members that are up, wherever they
// are, so that a client asking a node without a replica learns where to
// go. A stream whose leader is unknown now (an election) is
// STREAM_NOT_AVAILABLE. This node is always the first broker named.
func (c *Conn) metadata(m *stream.Metadata) {
	resp := &stream.MetadataResponse{CorrelationID: m.CorrelationID, Brokers: []stream.Broker{c.self()}}
	refs := map[string]uint16{}
	ref := func(node string) (uint16, bool) {
		if r, ok := refs[node]; ok {
			return r, true
		}
		if c.srv.Endpoint == nil {
			return 0, false
		}
		host, port, ok := c.srv.Endpoint(node)
		if !ok {
			return 0, false
		}
		r := uint16(0)
		if self := resp.Brokers[0]; host != self.Host || port != self.Port {
			r = uint16(len(resp.Brokers))
			resp.Brokers = append(resp.Brokers, stream.Broker{Reference: r, Host: host, Port: port})
		}
		refs[node] = r
		return r, true
	}
	for _, name := range m.Streams {
		resp.Streams = append(resp.Streams, c.streamMetadata(name, ref))
	}
	c.out.send(resp)
}

// leaderWait bounds how long metadata waits for a replicated stream to
// have a leader: an election takes a few hundred milliseconds.
const leaderWait = 3 * time.Second

// streamMetadata is one stream's part of a metadata answer; ref gives a
// node's broker reference.
func (c *Conn) streamMetadata(name string, ref func(node string) (uint16, bool)) stream.StreamMetadata {
	sm := stream.StreamMetadata{Stream: name, Leader: 0xffff}
	if err := c.grant.DescribeStream(name); err != nil {
		sm.Code = refusal(err)
		return sm
	}
	q, code := c.findStream(name)
	if code != stream.CodeOK {
		sm.Code = code
		return sm
	}
	view, replicated := q.Status()
	if !replicated {
		sm.Code, sm.Leader = stream.CodeOK, 0
		return sm
	}
	// A stream just created, or whose leader just went, elects one
	// within moments: wait for it a little rather than send the client
	// away (clients create a stream and ask its metadata at once).
	for deadline := time.Now().Add(leaderWait); view.Leader == "" && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		view, _ = q.Status()
	}
	leader, ok := ref(view.Leader)
	if view.Leader == "" || !ok {
		sm.Code = stream.CodeStreamNotAvailable
		return sm
	}
	sm.Code, sm.Leader = stream.CodeOK, leader
	for _, node := range view.Online {
		if r, ok := ref(node); ok && node != view.Leader && !slices.Contains(sm.Replicas, r) {
			sm.Replicas = append(sm.Replicas, r)
		}
	}
	return sm
}

// streamStats gives a stream's first and committed chunk ids, as
// RabbitMQ 3.11 does; -1 for an empty stream.
func (c *Conn) streamStats(m *stream.StreamStats) {
	answer := func(code stream.ResponseCode, stats map[string]int64) {
		c.out.send(&stream.StreamStatsResponse{CorrelationID: m.CorrelationID, Code: code, Stats: stats})
	}
	log, code := c.readableLog(m.Stream)
	if code != stream.CodeOK {
		answer(code, nil)
		return
	}
	first, end, last := log.Bounds()
	// A stream's readable chunks are committed ones (a replica reads
	// only what a majority has), so the last is also the committed one.
	stats := map[string]int64{"first_chunk_id": -1, "last_chunk_id": -1, "committed_chunk_id": -1}
	if end > first {
		stats["first_chunk_id"] = int64(first)
		stats["last_chunk_id"] = int64(last)
		stats["committed_chunk_id"] = int64(last)
	}
	answer(stream.CodeOK, stats)
}

// resolveOffsetSpec turns an offset specification into the offset a
// subscription with it would start at.
func (c *Conn) resolveOffsetSpec(m *stream.ResolveOffsetSpec) {
	answer := func(code stream.ResponseCode, offset uint64) {
		c.out.send(&stream.ResolveOffsetSpecResponse{CorrelationID: m.CorrelationID, Code: code, OffsetType: stream.OffsetOffset, Offset: offset})
	}
	log, code := c.readableLog(m.Stream)
	if code != stream.CodeOK {
		answer(code, 0)
		return
	}
	at, err := log.Position(offsetOf(m.Offset))
	if err != nil {
		answer(stream.CodeInternalError, 0)
		return
	}
	answer(stream.CodeOK, at)
}

// partitionOrder is the binding argument that orders a super stream's
// partitions.
const partitionOrder = "x-stream-partition-order"

// superStreamBindings are the bindings from the super stream's exchange
// to its partitions, in partition order; ok is false when there is no
// such exchange.
func (c *Conn) superStreamBindings(name string) (bindings []bindingTo, ok bool) {
	if _, err := c.vh.FindExchange(name); err != nil {
		return nil, false
	}
	for _, b := range c.vh.Bindings() {
		if b.Source != name || b.Destination.Kind != exchange.ToQueue {
			continue
		}
		order, _ := queue.Integer(b.Args[partitionOrder])
		bindings = append(bindings, bindingTo{queue: b.Destination.Name, key: b.Key, order: order})
	}
	slices.SortStableFunc(bindings, func(a, b bindingTo) int { return int(a.order - b.order) })
	return bindings, true
}

type bindingTo struct {
	queue, key string
	order      int64
}

// route names the partitions of a super stream a routing key reaches.
func (c *Conn) route(m *stream.Route) {
	resp := &stream.RouteResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK}
	if err := c.grant.RouteSuperStream(m.SuperStream); err != nil {
		resp.Code = refusal(err)
	} else if bindings, ok := c.superStreamBindings(m.SuperStream); !ok {
		resp.Code = stream.CodeStreamDoesNotExist
	} else {
		for _, b := range bindings {
			if b.key == m.RoutingKey && !slices.Contains(resp.Streams, b.queue) {
				resp.Streams = append(resp.Streams, b.queue)
			}
		}
	}
	c.out.send(resp)
}

// partitions names a super stream's partitions in order.
func (c *Conn) partitions(m *stream.Partitions) {
	resp := &stream.PartitionsResponse{CorrelationID: m.CorrelationID, Code: stream.CodeOK}
	if err := c.grant.DescribeSuperStream(m.SuperStream); err != nil {
		resp.Code = refusal(err)
	} else if bindings, ok := c.superStreamBindings(m.SuperStream); !ok {
		resp.Code = stream.CodeStreamDoesNotExist
	} else {
		for _, b := range bindings {
			if !slices.Contains(resp.Streams, b.queue) {
				resp.Streams = append(resp.Streams, b.queue)
			}
		}
	}
	c.out.send(resp)
}

// superStreamArg marks a super stream's exchange, as RabbitMQ marks it.
const superStreamArg = "x-super-stream"

// createSuperStream makes a super stream as RabbitMQ does: a stream per
// partition, a direct exchange named for the super stream, and a binding
// from it to each partition under its binding key, ordered by
// x-stream-partition-order. It needs what making those over AMQP needs.
// A failure part way deletes what it made.
func (c *Conn) createSuperStream(m *stream.CreateSuperStream) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.CreateSuperStreamResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	if m.Name == "" || len(m.Partitions) == 0 || len(m.Partitions) != len(m.BindingKeys) || topology.ReservedName(m.Name) {
		answer(stream.CodePreconditionFailed)
		return
	}
	args, err := declareArgs(m.Arguments)
	if err != nil {
		c.log.Info().Str("super_stream", m.Name).Err(err).Msg("super stream create refused")
		answer(stream.CodePreconditionFailed)
		return
	}
	if err := c.grant.DeclareExchange(m.Name, nil, true); err != nil {
		answer(refusal(err))
		return
	}
	for _, p := range m.Partitions {
		if err := c.grant.DeclareQueue(p, args, true); err != nil {
			answer(refusal(err))
			return
		}
		if err := c.grant.Bind(m.Name, auth.KindQueue, p); err != nil {
			answer(refusal(err))
			return
		}
	}
	if _, err := c.vh.FindExchange(m.Name); err == nil {
		answer(stream.CodeStreamAlreadyExists)
		return
	}
	for _, p := range m.Partitions {
		if p == "" || topology.ReservedName(p) {
			answer(stream.CodePreconditionFailed)
			return
		}
		if c.vh.HasQueue(p) {
			answer(stream.CodeStreamAlreadyExists)
			return
		}
	}
	var made []string
	undo := func() {
		_ = c.vh.DeleteExchange(m.Name, false)
		for _, p := range made {
			_, _ = c.vh.DeleteQueue(p, nil, false, false)
		}
	}
	for _, p := range m.Partitions {
		if _, err := c.vh.Declare(topology.QueueDef{Name: p, Durable: true, Args: args}, false); err != nil {
			undo()
			answer(codeOf(err))
			return
		}
		made = append(made, p)
	}
	def := exchange.Definition{VHost: c.vh.Name, Name: m.Name, Type: "direct", Durable: true, Args: protocol.Table{superStreamArg: true}}
	if _, err := c.vh.DeclareExchange(def, false); err != nil {
		undo()
		answer(codeOf(err))
		return
	}
	for i, p := range m.Partitions {
		err := c.vh.Bind(m.Name, exchange.Destination{Kind: exchange.ToQueue, Name: p}, m.BindingKeys[i], protocol.Table{partitionOrder: int64(i)}, nil)
		if err != nil {
			undo()
			answer(codeOf(err))
			return
		}
	}
	answer(stream.CodeOK)
}

// deleteSuperStream deletes a super stream's exchange and its partitions.
func (c *Conn) deleteSuperStream(m *stream.DeleteSuperStream) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.DeleteSuperStreamResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	bindings, ok := c.superStreamBindings(m.Name)
	if !ok {
		answer(stream.CodeStreamDoesNotExist)
		return
	}
	if err := c.grant.DeleteExchange(m.Name); err != nil {
		answer(refusal(err))
		return
	}
	for _, b := range bindings {
		if err := c.grant.DeleteQueue(b.queue); err != nil {
			answer(refusal(err))
			return
		}
	}
	if err := c.vh.DeleteExchange(m.Name, false); err != nil {
		answer(codeOf(err))
		return
	}
	for _, b := range bindings {
		if q, err := c.vh.Queue(b.queue, nil); err == nil && q.Type() == queue.Stream {
			_, _ = c.vh.DeleteQueue(b.queue, nil, false, false)
		}
	}
	answer(stream.CodeOK)
}
