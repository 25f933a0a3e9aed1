package streamproto

import (
	"cmp"
	"maps"
	"slices"
)

// The single-active-consumer coordinator's state: which subscriptions,
// anywhere in the cluster, form each group, and which of them is active.
// It is a plain value changed by the operations below, each of which
// returns the ConsumerUpdates its change calls for (sacUpdate); sending
// them is sac.go's. The rules, as RabbitMQ's rabbit_stream_sac_coordinator
// has them:
//
//   - A group of a plain stream keeps its active member until it leaves;
//     then the one that registered first among the others takes over.
//   - A group of a super stream's partition has as its active member the
//     one at the partition's index modulo the group's size, in
//     registration order. When that choice changes, the active one is
//     told to step down first, and the new one is activated only once it
//     has answered (or left): two never read at once.
//
// Every operation changes the members, then settles the group: with no
// member active and none stepping down, the chosen one is activated; in
// a partition's group whose active member is not the chosen one, and
// none stepping down, the active one is told to step down.
//
// Invariants, after each operation: a group has at most one member
// active; a member is activated only while none is active or stepping
// down (so the one activated never reads beside one that has not
// stopped); a group with members has one of them active or stepping down
// (settle); a member is in a group once. Two can believe themselves
// active only when a new coordinator hears it from both (sync): it keeps
// the first and steps the other down.

// sacKey names a group: RabbitMQ's {vhost, stream, consumer name}.
type sacKey struct{ VHost, Stream, Name string }

// sacMember names one subscription anywhere in the cluster: its node, the
// node's run (a new one each start, so that a connection id of an
// earlier run is never taken for a live one), its connection and its
// subscription id there.
type sacMember struct {
	Node string
	Run  uint64
	Conn uint64
	Sub  uint8
}

// sacUpdate is a ConsumerUpdate the coordinator has a member's node send:
// activate (Active) or step down.
type sacUpdate struct {
	Key    sacKey
	Member sacMember
	Active bool
}

// sacReport is a node's account of one of its members (sync).
type sacReport struct {
	Member       sacMember
	Partition    int
	Active       bool // told to be active, not told to step down since
	SteppingDown bool // told to step down, the client has not answered
}

type sacState struct {
	groups map[sacKey]*sacGroup
}

type sacGroup struct {
	// partition is the stream's index among its super stream's
	// partitions, -1 for a stream of its own.
	partition int
	members   []*sacSlot // in registration order
}

type sacSlot struct {
	m            sacMember
	active       bool
	steppingDown bool
}

// register adds m to group key, and settles it.
func (st *sacState) register(key sacKey, m sacMember, partition int) []sacUpdate {
	grp := st.group(key, partition)
	if grp.find(m) == nil {
		grp.members = append(grp.members, &sacSlot{m: m})
	}
	return st.settle(key, nil)
}

// leave takes m out of group key, and settles it.
func (st *sacState) leave(key sacKey, m sacMember) []sacUpdate {
	grp := st.groups[key]
	if grp == nil {
		return nil
	}
	grp.members = slices.DeleteFunc(grp.members, func(s *sacSlot) bool { return s.m == m })
	return st.settle(key, nil)
}

// steppedDown takes m's answer to a step-down, and settles its group.
func (st *sacState) steppedDown(key sacKey, m sacMember) []sacUpdate {
	grp := st.groups[key]
	if grp == nil {
		return nil
	}
	if s := grp.find(m); s != nil && !s.active {
		s.steppingDown = false
	}
	return st.settle(key, nil)
}

// sync takes node's account of all its members in the groups this
// coordinator has for it (those of other groups it reports elsewhere):
// members it no longer has leave, members it has and the coordinator
// lacks join as they are, and the state of the others is mended where a
// message was lost. A member that believes itself active where another
// is, is told to step down.
func (st *sacState) sync(node string, reports map[sacKey][]sacReport) []sacUpdate {
	var out []sacUpdate
	for _, key := range sortedKeys(st.groups) {
		if _, ok := reports[key]; ok {
			continue
		}
		grp := st.groups[key]
		if n := len(grp.members); removeNode(grp, node) < n {
			out = append(out, st.settle(key, nil)...)
		}
	}
	for _, key := range sortedKeys(reports) {
		rs := reports[key]
		partition := -1
		if len(rs) > 0 {
			partition = rs[0].Partition
		}
		grp := st.group(key, partition)
		grp.members = slices.DeleteFunc(grp.members, func(s *sacSlot) bool {
			return s.m.Node == node && !slices.ContainsFunc(rs, func(r sacReport) bool { return r.Member == s.m })
		})
		var resend []sacUpdate
		for _, r := range rs {
			s := grp.find(r.Member)
			if s == nil {
				s = &sacSlot{m: r.Member}
				grp.members = append(grp.members, s)
			}
			switch {
			case r.Active && !s.active:
				// Active by an earlier coordinator's word: it stays so
				// if the group has nobody else, else it steps down.
				if grp.busy() {
					s.steppingDown = true
					resend = append(resend, sacUpdate{Key: key, Member: s.m})
				} else {
					s.active, s.steppingDown = true, false
				}
			case s.active && !r.Active && !r.SteppingDown:
				resend = append(resend, sacUpdate{Key: key, Member: s.m, Active: true}) // the activation was lost
			case s.steppingDown && !r.SteppingDown && !r.Active:
				s.steppingDown = false // the answer was lost
			case !s.active && !s.steppingDown && r.SteppingDown:
				s.steppingDown = true // told by an earlier coordinator; its answer settles it
			}
		}
		out = append(out, st.settle(key, resend)...)
	}
	return out
}

// dropNode takes every member of node out of every group (the node is
// down, or gone), and settles the groups it was in.
func (st *sacState) dropNode(node string) []sacUpdate {
	var out []sacUpdate
	for _, key := range sortedKeys(st.groups) {
		grp := st.groups[key]
		if n := len(grp.members); removeNode(grp, node) < n {
			out = append(out, st.settle(key, nil)...)
		}
	}
	return out
}

// nodes lists the nodes with members in any group, sorted.
func (st *sacState) nodes() []string {
	var out []string
	for _, grp := range st.groups {
		for _, s := range grp.members {
			if !slices.Contains(out, s.m.Node) {
				out = append(out, s.m.Node)
			}
		}
	}
	slices.Sort(out)
	return out
}

// forget drops group key without a word to its members: this node no
// longer coordinates it, and they report to the one that does.
func (st *sacState) forget(key sacKey) { delete(st.groups, key) }

// settle activates or steps down as the rules say, after the updates
// already due (first), and drops the group once empty.
func (st *sacState) settle(key sacKey, first []sacUpdate) []sacUpdate {
	grp := st.groups[key]
	if grp == nil {
		return first
	}
	if len(grp.members) == 0 {
		delete(st.groups, key)
		return first
	}
	out := first
	if grp.busy() {
		if active := grp.active(); active != nil && grp.partition >= 0 && !grp.stepping() && grp.chosen() != active {
			active.active, active.steppingDown = false, true
			out = append(out, sacUpdate{Key: key, Member: active.m})
		}
		return out
	}
	chosen := grp.chosen()
	chosen.active = true
	return append(out, sacUpdate{Key: key, Member: chosen.m, Active: true})
}

// group is group key, made with partition when new.
func (st *sacState) group(key sacKey, partition int) *sacGroup {
	if st.groups == nil {
		st.groups = map[sacKey]*sacGroup{}
	}
	grp := st.groups[key]
	if grp == nil {
		grp = &sacGroup{partition: partition}
		st.groups[key] = grp
	}
	return grp
}

func (grp *sacGroup) find(m sacMember) *sacSlot {
	for _, s := range grp.members {
		if s.m == m {
			return s
		}
	}
	return nil
}

// active is the group's active member, nil when none is.
func (grp *sacGroup) active() *sacSlot {
	for _, s := range grp.members {
		if s.active {
			return s
		}
	}
	return nil
}

// stepping says a member was told to step down and has not answered.
func (grp *sacGroup) stepping() bool {
	return slices.ContainsFunc(grp.members, func(s *sacSlot) bool { return s.steppingDown })
}

// busy says a member is active or stepping down: none may be activated.
func (grp *sacGroup) busy() bool { return grp.active() != nil || grp.stepping() }

// chosen is the member that should be active: the first of a plain
// stream's group, the partition's index modulo the size of a super
// stream partition's.
func (grp *sacGroup) chosen() *sacSlot {
	if grp.partition < 0 {
		return grp.members[0]
	}
	return grp.members[grp.partition%len(grp.members)]
}

// removeNode takes node's members out of grp; it returns how many are
// left.
func removeNode(grp *sacGroup, node string) int {
	grp.members = slices.DeleteFunc(grp.members, func(s *sacSlot) bool { return s.m.Node == node })
	return len(grp.members)
}

// sortedKeys are m's keys in order, so that updates go out in one order.
func sortedKeys[V any](m map[sacKey]V) []sacKey {
	return slices.SortedFunc(maps.Keys(m), func(a, b sacKey) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Name, b.Name))
	})
}
