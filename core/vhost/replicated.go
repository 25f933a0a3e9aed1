package vhost

import (
	"cmp"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Replicated queues in a cluster: quorum queues and streams, whatever
// their type, as the vhost places, declares, deletes and changes them.
//
// A replicated queue's declaration is a topology command like a classic
// queue's: it names the queue's members (the nodes its group has, chosen
// by the declaring node) and its incarnation, which is also its group's
// id. Every node applies it: a member starts its member of the group (the
// node placed first stands for leader at once), the others register the
// queue to route to and read through a member.
//
// A member serves its own node's clients: publishes, consumers, gets and
// settlements are entries its group orders, whoever leads (Raft hands a
// follower's proposals to the leader). A node that is not a member
// forwards what is published to a member (as messages for a classic queue
// go to its home) and consumes through one (a remote.Source).
//
// A delete is a command too, naming the incarnation: each member stops its
// member and deletes its log.
//
// Members are named by node, and a node's Raft id is per incarnation
// (core/cluster's doc): the declaration also carries the ids of the
// members' incarnations (member_ids), and only a node whose current
// incarnation is among them makes the group's first configuration; any
// other member it names (a node that came back under a new incarnation,
// replaying the log) starts its member empty and waits to be added. Such
// a member asks a member of the group to replace the incarnation it was
// (CheckMembers): a change of members first removes from the group the
// incarnations the cluster no longer has, then adds the new one, so that
// what counts toward the group's majority is the nodes there are.

// Members are a replicated queue's nodes, by name, the one placed to lead
// first; none on a node of its own. The list is replaced whole when it
// changes, so it is read without a lock.
type Members struct{ p atomic.Pointer[[]string] }

// Nodes are the members; nil for none. The slice is not to be changed.
func (m *Members) Nodes() []string {
	if p := m.p.Load(); p != nil {
		return *p
	}
	return nil
}

// Set replaces the members (nil: none).
func (m *Members) Set(nodes []string) {
	if nodes == nil {
		m.p.Store(nil)
		return
	}
	m.p.Store(&nodes)
}

// ReplicatedRecord is a replicated queue's stored declaration: durable,
// with its arguments and store id, and in a cluster its members, its
// incarnation (the same id: its group's) and its first member as home.
func ReplicatedRecord(args protocol.Table, id uint64, members []string) QueueRecord {
	rec := QueueRecord{Durable: true, Args: args, StoreID: id}
	if members != nil {
		rec.Members, rec.Incarnation, rec.Home = members, id, members[0]
	}
	return rec
}

// placeMembers chooses a new replicated queue's members among the nodes
// that are up: as many as its argument sizeArg says (default three, at
// most all; x-quorum-initial-group-size, x-initial-cluster-size), the
// leader first. The leader is this node (client-local, the default) or
// the node placed first for the fewest of the vhost's replicated queues
// (balanced); the others are those holding the fewest members, then by
// name.
func (v *VHost) placeMembers(def QueueDef, sizeArg string) ([]string, error) {
	var up []string
	for _, n := range v.cluster.Nodes() {
		if v.cluster.Up(n) {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return nil, reply.Internal("no node of the cluster is up")
	}
	size := int64(3)
	if x, ok := def.Args[sizeArg]; ok {
		size, _ = queue.Integer(x)
	}
	size = min(size, int64(len(up)))
	leads, holds := map[string]int{}, map[string]int{}
	for _, t := range v.queueList() {
		members := t.MemberNodes()
		if len(members) > 0 {
			leads[members[0]]++
		}
		for _, m := range members {
			holds[m]++
		}
	}
	leader := v.self()
	// random and least-leaders are RabbitMQ 3.10's deprecated names for
	// balanced.
	if loc, _ := def.Args["x-queue-leader-locator"].(string); loc != "" && loc != "client-local" || !slices.Contains(up, leader) {
		leader = slices.MinFunc(up, func(a, b string) int { return cmp.Or(cmp.Compare(leads[a], leads[b]), cmp.Compare(a, b)) })
	}
	rest := slices.DeleteFunc(slices.Clone(up), func(n string) bool { return n == leader })
	slices.SortFunc(rest, func(a, b string) int { return cmp.Or(cmp.Compare(holds[a], holds[b]), cmp.Compare(a, b)) })
	return append([]string{leader}, rest[:size-1]...), nil
}

// proposeReplicated places a new replicated queue's members (sizeArg
// sets how many) and proposes its declaration, which names them.
// It returns the incarnation proposed.
func (v *VHost) proposeReplicated(def QueueDef, sizeArg string) (uint64, error) {
	members, err := v.placeMembers(def, sizeArg)
	if err != nil {
		return 0, err
	}
	def.Home, def.ID, def.Members = members[0], newIncarnation(), members
	def.MemberIDs = make([]uint64, len(members))
	for i, m := range members {
		def.MemberIDs[i] = v.cluster.NodeID(m)
	}
	return def.ID, v.propose(DeclareQueue{Def: def})
}

// declaredAlready says whether a queue named as def is there already,
// and if so, what a declare of def gets: nil when it matches, 406 when
// its type, flags or arguments differ. A replicated declare applied on a
// node that has one of another incarnation keeps that one.
func (v *VHost) declaredAlready(def QueueDef) (bool, error) {
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
	if err := v.propose(DeleteQueue{Name: name, Incarnation: incarnation}); err != nil {
		return 0, err
	}
	return ready, nil
}

// nodeNamed is the node of names whose current incarnation is id; "" when
// none is.
func (v *VHost) nodeNamed(names []string, id uint64) string {
	if id == 0 {
		return ""
	}
	for _, m := range names {
		if v.cluster.NodeID(m) == id {
			return m
		}
	}
	return ""
}

// voterNames names a group's voters by node, sorted; an incarnation the
// cluster no longer has is written as its id, in hexadecimal.
func (v *VHost) voterNames(ids []uint64) []string {
	nodes := v.cluster.Nodes()
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		name := v.nodeNamed(nodes, id)
		if name == "" {
			name = strconv.FormatUint(id, 16)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// QuorumView is a replicated queue's group as this node sees it.
type QuorumView struct {
	// Leader, Members and Online name nodes; on a node of its own they
	// are empty (the node is the only member).
	Leader          string
	Members, Online []string
	// Raft is this node's member's view (Role "" on a node that is not
	// a member); Match is, on the leader, each member's log position by
	// node name; Voters are its configuration's voters by node name (an
	// incarnation the cluster no longer has by its id, in hexadecimal).
	Raft   cluster.GroupStatus
	Match  map[string]uint64
	Voters []string
}

// QuorumStatus is a replicated queue's group as this node sees it:
// leader, members and, on the leader, each member's log position.
func (e QueueEntry) QuorumStatus() (QuorumView, bool) {
	if e.t == nil {
		return QuorumView{}, false
	}
	return e.t.Status()
}

// matchByName fills a view's Match and Voters by node name from its
// member's Raft view.
func (v *VHost) matchByName(view *QuorumView, members []string) {
	if v.cluster == nil {
		return // a group of this node alone
	}
	if view.Raft.Role != "" {
		view.Voters = v.voterNames(view.Raft.Members)
	}
	if len(view.Raft.Match) > 0 {
		view.Match = map[string]uint64{}
		for _, m := range members {
			if at, ok := view.Raft.Match[v.cluster.NodeID(m)]; ok {
				view.Match[m] = at
			}
		}
	}
}

// ---- changing the members of a quorum queue or a stream

// OpQuorumMembers is the topology command that records a quorum queue's
// (or a stream's) new members, once its group has the change.
const OpQuorumMembers = "quorum_members"

// callQuorumMember asks a member to change the members.
const callQuorumMember = "quorum.member"

// replicatedQueue is the replicated queue named name; nil when there is
// none.
func (v *VHost) replicatedQueue(name string) Queue {
	if t := v.lookup(name); t != nil && t.Replicated() {
		return t
	}
	return nil
}

// ChangeQuorumMember adds node to a quorum queue's or a stream's members,
// or removes it (rabbitmq-queues add_member and delete_member, and grow
// and shrink). The group changes first, through a member; then every
// node records the new members, and the node added starts its member
// (which gets the group's log from the leader) or the node removed stops
// its own and deletes its log. A node the members name whose current
// incarnation the group lacks (it came back on an empty data directory)
// is added again.
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
	if !slices.Contains(v.cluster.Nodes(), node) {
		return reply.NotFound("no node '%s' in the cluster", node)
	}
	members := r.MemberNodes()
	switch {
	case !add && !slices.Contains(members, node):
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, r.Kind(), name, v.Name)
	case !add && len(members) == 1:
		return reply.PreconditionFailed("node '%s' is the last member of %s '%s' in vhost '%s'; delete the queue instead", node, r.Kind(), name, v.Name)
	}
	// An add of a node the members name goes on: the group's
	// configuration decides (changeMember).
	if r.Member() {
		return v.changeMember(r, node, add)
	}
	rq := r.Via()
	if rq == nil {
		return reply.NotFound("no member of %s '%s' in vhost '%s' is up (members %v)", r.Kind(), name, v.Name, members)
	}
	_, err := v.callHome(rq, callQuorumMember, protocol.Table{"node": node, "add": add})
	return err
}

// memberCatchUp bounds how long a membership change waits for this
// node's member, just added, to learn the group's configuration.
const memberCatchUp = 5 * time.Second

// changeMember changes r's group, this node being a member, then has
// every node record its new members. The incarnations the cluster no
// longer has (nodes forgotten, or come back under a new incarnation)
// leave the group first: they count toward its majority and never answer.
func (v *VHost) changeMember(r Queue, node string, add bool) error {
	g := r.Group()
	if g == nil {
		return ErrNoMember
	}
	name, kind := r.Name(), r.Kind()
	// The member table as the cluster has it: an incarnation this node
	// has not heard of yet is not taken for one removed.
	synced := v.cluster.Sync() == nil
	// The group's configuration decides: the members recorded here may
	// lag a change made through another node. A member that has just
	// joined has no configuration until the leader's log or snapshot
	// reaches it: it waits for that, briefly.
	self := v.groups.Self()
	voters := g.Status().Members
	for deadline := time.Now().Add(memberCatchUp); !slices.Contains(voters, self); voters = g.Status().Members {
		if time.Now().After(deadline) {
			return reply.Internal("this node's member of %s '%s' in vhost '%s' is still catching up with the group; try again", kind, name, v.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	confChange := func(add bool, id uint64) error {
		ch := make(chan error, 1)
		if add {
			g.AddMember(id, func(err error) { ch <- err })
		} else {
			g.RemoveMember(id, func(err error) { ch <- err })
		}
		if err := <-ch; err != nil {
			return reply.Internal("%s '%s' in vhost '%s': the change of members was not committed: %v", kind, name, v.Name, err)
		}
		return nil
	}
	if synced {
		for _, id := range slices.Clone(voters) {
			if id == self || v.isCurrent(id) {
				continue
			}
			v.log.Warn().Str("queue", name).Str("incarnation", strconv.FormatUint(id, 16)).
				Msg("removing from the group an incarnation of a node the cluster no longer has")
			if err := confChange(false, id); err != nil {
				return err
			}
			voters = slices.DeleteFunc(voters, func(x uint64) bool { return x == id })
		}
	}
	target := v.cluster.NodeID(node)
	switch in := slices.Contains(voters, target); {
	case target == 0:
		return reply.NotFound("no node '%s' in the cluster", node)
	case add && in:
		return reply.PreconditionFailed("node '%s' is already a member of %s '%s' in vhost '%s'", node, kind, name, v.Name)
	case !add && !in:
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, kind, name, v.Name)
	case !add && len(voters) == 1:
		return reply.PreconditionFailed("node '%s' is the last member of %s '%s' in vhost '%s'; delete the queue instead", node, kind, name, v.Name)
	}
	if err := confChange(add, target); err != nil {
		return err
	}
	members := slices.Clone(r.MemberNodes())
	if add {
		if !slices.Contains(members, node) {
			members = append(members, node)
		}
	} else {
		members = slices.DeleteFunc(members, func(m string) bool { return m == node })
	}
	if slices.Equal(members, r.MemberNodes()) {
		return nil // a new incarnation of a node the members name
	}
	return v.propose(QuorumMembers{Name: name, Incarnation: r.Incarnation(), Members: members})
}

// isCurrent says whether id is the current incarnation of a node of the
// cluster.
func (v *VHost) isCurrent(id uint64) bool {
	return v.nodeNamed(v.cluster.Nodes(), id) != ""
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
		return stored(err)
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

// ---- a new incarnation of a member

// Rejoining is a member's state as CheckMembers sees it.
type Rejoining struct {
	since  atomic.Int64 // unix ms it was first seen outside its group's configuration; 0: inside
	asking atomic.Bool  // an ask is under way
	warned atomic.Bool  // told the log it has nobody to ask
}

// rejoinAfter is how long a member this node runs may be outside its
// group's configuration before it asks to be added, and then between
// asks: a member the group is adding learns the configuration from the
// leader well within it.
const rejoinAfter = 2 * time.Second

// CheckMembers has each member of a quorum queue or stream this node runs
// whose group does not count this node's incarnation (a member that is a
// new incarnation of its node: its data directory was lost, or reset)
// ask a member up to add it; the change of members that does it first
// removes the incarnation it replaces (changeMember). The broker calls
// it every second.
func (v *VHost) CheckMembers() {
	if v.cluster == nil {
		return
	}
	now := time.Now().UnixMilli()
	for _, r := range v.queueList() {
		if !r.Replicated() {
			continue
		}
		g, st := r.Group(), r.Rejoining()
		if g == nil || g.Voter() {
			st.since.Store(0)
			continue
		}
		since := st.since.Load()
		if since == 0 {
			st.since.Store(now)
			continue
		}
		if now-since < rejoinAfter.Milliseconds() || !st.asking.CompareAndSwap(false, true) {
			continue
		}
		go func() {
			defer st.asking.Store(false)
			v.askToRejoin(r)
			st.since.Store(time.Now().UnixMilli())
		}()
	}
}

// askToRejoin asks a member of r's group to add this node's incarnation.
func (v *VHost) askToRejoin(r Queue) {
	rq := r.Via()
	if rq == nil {
		if !r.Rejoining().warned.Swap(true) {
			v.log.Warn().Str("queue", r.Name()).Strs("members", r.MemberNodes()).
				Msg("this node's member is not in its group's configuration and no other member is up to add it; if this node was the only member, what the queue held was lost with its data: delete the queue and declare it again")
		}
		return
	}
	_, err := v.callHome(rq, callQuorumMember, protocol.Table{"node": v.self(), "add": true})
	switch {
	case err == nil:
		v.log.Info().Str("queue", r.Name()).Str("via", rq.Home).
			Msg("this node's new incarnation was added to the group, in place of the one it was")
	case code(err) == protocol.PreconditionFailed:
		// Added already: the leader's log or snapshot is on its way.
	default:
		v.log.Info().Err(err).Str("queue", r.Name()).Str("via", rq.Home).
			Msg("could not have this node's member added to its group yet; trying again")
	}
}
