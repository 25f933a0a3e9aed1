package vhost

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/quorum"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Quorum queues (x-queue-type quorum) keep their messages in a Raft group
// of their own (core/quorum's machine over a cluster.Group, its log in
// the store): a publish is confirmed once the group committed it, so a
// confirmed message survives a crash. On a node without a cluster the
// group has this node as its only member.
//
// A quorum queue is reached like a classic one (routing, the default
// exchange, bindings, consume, get, purge, delete, listings); what
// differs lives here: the declare's rules (RabbitMQ 3.10's, with its
// reply texts), the confirms (through a Forwarding, as messages sent to
// other nodes are), dead-lettering out of the group, expiry at the head,
// and restoring the group at start-up.

// QuorumQueue is a quorum queue of this vhost: its declaration and this
// node's member of its group. On a cluster node that is not one of its
// members, Queue is dormant (active is false) and the queue is reached
// through a member (quorum_cluster.go); a change of members may start or
// stop this node's.
type QuorumQueue struct {
	*quorum.Queue
	Name string
	Args protocol.Table
	ID   uint64 // its group's id, and its stored record's
	// members are the nodes its group has, by name, the one that stood
	// first for leader first; nil on a node of its own. Replaced whole
	// when they change (MemberNodes).
	members atomic.Pointer[[]string]
	// base is what the arguments set; settings what is in force, with
	// the policy (read on the group's loop when a message dies).
	base     queue.Settings
	settings atomic.Pointer[queue.Settings]
	// used is when a client last used the queue (unix ms): a declare, a
	// consumer, a get; for x-expires.
	used atomic.Int64
	// config is the machine's config in force (under defMu).
	config quorum.Config
	// Counters are the queue's message statistics.
	Counters stats.Meter

	active    atomic.Bool // this node's member runs
	group     atomic.Pointer[cluster.Group]
	rejoining rejoining // a new incarnation's member asking to be added (CheckMembers)
}

// checkQuorum refuses a new quorum queue's flags the way RabbitMQ 3.10
// does; its arguments were checked with queue.CheckDeclareArgs.
func (v *VHost) checkQuorum(def QueueDef) error {
	invalidProperty := func(p string) error {
		return reply.PreconditionFailed("invalid property '%s' for queue '%s' in vhost '%s'", p, def.Name, v.Name)
	}
	switch {
	case def.ServerNamed:
		return reply.PreconditionFailed("Cannot declare a server-named queue for type rabbit_quorum_queue")
	case !def.Durable:
		return invalidProperty("non-durable")
	case def.AutoDelete:
		return invalidProperty("auto-delete")
	case def.Exclusive:
		return invalidProperty("exclusive-owner")
	}
	if v.groups == nil || v.store == nil {
		return reply.PreconditionFailed("queue '%s' in vhost '%s': quorum queues need the broker's store", def.Name, v.Name)
	}
	return nil
}

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
func (qq *QuorumQueue) inForce(p *policy.Policy) (queue.Settings, quorum.Config) {
	s := qq.base
	strategy, _ := qq.Args["x-dead-letter-strategy"].(string)
	if p != nil {
		s = s.WithPolicy(p.Definition)
		if _, set := qq.Args["x-dead-letter-strategy"]; !set {
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

// applyQuorumPolicies puts the policies now in force on the quorum
// queues; defMu is held. Each change is a log entry, so every member
// changes its limits at the same point of the queue's history.
func (v *VHost) applyQuorumPolicies() {
	for _, qq := range v.quorumList() {
		before := *qq.settings.Load()
		s, cfg := qq.inForce(v.policies.For(policy.Queues, qq.Name))
		if s == before && cfg == qq.config {
			continue
		}
		qq.config = cfg
		if !qq.member() {
			qq.SetTTL(ttlOf(s)) // for when a member starts here; the members change the limits
			continue
		}
		if err := qq.Configure(cfg, ttlOf(s)); err != nil {
			v.log.Warn().Err(err).Str("queue", qq.Name).Msg("could not apply the policy to the quorum queue")
		}
	}
}

// quorumRecord is a quorum queue's stored declaration; in a cluster its
// members and its incarnation (its group's id) too.
func quorumRecordOf(qq *QuorumQueue) QueueRecord {
	rec := QueueRecord{Durable: true, Args: qq.Args, StoreID: qq.ID}
	if nodes := qq.MemberNodes(); nodes != nil {
		rec.Members, rec.Incarnation, rec.Home = nodes, qq.ID, nodes[0]
	}
	return rec
}

// MemberNodes are the nodes the queue's group has, by name; nil on a node
// of its own. The slice is not to be changed.
func (qq *QuorumQueue) MemberNodes() []string {
	if m := qq.members.Load(); m != nil {
		return *m
	}
	return nil
}

func (qq *QuorumQueue) setMembers(members []string) {
	if members == nil {
		qq.members.Store(nil)
		return
	}
	qq.members.Store(&members)
}

// member says whether this node runs a member of the queue's group.
func (qq *QuorumQueue) member() bool { return qq.active.Load() }

// declareQuorumDef is Declare's change for a quorum queue; defMu is held.
func (v *VHost) declareQuorumDef(def QueueDef) (*QuorumQueue, bool, error) {
	settings, err := v.parseDeclare(def)
	if err != nil {
		return nil, false, err
	}
	return v.declareQuorum(def, settings)
}

// declareQuorum makes a quorum queue, or checks the one there is; defMu
// is held and the arguments parsed.
func (v *VHost) declareQuorum(def QueueDef, settings queue.Settings) (*QuorumQueue, bool, error) {
	if qq, _ := v.typed[def.Name].(*QuorumQueue); qq != nil {
		if err := v.equivalentQueue(qq.shape(), def); err != nil {
			return nil, false, err
		}
		qq.touch()
		return qq, false, nil
	}
	if err := v.checkQuorum(def); err != nil {
		return nil, false, err
	}
	qq := v.newQuorum(def.Name, def.Args, v.store.NewID(), nil, settings)
	// Recorded first: a crash before the group starts leaves a queue
	// whose group starts empty at the restart, never a group nobody
	// names.
	if err := v.store.PutMeta(storage.KindQueue, v.Name, def.Name, quorumRecordOf(qq).Table()); err != nil {
		return nil, false, stored(err)
	}
	if err := v.startQuorum(qq, false, false, nil); err != nil {
		_ = v.store.DeleteMeta(storage.KindQueue, v.Name, def.Name)
		return nil, false, reply.Internal("could not start the quorum queue '%s': %v", def.Name, err)
	}
	v.registerTyped(qq)
	return qq, true, nil
}

// newQuorum makes a quorum queue with its machine, dormant until this
// node's member of its group starts (startQuorum); defMu is held.
func (v *VHost) newQuorum(name string, args protocol.Table, id uint64, members []string, settings queue.Settings) *QuorumQueue {
	qq := &QuorumQueue{Name: name, Args: args, ID: id, base: settings}
	qq.setMembers(members)
	s, cfg := qq.inForce(v.policies.For(policy.Queues, qq.Name))
	qq.config = cfg
	self := uint64(1)
	if v.groups != nil {
		self = v.groups.Self()
	}
	qq.Queue = quorum.NewQueue(quorum.QueueConfig{Name: qq.Name, VHost: v.Name, Machine: cfg, TTL: ttlOf(s),
		Node: self, DeadLetter: func(m *message.Message, why quorum.Reason) { v.quorumDeadLetter(qq, m, why, nil) },
		DeadLetterConfirmed: func(m *message.Message, why quorum.Reason, done func(bool)) { v.quorumDeadLetter(qq, m, why, done) },
		Retry:               func(err error) bool { return errors.Is(err, cluster.ErrNoQuorum) },
		Logger:              v.log.With().Str("vhost", v.Name).Logger()})
	return qq
}

// startQuorum starts this node's member of qq's group, from its log if it
// has one, and waits until it has replayed it; campaign makes it stand
// for leader at once (the member a new queue's leader locator chose), join
// makes it a member the group is adding (see cluster.Group.AddMember);
// boot is a new group's first configuration (startMember).
func (v *VHost) startQuorum(qq *QuorumQueue, campaign, join bool, boot []uint64) error {
	g, err := v.startMember(qq.ID, boot, campaign, join, func(g *cluster.Group) { qq.SetLog(g) }, qq.Queue)
	if err != nil {
		qq.SetLog(nil)
		return err
	}
	qq.group.Store(g)
	qq.active.Store(true)
	qq.touch()
	<-g.Recovered()
	if !campaign && !join && qq.MemberNodes() == nil {
		// A group of this node alone, restarted: its earlier run's
		// consumers are ended before clients come (in a cluster the
		// leader may be elsewhere, and they are ended in the background).
		qq.EndEarlierRuns(restartTidyTimeout)
	}
	v.startExpiry()
	return nil
}

// restartTidyTimeout bounds how long a restarted group of one waits to
// end its earlier run's consumers: one commit each, on this node's disk.
const restartTidyTimeout = 10 * time.Second

// startMember starts this node's member of a replicated queue's Raft
// group: id is the group's (and its log's), boot the Raft ids of a new
// group's first members (bootIDs; nil: a group of this node alone, or
// one it joins); bind hands the machine its group before it runs.
func (v *VHost) startMember(id uint64, boot []uint64, campaign, join bool, bind func(*cluster.Group), m cluster.GroupMachine) (*cluster.Group, error) {
	rs, ok := v.store.(raftLogs)
	if !ok || v.groups == nil {
		return nil, fmt.Errorf("this node keeps no Raft groups")
	}
	log, err := rs.RaftLog(id)
	if err != nil {
		return nil, err
	}
	ids := boot
	if ids == nil {
		ids = []uint64{v.groups.Self()}
	}
	return v.groups.Start(cluster.GroupConfig{ID: id, Members: ids, Campaign: campaign && !join, Join: join,
		Bind: bind, Log: log, Machine: m})
}

// stopMember stops this node's member of qq's group, deletes its log and
// empties the machine: the queue stays, reached through the members.
func (v *VHost) stopMember(qq *QuorumQueue) {
	qq.active.Store(false)
	g := qq.group.Swap(nil)
	if g == nil {
		return
	}
	g.Stop()
	qq.Reset()
	if err := v.store.(raftLogs).DeleteRaftLog(qq.ID); err != nil {
		v.log.Error().Err(err).Str("queue", qq.Name).Msg("could not delete the quorum queue's log")
	}
}

// raftLogs is the part of *storage.Store quorum queues need.
type raftLogs interface {
	RaftLog(group uint64) (*storage.RaftLog, error)
	DeleteRaftLog(group uint64) error
}

func (qq *QuorumQueue) shape() queueShape {
	return queueShape{Durable: true, Args: qq.Args}
}

// quorumQueue returns the named quorum queue, nil when there is none.
func (v *VHost) quorumQueue(name string) *QuorumQueue { return typedAs[*QuorumQueue](v, name) }

// The quorum queue's adapter (adapters.go).

func (qq *QuorumQueue) typeName() string          { return queue.Quorum }
func (qq *QuorumQueue) arguments() protocol.Table { return qq.Args }
func (qq *QuorumQueue) record() QueueRecord       { return quorumRecordOf(qq) }
func (qq *QuorumQueue) handleCall(v *VHost, op string, req protocol.Table) (protocol.Table, error) {
	return v.handleQuorumCall(op, qq, req)
}

func (qq *QuorumQueue) deleteChecks(v *VHost, ifUnused, ifEmpty bool) (int, error) {
	ready, _, unacked, consumers := qq.Stats()
	if ifUnused && consumers > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' in use", qq.Name, v.Name)
	}
	if ifEmpty && ready+unacked > 0 {
		return 0, reply.PreconditionFailed("queue '%s' in vhost '%s' is not empty", qq.Name, v.Name)
	}
	return ready, nil
}

func (qq *QuorumQueue) figures(v *VHost) (queue.Stats, *stats.Meter, error) {
	st, err := v.quorumStats(qq)
	return st, &qq.Counters, err
}

func (qq *QuorumQueue) addTo(r *RouteBuffers) {
	if !slices.Contains(r.quorum, qq) {
		r.quorum = append(r.quorum, qq)
	}
}

func (qq *QuorumQueue) checkArgs(v *VHost, def QueueDef) error {
	_, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	return err
}

func (qq *QuorumQueue) equivalent(v *VHost, def QueueDef) error {
	return v.equivalentQueue(qq.shape(), def)
}

func (qq *QuorumQueue) deleteReplicated(v *VHost, ifUnused, ifEmpty bool) (int, error) {
	return v.deleteReplicatedQuorum(qq, ifUnused, ifEmpty)
}

func (qq *QuorumQueue) declareCounts(v *VHost) (int, int, error) {
	st, err := v.quorumStats(qq)
	return st.Ready, st.Consumers, err
}

func (qq *QuorumQueue) source(v *VHost) (Source, error) {
	qq.touch()
	return v.quorumSource(qq)
}

// purge purges through this node's member, or asks a member elsewhere.
func (qq *QuorumQueue) purge(v *VHost) (int, error) {
	if !qq.member() {
		rq := v.via(qq)
		if rq == nil {
			return 0, v.membersDown(qq)
		}
		ans, err := v.callHome(rq, callQueuePurge, protocol.Table{})
		return int(id(ans, "messages")), err
	}
	n, err := qq.Purge()
	if err != nil {
		if _, ok := err.(*reply.Error); ok {
			return 0, err // unavailable: no leader
		}
		return 0, reply.Internal("purging quorum queue '%s' in vhost '%s': %v", qq.Name, v.Name, err)
	}
	return n, nil
}

// release ends the queue's consumers, stops its group and deletes its log.
func (qq *QuorumQueue) release(v *VHost) {
	qq.CancelAll()
	v.stopMember(qq)
}

// RestoreQuorum restarts a stored quorum queue's group at start-up.
func (v *VHost) RestoreQuorum(def QueueDef, id uint64) error {
	settings, err := queue.ParseArgs(def.Name, v.Name, def.Args)
	if err != nil {
		return err
	}
	if v.groups == nil {
		return fmt.Errorf("quorum queue '%s': this broker runs no groups", def.Name)
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	qq := v.newQuorum(def.Name, def.Args, id, def.Members, settings)
	if qq.MemberNodes() == nil || slices.Contains(qq.MemberNodes(), v.self()) {
		// In a cluster a member whose log is empty (it crashed before
		// writing any) gets the group's from the leader: only a new
		// queue's declare makes its first configuration.
		if err := v.startQuorum(qq, false, qq.MemberNodes() != nil, nil); err != nil {
			return err
		}
	}
	v.registerTyped(qq)
	return nil
}

// enqueueQuorum hands m to the quorum queues routing reached and empties
// r.quorum; f, when not nil, hears from each (a refused message is
// ErrRejected, which nacks its publisher).
func (v *VHost) enqueueQuorum(m *message.Message, r *RouteBuffers, f *Forwarding) {
	for i, qq := range r.quorum {
		qq.Counters.Inc(stats.PublishIn)
		qq.Enqueue(m, func(err error) {
			if err == quorum.ErrRefused {
				err = ErrRejected
			}
			if f != nil {
				f.done(err)
			}
		})
		r.quorum[i] = nil
	}
	r.quorum = r.quorum[:0]
}

// quorumDeadLetter republishes a message that left qq as a dead letter to
// its dead-letter exchange's queues, with x-death. With done nil it is at
// most once: what cannot be routed is dropped. With done (at least once)
// it says whether every queue reached took the message (and synced it,
// when it is persistent); false (no exchange, no route, a refusal) leaves
// the message in qq for another try.
func (v *VHost) quorumDeadLetter(qq *QuorumQueue, m *message.Message, why quorum.Reason, done func(ok bool)) {
	// Counted once: at most once as it leaves, at least once when its
	// targets have it.
	count := func() {
		if k, ok := stats.DeadLetterKind(string(why)); ok {
			qq.Counters.Inc(k)
			v.Counters.Inc(k)
		}
	}
	if done == nil {
		count()
	} else {
		answer := done
		done = func(ok bool) {
			if ok {
				count()
			}
			answer(ok)
		}
	}
	failed := func() {
		if done != nil {
			done(false)
		}
	}
	s := *qq.settings.Load()
	x, err := v.Exchange(s.DeadLetterExchange)
	if err != nil {
		failed() // at most once, a missing dead-letter exchange drops the message, as RabbitMQ
		return
	}
	dead, err := deadLettered(queue.Dead{Entry: queue.Entry{Msg: m}, Reason: queue.Reason(why)}, qq.Name, s, time.Now())
	if err != nil {
		v.log.Warn().Err(err).Str("queue", qq.Name).Msg("cannot dead-letter message")
		failed()
		return
	}
	var r RouteBuffers
	if _, err := v.route(x, dead, &r, ""); err != nil {
		v.log.Warn().Err(err).Str("queue", qq.Name).Msg("dead-letter routing failed")
		failed()
		return
	}
	held := v.holdPending(dead, &r)
	if why != quorum.Rejected {
		dropCycles(&r, dead)
	}
	out := v.enqueue(dead, &r)
	f := v.forward(dead, &r, false)
	if done == nil {
		return
	}
	if out.Rejected || out.Queues == 0 && f == nil && !held {
		done(false)
		return
	}
	synced := func() {
		if out.Stored || held {
			v.AfterSync(func(err error) { done(err == nil) })
			return
		}
		done(true)
	}
	if f == nil {
		synced()
		return
	}
	f.Then(func(err error) {
		if err != nil {
			done(false)
			return
		}
		synced()
	})
}

// expiry runs the vhost's quorum queues' expiry at the head: every
// expiryEvery the leaders whose head message is due append an expiry.
type expiry struct {
	once sync.Once
	stop chan struct{}
}

const expiryEvery = 100 * time.Millisecond

// startExpiry starts the expiry loop with the first quorum queue.
func (v *VHost) startExpiry() {
	v.expiry.once.Do(func() {
		go func() {
			t := time.NewTicker(expiryEvery)
			defer t.Stop()
			for {
				select {
				case <-v.expiry.stop:
					return
				case <-t.C:
				}
				now := time.Now().UnixMilli()
				for _, qq := range v.quorumList() {
					if !qq.member() {
						continue
					}
					if _, leading := qq.Leader(); !leading {
						continue
					}
					if at := qq.HeadExpiresAt(); at != 0 && at <= now {
						go qq.Expire()
					}
					if qq.unusedFor(now) {
						go v.expireQuorum(qq)
					}
				}
			}
		}()
	})
}

// touch marks the queue used now, for x-expires.
func (qq *QuorumQueue) touch() { qq.used.Store(time.Now().UnixMilli()) }

// unusedFor says whether x-expires has passed without a client using the
// queue; a queue with consumers is in use.
func (qq *QuorumQueue) unusedFor(now int64) bool {
	expires := qq.settings.Load().Expires
	if expires == queue.Unlimited {
		return false
	}
	if _, _, _, consumers := qq.Stats(); consumers > 0 {
		qq.used.Store(now)
		return false
	}
	return now-qq.used.Load() >= expires
}

// expireQuorum deletes a quorum queue x-expires found unused, if it still
// is once defMu is held.
func (v *VHost) expireQuorum(qq *QuorumQueue) {
	if v.cluster != nil {
		if qq.unusedFor(time.Now().UnixMilli()) {
			v.queueGone(qq.Name, qq.ID) // deleted on every node when it is applied
		}
		return
	}
	v.defMu.Lock()
	defer v.defMu.Unlock()
	if v.quorumQueue(qq.Name) == qq && qq.unusedFor(time.Now().UnixMilli()) {
		v.forgetTyped(qq)
	}
}

// quorumList returns the quorum queues, for work done without mu.
func (v *VHost) quorumList() []*QuorumQueue { return typedList[*QuorumQueue](v) }

// quorumStats are qq's figures as a listing shows them.
func (qq *QuorumQueue) stats() queue.Stats {
	ready, bytes, unacked, consumers := qq.Stats()
	return queue.Stats{Ready: ready, ReadyBytes: bytes, Unacked: unacked, Consumers: consumers}
}
