package broker

import (
	"regexp"
	"slices"
	"sort"
)

// Grow and shrink are rabbitmq-queues' commands of the same names: they
// change the members of many quorum queues at once, one queue at a time
// (each change is a configuration change of the queue's group, then a
// topology command).

// QuorumChange is one queue's outcome of Grow or Shrink: its members
// after the change, or why it failed.
type QuorumChange struct {
	VHost, Name string
	Size        int
	Err         error
}

// GrowQuorum adds node to the quorum queues that lack it, in the vhosts
// and with the names the patterns match (nil matches all); with even,
// only to those with an even number of members (rabbitmq-queues grow
// NODE even).
func (b *Broker) GrowQuorum(node string, even bool, vhosts, queues *regexp.Regexp) []QuorumChange {
	return b.changeQuorum(vhosts, queues, func(members []string) bool {
		return !slices.Contains(members, node) && (!even || len(members)%2 == 0)
	}, node, true)
}

// ShrinkQuorum removes node from every quorum queue it is a member of,
// except those it is the only member of (reported as failed).
func (b *Broker) ShrinkQuorum(node string) []QuorumChange {
	return b.changeQuorum(nil, nil, func(members []string) bool { return slices.Contains(members, node) }, node, false)
}

func (b *Broker) changeQuorum(vhosts, queues *regexp.Regexp, wanted func([]string) bool, node string, add bool) []QuorumChange {
	var out []QuorumChange
	for _, vname := range b.VHosts() {
		if vhosts != nil && !vhosts.MatchString(vname) {
			continue
		}
		v, ok := b.VHost(vname)
		if !ok {
			continue
		}
		all := v.QuorumMembers()
		names := make([]string, 0, len(all))
		for name := range all {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			members := all[name]
			if queues != nil && !queues.MatchString(name) || !wanted(members) {
				continue
			}
			err := v.ChangeQuorumMember(name, node, add)
			size := len(members)
			if err == nil && add {
				size++
			} else if err == nil {
				size--
			}
			out = append(out, QuorumChange{VHost: vname, Name: name, Size: size, Err: err})
		}
	}
	return out
}
