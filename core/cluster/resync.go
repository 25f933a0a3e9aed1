package cluster

import (
	"encoding/binary"
	"time"

	"go.etcd.io/raft/v3"
)

// A member that lost or changed its leader, started, restored a
// snapshot, or whose node's loop stood still (stallAfter: a stopped or
// starved process, which a paused leader cannot otherwise tell) is
// resyncing: the entries it applies may be old, taken back
// by later ones it has yet to receive, so a machine that acts on them
// for clients (a quorum queue's deliveries) holds back until the member
// is current (BatchApplier). It is current once it has applied what the
// leader had committed when it asked: its own view of the commit index
// is bounded by the entries it has received, so it asks the leader with
// a read index (Raft's ReadIndex, which writes nothing), as Node.Barrier
// does for the metadata group. A member that never gets there within
// resyncLimit is taken as current anyway.
type resyncState struct {
	on     bool
	since  time.Time
	target uint64 // the commit index the leader named (0: not yet)
	asked  uint64 // the read index request in flight (0: none)
	askAt  time.Time
	next   uint64 // the last request's number
}

// askAgain is how long a read index request waits before it is made
// again (the leader's answer may be lost, or it led no more).
const askAgain = time.Second

// startResync begins a resync; the loop's.
func (g *Group) startResync() {
	g.resync = resyncState{on: true, since: time.Now(), next: g.resync.next}
}

// askLeader asks the leader for its commit index when a resync needs it;
// the loop's, outside a Ready's handling.
func (g *Group) askLeader() {
	r := &g.resync
	if !r.on || r.target != 0 || g.lead == raft.None || (r.asked != 0 && time.Since(r.askAt) < askAgain) {
		return
	}
	r.next++
	r.asked, r.askAt = r.next, time.Now()
	g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, r.asked))
}

// readStates takes the leader's answer from a Ready's read states.
func (g *Group) readStates(states []raft.ReadState) {
	r := &g.resync
	for _, rs := range states {
		if r.on && r.asked != 0 && len(rs.RequestCtx) == 8 && binary.BigEndian.Uint64(rs.RequestCtx) == r.asked {
			r.target, r.asked = max(rs.Index, 1), 0
		}
	}
}

// current says whether the member is current, ending a resync that has
// caught up (or lasted resyncLimit).
func (g *Group) current() bool {
	r := &g.resync
	if r.on && (r.target != 0 && g.applied >= r.target && g.lead != raft.None || time.Since(r.since) > resyncLimit) {
		r.on = false
	}
	return !r.on
}
