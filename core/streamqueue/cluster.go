package streamqueue

import (
	"slices"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/membership"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
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
// lacks from another (callCopy).
//
// A member serves its own node's publishers and consumers from its
// replica. A node that is not a member forwards what is published to a
// member, as to a quorum queue's, and its consumers read through one (a
// remote consumer there, with the same x-stream-offset).
//
// Its members change as a quorum queue's do (vhost's ChangeQuorumMember:
// warrenctl add_member, delete_member, grow and shrink, and
// forget_cluster_node), and a new incarnation of a member's node replaces
// the one it was in the same way (CheckMembers). A replica removed stops;
// its messages stay until the stream is deleted, and if it is added back
// it goes on from them (entries it applied before are the same entries),
// copying what it lacks. A consumer reading that replica on its node is
// not told.

// callCopy asks a member for a run of its replica's messages.
const callCopy = "stream.copy"

// MemberNodes are the nodes of the stream's group, by name; nil on a node
// of its own. The slice is not to be changed.
func (s *Queue) MemberNodes() []string { return s.members.Nodes() }

// Replicated says the stream has a group: it was declared in a cluster.
func (s *Queue) Replicated() bool { return s.MemberNodes() != nil }

// Member says whether this node runs a replica of the stream.
func (s *Queue) Member() bool { return s.active.Load() }

// Here says whether the stream's messages are on this node: a stream of
// a node of its own, or this node's replica.
func (s *Queue) Here() bool { return s.MemberNodes() == nil || s.Member() }

// Elsewhere is "": a stream is its group's, not one node's.
func (s *Queue) Elsewhere() string { return "" }

// DeclareReplicated declares a new stream for the cluster.
func (t Type) DeclareReplicated(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if err := t.Check(h, def); err != nil {
		return nil, false, err
	}
	incarnation, err := membership.Propose(h, def, "x-initial-cluster-size")
	if err != nil {
		return nil, false, err
	}
	s, _ := h.Lookup(def.Name).(*Queue)
	if s == nil {
		if exists, err := h.DeclaredAlready(def); exists {
			return nil, false, err // another node declared another type first
		}
		return nil, false, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, h.Name()) // deleted again already
	}
	if err := s.Equivalent(def); err != nil {
		return nil, false, err
	}
	return s, s.s.ID() == incarnation, nil
}

// ApplyDeclare declares a stream for the cluster: every node records it,
// its members start their replicas; defMu is held.
func (Type) ApplyDeclare(h queuetype.Host, def topology.QueueDef) error {
	if s, _ := h.Lookup(def.Name).(*Queue); s != nil && s.s.ID() == def.ID {
		return nil
	}
	if exists, err := h.DeclaredAlready(def); exists {
		return err
	}
	s, err := open(h, def, def.ID, def.Members)
	if err != nil {
		return err
	}
	if slices.Contains(def.Members, h.Self()) {
		// As a quorum queue's member: a new stream's first members
		// make its first configuration, others join.
		var boot []uint64
		if membership.FirstMember(h, def) {
			boot = membership.BootIDs(def)
		}
		if err := s.start(def.Home == h.Self() && boot != nil, boot == nil, boot); err != nil {
			// Kept as a stream this node reaches through the other
			// members, so every node has the same topology.
			h.Logger().Error().Err(err).Str("queue", def.Name).Msg("could not start this node's replica of the stream")
		}
	}
	h.Register(s)
	return nil
}

// start starts this node's replica of the stream's group and waits until
// it has replayed its log; campaign, join and boot as membership.Start's.
func (s *Queue) start(campaign, join bool, boot []uint64) error {
	bind := func(g *cluster.Group) { s.s.SetReplica(g, s.copyFrom()) }
	g, err := membership.Start(s.h, s.s.ID(), boot, campaign, join, bind, s.s)
	if err != nil {
		return err
	}
	s.group.Store(g)
	s.active.Store(true)
	<-g.Recovered()
	return nil
}

// stop stops this node's replica's group and deletes its log (the stream
// is being deleted, or the replica removed).
func (s *Queue) stop() {
	s.active.Store(false)
	g := s.group.Swap(nil)
	if g == nil {
		return
	}
	g.Stop()
	if err := membership.DeleteLog(s.h, s.s.ID()); err != nil {
		s.h.Logger().Error().Err(err).Str("queue", s.name).Msg("could not delete the stream's Raft log")
	}
}

// Join starts this node's replica, one the group is adding. Leave stops
// it; its messages stay until the stream is deleted, and a replica added
// back goes on from them. defMu is held.
func (s *Queue) Join() error { return s.start(false, true, nil) }
func (s *Queue) Leave()      { s.stop() }

// RecordMembers records new members, in memory and in the store; defMu is
// held.
func (s *Queue) RecordMembers(members []string) error {
	s.members.Set(members)
	return s.h.Store().PutMeta(storage.KindQueue, s.h.Name(), s.name, s.Record().Table())
}

// Tidy: a stream's consumers hold nothing of it to give back.
func (s *Queue) Tidy() {}

// copyFrom is how the replica here copies what it lacks: from the members
// up, the leader first, the others in turn.
func (s *Queue) copyFrom() stream.Fetch {
	return func(from uint64, maxBytes int) ([]stream.Fetched, error) {
		var lastErr error
		for _, rq := range s.vias() {
			// "offset", not "from": CallHome names the calling node "from".
			ans, err := s.h.CallHome(rq, callCopy, protocol.Table{"offset": int64(from), "max": int64(maxBytes)})
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

// vias are the other members up, as RemoteQueues, the leader as this
// node's replica knows it first.
func (s *Queue) vias() []*queuetype.RemoteQueue {
	var leader uint64
	if g := s.group.Load(); g != nil {
		leader = g.Status().Leader
	}
	var out []*queuetype.RemoteQueue
	for _, m := range s.MemberNodes() {
		if m == s.h.Self() || !s.h.Up(m) {
			continue
		}
		rq := &queuetype.RemoteQueue{Name: s.name, Home: m, Durable: true, Args: s.args, ID: s.s.ID()}
		if leader != 0 && s.h.NodeID(m) == leader {
			out = append([]*queuetype.RemoteQueue{rq}, out...)
		} else {
			out = append(out, rq)
		}
	}
	return out
}

// Via is the member a node that is not one reaches the stream through;
// nil when none is up.
func (s *Queue) Via() *queuetype.RemoteQueue {
	if vias := s.vias(); len(vias) > 0 {
		return vias[0]
	}
	return nil
}

// DeleteReplicated deletes the stream for the cluster once its conditions
// hold.
func (s *Queue) DeleteReplicated(ifUnused, ifEmpty bool) (int, error) {
	st, err := s.stats()
	if err != nil {
		return 0, err
	}
	return s.h.ProposeDelete(s.name, s.s.ID(), st.Consumers, st.Ready, st.Ready, ifUnused, ifEmpty)
}

// stats are the stream's figures: its replica's here, or a member's
// through a call.
func (s *Queue) stats() (queue.Stats, error) { return membership.StatsOf(s.h, s, s.s.Stats) }

// HandleCall answers another node's call about the stream, this node
// having a replica.
func (s *Queue) HandleCall(op string, req protocol.Table) (protocol.Table, error) {
	switch op {
	case callCopy:
		got, err := s.s.Copy(remote.Int(req, "offset"), int(remote.Int(req, "max")))
		if err != nil {
			return nil, reply.Internal("stream '%s' in vhost '%s': %v", s.name, s.h.Name(), err)
		}
		return protocol.Table{"data": stream.EncodeFetched(got)}, nil
	case queuetype.CallQueueDelete:
		n, err := s.DeleteReplicated(remote.Bool(req, "if_unused"), remote.Bool(req, "if_empty"))
		return protocol.Table{"messages": int64(n)}, err
	case queuetype.CallQueuePurge:
		return nil, s.refuses("queue.purge")
	case queuetype.CallMember:
		return protocol.Table{}, membership.ChangeHere(s.h, s, remote.String(req, "node"), remote.Bool(req, "add"))
	case queuetype.CallLead:
		return protocol.Table{}, membership.LeadHere(s.h, s, remote.String(req, "node"))
	case queuetype.CallConsume, queuetype.CallCancel, queuetype.CallSettle:
		return s.h.HandleConsumerCall(op, local{s}, req)
	case queuetype.CallGet:
		return nil, s.refuses("basic.get")
	case queuetype.CallQueueCounts:
		st := s.s.Stats()
		return protocol.Table{"messages": int64(st.Ready), "consumers": int64(st.Consumers), "bytes": st.ReadyBytes,
			"leader": s.leader()}, nil
	}
	return nil, reply.Internal("unknown call %q (a node of a newer version?)", op)
}

// leader names the member that leads the stream's group as this node's
// replica sees it; "" when none is known.
func (s *Queue) leader() string {
	g := s.group.Load()
	if g == nil {
		return ""
	}
	return membership.NodeNamed(s.h, s.MemberNodes(), g.Status().Leader)
}
