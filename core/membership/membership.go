// Package membership is the members of replicated queues in a cluster,
// whatever their type (quorum queues, streams): where a new one's members
// go, how its group starts on a node, how a member is added or removed,
// how a node that came back under a new incarnation rejoins, and what a
// listing shows of a group. The types (core/quorumqueue,
// core/streamqueue) call it with their queuetype.Host; the vhost applies the
// commands it proposes (topology.DeclareQueue, topology.QuorumMembers).
//
// A replicated queue's declaration is a topology command like a classic
// queue's: it names the queue's members (the nodes its group has, chosen
// by the declaring node, Place) and its incarnation, which is also its
// group's id. Every node applies it: a member starts its member of the
// group (the node placed first stands for leader at once), the others
// register the queue to route to and read through a member.
//
// A member serves its own node's clients: publishes, consumers, gets and
// settlements are entries its group orders, whoever leads (Raft hands a
// follower's proposals to the leader). A node that is not a member
// forwards what is published to a member (as messages for a classic queue
// go to its home) and consumes through one (a remote.Source). A delete is
// a command too, naming the incarnation: each member stops its member and
// deletes its log.
//
// Members are named by node, and a node's Raft id is per incarnation
// (core/cluster's doc): the declaration also carries the ids of the
// members' incarnations (member_ids), and only a node whose current
// incarnation is among them makes the group's first configuration
// (FirstMember); any other member it names (a node that came back under a
// new incarnation, replaying the log) starts its member empty and waits
// to be added. Such a member asks a member of the group to replace the
// incarnation it was (Rejoin): a change of members first removes from the
// group the incarnations the cluster no longer has, then adds the new
// one, so that what counts toward the group's majority is the nodes there
// are.
package membership

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A Queue is a replicated queue as this package sees it: a queuetype.Queue
// and its member's group on this node (nil when it runs none).
type Queue interface {
	queuetype.Queue
	Group() *cluster.Group
}

// Members are a replicated queue's nodes, by name, the one placed to lead
// first; none on a node of its own. The list is replaced whole when it
// changes, so it is read without a lock.
type Members struct{ p atomic.Pointer[[]string] }

// Nodes are the members; nil on a node of its own. The slice is not to be
// changed.
func (m *Members) Nodes() []string {
	if p := m.p.Load(); p != nil {
		return *p
	}
	return nil
}

// Set replaces the members.
func (m *Members) Set(nodes []string) {
	if nodes == nil {
		m.p.Store(nil)
		return
	}
	m.p.Store(&nodes)
}

// Record is a replicated queue's stored declaration: durable, with its
// arguments and store id, and in a cluster its members, its incarnation
// (the same id: its group's) and its first member as home.
func Record(args protocol.Table, id uint64, members []string) topology.QueueRecord {
	rec := topology.QueueRecord{Durable: true, Args: args, StoreID: id}
	if members != nil {
		rec.Members, rec.Incarnation, rec.Home = members, id, members[0]
	}
	return rec
}

// ---- a new queue

// Place chooses a new replicated queue's members among the nodes that are
// up: as many as its argument sizeArg says (default three, at most all;
// x-quorum-initial-group-size, x-initial-cluster-size), the leader first.
// The leader is this node (client-local, the default) or the node placed
// first for the fewest of the vhost's replicated queues (balanced); the
// others are those holding the fewest members, then by name.
func Place(h queuetype.Host, def topology.QueueDef, sizeArg string) ([]string, error) {
	c := h.Cluster()
	var up []string
	for _, n := range c.Nodes() {
		if c.Up(n) {
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
	for _, t := range h.List() {
		members := t.MemberNodes()
		if len(members) > 0 {
			leads[members[0]]++
		}
		for _, m := range members {
			holds[m]++
		}
	}
	leader := h.Self()
	// random and least-leaders are RabbitMQ 3.10's deprecated names for
	// balanced.
	if loc, _ := def.Args["x-queue-leader-locator"].(string); loc != "" && loc != "client-local" || !slices.Contains(up, leader) {
		leader = slices.MinFunc(up, func(a, b string) int { return cmp.Or(cmp.Compare(leads[a], leads[b]), cmp.Compare(a, b)) })
	}
	rest := slices.DeleteFunc(slices.Clone(up), func(n string) bool { return n == leader })
	slices.SortFunc(rest, func(a, b string) int { return cmp.Or(cmp.Compare(holds[a], holds[b]), cmp.Compare(a, b)) })
	return append([]string{leader}, rest[:size-1]...), nil
}

// Propose places a new replicated queue's members (sizeArg sets how many)
// and proposes its declaration, which names them and the Raft ids of
// their incarnations. It returns the incarnation proposed.
func Propose(h queuetype.Host, def topology.QueueDef, sizeArg string) (uint64, error) {
	members, err := Place(h, def, sizeArg)
	if err != nil {
		return 0, err
	}
	def.Home, def.ID, def.Members = members[0], h.NewIncarnation(), members
	def.MemberIDs = make([]uint64, len(members))
	for i, m := range members {
		def.MemberIDs[i] = h.Cluster().NodeID(m)
	}
	return def.ID, h.Propose(topology.DeclareQueue{Def: def})
}

// FirstMember says whether this node's incarnation makes a new
// replicated queue's first configuration (BootIDs); otherwise its member
// joins the group as it is. A declaration from a metadata snapshot always
// joins.
func FirstMember(h queuetype.Host, def topology.QueueDef) bool {
	g := h.Groups()
	return !def.FromSnapshot && g != nil && slices.Contains(BootIDs(def), g.Self())
}

// BootIDs are the Raft ids of a new replicated queue's first members:
// those its declaration names, or, in one written before ids were per
// incarnation, the ids its members had then.
func BootIDs(def topology.QueueDef) []uint64 {
	if len(def.MemberIDs) == len(def.Members) {
		return def.MemberIDs
	}
	ids := make([]uint64, len(def.Members))
	for i, m := range def.Members {
		ids[i] = cluster.LegacyID(m)
	}
	return ids
}

// raftLogs is the part of *storage.Store replicated queues need.
type raftLogs interface {
	RaftLog(group uint64) (*storage.RaftLog, error)
	DeleteRaftLog(group uint64) error
}

// Start starts this node's member of a replicated queue's Raft group: id
// is the group's (and its log's), boot the Raft ids of a new group's
// first members (BootIDs; nil: a group of this node alone, or one it
// joins); bind hands the machine its group before it runs.
func Start(h queuetype.Host, id uint64, boot []uint64, campaign, join bool, bind func(*cluster.Group), m cluster.GroupMachine) (*cluster.Group, error) {
	rs, ok := h.Store().(raftLogs)
	groups := h.Groups()
	if !ok || groups == nil {
		return nil, fmt.Errorf("this node keeps no Raft groups")
	}
	log, err := rs.RaftLog(id)
	if err != nil {
		return nil, err
	}
	ids := boot
	if ids == nil {
		ids = []uint64{groups.Self()}
	}
	return groups.Start(cluster.GroupConfig{ID: id, Members: ids, Campaign: campaign && !join, Join: join,
		Bind: bind, Log: log, Machine: m})
}

// DeleteLog deletes a stopped member's log.
func DeleteLog(h queuetype.Host, id uint64) error {
	rs, ok := h.Store().(raftLogs)
	if !ok {
		return nil
	}
	return rs.DeleteRaftLog(id)
}

// ---- reaching the group

// NodeNamed is the node of names whose current incarnation is id; ""
// when none is.
func NodeNamed(h queuetype.Host, names []string, id uint64) string {
	if id == 0 {
		return ""
	}
	for _, m := range names {
		if h.Cluster().NodeID(m) == id {
			return m
		}
	}
	return ""
}

// StatsOf are q's figures: local's when its messages are here, otherwise
// a member's through a call (Down when none can be reached).
func StatsOf(h queuetype.Host, q queuetype.Queue, local func() queue.Stats) (queue.Stats, error) {
	if q.Here() {
		return local(), nil
	}
	rq := q.Via()
	if rq == nil {
		return queue.Stats{}, Down(h, q)
	}
	return h.RemoteStats(rq)
}

// Down is the answer for a replicated queue none of whose members can be
// reached from here.
func Down(h queuetype.Host, q queuetype.Queue) error {
	return reply.NotFound("no member of %s '%s' in vhost '%s' is up (members %v)", q.Kind(), q.Name(), h.Name(), q.MemberNodes())
}

// View is q's group as this node sees it: its members and those up; with
// a member here its Raft view and leader (leader names it); without, the
// leader a member elsewhere names.
func View(h queuetype.Host, q Queue, leader func() string) queuetype.QuorumView {
	members := q.MemberNodes()
	view := queuetype.QuorumView{Members: members}
	for _, m := range members {
		if h.Up(m) {
			view.Online = append(view.Online, m)
		}
	}
	g := q.Group()
	if g == nil {
		if rq := q.Via(); rq != nil {
			if ans, err := h.CallHome(rq, queuetype.CallQueueCounts, protocol.Table{}); err == nil {
				view.Leader = remote.String(ans, "leader")
			}
		}
		return view
	}
	view.Raft = g.Status()
	view.Leader = leader()
	if h.Self() == "" {
		return view // a group of this node alone
	}
	if view.Raft.Role != "" {
		view.Voters = voterNames(h, view.Raft.Members)
	}
	if len(view.Raft.Match) > 0 {
		view.Match = map[string]uint64{}
		for _, m := range members {
			if at, ok := view.Raft.Match[h.Cluster().NodeID(m)]; ok {
				view.Match[m] = at
			}
		}
	}
	return view
}

// voterNames names a group's voters by node, sorted; an incarnation the
// cluster no longer has is written as its id, in hexadecimal.
func voterNames(h queuetype.Host, ids []uint64) []string {
	nodes := h.Cluster().Nodes()
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		name := NodeNamed(h, nodes, id)
		if name == "" {
			name = strconv.FormatUint(id, 16)
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ---- changing the members

// Change adds node to q's members, or removes it (rabbitmq-queues
// add_member and delete_member, and grow and shrink): through this
// node's member, or a call to a member up. The group changes first; then
// every node records the new members, and the node added starts its
// member (which gets the group's log from the leader) or the node removed
// stops its own and deletes its log. A node the members name whose
// current incarnation the group lacks (it came back on an empty data
// directory) is added again.
func Change(h queuetype.Host, q Queue, node string, add bool) error {
	if !slices.Contains(h.Cluster().Nodes(), node) {
		return reply.NotFound("no node '%s' in the cluster", node)
	}
	members := q.MemberNodes()
	switch {
	case !add && !slices.Contains(members, node):
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, q.Kind(), q.Name(), h.Name())
	case !add && len(members) == 1:
		return reply.PreconditionFailed("node '%s' is the last member of %s '%s' in vhost '%s'; delete the queue instead", node, q.Kind(), q.Name(), h.Name())
	}
	// An add of a node the members name goes on: the group's
	// configuration decides (ChangeHere).
	if q.Member() {
		return ChangeHere(h, q, node, add)
	}
	rq := q.Via()
	if rq == nil {
		return Down(h, q)
	}
	_, err := h.CallHome(rq, queuetype.CallMember, protocol.Table{"node": node, "add": add})
	return err
}

// Lead has q's group hand its leadership to node, one of its members, as
// rabbitmq-queues rebalance moves leaders: through this node's member, or
// a call to a member (queuetype.CallLead). It returns once the leader was
// asked; the group's status says when node leads.
func Lead(h queuetype.Host, q Queue, node string) error {
	if !slices.Contains(q.MemberNodes(), node) {
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, q.Kind(), q.Name(), h.Name())
	}
	if q.Member() {
		return LeadHere(h, q, node)
	}
	rq := q.Via()
	if rq == nil {
		return Down(h, q)
	}
	_, err := h.CallHome(rq, queuetype.CallLead, protocol.Table{"node": node})
	return err
}

// LeadHere is Lead on a member (a call to it, queuetype.CallLead, comes
// here).
func LeadHere(h queuetype.Host, q Queue, node string) error {
	g := q.Group()
	if g == nil {
		return queuetype.ErrNoMember
	}
	id := h.Cluster().NodeID(node)
	if id == 0 || !slices.Contains(g.Status().Members, id) {
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, q.Kind(), q.Name(), h.Name())
	}
	g.TransferLeader(id)
	return nil
}

// memberCatchUp bounds how long a membership change waits for this
// node's member, just added, to learn the group's configuration.
const memberCatchUp = 5 * time.Second

// ChangeHere changes q's group, this node being a member (a call to it,
// queuetype.CallMember, comes here), then has every node record its new
// members. The incarnations the cluster no longer has (nodes forgotten,
// or come back under a new incarnation) leave the group first: they
// count toward its majority and never answer.
func ChangeHere(h queuetype.Host, q Queue, node string, add bool) error {
	g := q.Group()
	if g == nil {
		return queuetype.ErrNoMember
	}
	c := h.Cluster()
	name, kind := q.Name(), q.Kind()
	// The member table as the cluster has it: an incarnation this node
	// has not heard of yet is not taken for one removed.
	synced := c.Sync() == nil
	// The group's configuration decides: the members recorded here may
	// lag a change made through another node. A member that has just
	// joined has no configuration until the leader's log or snapshot
	// reaches it: it waits for that, briefly.
	self := h.Groups().Self()
	voters := g.Status().Members
	for deadline := time.Now().Add(memberCatchUp); !slices.Contains(voters, self); voters = g.Status().Members {
		if time.Now().After(deadline) {
			return reply.Internal("this node's member of %s '%s' in vhost '%s' is still catching up with the group; try again", kind, name, h.Name())
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
			return reply.Internal("%s '%s' in vhost '%s': the change of members was not committed: %v", kind, name, h.Name(), err)
		}
		return nil
	}
	if synced {
		for _, id := range slices.Clone(voters) {
			if id == self || NodeNamed(h, c.Nodes(), id) != "" {
				continue
			}
			h.Logger().Warn().Str("queue", name).Str("incarnation", strconv.FormatUint(id, 16)).
				Msg("removing from the group an incarnation of a node the cluster no longer has")
			if err := confChange(false, id); err != nil {
				return err
			}
			voters = slices.DeleteFunc(voters, func(x uint64) bool { return x == id })
		}
	}
	target := c.NodeID(node)
	switch in := slices.Contains(voters, target); {
	case target == 0:
		return reply.NotFound("no node '%s' in the cluster", node)
	case add && in:
		return reply.PreconditionFailed("node '%s' is already a member of %s '%s' in vhost '%s'", node, kind, name, h.Name())
	case !add && !in:
		return reply.PreconditionFailed("node '%s' is not a member of %s '%s' in vhost '%s'", node, kind, name, h.Name())
	case !add && len(voters) == 1:
		return reply.PreconditionFailed("node '%s' is the last member of %s '%s' in vhost '%s'; delete the queue instead", node, kind, name, h.Name())
	}
	if err := confChange(add, target); err != nil {
		return err
	}
	members := slices.Clone(q.MemberNodes())
	if add {
		if !slices.Contains(members, node) {
			members = append(members, node)
		}
	} else {
		members = slices.DeleteFunc(members, func(m string) bool { return m == node })
	}
	if slices.Equal(members, q.MemberNodes()) {
		return nil // a new incarnation of a node the members name
	}
	return h.Propose(topology.QuorumMembers{Name: name, Incarnation: q.Incarnation(), Members: members})
}

// ---- a new incarnation of a member

// Rejoining is a member's state as Rejoin sees it.
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

// Rejoin has q's member here, when its group does not count this node's
// incarnation (a member that is a new incarnation of its node: its data
// directory was lost, or reset), ask a member up to add it, once it has
// been outside for rejoinAfter; the change of members that does it first
// removes the incarnation it replaces (ChangeHere). The vhost's
// CheckMembers calls it every second; the ask runs on its own goroutine.
func Rejoin(h queuetype.Host, q Queue, st *Rejoining) {
	g := q.Group()
	if g == nil || g.Voter() {
		st.since.Store(0)
		return
	}
	now := time.Now().UnixMilli()
	since := st.since.Load()
	if since == 0 {
		st.since.Store(now)
		return
	}
	if now-since < rejoinAfter.Milliseconds() || !st.asking.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer st.asking.Store(false)
		askToRejoin(h, q, st)
		st.since.Store(time.Now().UnixMilli())
	}()
}

// askToRejoin asks a member of q's group to add this node's incarnation.
func askToRejoin(h queuetype.Host, q Queue, st *Rejoining) {
	rq := q.Via()
	if rq == nil {
		if !st.warned.Swap(true) {
			h.Logger().Warn().Str("queue", q.Name()).Strs("members", q.MemberNodes()).
				Msg("this node's member is not in its group's configuration and no other member is up to add it; if this node was the only member, what the queue held was lost with its data: delete the queue and declare it again")
		}
		return
	}
	_, err := h.CallHome(rq, queuetype.CallMember, protocol.Table{"node": h.Self(), "add": true})
	switch {
	case err == nil:
		h.Logger().Info().Str("queue", q.Name()).Str("via", rq.Home).
			Msg("this node's new incarnation was added to the group, in place of the one it was")
	case reply.As(err) != nil && reply.As(err).Code == protocol.PreconditionFailed:
		// Added already: the leader's log or snapshot is on its way.
	default:
		h.Logger().Info().Err(err).Str("queue", q.Name()).Str("via", rq.Home).
			Msg("could not have this node's member added to its group yet; trying again")
	}
}
