package vhost

import (
	"slices"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
)

// Replicated queues in a cluster (quorum queues and streams, whatever
// their type) as the vhost applies their commands: core/membership
// places their members and changes them; the vhost records the changes
// every node applies (applyQuorumMembers) and has this node's members
// rejoin their groups (CheckMembers).

// declaredAlready says whether a queue named as def is there already,
// and if so, what a declare of def gets: nil when it matches, 406 when
// its type, flags or arguments differ. A replicated declare applied on a
// node that has one of another incarnation keeps that one.
func (v *VHost) declaredAlready(def topology.QueueDef) (bool, error) {
	if t := v.lookup(def.Name); t != nil {
		return true, t.Equivalent(def)
	}
	return false, nil
}

// proposeDelete proposes a replicated queue's delete once its conditions
// hold (no consumers with ifUnused, no messages held with ifEmpty), and
// returns the count delete-ok reports.
func (v *VHost) proposeDelete(name string, incarnation uint64, consumers, held, ready int, ifUnused, ifEmpty bool) (int, error) {
	if err := queue.DeleteConditions(name, v.Name, consumers, held, ifUnused, ifEmpty); err != nil {
		return 0, err
	}
	if err := v.propose(topology.DeleteQueue{Name: name, Incarnation: incarnation}); err != nil {
		return 0, err
	}
	return ready, nil
}

// QuorumStatus is a replicated queue's group as this node sees it:
// leader, members and, on the leader, each member's log position.
func (e QueueEntry) QuorumStatus() (queuetype.QuorumView, bool) {
	if e.t == nil {
		return queuetype.QuorumView{}, false
	}
	return e.t.Status()
}

// ---- changing the members of a quorum queue or a stream

// replicatedQueue is the replicated queue named name; nil when there is
// none.
func (v *VHost) replicatedQueue(name string) queuetype.GroupQueue {
	if r, ok := v.lookup(name).(queuetype.GroupQueue); ok && r.Replicated() {
		return r
	}
	return nil
}

// ChangeQuorumMember adds node to a quorum queue's or a stream's members,
// or removes it (rabbitmq-queues add_member and delete_member, and grow
// and shrink): the queue's type changes its group (core/membership), and
// every node records the new members when the change is applied.
func (v *VHost) ChangeQuorumMember(name, node string, add bool) error {
	if v.cluster == nil {
		return reply.PreconditionFailed("this node is not clustered: a quorum queue's only member is this node")
	}
	// What other nodes changed a moment ago counts (a member added
	// through another node).
	_ = v.cluster.Sync()
	r := v.replicatedQueue(name)
	if r == nil {
		if v.HasQueue(name) {
			return reply.PreconditionFailed("queue '%s' in vhost '%s' is not a quorum queue", name, v.Name)
		}
		return reply.NotFound("no queue '%s' in vhost '%s'", name, v.Name)
	}
	return r.ChangeMember(node, add)
}

// LeadQueue asks the group of the quorum queue or stream name to hand its
// leadership to node, one of its members (rabbitmq-queues rebalance); it
// returns once the group was asked.
func (v *VHost) LeadQueue(name, node string) error {
	if v.cluster == nil {
		return reply.PreconditionFailed("this node is not clustered: a quorum queue's only member leads")
	}
	r := v.replicatedQueue(name)
	if r == nil {
		return reply.NotFound("no quorum queue or stream '%s' in vhost '%s'", name, v.Name)
	}
	return r.Lead(node)
}

// applyQuorumMembers records a quorum queue's or a stream's new members,
// starting or stopping this node's member; defMu is held.
func (v *VHost) applyQuorumMembers(name string, incarnation uint64, members []string) error {
	r := v.replicatedQueue(name)
	if r == nil || r.Incarnation() != incarnation || len(members) == 0 {
		return nil // deleted (and perhaps declared again) meanwhile
	}
	var uniq []string
	for _, m := range members {
		if !slices.Contains(uniq, m) {
			uniq = append(uniq, m)
		}
	}
	members = uniq
	if err := r.RecordMembers(members); err != nil {
		return queuetype.Stored(err)
	}
	switch in := slices.Contains(members, v.self()); {
	case in && !r.Member():
		if err := r.Join(); err != nil {
			v.log.Error().Err(err).Str("queue", name).Msgf("could not start this node's new member of the %s", r.Kind())
		}
	case !in && r.Member():
		r.Leave()
	}
	return nil
}

// QuorumMembers lists the vhost's quorum queues and replicated streams
// with their members, by name.
func (v *VHost) QuorumMembers() map[string][]string {
	out := map[string][]string{}
	for _, t := range v.queueList() {
		if t.Replicated() {
			out[t.Name()] = t.MemberNodes()
		}
	}
	return out
}

// CheckMembers has each member of a quorum queue or stream this node runs
// whose group does not count this node's incarnation ask to be added
// (GroupQueue.Rejoin). The broker calls it every second.
func (v *VHost) CheckMembers() {
	if v.cluster == nil {
		return
	}
	for _, t := range v.queueList() {
		if r, ok := t.(queuetype.GroupQueue); ok && r.Replicated() {
			r.Rejoin()
		}
	}
}
