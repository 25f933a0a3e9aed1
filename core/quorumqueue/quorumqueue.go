// Package quorumqueue is the quorum queue (x-queue-type quorum) as a vhost
// holds it: a queuetype.Type and its queuetype.Queue.
//
// A quorum queue keeps its messages in a Raft group of its own
// (core/quorum's machine over a cluster.Group, its log in the store): a
// publish is confirmed once the group committed it, so a confirmed
// message survives a crash. On a node without a cluster the group has
// this node as its only member.
//
// A quorum queue is reached like a classic one (routing, the default
// exchange, bindings, consume, get, purge, delete, listings); what differs
// lives here: the declare's rules (RabbitMQ 3.10's, with its reply
// texts), the confirms, dead-lettering out of the group, expiry at the
// head, restoring the group at start-up, and in a cluster (cluster.go)
// its members on several nodes.
//
// Invariants:
//
//   - A queue's record is stored before its group starts: a crash between
//     the two leaves a queue whose group starts empty at the restart,
//     never a group nobody names.
//   - Every change of its limits (a policy) is a log entry, so every
//     member changes them at the same point of the queue's history.
//   - Its member here runs exactly when active is true; a node that is
//     not a member reaches it through one (Via).
package quorumqueue

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/membership"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/quorum"
	"github.com/warrenmq/warren/core/remote"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A quorum queue is a queue of a Raft group, whose members
// core/membership changes.
var (
	_ queuetype.GroupQueue = (*Queue)(nil)
	_ membership.Queue     = (*Queue)(nil)
)

// Type is the quorum queue type, for queuetype.NewTypes.
type Type struct{}

// Name is its x-queue-type.
func (Type) Name() string { return queue.Quorum }

// Check refuses a new quorum queue's arguments and flags.
func (Type) Check(h queuetype.Host, def topology.QueueDef) error {
	if _, err := queue.ParseArgs(def.Name, h.Name(), def.Args); err != nil {
		return err
	}
	// Not whether this vhost keeps a store: a definitions import checks
	// a vhost it is about to create against a scratch one that has none.
	return topology.RefuseFlags(h.Name(), def, "rabbit_quorum_queue")
}

// Declare makes a quorum queue on a node of its own, or checks the one
// there is; defMu is held.
func (Type) Declare(h queuetype.Host, def topology.QueueDef) (queuetype.Queue, bool, error) {
	settings, err := h.ParseDeclare(def)
	if err != nil {
		return nil, false, err
	}
	if qq, _ := h.Lookup(def.Name).(*Queue); qq != nil {
		if err := h.EquivalentDurable(qq.args, def); err != nil {
			return nil, false, err
		}
		qq.Touch()
		return qq, false, nil
	}
	if err := check(h, def); err != nil {
		return nil, false, err
	}
	qq := newQueue(h, def.Name, def.Args, h.Store().NewID(), nil, settings)
	if err := h.Store().PutMeta(storage.KindQueue, h.Name(), def.Name, qq.Record().Table()); err != nil {
		return nil, false, queuetype.Stored(err)
	}
	if err := qq.start(false, false, nil); err != nil {
		_ = h.Store().DeleteMeta(storage.KindQueue, h.Name(), def.Name)
		return nil, false, reply.Internal("could not start the quorum queue '%s': %v", def.Name, err)
	}
	h.Register(qq)
	return qq, true, nil
}

// Restore restarts a stored quorum queue's group at start-up; defMu is
// held.
func (Type) Restore(h queuetype.Host, def topology.QueueDef, id uint64, _ []storage.Level) error {
	settings, err := queue.ParseArgs(def.Name, h.Name(), def.Args)
	if err != nil {
		return err
	}
	if h.Groups() == nil {
		return fmt.Errorf("quorum queue '%s': this broker runs no groups", def.Name)
	}
	qq := newQueue(h, def.Name, def.Args, id, def.Members, settings)
	if qq.MemberNodes() == nil || slices.Contains(qq.MemberNodes(), h.Self()) {
		// In a cluster a member whose log is empty (it crashed before
		// writing any) gets the group's from the leader: only a new
		// queue's declare makes its first configuration.
		if err := qq.start(false, qq.MemberNodes() != nil, nil); err != nil {
			return err
		}
	}
	h.Register(qq)
	return nil
}

// check refuses a new quorum queue's flags the way RabbitMQ 3.10 does;
// its arguments were checked with queue.CheckDeclareArgs.
func check(h queuetype.Host, def topology.QueueDef) error {
	if err := topology.RefuseFlags(h.Name(), def, "rabbit_quorum_queue"); err != nil {
		return err
	}
	if h.Groups() == nil || h.Store() == nil {
		return reply.PreconditionFailed("queue '%s' in vhost '%s': quorum queues need the broker's store", def.Name, h.Name())
	}
	return nil
}

// Queue is a quorum queue of a vhost: its declaration and this node's
// member of its group. On a cluster node that is not one of its members,
// the member is dormant (active is false) and the queue is reached
// through a member (cluster.go); a change of members may start or stop
// this node's.
type Queue struct {
	h    queuetype.Host
	q    *quorum.Queue
	name string
	args protocol.Table
	id   uint64 // its group's id, and its stored record's
	// members are the nodes its group has (MemberNodes).
	members membership.Members
	// base is what the arguments set; settings what is in force, with
	// the policy (read on the group's loop when a message dies).
	base     queue.Settings
	settings atomic.Pointer[queue.Settings]
	// used is when a client last used the queue (unix ms): a declare, a
	// consumer, a get; for x-expires.
	used atomic.Int64
	// config is the machine's config in force (under defMu).
	config   quorum.Config
	counters stats.Meter

	active    atomic.Bool // this node's member runs
	group     atomic.Pointer[cluster.Group]
	rejoining membership.Rejoining
}

// newQueue makes a quorum queue with its machine, dormant until this
// node's member of its group starts (start); defMu is held.
func newQueue(h queuetype.Host, name string, args protocol.Table, id uint64, members []string, settings queue.Settings) *Queue {
	qq := &Queue{h: h, name: name, args: args, id: id, base: settings}
	qq.members.Set(members)
	s, cfg := qq.inForce(h.Policy(name))
	qq.config = cfg
	self := uint64(1)
	if h.Groups() != nil {
		self = h.Groups().Self()
	}
	qq.q = quorum.NewQueue(quorum.QueueConfig{Name: name, VHost: h.Name(), Machine: cfg, TTL: ttlOf(s),
		Node: self, DeadLetter: func(m *message.Message, why quorum.Reason) { qq.deadLetter(m, why, nil) },
		DeadLetterConfirmed: func(m *message.Message, why quorum.Reason, done func(bool)) { qq.deadLetter(m, why, done) },
		Retry:               func(err error) bool { return errors.Is(err, cluster.ErrNoQuorum) },
		Logger:              h.Logger().With().Str("vhost", h.Name()).Logger()})
	return qq
}

// start starts this node's member of the queue's group, from its log if
// it has one, and waits until it has replayed it; campaign makes it stand
// for leader at once (the member a new queue's leader locator chose), join
// makes it a member the group is adding (see cluster.Group.AddMember);
// boot is a new group's first configuration (membership.Start).
func (qq *Queue) start(campaign, join bool, boot []uint64) error {
	g, err := membership.Start(qq.h, qq.id, boot, campaign, join, func(g *cluster.Group) { qq.q.SetLog(g) }, qq.q)
	if err != nil {
		qq.q.SetLog(nil)
		return err
	}
	qq.group.Store(g)
	qq.active.Store(true)
	qq.Touch()
	<-g.Recovered()
	if !campaign && !join && qq.MemberNodes() == nil {
		// A group of this node alone, restarted: its earlier run's
		// consumers are ended before clients come (in a cluster the
		// leader may be elsewhere, and they are ended in the background).
		qq.q.EndEarlierRuns(restartTidyTimeout)
	}
	qq.h.Every("quorum expiry", expiryEvery, func() { expireAll(qq.h) })
	return nil
}

// restartTidyTimeout bounds how long a restarted group of one waits to
// end its earlier run's consumers: one commit each, on this node's disk.
const restartTidyTimeout = 10 * time.Second

// stop stops this node's member of the queue's group, deletes its log and
// empties the machine: the queue stays, reached through the members.
func (qq *Queue) stop() {
	qq.active.Store(false)
	g := qq.group.Swap(nil)
	if g == nil {
		return
	}
	g.Stop()
	qq.q.Reset()
	if err := membership.DeleteLog(qq.h, qq.id); err != nil {
		qq.h.Logger().Error().Err(err).Str("queue", qq.name).Msg("could not delete the quorum queue's log")
	}
}

// ---- settings

// machineConfig is what a quorum queue's machine acts on, from its
// settings (arguments and policy). At-least-once dead-lettering holds
// only with overflow reject-publish, as RabbitMQ 3.10 has it (with
// drop-head it falls back to at-most-once).
func machineConfig(s queue.Settings, strategy string) quorum.Config {
	c := quorum.DefaultConfig()
	c.MaxLength, c.MaxBytes, c.DeliveryLimit = s.MaxLength, s.MaxLengthBytes, s.DeliveryLimit
	if s.Overflow != queue.DropHead {
		// reject-publish-dlx is taken as reject-publish, as RabbitMQ
		// 3.10's quorum queues take it.
		c.Overflow = quorum.RejectPublish
	}
	c.DeadLetter = s.HasDeadLetter
	c.SingleActive = s.SingleActiveConsumer
	c.AtLeastOnce = strategy == "at-least-once" && s.HasDeadLetter && s.Overflow == queue.RejectPublish
	return c
}

// inForce records and returns the settings in force under policy p (nil:
// none), and the machine's config for them. The argument
// x-dead-letter-strategy wins over the policy's dead-letter-strategy.
func (qq *Queue) inForce(p *policy.Policy) (queue.Settings, quorum.Config) {
	s := qq.base
	strategy, _ := qq.args["x-dead-letter-strategy"].(string)
	if p != nil {
		s = s.WithPolicy(p.Definition)
		if _, set := qq.args["x-dead-letter-strategy"]; !set {
			strategy, _ = p.Definition["dead-letter-strategy"].(string)
		}
	}
	qq.settings.Store(&s)
	return s, machineConfig(s, strategy)
}

func ttlOf(s queue.Settings) time.Duration {
	if s.MessageTTL == queue.Unlimited {
		return 0
	}
	return time.Duration(s.MessageTTL) * time.Millisecond
}

// PolicyChanged puts the policy now in force on the queue; defMu is held.
// Each change is a log entry, so every member changes its limits at the
// same point of the queue's history.
func (qq *Queue) PolicyChanged() {
	before := *qq.settings.Load()
	s, cfg := qq.inForce(qq.h.Policy(qq.name))
	if s == before && cfg == qq.config {
		return
	}
	qq.config = cfg
	if !qq.Member() {
		qq.q.SetTTL(ttlOf(s)) // for when a member starts here; the members change the limits
		return
	}
	if err := qq.q.Configure(cfg, ttlOf(s)); err != nil {
		qq.h.Logger().Warn().Err(err).Str("queue", qq.name).Msg("could not apply the policy to the quorum queue")
	}
}

// ---- what the vhost asks (queuetype.Queue)

func (qq *Queue) Name() string              { return qq.name }
func (qq *Queue) Type() string              { return queue.Quorum }
func (qq *Queue) Kind() string              { return "quorum queue" }
func (qq *Queue) Arguments() protocol.Table { return qq.args }
func (qq *Queue) Incarnation() uint64       { return qq.id }
func (qq *Queue) Replicated() bool          { return true }
func (qq *Queue) Group() *cluster.Group     { return qq.group.Load() }

// ChangeMember adds node to the group or removes it (core/membership).
func (qq *Queue) ChangeMember(node string, add bool) error {
	return membership.Change(qq.h, qq, node, add)
}

func (qq *Queue) Lead(node string) error { return membership.Lead(qq.h, qq, node) }

// Rejoin has this node's member ask to be added back, when its group
// does not count it (core/membership).
func (qq *Queue) Rejoin() { membership.Rejoin(qq.h, qq, &qq.rejoining) }

// Record is its stored declaration; in a cluster its members and its
// incarnation (its group's id) too.
func (qq *Queue) Record() topology.QueueRecord {
	return membership.Record(qq.args, qq.id, qq.MemberNodes())
}

// MemberNodes are the nodes the queue's group has, by name; nil on a node
// of its own. The slice is not to be changed.
func (qq *Queue) MemberNodes() []string { return qq.members.Nodes() }

// Member says whether this node runs a member of the queue's group;
// Here, that its messages are taken here (the same for a quorum queue).
func (qq *Queue) Member() bool { return qq.active.Load() }
func (qq *Queue) Here() bool   { return qq.active.Load() }

// Elsewhere is "": a quorum queue is its group's, not one node's.
func (qq *Queue) Elsewhere() string { return "" }

// DeleteChecks refuses a delete whose conditions do not hold.
func (qq *Queue) DeleteChecks(ifUnused, ifEmpty bool) (int, error) {
	ready, _, unacked, consumers := qq.q.Stats()
	return ready, queue.DeleteConditions(qq.name, qq.h.Name(), consumers, ready+unacked, ifUnused, ifEmpty)
}

// Figures are its depth from a member, and its message statistics.
func (qq *Queue) Figures() (queue.Stats, *stats.Meter, error) {
	st, err := qq.stats()
	return st, &qq.counters, err
}

// CheckArgs refuses a redeclare's arguments the queue cannot take.
func (qq *Queue) CheckArgs(def topology.QueueDef) error {
	_, err := queue.ParseArgs(def.Name, qq.h.Name(), def.Args)
	return err
}

// Equivalent refuses a redeclare that differs from the queue (406).
func (qq *Queue) Equivalent(def topology.QueueDef) error { return qq.h.EquivalentDurable(qq.args, def) }

// DeclareCounts are the ready messages and consumers declare-ok reports.
func (qq *Queue) DeclareCounts() (int, int, error) {
	st, err := qq.stats()
	return st.Ready, st.Consumers, err
}

// Source is its member here, or a member on another node.
func (qq *Queue) Source() (queuetype.Source, error) {
	qq.Touch()
	if qq.Member() {
		return member{qq.q, qq}, nil
	}
	rq := qq.Via()
	if rq == nil {
		return nil, membership.Down(qq.h, qq)
	}
	return elsewhere{qq.h.RemoteSource(rq), qq}, nil
}

// Purge purges through this node's member, or asks a member elsewhere.
func (qq *Queue) Purge() (int, error) {
	if !qq.Member() {
		rq := qq.Via()
		if rq == nil {
			return 0, membership.Down(qq.h, qq)
		}
		ans, err := qq.h.CallHome(rq, queuetype.CallQueuePurge, protocol.Table{})
		return int(remote.Int(ans, "messages")), err
	}
	n, err := qq.q.Purge()
	if err != nil {
		if _, ok := err.(*reply.Error); ok {
			return 0, err // unavailable: no leader
		}
		return 0, reply.Internal("purging quorum queue '%s' in vhost '%s': %v", qq.name, qq.h.Name(), err)
	}
	return n, nil
}

// Release ends the queue's consumers, stops its group and deletes its log.
func (qq *Queue) Release() {
	qq.q.CancelAll()
	qq.stop()
}

// Close commits the acks its member took just before, by deadline.
func (qq *Queue) Close(deadline time.Time) {
	if qq.Member() {
		qq.q.FlushSettles(time.Until(deadline))
	}
}

// Enqueue hands m to the group; a refused message is queuetype.ErrRejected,
// which nacks its publisher.
func (qq *Queue) Enqueue(m *message.Message, done func(error)) {
	qq.counters.Inc(stats.PublishIn)
	qq.q.Enqueue(m, func(err error) {
		if err == quorum.ErrRefused {
			err = queuetype.ErrRejected
		}
		done(err)
	})
}

// deadLetter republishes a message that left the queue as a dead letter
// (Host.DeadLetter); done, when set, is at least once.
func (qq *Queue) deadLetter(m *message.Message, why quorum.Reason, done func(ok bool)) {
	qq.h.DeadLetter(qq.name, *qq.settings.Load(), m, queue.Reason(why), &qq.counters, done)
}

// stats are the queue's figures: its member's here, or a member's through
// a call.
func (qq *Queue) stats() (queue.Stats, error) { return membership.StatsOf(qq.h, qq, qq.localStats) }

func (qq *Queue) localStats() queue.Stats {
	ready, bytes, unacked, consumers := qq.q.Stats()
	return queue.Stats{Ready: ready, ReadyBytes: bytes, Unacked: unacked, Consumers: consumers}
}

// ---- consuming

// member is this node's member as a channel consumes from it.
type member struct {
	*quorum.Queue
	qq *Queue
}

// elsewhere is a member on another node as a channel consumes from it.
type elsewhere struct {
	*remote.Source
	qq *Queue
}

// Refuses a consumer under a global prefetch, as RabbitMQ 3.10.8 does.
func (s member) Refuses(what queuetype.Asked) error    { return s.qq.refuses(what) }
func (s elsewhere) Refuses(what queuetype.Asked) error { return s.qq.refuses(what) }

func (qq *Queue) refuses(what queuetype.Asked) error {
	if what == queuetype.AskGlobalPrefetch {
		return reply.NotImplemented("queue '%s' in vhost '%s' does not support global qos", qq.name, qq.h.Name())
	}
	return nil
}

// ---- expiry

// expiryEvery is how often the vhost's quorum queues whose head message is
// due append an expiry, and those unused for x-expires are deleted.
const expiryEvery = 100 * time.Millisecond

// expireAll runs expiry at the head of every quorum queue of h this node
// leads.
func expireAll(h queuetype.Host) {
	now := time.Now().UnixMilli()
	for _, t := range h.List() {
		qq, ok := t.(*Queue)
		if !ok || !qq.Member() {
			continue
		}
		if _, leading := qq.q.Leader(); !leading {
			continue
		}
		if at := qq.q.HeadExpiresAt(); at != 0 && at <= now {
			go qq.q.Expire()
		}
		if qq.unusedFor(now) {
			go h.Expired(qq, func() bool { return qq.unusedFor(time.Now().UnixMilli()) })
		}
	}
}

// Touch marks the queue used now, for x-expires.
func (qq *Queue) Touch() { qq.used.Store(time.Now().UnixMilli()) }

// unusedFor says whether x-expires has passed without a client using the
// queue; a queue with consumers is in use.
func (qq *Queue) unusedFor(now int64) bool {
	expires := qq.settings.Load().Expires
	if expires == queue.Unlimited {
		return false
	}
	if _, _, _, consumers := qq.q.Stats(); consumers > 0 {
		qq.used.Store(now)
		return false
	}
	return now-qq.used.Load() >= expires
}
