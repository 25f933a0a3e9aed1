package vhost

import (
	"slices"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/protocol"
)

// Streams in a cluster.
//
// A stream is replicated as a quorum queue is: its declaration is a
// topology command naming its members (x-initial-cluster-size of the
// nodes up, default three, placed as quorum queues are) and its
// incarnation, which is also its Raft group's id and its log's id in
// each member's store. Each member runs a replica (core/stream's
// replica.go): appends are entries of the group, confirmed once a
// majority has them; every replica stores every message at the same
// offset; a replica that fell behind the others' logs copies what it
// lacks from another (callStreamCopy).
//
// A member serves its own node's publishers and consumers from its
// replica. A node that is not a member forwards what is published to a
// member, as to a quorum queue's, and its consumers read through one (a
// remote consumer there, with the same x-stream-offset).
//
// Its members change as a quorum queue's do (ChangeQuorumMember: warrenctl
// add_member, delete_member, grow and shrink, and forget_cluster_node),
// and a new incarnation of a member's node replaces the one it was in the
// same way (CheckMembers). A replica removed stops; its messages stay
// until the stream is deleted, and if it is added back it goes on from
// them (entries it applied before are the same entries), copying what it
// lacks. A consumer reading that replica on its node is not told.

// callStreamCopy asks a member for a run of its replica's messages.
const callStreamCopy = "stream.copy"

// MemberNodes are the nodes of the stream's group, by name; nil on a node
// of its own. The slice is not to be changed.
func (s *StreamQueue) MemberNodes() []string {
	if m := s.members.Load(); m != nil {
		return *m
	}
	return nil
}

// member says whether this node runs a replica of the stream.
func (s *StreamQueue) member() bool { return s.active.Load() }

// here says whether the stream's messages are on this node: a stream of
// a node of its own, or this node's replica.
func (s *StreamQueue) here() bool { return s.MemberNodes() == nil || s.member() }

// declareStreamReplicated declares a new stream for the cluster.
func (v *VHost) declareStreamReplicated(def QueueDef) (Declared, error) {
	if err := v.streamProperties(def); err != nil {
		return Declared{}, err
	}
	incarnation, err := v.proposeReplicated(def, "x-initial-cluster-size")
	if err != nil {
		return Declared{}, err
	}
	s := v.streamQueue(def.Name)
	if s == nil {
		if exists, err := v.declaredAlready(def); exists {
			return Declared{}, err // another node declared another type first
		}
		return Declared{}, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, v.Name) // deleted again already
	}
	if err := v.equivalentStream(s, def); err != nil {
		return Declared{}, err
	}
	return Declared{Name: s.Name, t: s, Created: s.ID() == incarnation}, nil
}

// applyDeclareStream declares a stream for the cluster: every node
// records it, its members start their replicas; defMu is held.
func (v *VHost) applyDeclareStream(def QueueDef) error {
	if s := v.streamQueue(def.Name); s != nil && s.ID() == def.ID {
		return nil
	}
	if exists, err := v.declaredAlready(def); exists {
		return err
	}
	s, err := v.openStream(def, v.streamConfig(def), def.ID, def.Members)
	if err != nil {
		return err
	}
	if slices.Contains(def.Members, v.self()) {
		// As a quorum queue's member (applyDeclareQuorum).
		var boot []uint64
		if v.firstMember(def) {
			boot = bootIDs(def)
		}
		if err := v.startStream(s, def.Home == v.self() && boot != nil, boot == nil, boot); err != nil {
			// Kept as a stream this node reaches through the other
			// members, so every node has the same topology.
			v.log.Error().Err(err).Str("queue", def.Name).Msg("could not start this node's replica of the stream")
		}
	}
	v.registerTyped(s)
	return nil
}

// startStream starts this node's replica of s's group and waits until it
// has replayed its log; campaign, join and boot as startQuorum's.
func (v *VHost) startStream(s *StreamQueue, campaign, join bool, boot []uint64) error {
	bind := func(g *cluster.Group) { s.SetReplica(g, v.copyFor(s)) }
	g, err := v.startMember(s.ID(), boot, campaign, join, bind, s.Stream)
	if err != nil {
		return err
	}
	s.group.Store(g)
	s.active.Store(true)
	<-g.Recovered()
	return nil
}

// stopStreamReplica stops this node's replica's group and deletes its
// log (the stream is being deleted, or the replica removed).
func (v *VHost) stopStreamReplica(s *StreamQueue) {
	s.active.Store(false)
	g := s.group.Swap(nil)
	if g == nil {
		return
	}
	g.Stop()
	if err := v.store.(raftLogs).DeleteRaftLog(s.ID()); err != nil {
		v.log.Error().Err(err).Str("queue", s.Name).Msg("could not delete the stream's Raft log")
	}
}

// copyFor is how s's replica here copies what it lacks: from the
// members up, the leader first, the others in turn.
func (v *VHost) copyFor(s *StreamQueue) stream.Fetch {
	return func(from uint64, maxBytes int) ([]stream.Fetched, error) {
		var lastErr error
		for _, rq := range v.streamVias(s) {
			// "offset", not "from": callHome names the calling node "from".
			ans, err := v.callHome(rq, callStreamCopy, protocol.Table{"offset": int64(from), "max": int64(maxBytes)})
			if err != nil {
				lastErr = err
				continue
			}
			data, _ := ans["data"].([]byte)
			got, err := stream.DecodeFetched(data)
			if err != nil || len(got) == 0 {
				lastErr = err
				continue
			}
			return got, nil
		}
		return nil, lastErr
	}
}

// streamVias are the other members up, as RemoteQueues, the leader as
// this node's replica knows it first.
func (v *VHost) streamVias(s *StreamQueue) []*RemoteQueue {
	var leader uint64
	if g := s.group.Load(); g != nil {
		leader = g.Status().Leader
	}
	var out []*RemoteQueue
	for _, m := range s.MemberNodes() {
		if m == v.self() || !v.cluster.Up(m) {
			continue
		}
		rq := &RemoteQueue{Name: s.Name, Home: m, Durable: true, Args: s.Args, ID: s.ID()}
		if leader != 0 && v.cluster.NodeID(m) == leader {
			out = append([]*RemoteQueue{rq}, out...)
		} else {
			out = append(out, rq)
		}
	}
	return out
}

// streamVia is the member a node that is not one reaches the stream
// through; nil when none is up.
func (v *VHost) streamVia(s *StreamQueue) *RemoteQueue {
	if vias := v.streamVias(s); len(vias) > 0 {
		return vias[0]
	}
	return nil
}

// deleteReplicatedStream deletes a stream for the cluster once its
// conditions hold.
func (v *VHost) deleteReplicatedStream(s *StreamQueue, ifUnused, ifEmpty bool) (int, error) {
	st, err := v.streamStats(s)
	if err != nil {
		return 0, err
	}
	return v.proposeDelete(s.Name, s.ID(), st.Consumers, st.Ready, st.Ready, ifUnused, ifEmpty)
}

// streamStats are a stream's figures: its replica's here, or a member's
// through a call.
func (v *VHost) streamStats(s *StreamQueue) (queue.Stats, error) {
	if s.here() {
		return s.Stats(), nil
	}
	rq := v.streamVia(s)
	if rq == nil {
		return queue.Stats{}, v.replicasDown(s)
	}
	return v.remoteStats(rq)
}

// replicasDown is the answer for a stream none of whose members can be
// reached from here.
func (v *VHost) replicasDown(s *StreamQueue) error {
	return reply.NotFound("no member of stream '%s' in vhost '%s' is up (members %v)", s.Name, v.Name, s.MemberNodes())
}

// handleStreamCall answers another node's call about a stream this node
// has a replica of.
func (v *VHost) handleStreamCall(op string, s *StreamQueue, req protocol.Table) (protocol.Table, error) {
	b := func(k string) bool { x, _ := req[k].(bool); return x }
	switch op {
	case callStreamCopy:
		got, err := s.Copy(id(req, "offset"), int(id(req, "max")))
		if err != nil {
			return nil, reply.Internal("stream '%s' in vhost '%s': %v", s.Name, v.Name, err)
		}
		return protocol.Table{"data": stream.EncodeFetched(got)}, nil
	case callQueueDelete:
		n, err := v.deleteReplicatedStream(s, b("if_unused"), b("if_empty"))
		return protocol.Table{"messages": int64(n)}, err
	case callQueuePurge:
		return nil, v.StreamRefuses("queue.purge", s.Name)
	case callQuorumMember:
		return protocol.Table{}, v.changeMember(s, str(req, "node"), b("add"))
	case callConsume, callCancel, callSettle:
		return v.handleConsumerCall(op, streamSource{v: v, s: s}, req)
	case callGet:
		return nil, v.StreamRefuses("basic.get", s.Name)
	case callQueueCounts:
		st := s.Stats()
		return protocol.Table{"messages": int64(st.Ready), "consumers": int64(st.Consumers), "bytes": st.ReadyBytes,
			"leader": v.streamLeader(s)}, nil
	}
	return nil, reply.Internal("unknown call %q (a node of a newer version?)", op)
}

// streamStatus is a replicated stream's group as this node sees it, as
// QuorumStatus gives a quorum queue's.
func (v *VHost) streamStatus(s *StreamQueue) QuorumView {
	view := QuorumView{Members: s.MemberNodes()}
	for _, m := range s.MemberNodes() {
		if v.cluster.Up(m) {
			view.Online = append(view.Online, m)
		}
	}
	g := s.group.Load()
	if g == nil {
		if rq := v.streamVia(s); rq != nil {
			if ans, err := v.callHome(rq, callQueueCounts, protocol.Table{}); err == nil {
				view.Leader = str(ans, "leader")
			}
		}
		return view
	}
	view.Raft = g.Status()
	view.Leader = v.streamLeader(s)
	v.matchByName(&view, s.MemberNodes())
	return view
}

// streamLeader names the member that leads s's group as this node's
// replica sees it; "" when none is known.
func (v *VHost) streamLeader(s *StreamQueue) string {
	g := s.group.Load()
	if g == nil {
		return ""
	}
	return v.nodeNamed(s.MemberNodes(), g.Status().Leader)
}

// remoteStream is a stream this node has no replica of, as a channel of
// this node reads it: through a member, the stream's checks made here.
type remoteStream struct {
	*RemoteSource
	s *StreamQueue
}

// Consume checks what a stream's consumer must set, then consumes
// through the member with the consumer's x-stream-offset.
func (src remoteStream) Consume(c queue.Consumer, added func()) error {
	if err := checkStreamConsumer(src.s, c); err != nil {
		return err
	}
	if _, err := stream.ParseOffset(streamOffsetArg(c), time.Now()); err != nil {
		return reply.PreconditionFailed("invalid arg 'x-stream-offset' for queue '%s' in vhost '%s': %v", src.s.Name, src.s.VHost, err)
	}
	src.RemoteSource.args = protocol.Table{}
	if x := streamOffsetArg(c); x != nil {
		src.RemoteSource.args["x-stream-offset"] = x
	}
	return src.RemoteSource.Consume(c, added)
}

// Get is refused, as on a member.
func (src remoteStream) Get(bool) (queue.Delivery, int, bool) { return queue.Delivery{}, 0, false }

// streamSourceFor is what a channel of this node reads s through.
func (v *VHost) streamSourceFor(s *StreamQueue) (Source, error) {
	if s.here() {
		return streamSource{v: v, s: s}, nil
	}
	rq := v.streamVia(s)
	if rq == nil {
		return nil, v.replicasDown(s)
	}
	return remoteStream{RemoteSource: &RemoteSource{v: v, rq: rq, id: v.sourceSeq.Add(1)}, s: s}, nil
}
