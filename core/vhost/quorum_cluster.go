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
	"github.com/warrenmq/warren/storage"
)

// Quorum queues in a cluster.
//
// A quorum queue's declaration is a topology command like a classic
// queue's: it names the queue's members (the nodes its group has, chosen
// by the declaring node) and its incarnation, which is also its group's
// id. Every node applies it: a member starts its member of the group (the
// node the leader locator chose stands for leader at once), the others
// register the queue to route to and read through a member.
//
// A member serves its own node's clients: publishes, consumers, gets and
// settlements are entries its group orders, whoever leads (Raft hands a
// follower's proposals to the leader). A node that is not a member
// forwards what is published to a member (as messages for a classic queue
// go to its home) and consumes through one (a RemoteSource).
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

// placeQuorum chooses a new quorum queue's members among the nodes that
// are up: x-quorum-initial-group-size of them (default three, at most
// all), the leader first. The leader is this node (client-local, the
// default) or the node that leads the fewest of the vhost's quorum queues
// (balanced); the others are those holding the fewest members, then by
// name.
func (v *VHost) placeQuorum(def QueueDef) ([]string, error) {
	return v.placeMembers(def, "x-quorum-initial-group-size")
}

// placeMembers is placeQuorum with the argument that sets the group's
// size (a stream's is x-initial-cluster-size); streams' replicas count
// among the members a node holds.
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
	for _, qq := range v.quorumList() {
		if len(qq.MemberNodes()) > 0 {
			leads[qq.MemberNodes()[0]]++
		}
		for _, m := range qq.MemberNodes() {
			holds[m]++
		}
	}
	for _, s := range v.streamList() {
		for _, m := range s.MemberNodes() {
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

// bootIDs are the Raft ids of a new replicated queue's first members:
// those its declaration names, or, in one written before ids were per
// incarnation, the ids its members had then.
func bootIDs(def QueueDef) []uint64 {
	if len(def.MemberIDs) == len(def.Members) {
		return def.MemberIDs
	}
	ids := make([]uint64, len(def.Members))
	for i, m := range def.Members {
		ids[i] = cluster.LegacyID(m)
	}
	return ids
}

// firstMember says whether this node's current incarnation is among a
// new replicated queue's first members, and makes its group's first
// configuration; otherwise its member joins the group as it is. A
// declaration from a metadata snapshot always joins.
func (v *VHost) firstMember(def QueueDef) bool {
	return !def.restored && v.groups != nil && slices.Contains(bootIDs(def), v.groups.Self())
}

// declareQuorumReplicated declares a new quorum queue for the cluster.
func (v *VHost) declareQuorumReplicated(def QueueDef) (Declared, error) {
	if _, err := v.parseDeclare(def); err != nil {
		return Declared{}, err
	}
	if err := v.checkQuorum(def); err != nil {
		return Declared{}, err
	}
	incarnation, err := v.proposeReplicated(def, "x-quorum-initial-group-size")
	if err != nil {
		return Declared{}, err
	}
	qq := v.quorumQueue(def.Name)
	if qq == nil {
		return Declared{}, reply.NotFound("no queue '%s' in vhost '%s'", def.Name, v.Name) // deleted again already
	}
	if err := v.equivalentQueue(qq.shape(), def); err != nil {
		return Declared{}, err
	}
	return Declared{Name: qq.Name, t: qq, Created: qq.ID == incarnation}, nil
}

// applyDeclareQuorum declares a quorum queue for the cluster; defMu is
// held.
func (v *VHost) applyDeclareQuorum(def QueueDef) error {
	if qq := v.quorumQueue(def.Name); qq != nil && qq.ID == def.ID {
		return nil
	}
	if exists, err := v.declaredAlready(def); exists {
		return err
	}
	settings, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	if err != nil {
		return err
	}
	qq := v.newQuorum(def.Name, def.Args, def.ID, def.Members, settings)
	if err := v.store.PutMeta(storage.KindQueue, v.Name, def.Name, quorumRecordOf(qq).Table()); err != nil {
		return stored(err)
	}
	if slices.Contains(def.Members, v.self()) {
		// A new queue's members make its first configuration; one
		// learned from a snapshot, or a new incarnation of a member,
		// joins the group as it is.
		var boot []uint64
		if v.firstMember(def) {
			boot = bootIDs(def)
		}
		if err := v.startQuorum(qq, def.Home == v.self(), boot == nil, boot); err != nil {
			// Kept as a queue this node reaches through the other
			// members, so every node has the same topology.
			v.log.Error().Err(err).Str("queue", def.Name).Msg("could not start this node's member of the quorum queue")
		}
	}
	v.registerTyped(qq)
	return nil
}

// declaredAlready says whether a queue named as def is there already,
// and if so, what a declare of def gets: nil when it matches, 406 when
// its type, flags or arguments differ. A replicated declare applied on a
// node that has one of another incarnation keeps that one.
func (v *VHost) declaredAlready(def QueueDef) (bool, error) {
	v.mu.RLock()
	t, q, rq := v.typed[def.Name], v.queues[def.Name], v.remote[def.Name]
	v.mu.RUnlock()
	switch {
	case t != nil:
		return true, t.equivalent(v, def)
	case q != nil:
		return true, v.equivalentQueue(shapeOf(q), def)
	case rq != nil:
		return true, v.equivalentQueue(rq.shape(), def)
	}
	return false, nil
}

// deleteReplicatedQuorum deletes a quorum queue for the cluster once its
// conditions hold.
func (v *VHost) deleteReplicatedQuorum(qq *QuorumQueue, ifUnused, ifEmpty bool) (int, error) {
	st, err := v.quorumStats(qq)
	if err != nil {
		return 0, err
	}
	return v.proposeDelete(qq.Name, qq.ID, st.Consumers, st.Ready+st.Unacked, st.Ready, ifUnused, ifEmpty)
}

// proposeDelete proposes a replicated queue's delete once its conditions
// hold (no consumers with ifUnused, no messages held with ifEmpty), and
// returns the count delete-ok reports.
func (v *VHost) proposeDelete(name string, incarnation uint64, consumers, held, ready int, ifUnused, ifEmpty bool) (int, error) {
	if ifUnused && consumers > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' in use", name, v.Name)
	}
	if ifEmpty && held > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' is not empty", name, v.Name)
	}
	if err := v.propose(DeleteQueue{Name: name, Incarnation: incarnation}); err != nil {
		return 0, err
	}
	return ready, nil
}

// via is the member a node that is not one reaches the queue through: the
// first one up, as a RemoteQueue; nil when none is.
func (v *VHost) via(qq *QuorumQueue) *RemoteQueue {
	for _, m := range qq.MemberNodes() {
		if m != v.self() && v.cluster.Up(m) {
			return &RemoteQueue{Name: qq.Name, Home: m, Durable: true, Args: qq.Args, ID: qq.ID}
		}
	}
	return nil
}

// membersDown is the answer for a quorum queue none of whose members can
// be reached from here.
func (v *VHost) membersDown(qq *QuorumQueue) error {
	return reply.NotFound("no member of quorum queue '%s' in vhost '%s' is up (members %v)", qq.Name, v.Name, qq.MemberNodes())
}

// quorumStats are a quorum queue's figures: its member's here, or a
// member's through a call.
func (v *VHost) quorumStats(qq *QuorumQueue) (queue.Stats, error) {
	if qq.member() {
		return qq.stats(), nil
	}
	rq := v.via(qq)
	if rq == nil {
		return queue.Stats{}, v.membersDown(qq)
	}
	return v.remoteStats(rq)
}

// quorumSource is what a channel of this node consumes a quorum queue
// through.
func (v *VHost) quorumSource(qq *QuorumQueue) (Source, error) {
	if qq.member() {
		return qq, nil
	}
	rq := v.via(qq)
	if rq == nil {
		return nil, v.membersDown(qq)
	}
	return &RemoteSource{v: v, rq: rq, id: v.sourceSeq.Add(1)}, nil
}

// handleQuorumCall answers another node's call about a quorum queue this
// node is a member of.
func (v *VHost) handleQuorumCall(op string, qq *QuorumQueue, req protocol.Table) (protocol.Table, error) {
	b := func(k string) bool { x, _ := req[k].(bool); return x }
	switch op {
	case callQueueDelete:
		n, err := v.deleteReplicatedQuorum(qq, b("if_unused"), b("if_empty"))
		return protocol.Table{"messages": int64(n)}, err
	case callQueuePurge:
		n, err := qq.Purge()
		if err != nil {
			return nil, reply.Internal("purging quorum queue '%s' in vhost '%s': %v", qq.Name, v.Name, err)
		}
		return protocol.Table{"messages": int64(n)}, nil
	case callConsume, callCancel, callSettle, callGet:
		return v.handleConsumerCall(op, qq, req)
	case callQuorumMember:
		return protocol.Table{}, v.changeMember(qq, str(req, "node"), b("add"))
	case callQueueCounts:
		st := qq.stats()
		return protocol.Table{"messages": int64(st.Ready), "consumers": int64(st.Consumers), "bytes": st.ReadyBytes,
			"unacked": int64(st.Unacked), "leader": v.leaderName(qq)}, nil
	}
	return nil, reply.Internal("unknown call %q (a node of a newer version?)", op)
}

// leaderName names the member that leads qq's group as this member sees
// it; "" when none is known.
func (v *VHost) leaderName(qq *QuorumQueue) string {
	leader, _ := qq.Leader()
	if qq.MemberNodes() == nil {
		if leader != 0 {
			return v.self()
		}
		return ""
	}
	return v.nodeNamed(qq.MemberNodes(), leader)
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

// QuorumView is a quorum queue's group as this node sees it.
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

// QuorumStatus is a quorum queue's group as this node sees it: leader,
// members and, on the leader, each member's log position.
func (e QueueEntry) QuorumStatus() (QuorumView, bool) {
	if e.t == nil {
		return QuorumView{}, false
	}
	return e.t.status(e.v)
}

// status is the quorum queue's group: leader, members, and on the leader
// each member's log position.
func (qq *QuorumQueue) status(v *VHost) (QuorumView, bool) {
	view := QuorumView{Members: qq.MemberNodes()}
	for _, m := range qq.MemberNodes() {
		if v.cluster != nil && v.cluster.Up(m) {
			view.Online = append(view.Online, m)
		}
	}
	if !qq.member() {
		if rq := v.via(qq); rq != nil {
			if ans, err := v.callHome(rq, callQueueCounts, protocol.Table{}); err == nil {
				view.Leader = str(ans, "leader")
			}
		}
		return view, true
	}
	if g := qq.group.Load(); g != nil {
		view.Raft = g.Status()
	}
	view.Leader = v.leaderName(qq)
	v.matchByName(&view, qq.MemberNodes())
	return view, true
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

// tidyQuorums has each quorum queue this node leads end the consumers of
// members that are down, and each member the consumers of this node's
// earlier runs: what they held goes back to the queue (see
// quorum.Queue.Tidy). A consumer id names the member's node it was
// attached to (a consumer on a node that is not a member is attached to
// a member, which answers for it). Members do it every time, not only
// when a leader is elected: a restarted member may learn of its earlier
// run's consumers from a snapshot, after its first look.
func (v *VHost) tidyQuorums() {
	for _, qq := range v.quorumList() {
		if !qq.member() || qq.MemberNodes() == nil {
			continue
		}
		alive := func(node uint64) bool {
			if m := v.nodeNamed(qq.MemberNodes(), node); m != "" {
				return v.cluster.Up(m)
			}
			// An incarnation the cluster removed is gone; one this
			// node does not know of (yet) is taken to be up.
			return !v.cluster.Removed(node)
		}
		go qq.Tidy(alive)
	}
}

// ---- changing the members of a quorum queue or a stream

// OpQuorumMembers is the topology command that records a quorum queue's
// (or a stream's) new members, once its group has the change.
const OpQuorumMembers = "quorum_members"

// callQuorumMember asks a member to change the members.
const callQuorumMember = "quorum.member"

// replicated is a quorum queue or a stream of a cluster, as a change of
// its members sees it.
type replicated interface {
	queueName() string
	kind() string // "quorum queue" or "stream", for the replies
	incarnation() uint64
	MemberNodes() []string
	member() bool
	memberGroup() *cluster.Group
	rejoin() *rejoining
	// via is the member this node reaches the group through when it runs
	// none of its own: another member up; nil when none is.
	via(v *VHost) *RemoteQueue
	// recordMembers records new members, in memory and in the store; defMu
	// is held.
	recordMembers(v *VHost, members []string) error
	// join starts this node's member, one the group is adding; leave
	// stops it. defMu is held.
	join(v *VHost) error
	leave(v *VHost)
}

func (qq *QuorumQueue) queueName() string           { return qq.Name }
func (qq *QuorumQueue) kind() string                { return "quorum queue" }
func (qq *QuorumQueue) incarnation() uint64         { return qq.ID }
func (qq *QuorumQueue) memberGroup() *cluster.Group { return qq.group.Load() }
func (qq *QuorumQueue) rejoin() *rejoining          { return &qq.rejoining }
func (qq *QuorumQueue) via(v *VHost) *RemoteQueue   { return v.via(qq) }
func (qq *QuorumQueue) join(v *VHost) error         { return v.startQuorum(qq, false, true, nil) }
func (qq *QuorumQueue) leave(v *VHost)              { v.stopMember(qq) }
func (qq *QuorumQueue) recordMembers(v *VHost, members []string) error {
	qq.setMembers(members)
	return v.store.PutMeta(storage.KindQueue, v.Name, qq.Name, quorumRecordOf(qq).Table())
}

func (s *StreamQueue) queueName() string           { return s.Name }
func (s *StreamQueue) kind() string                { return "stream" }
func (s *StreamQueue) incarnation() uint64         { return s.ID() }
func (s *StreamQueue) memberGroup() *cluster.Group { return s.group.Load() }
func (s *StreamQueue) rejoin() *rejoining          { return &s.rejoining }
func (s *StreamQueue) via(v *VHost) *RemoteQueue   { return v.streamVia(s) }
func (s *StreamQueue) join(v *VHost) error         { return v.startStream(s, false, true, nil) }

// leave stops the replica; its messages stay until the stream is
// deleted, and a replica added back goes on from them.
func (s *StreamQueue) leave(v *VHost) { v.stopStreamReplica(s) }
func (s *StreamQueue) recordMembers(v *VHost, members []string) error {
	s.members.Store(&members)
	return v.store.PutMeta(storage.KindQueue, v.Name, s.Name, streamRecordOf(s).Table())
}

// replicatedQueue is the quorum queue or replicated stream named name;
// nil when there is none.
func (v *VHost) replicatedQueue(name string) replicated {
	if qq := v.quorumQueue(name); qq != nil {
		return qq
	}
	if s := v.streamQueue(name); s != nil && s.MemberNodes() != nil {
		return s
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
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, r.kind(), name, v.Name)
	case !add && len(members) == 1:
		return reply.PreconditionFailed("node '%s' is the last member of %s '%s' in vhost '%s'; delete the queue instead", node, r.kind(), name, v.Name)
	}
	// An add of a node the members name goes on: the group's
	// configuration decides (changeMember).
	if r.member() {
		return v.changeMember(r, node, add)
	}
	rq := r.via(v)
	if rq == nil {
		return reply.NotFound("no member of %s '%s' in vhost '%s' is up (members %v)", r.kind(), name, v.Name, members)
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
func (v *VHost) changeMember(r replicated, node string, add bool) error {
	g := r.memberGroup()
	if g == nil {
		return ErrNoMember
	}
	name, kind := r.queueName(), r.kind()
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
	return v.propose(QuorumMembers{Name: name, Incarnation: r.incarnation(), Members: members})
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
	if r == nil || r.incarnation() != incarnation || len(members) == 0 {
		return nil // deleted (and perhaps declared again) meanwhile
	}
	var uniq []string
	for _, m := range members {
		if !slices.Contains(uniq, m) {
			uniq = append(uniq, m)
		}
	}
	members = uniq
	if err := r.recordMembers(v, members); err != nil {
		return stored(err)
	}
	switch in := slices.Contains(members, v.self()); {
	case in && !r.member():
		if err := r.join(v); err != nil {
			v.log.Error().Err(err).Str("queue", name).Msgf("could not start this node's new member of the %s", r.kind())
		}
	case !in && r.member():
		r.leave(v)
	}
	return nil
}

// QuorumMembers lists the vhost's quorum queues and replicated streams
// with their members, by name.
func (v *VHost) QuorumMembers() map[string][]string {
	out := map[string][]string{}
	for _, qq := range v.quorumList() {
		out[qq.Name] = qq.MemberNodes()
	}
	for _, s := range v.streamList() {
		if s.MemberNodes() != nil {
			out[s.Name] = s.MemberNodes()
		}
	}
	return out
}

// ---- a new incarnation of a member

// rejoining is a member's state as CheckMembers sees it.
type rejoining struct {
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
	var rs []replicated
	for _, qq := range v.quorumList() {
		rs = append(rs, qq)
	}
	for _, s := range v.streamList() {
		rs = append(rs, s)
	}
	for _, r := range rs {
		g, st := r.memberGroup(), r.rejoin()
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
func (v *VHost) askToRejoin(r replicated) {
	rq := r.via(v)
	if rq == nil {
		if !r.rejoin().warned.Swap(true) {
			v.log.Warn().Str("queue", r.queueName()).Strs("members", r.MemberNodes()).
				Msg("this node's member is not in its group's configuration and no other member is up to add it; if this node was the only member, what the queue held was lost with its data: delete the queue and declare it again")
		}
		return
	}
	_, err := v.callHome(rq, callQuorumMember, protocol.Table{"node": v.self(), "add": true})
	switch {
	case err == nil:
		v.log.Info().Str("queue", r.queueName()).Str("via", rq.Home).
			Msg("this node's new incarnation was added to the group, in place of the one it was")
	case code(err) == protocol.PreconditionFailed:
		// Added already: the leader's log or snapshot is on its way.
	default:
		v.log.Info().Err(err).Str("queue", r.queueName()).Str("via", rq.Home).
			Msg("could not have this node's member added to its group yet; trying again")
	}
}
