package quorumqueue

import (
	"slices"

	"github.com/warrenmq/warren/core/membership"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Quorum queues in a cluster.
//
// A quorum queue's declaration is a topology command naming its members
// and its incarnation, its group's id (vhost's replicated.go places the
// members and changes them). Every node applies it: a member starts its
// member of the group (the node the leader locator chose stands for
// leader at once), the others register the queue to route to and read
// through a member.
//
// A member serves its own node's clients: publishes, consumers, gets and
// settlements are entries its group orders, whoever leads. A node that is
// not a member forwards what is published to a member (Via) and consumes
// through one (a remote.Source). A delete is a command too, naming
// the incarnation: each member stops its member and deletes its log.

// DeclareReplicated declares a new quorum queue for the cluster.
func (Type) DeclareReplicated(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	if _, err := h.ParseDeclare(def); err != nil {
		return nil, false, err
	}
	if err := check(h, def); err != nil {
		return nil, false, err
	}
	incarnation, err := membership.Propose(h, def, "x-quorum-initial-group-size")
	if err != nil {
		return nil, false, err
	}
	qq, _ := h.Lookup(def.Name).(*Queue)
	if qq == nil {
		return nil, false, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, h.Name()) // deleted again already
	}
	if err := h.EquivalentDurable(qq.args, def); err != nil {
		return nil, false, err
	}
	return qq, qq.id == incarnation, nil
}

// ApplyDeclare declares a quorum queue for the cluster; defMu is held.
func (Type) ApplyDeclare(h queuetype.Host, def topology.QueueDef) error {
	if qq, _ := h.Lookup(def.Name).(*Queue); qq != nil && qq.id == def.ID {
		return nil
	}
	if exists, err := h.DeclaredAlready(def); exists {
		return err
	}
	settings, err := queue.ParseArgs(def.Name, h.Name(), def.Args)
	if err != nil {
		return err
	}
	qq := newQueue(h, def.Name, def.Args, def.ID, def.Members, settings)
	if err := h.Store().PutMeta(storage.KindQueue, h.Name(), def.Name, qq.Record().Table()); err != nil {
		return queuetype.Stored(err)
	}
	if slices.Contains(def.Members, h.Self()) {
		// A new queue's members make its first configuration; one
		// learned from a snapshot, or a new incarnation of a member,
		// joins the group as it is.
		var boot []uint64
		if membership.FirstMember(h, def) {
			boot = membership.BootIDs(def)
		}
		if err := qq.start(def.Home == h.Self(), boot == nil, boot); err != nil {
			// Kept as a queue this node reaches through the other
			// members, so every node has the same topology.
			h.Logger().Error().Err(err).Str("queue", def.Name).Msg("could not start this node's member of the quorum queue")
		}
	}
	h.Register(qq)
	return nil
}

// DeleteReplicated deletes the queue for the cluster once its conditions
// hold.
func (qq *Queue) DeleteReplicated(ifUnused, ifEmpty bool) (int, error) {
	st, err := qq.stats()
	if err != nil {
		return 0, err
	}
	return qq.h.ProposeDelete(qq.name, qq.id, st.Consumers, st.Ready+st.Unacked, st.Ready, ifUnused, ifEmpty)
}

// Via is the member a node that is not one reaches the queue through: the
// first one up, as a RemoteQueue; nil when none is.
func (qq *Queue) Via() *queuetype.RemoteQueue {
	for _, m := range qq.MemberNodes() {
		if m != qq.h.Self() && qq.h.Up(m) {
			return &queuetype.RemoteQueue{Name: qq.name, Home: m, Durable: true, Args: qq.args, ID: qq.id}
		}
	}
	return nil
}

// HandleCall answers another node's call about the queue, this node being
// a member.
func (qq *Queue) HandleCall(op string, req protocol.Table) (protocol.Table, error) {
	switch op {
	case queuetype.CallQueueDelete:
		n, err := qq.DeleteReplicated(remote.Bool(req, "if_unused"), remote.Bool(req, "if_empty"))
		return protocol.Table{"messages": int64(n)}, err
	case queuetype.CallQueuePurge:
		n, err := qq.q.Purge()
		if err != nil {
			return nil, reply.Internal("purging quorum queue '%s' in vhost '%s': %v", qq.name, qq.h.Name(), err)
		}
		return protocol.Table{"messages": int64(n)}, nil
	case queuetype.CallConsume, queuetype.CallCancel, queuetype.CallSettle, queuetype.CallGet:
		return qq.h.HandleConsumerCall(op, qq.q, req)
	case queuetype.CallMember:
		return protocol.Table{}, membership.ChangeHere(qq.h, qq, remote.String(req, "node"), remote.Bool(req, "add"))
	case queuetype.CallLead:
		return protocol.Table{}, membership.LeadHere(qq.h, qq, remote.String(req, "node"))
	case queuetype.CallQueueCounts:
		st := qq.localStats()
		return protocol.Table{"messages": int64(st.Ready), "consumers": int64(st.Consumers), "bytes": st.ReadyBytes,
			"unacked": int64(st.Unacked), "leader": qq.leaderName()}, nil
	}
	return nil, reply.Internal("unknown call %q (a node of a newer version?)", op)
}

// leaderName names the member that leads the group as this member sees
// it; "" when none is known.
func (qq *Queue) leaderName() string {
	leader, _ := qq.q.Leader()
	if qq.MemberNodes() == nil {
		if leader != 0 {
			return qq.h.Self()
		}
		return ""
	}
	return membership.NodeNamed(qq.h, qq.MemberNodes(), leader)
}

// Status is the queue's group: leader, members, and on the leader each
// member's log position.
func (qq *Queue) Status() (queuetype.QuorumView, bool) {
	return membership.View(qq.h, qq, qq.leaderName), true
}

// Tidy has the group, when this node leads it, end the consumers of
// members that are down, and each member the consumers of this node's
// earlier runs: what they held goes back to the queue (see
// quorum.Queue.Tidy). A consumer id names the member's node it was
// attached to (a consumer on a node that is not a member is attached to
// a member, which answers for it). Members do it every time, not only
// when a leader is elected: a restarted member may learn of its earlier
// run's consumers from a snapshot, after its first look.
func (qq *Queue) Tidy() {
	if !qq.Member() || qq.MemberNodes() == nil {
		return
	}
	members := qq.MemberNodes()
	alive := func(node uint64) bool {
		if m := membership.NodeNamed(qq.h, members, node); m != "" {
			return qq.h.Up(m)
		}
		// An incarnation the cluster removed is gone; one this node
		// does not know of (yet) is taken to be up.
		return !qq.h.Removed(node)
	}
	go qq.q.Tidy(alive)
}

// RecordMembers records new members, in memory and in the store; defMu is
// held.
func (qq *Queue) RecordMembers(members []string) error {
	qq.members.Set(members)
	return qq.h.Store().PutMeta(storage.KindQueue, qq.h.Name(), qq.name, qq.Record().Table())
}

// Join starts this node's member, one the group is adding; Leave stops it
// and deletes its log. defMu is held.
func (qq *Queue) Join() error { return qq.start(false, true, nil) }
func (qq *Queue) Leave()      { qq.stop() }
