package broker

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/warrenmq/warren/core/reply"
)

// Rebalancing moves the leaders of quorum queues and streams so that each
// running node leads about as many as the others, as rabbitmq-queues
// rebalance does: a node leading more than its share (the number of
// leaders over the nodes running, rounded up) hands a queue to the member
// running that leads fewest, until none leads more than its share or no
// member can take one. The leaders move by Raft's leadership transfer,
// one request per queue; Rebalance then waits, up to ctx's deadline, for
// the groups to report their new leaders, asking again where a transfer
// did not happen, and counts them.

// RebalanceRow is one node's count of leaders after a rebalance.
type RebalanceRow struct {
	Node          string
	QuorumQueues  int
	Streams       int
	ClassicQueues int // replicated classic queues: Warren has none
}

// The queue types a rebalance takes, as rabbitmq-queues rebalance names
// them (stream is Warren's own: its streams are Raft groups too).
var rebalanceTypes = map[string][]string{"all": {"quorum", "stream"}, "quorum": {"quorum"}, "stream": {"stream"}, "classic": nil}

type ledQueue struct {
	vhost, name, typ, leader string
	members                  []string
}

// Rebalance moves leaders of the queues of type typ (all, quorum, stream,
// classic) whose vhost and name match the patterns ("" matches all), and
// counts each running node's leaders afterwards. A queue whose leader
// could not be moved keeps it, with a log line; an unknown type or a bad
// pattern is refused (406).
func (b *Broker) Rebalance(ctx context.Context, typ, vhostPattern, queuePattern string) ([]RebalanceRow, error) {
	types, ok := rebalanceTypes[typ]
	if !ok {
		return nil, reply.PreconditionFailed("unknown queue type '%s': it is one of all, quorum, stream, classic", typ)
	}
	vp, err := regexp.Compile(vhostPattern)
	if err != nil {
		return nil, reply.PreconditionFailed("vhost pattern: %v", err)
	}
	qp, err := regexp.Compile(queuePattern)
	if err != nil {
		return nil, reply.PreconditionFailed("queue pattern: %v", err)
	}
	running := []string{b.NodeName()}
	if n := b.cluster.Load(); n != nil {
		running = running[:0]
		for _, m := range n.Status().Members {
			if m.Alive || m.Name == b.NodeName() {
				running = append(running, m.Name)
			}
		}
	}
	sort.Strings(running)
	queues := b.ledQueues(types, vp, qp)
	led := map[string]int{}
	for _, q := range queues {
		led[q.leader]++
	}
	share := (len(queues) + len(running) - 1) / len(running)
	var moved []ledQueue
	for _, q := range queues {
		if led[q.leader] <= share || len(running) == 1 {
			continue // a node of its own leads every queue it has
		}
		to := ""
		for _, m := range running {
			if slices.Contains(q.members, m) && led[m] < share && (to == "" || led[m] < led[to]) {
				to = m
			}
		}
		if to == "" {
			continue
		}
		v, ok := b.VHost(q.vhost)
		if !ok {
			continue
		}
		if err := v.LeadQueue(q.name, to); err != nil {
			// It keeps its leader; the counts say so.
			b.log.Warn().Err(err).Str("vhost", q.vhost).Str("queue", q.name).Str("to", to).
				Msg("rebalance: the queue's leader could not be moved")
			continue
		}
		led[q.leader]--
		led[to]++
		q.leader = to
		moved = append(moved, q)
	}
	b.awaitLeaders(ctx, moved)
	rows := map[string]*RebalanceRow{}
	for _, n := range running {
		rows[n] = &RebalanceRow{Node: n}
	}
	for _, q := range b.ledQueues(types, vp, qp) {
		r := rows[q.leader]
		if r == nil {
			continue // a leader not running: the group elects another
		}
		if q.typ == "stream" {
			r.Streams++
		} else {
			r.QuorumQueues++
		}
	}
	out := make([]RebalanceRow, 0, len(running))
	for _, n := range running {
		out = append(out, *rows[n])
	}
	return out, nil
}

// ledQueues are the queues of types matching the patterns, with their
// leaders and members, in vhost and name order.
func (b *Broker) ledQueues(types []string, vp, qp *regexp.Regexp) []ledQueue {
	var out []ledQueue
	names := b.VHosts()
	sort.Strings(names)
	for _, vh := range names {
		v, ok := b.VHost(vh)
		if !ok || !vp.MatchString(vh) {
			continue
		}
		entries := v.QueueEntries()
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		for _, e := range entries {
			if !slices.Contains(types, e.Type) || !qp.MatchString(e.Name) {
				continue
			}
			view, ok := e.QuorumStatus()
			if !ok {
				continue
			}
			leader := view.Leader
			if leader == "" && len(view.Members) == 0 {
				leader = b.NodeName() // a node of its own leads its groups
			}
			out = append(out, ledQueue{vhost: vh, name: e.Name, typ: e.Type, leader: leader, members: view.Members})
		}
	}
	return out
}

// reaskLeader is how long a moved queue may keep its old leader before
// the transfer is asked again: Raft drops a transfer silently (a message
// lost, a follower that knew no leader, a transferee that did not catch
// up within an election timeout), and rabbitmq-queues rebalance is
// expected to end balanced when every member is running.
const reaskLeader = time.Second

// awaitLeaders waits, until ctx is done, for the moved queues' groups to
// report their new leaders, asking again for those that have not moved
// after reaskLeader.
func (b *Broker) awaitLeaders(ctx context.Context, moved []ledQueue) {
	asked := time.Now()
	for len(moved) > 0 {
		moved = slices.DeleteFunc(moved, func(q ledQueue) bool {
			v, ok := b.VHost(q.vhost)
			if !ok {
				return true
			}
			info, ok := v.QueueInfo(q.name)
			if !ok {
				return true
			}
			view, _ := info.QuorumStatus()
			return view.Leader == q.leader
		})
		if len(moved) == 0 {
			return
		}
		if time.Since(asked) >= reaskLeader {
			asked = time.Now()
			for _, q := range moved {
				if v, ok := b.VHost(q.vhost); ok {
					if err := v.LeadQueue(q.name, q.leader); err != nil {
						b.log.Debug().Err(err).Str("vhost", q.vhost).Str("queue", q.name).Str("to", q.leader).
							Msg("rebalance: asking again for the queue's leader to move")
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
