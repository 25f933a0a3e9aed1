package quorum

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
)

// Log orders and keeps a queue's entries: the queue's Raft group
// (*cluster.Group), of one member on a node without a cluster. Propose
// hands an entry over and calls done with the index it was committed at
// once the queue has applied it, or with why it could not be (a minority
// cannot commit). The Log calls the queue's Apply with every committed
// entry, in index order.
type Log interface {
	Propose(entry []byte, done func(index uint64, err error))
}

// ErrRefused is a publish the queue refused (overflow reject-publish).
var ErrRefused = reply.PreconditionFailed("the quorum queue refused the message (overflow reject-publish)")

// Queue is this node's member of a quorum queue: it turns what clients
// of this node do into entries, and what applying them asks for
// (Machine's effects) into deliveries, dead letters and answers to
// publishers. It serves a channel as a queue does (vhost.Source).
//
// Every member applies every entry, so every member can serve the
// consumers of its own node: a delivery the machine decides is handed
// over by the member on the consumer's node (consumer ids name it), and
// a consumer's settlements are entries like any other. What must happen
// once for the queue (dead-lettering, expiry, ending the consumers of
// nodes that are gone) is the leader's alone.
type Queue struct {
	Name, VHost string
	log         atomic.Pointer[logBox] // nil: no member of the group runs here
	ttlMillis   atomic.Int64           // x-message-ttl (or the policy's); 0 none
	deadLetter  func(m *message.Message, why Reason)
	// deadLetterConfirmed routes an at-least-once dead letter (QueueConfig).
	deadLetterConfirmed func(m *message.Message, why Reason, done func(ok bool))
	retry               func(error) bool

	logger zerolog.Logger

	mu     lockorder.Mutex[lockorder.QuorumQueue]
	m      *Machine
	bodies map[uint64]*message.Message // ready and checked-out messages, by id
	// floor: the member's log holds the entries of the messages from this
	// index on, so a snapshot refers to their bodies there (those before
	// came with a snapshot from the leader, and snapshots carry them).
	floor uint64
	// oldestLogged is the oldest message at or past floor as of the last
	// snapshot (0: none): the log is kept from it on.
	oldestLogged uint64
	consumers    map[ConsumerID]*local // this node's consumers
	byClient     map[queue.Consumer]ConsumerID
	purged       map[uint64]int // purges this node proposed, by nonce, until Purge reads them
	gets         map[ConsumerID]chan getResult
	nextID       uint64
	dead         []deadMsg // to route once the lock is released
	// ended are this node's consumers another member's entry ended (the
	// leader found their node gone): told once the lock is released.
	ended     []queue.Consumer
	tidying   atomic.Bool // a Tidy's proposals are on their way
	tidyAgain atomic.Bool // a Tidy was asked for since the running one looked
	// tidyDue: an entry applied under the lock named a consumer of this
	// node's earlier run; a Tidy starts once the lock is released.
	tidyDue bool

	// holder is, for each message delivered to a consumer of this node
	// and not settled yet, that consumer: settlements name it.
	holder map[uint64]ConsumerID
	// handed is, for each message handed to a consumer of this node and
	// not gone from the queue, to whom and at which delivery count: what
	// the machine says a consumer holds is handed again (handOverHeld)
	// only if it was not handed so, whatever its ack on the way.
	handed map[uint64]handedTo
	// orphans are deliveries to consumers of this run that are gone
	// here (cancelled, or whose checkout failed yet was committed): given
	// back once the lock is released.
	orphans []pending
	// resume lists this run's consumers an entry suspected: their node
	// (this one) is back, and says so once the lock is released.
	resume []ConsumerID

	// Deliveries wait for the end of the batch of entries that made them
	// (AppliedBatch), once the log says it tells batches: an entry
	// applied later in the batch may take one back (its consumer
	// suspected while this member was away), and a member catching up
	// must hand out only what is still so once it has caught up.
	batched bool
	waiting []pendingDelivery // this batch's deliveries to this node's consumers
	// resync: the member is catching up (or restored a snapshot); when
	// it is current, what this node's consumers hold is handed over
	// from the machine's state, not from the deliveries on the way.
	resync bool

	// setMu guards the entries waiting to be proposed in order
	// (settlements, cancels); a leaf, never held with mu.
	setMu    lockorder.Mutex[lockorder.QuorumSettle]
	settles  []pending
	settling bool   // a flushSettles goroutine runs
	inflight int    // entries proposed and not answered yet
	leader   uint64 // the member that leads, as Raft last said (0: none known)
	leading  bool
	term     uint64
	// follower: another member leads (or none is known): this member
	// keeps the state and serves its own node's consumers, but routes no
	// dead letters. A queue whose log never names a leader (tests) acts.
	follower bool
	node     uint64 // this node, in consumer ids
	run      uint32 // this run of the node, in consumer ids
	// runPrefix begins the ids of this run's consumers ("node.run.").
	runPrefix string
}

type handedTo struct {
	consumer ConsumerID
	count    uint32
}

// pendingDelivery is a delivery an applied entry made, waiting for the
// end of its batch.
type pendingDelivery struct {
	e Effect
	m *message.Message
}

type deadMsg struct {
	m    *message.Message
	why  Reason
	id   uint64 // its id in the queue
	keep bool   // at least once: settled once its targets have it
}

// local is a consumer on this node.
type local struct {
	c       queue.Consumer
	ready   bool             // basic.consume-ok is out
	waiting []queue.Delivery // committed to it, not taken by its channel yet
}

type getResult struct {
	d         queue.Delivery
	remaining int
	ok        bool
}

// QueueConfig is what a Queue needs.
type QueueConfig struct {
	Name, VHost string
	Log         Log
	Machine     Config
	// Node is this node's id: consumer ids name it and the run, so a
	// leader can tell the consumers of this node's earlier runs, gone
	// with them.
	Node uint64
	TTL  time.Duration // x-message-ttl; 0 none
	// DeadLetter routes a dead message (the vhost's dead-lettering); nil
	// drops them. DeadLetterConfirmed routes an at-least-once one and
	// says, through done, whether every target took it.
	DeadLetter          func(m *message.Message, why Reason)
	DeadLetterConfirmed func(m *message.Message, why Reason, done func(ok bool))
	// Retry says whether a proposal that failed with err may be proposed
	// again (the group had no leader for a while); nil: never.
	Retry func(err error) bool
	// Logger hears what the queue decides on its own: a node's consumers
	// suspected, or resumed.
	Logger zerolog.Logger
}

// NewQueue makes this node's member of a quorum queue, over its log.
func NewQueue(c QueueConfig) *Queue {
	q := &Queue{node: c.Node, run: rand.Uint32(), Name: c.Name, VHost: c.VHost, deadLetter: c.DeadLetter, deadLetterConfirmed: c.DeadLetterConfirmed, m: New(c.Machine),
		bodies: map[uint64]*message.Message{}, consumers: map[ConsumerID]*local{}, byClient: map[queue.Consumer]ConsumerID{},
		retry: c.Retry, logger: c.Logger, holder: map[uint64]ConsumerID{}, handed: map[uint64]handedTo{}, purged: map[uint64]int{}, gets: map[ConsumerID]chan getResult{}}
	q.runPrefix = fmt.Sprintf("%x.%x.", q.node, q.run)
	q.ttlMillis.Store(c.TTL.Milliseconds())
	if c.Log != nil {
		q.SetLog(c.Log)
	}
	return q
}

// SetLog gives the queue its log when the log needs the queue first (a
// Raft group's member takes the queue as its machine); nil takes it away
// (this node's member stopped).
func (q *Queue) SetLog(l Log) {
	if l == nil {
		q.log.Store(nil)
		return
	}
	q.log.Store(&logBox{l})
}

type logBox struct{ Log }

// ErrNoLog answers what is asked of a queue whose member does not run
// on this node.
var ErrNoLog = reply.Internal("this node runs no member of the quorum queue")

// commit hands an entry to the log.
func (q *Queue) commit(entry []byte, done func(index uint64, err error)) {
	q.commitWith(entry, false, done)
}

// lazyLog is a Log that takes entries which may wait a moment for others
// to share their save (cluster.Group.ProposeLazily).
type lazyLog interface {
	ProposeLazily(entry []byte, done func(index uint64, err error))
}

// commitWith hands an entry to the log, lazily if it may wait.
func (q *Queue) commitWith(entry []byte, lazy bool, done func(index uint64, err error)) {
	b := q.log.Load()
	if b == nil {
		done(0, ErrNoLog)
		return
	}
	if l, ok := b.Log.(lazyLog); ok && lazy {
		l.ProposeLazily(entry, done)
		return
	}
	b.Propose(entry, done)
}

// Reset empties the queue's state, this node's member of its group having
// been removed: a member added again starts from the group's log. This
// node's consumers are cancelled.
func (q *Queue) Reset() {
	q.SetLog(nil)
	q.CancelAll()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.m = New(q.m.cfg)
	clear(q.bodies)
	clear(q.holder)
	clear(q.handed)
	clear(q.purged)
	q.dead, q.ended, q.orphans = nil, nil, nil
	q.leader, q.term, q.leading, q.follower = 0, 0, false, true
}

// Enqueue appends a message and calls done once the queue has it (a
// confirm): after the entry is committed, with ErrRefused when a full
// queue with reject-publish refused it.
func (q *Queue) Enqueue(m *message.Message, done func(error)) {
	now := time.Now().UnixMilli()
	var expiresAt int64
	if ttl := q.ttlMillis.Load(); ttl > 0 {
		expiresAt = now + ttl
	}
	if m.TTL != message.NoTTL && (expiresAt == 0 || now+m.TTL < expiresAt) {
		expiresAt = now + m.TTL
	}
	if confirmEarly && done != nil {
		done(nil) // broken on purpose: see confirm_unsafe.go
		done = nil
	}
	// Applying the entry answers ErrRefused when the queue refused it.
	q.propose(encode(enqueue{now: now, expiresAt: expiresAt, msg: m}), func(_ uint64, err error) {
		if done != nil {
			done(err)
		}
	})
}

// unavailable is the error a client gets when its request could not be
// committed for want of a leader: its channel closes, not its connection,
// and it may try again.
func (q *Queue) unavailable(err error) error {
	if q.retry != nil && q.retry(err) {
		return reply.NotFound("quorum queue '%s' in vhost '%s' is unavailable: no majority of its members answered (%v)", q.Name, q.VHost, err)
	}
	return err
}

// append appends an entry, in order (propose), and waits until it is
// applied.
func (q *Queue) append(entry []byte) error {
	ch := make(chan error, 1)
	q.propose(entry, func(_ uint64, err error) { ch <- err })
	return <-ch
}

// leaderLog is a Log that takes a leader's own decisions for the leader
// alone (cluster.Group.ProposeAsLeader).
type leaderLog interface {
	ProposeAsLeader(entry []byte, done func(index uint64, err error))
}

// appendAsLeader is append for what the leader decides from its own view
// (a node's consumers suspected): should it stop leading before the entry
// is applied, the entry is not sent to the next leader, whose view may
// differ (it fails, and the next Tidy decides again).
func (q *Queue) appendAsLeader(entry []byte) error {
	b := q.log.Load()
	if b == nil {
		return ErrNoLog
	}
	l, ok := b.Log.(leaderLog)
	if !ok {
		return q.append(entry)
	}
	ch := make(chan error, 1)
	l.ProposeAsLeader(entry, func(_ uint64, err error) { ch <- err })
	return <-ch
}

// propose hands an entry to the log after whatever the outbox holds, so
// that what a channel does reaches the log in the order it did it: a
// basic.get right after a nack with requeue finds the message back, as
// in RabbitMQ, where a channel's commands to a queue go to its log in
// turn. With the outbox empty the entry goes at once; else it joins the
// outbox, which proposes in order. (The group applies a member's
// proposals in the order it made them, a lost one sent again before
// those behind it: cluster's proposals.go.)
func (q *Queue) propose(entry []byte, done func(index uint64, err error)) {
	q.setMu.Lock()
	if q.settling {
		q.settles = append(q.settles, pending{entry: entry, answer: done})
		q.setMu.Unlock()
		return
	}
	q.setMu.Unlock()
	q.commit(entry, done)
}

func (q *Queue) newConsumerID(prefix string) ConsumerID {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	return ConsumerID(fmt.Sprintf("%s%s%d", q.runPrefix, prefix, q.nextID))
}

// Consume adds a consumer: deliveries start once the checkout is
// committed, after added (basic.consume-ok).
func (q *Queue) Consume(c queue.Consumer, added func()) error {
	id := q.newConsumerID("c")
	q.mu.Lock()
	q.consumers[id] = &local{c: c}
	q.byClient[c] = id
	q.mu.Unlock()
	credit := 0
	if p, ok := c.(interface{ Prefetch() int }); ok {
		credit = p.Prefetch()
	}
	if err := q.append(encode(checkout{consumer: id, credit: credit, noAck: c.NoAck(), priority: queue.PriorityOf(c)})); err != nil {
		q.mu.Lock()
		delete(q.consumers, id)
		delete(q.byClient, c)
		q.mu.Unlock()
		// Not answered is not refused: a checkout committed later is
		// cancelled.
		q.post(pending{entry: encode(cancelConsumer{id})})
		return q.unavailable(err)
	}
	if added != nil {
		added()
	}
	q.mu.Lock()
	if l := q.consumers[id]; l != nil {
		l.ready = true
	}
	q.mu.Unlock()
	q.Kick()
	return nil
}

// Cancel stops a consumer's deliveries; what its channel holds stays
// checked out until settled (the channel requeues it when it closes).
func (q *Queue) Cancel(c queue.Consumer) {
	q.mu.Lock()
	id, ok := q.byClient[c]
	var back []uint64
	if ok {
		for _, d := range q.consumers[id].waiting {
			back = append(back, d.Entry.Seq)
		}
		delete(q.byClient, c)
		delete(q.consumers, id)
	}
	q.mu.Unlock()
	if !ok {
		return
	}
	done := make(chan struct{})
	q.post(pending{entry: encode(cancelConsumer{id}), done: done})
	if len(back) > 0 {
		// Committed to it but never handed to its channel: given back.
		q.post(pending{how: Requeue, consumer: id, ids: back})
	}
	// Waited for, so that what the channel does next comes after; not
	// for ever, on the minority side of a partition.
	select {
	case <-done:
	case <-time.After(cancelWait):
	}
}

// cancelWait bounds how long a cancel waits for its entry.
const cancelWait = 10 * time.Second

// LeaderChanged records who leads the queue's group now.
func (q *Queue) LeaderChanged(leader, term uint64, self bool) {
	q.mu.Lock()
	q.leader, q.term, q.leading, q.follower = leader, term, self, !self
	var dead []deadMsg
	if self {
		// The dead letters an earlier leader had not settled are this
		// one's to route.
		for _, e := range q.m.PendingDeadLetters() {
			if m := q.bodies[e.Msg.ID]; m != nil {
				dead = append(dead, deadMsg{m: m, why: e.Reason, id: e.Msg.ID, keep: true})
			}
		}
	}
	q.mu.Unlock()
	if len(dead) > 0 {
		go q.routeDead(dead)
	}
	if leader != 0 {
		// Off the log's loop, which calls this: appending waits for it.
		go q.Tidy(nil)
	}
}

// Tidy ends the consumers whose channels are gone, those of this node's
// earlier runs (any member knows its own node restarted); on the leader,
// it suspects the consumers of nodes alive says are down (nil: none is):
// what they held goes back to the queue, redelivered, and they get
// nothing until their node, back, resumes them, which Tidy does too for
// this node's. It proposes only what the machine still has, and one round
// at a time.
//
// A Tidy asked for while another runs is not lost: the running one goes
// round again, so a state that changed under it (a snapshot installed
// just after it looked) is looked at too.
func (q *Queue) Tidy(alive func(node uint64) bool) {
	q.tidyAgain.Store(true)
	for q.tidying.CompareAndSwap(false, true) {
		failed := false
		for !failed && q.tidyAgain.Swap(false) {
			failed = q.tidyOnce(alive) != nil
		}
		q.tidying.Store(false)
		if failed || !q.tidyAgain.Load() {
			// A failure waits for the next Tidy (the periodic one, or
			// the next leader's): going round at once would spin while
			// the group has no leader.
			return
		}
	}
}

// EndEarlierRuns ends the consumers of this node's earlier runs, as Tidy
// does, and waits, for up to timeout, until none is left: a restarted
// group of one does it before clients come, so that what those consumers
// held is back in the queue when a client first looks.
func (q *Queue) EndEarlierRuns(timeout time.Duration) {
	earlier := func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return slices.ContainsFunc(q.m.Consumers(), q.earlierRun)
	}
	// A Tidy running already goes round again for this one.
	q.Tidy(nil)
	for deadline := time.Now().Add(timeout); earlier() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// tidyOnce proposes the ends of the consumers goneConsumers lists, the
// suspicion of the nodes downNodes lists, and the resumption of this
// run's consumers suspected.
func (q *Queue) tidyOnce(alive func(node uint64) bool) error {
	q.mu.Lock()
	gone := q.goneConsumers()
	down := q.downNodes(alive)
	resume := q.localSuspected()
	q.mu.Unlock()
	if len(resume) > 0 {
		if err := q.append(encode(resumeConsumers{consumers: resume})); err != nil {
			return err
		}
		q.logger.Info().Str("queue", q.Name).Int("consumers", len(resume)).Msg("quorum queue: this node's suspected consumers resume")
	}
	for _, node := range down {
		// Decided again just before each proposal, as below.
		q.mu.Lock()
		still := slices.Contains(q.downNodes(alive), node)
		q.mu.Unlock()
		if !still {
			continue
		}
		if err := q.appendAsLeader(encode(suspectNode{node: node})); err != nil {
			return err
		}
		// A suspicion gives back what the node's consumers hold, and
		// their acks until they resume are lost: worth a line, once it
		// is committed (a cut-off leader's are not).
		q.logger.Info().Str("queue", q.Name).Str("node", fmt.Sprintf("%x", node)).Msg("quorum queue leader: a member's node is not heard from; its consumers are suspected")
	}
	for _, id := range gone {
		// Decided again just before each proposal: a leader cut off from
		// the others finds them all down, and its proposals wait until
		// the partition heals; by then it leads no more, and they are up.
		q.mu.Lock()
		still := slices.Contains(q.goneConsumers(), id)
		q.mu.Unlock()
		if !still {
			continue
		}
		if err := q.append(encode(downConsumer{id})); err != nil {
			return err
		}
	}
	return nil
}

// goneConsumers lists the consumers Tidy ends: this node's earlier
// runs'; q.mu is held.
func (q *Queue) goneConsumers() []ConsumerID {
	var out []ConsumerID
	for _, id := range q.m.Consumers() {
		if q.earlierRun(id) {
			out = append(out, id)
		}
	}
	return out
}

// downNodes lists, on the leader, the other nodes alive says are down
// that have consumers not suspected yet; q.mu is held.
func (q *Queue) downNodes(alive func(node uint64) bool) []uint64 {
	if !q.leading || alive == nil {
		return nil
	}
	var out []uint64
	for _, id := range q.m.Consumers() {
		node, ok := id.Node()
		if ok && node != q.node && !slices.Contains(out, node) && q.m.Active(id) && !alive(node) {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// earlierRun reports whether id is a consumer of one of this node's
// earlier runs.
func (q *Queue) earlierRun(id ConsumerID) bool {
	node, ok := id.Node()
	return ok && node == q.node && !strings.HasPrefix(string(id), q.runPrefix)
}

// Node is the node a consumer id names, as newConsumerID wrote it.
func (id ConsumerID) Node() (uint64, bool) {
	s := string(id)
	i := strings.IndexByte(s, '.')
	if i <= 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:i], 16, 64)
	return n, err == nil
}

// Leader is the member that leads the queue's group (0: none known) and
// whether it is this node.
func (q *Queue) Leader() (uint64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.leader, q.leading
}

// CancelAll ends this node's consumers, the queue being deleted: each
// hears it (basic.cancel, for a client that asked), and what their
// channels hold they settle with nobody.
func (q *Queue) CancelAll() {
	q.mu.Lock()
	var gone []queue.Consumer
	for c, id := range q.byClient {
		gone = append(gone, c)
		delete(q.consumers, id)
	}
	clear(q.byClient)
	q.mu.Unlock()
	for _, c := range gone {
		c.Cancelled()
	}
}

// Kick hands the channels what waits for them, once they have room.
func (q *Queue) Kick() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, l := range q.consumers {
		q.drain(l)
	}
}

// drain gives a consumer what waits for it; q.mu is held.
func (q *Queue) drain(l *local) {
	for l.ready && len(l.waiting) > 0 && l.c.Deliver(l.waiting[0]) {
		l.waiting[0] = queue.Delivery{}
		l.waiting = l.waiting[1:]
	}
}

// Get takes one message for basic.get.
func (q *Queue) Get(noAck bool) (queue.Delivery, int, bool) {
	id := q.newConsumerID("g")
	ch := make(chan getResult, 1)
	q.mu.Lock()
	q.gets[id] = ch
	q.mu.Unlock()
	err := q.append(encode(get{consumer: id, noAck: noAck}))
	q.mu.Lock()
	delete(q.gets, id)
	q.mu.Unlock()
	if err != nil {
		return queue.Delivery{}, 0, false
	}
	select {
	case r := <-ch:
		return r.d, r.remaining, r.ok
	default:
		return queue.Delivery{}, 0, false
	}
}

// settle hands settlements to the log without waiting (an ack needs no
// answer), each naming the consumer that holds the message. Those that
// come while earlier ones are being committed are gathered into the next
// entries, so a consumer acking one message at a time costs an entry per
// commit round, not per ack.
//
// An ack made while the queue has nothing ready goes lazily
// (cluster.Group.ProposeLazily): it waits a few milliseconds at most for
// the next publish and shares its save, so a consumer that keeps up with
// its publisher costs the log one fsync per message, not two. Nobody
// waits for it: the consumer's credit matters only once a message is
// ready, and the publish that makes one is applied after the ack. A
// requeue or a reject goes at once (it hands a message on), and so does
// an ack while messages wait, since it may be what lets the next one go.
// A crash may lose a lazy ack of the last few milliseconds: the message
// is delivered again, as any unacked one is.
func (q *Queue) settle(how How, entries []queue.Entry) {
	var byHolder []pending
	q.mu.Lock()
	ready, _ := q.m.Ready()
	lazy := how == Ack && ready == 0
	for _, e := range entries {
		c := q.holder[e.Seq]
		delete(q.holder, e.Seq)
		i := slices.IndexFunc(byHolder, func(p pending) bool { return p.consumer == c })
		if i < 0 {
			byHolder = append(byHolder, pending{how: how, consumer: c, lazy: lazy})
			i = len(byHolder) - 1
		}
		byHolder[i].ids = append(byHolder[i].ids, e.Seq)
	}
	q.mu.Unlock()
	q.post(byHolder...)
}

// post hands entries to the ordered outbox flushSettles proposes.
func (q *Queue) post(ps ...pending) {
	q.setMu.Lock()
	for _, p := range ps {
		n := len(q.settles)
		if p.entry == nil && n > 0 && q.settles[n-1].merges(p) {
			q.settles[n-1].ids = append(q.settles[n-1].ids, p.ids...)
			q.settles[n-1].lazy = q.settles[n-1].lazy && p.lazy
			continue
		}
		q.settles = append(q.settles, p)
	}
	start := !q.settling
	q.settling = true
	q.setMu.Unlock()
	if start {
		go q.flushSettles()
	}
}

// FlushSettles waits, for up to timeout, until the settlements handed to
// the queue are committed: a broker stopping cleanly keeps the acks its
// channels took just before.
func (q *Queue) FlushSettles(timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		q.setMu.Lock()
		busy := q.settling || q.inflight > 0
		q.setMu.Unlock()
		if !busy {
			return
		}
	}
}

// pending is an entry waiting in the outbox: a settlement of one kind by
// one consumer ("" for messages whose holder is unknown here), gathered
// while earlier entries are committed, or a whole entry (a cancel, or
// what propose queued behind them).
type pending struct {
	how      How
	consumer ConsumerID
	ids      []uint64
	entry    []byte
	lazy     bool          // may wait for another entry's save (settle)
	done     chan struct{} // closed once committed, or given up
	// answer hears how a proposed entry went, which is not proposed
	// again: its proposer decides.
	answer func(index uint64, err error)
}

func (p pending) merges(next pending) bool {
	return p.entry == nil && p.done == nil && p.how == next.how && p.consumer == next.consumer
}

func (p pending) bytes() []byte {
	switch {
	case p.entry != nil:
		return p.entry
	case p.consumer == "":
		return encode(settleAny{how: p.how, ids: p.ids})
	}
	return encode(settleBy{consumer: p.consumer, how: p.how, ids: p.ids})
}

// retryEvery is how long the outbox waits before it proposes again what
// the group could not commit.
const retryEvery = 100 * time.Millisecond

// flushSettles proposes the outbox, in order, without waiting for what
// it proposed before: an ack is in the log once the next save of the
// group is synced, however far the applying of entries lags behind the
// committing of them (a group applies at most 1 MiB of entries a round,
// and a busy queue of large messages can be seconds behind). It ends
// when the outbox is empty. What was not committed for want of a leader
// is proposed again after retryEvery (but for what propose queued, whose
// proposer hears): each such entry changes nothing when applied twice,
// and settlements of different deliveries, a consumer's cancel after
// them, or an end (Down) before them, lead to the same state in any
// order but for redelivering what an end gave back.
func (q *Queue) flushSettles() {
	for {
		q.setMu.Lock()
		batch := q.settles
		q.settles = nil
		if len(batch) == 0 {
			q.settling = false
			q.setMu.Unlock()
			return
		}
		q.inflight += len(batch)
		q.setMu.Unlock()
		if settleHold > 0 {
			time.Sleep(settleHold) // broken on purpose: see settle_unsafe.go
		}
		for _, p := range batch {
			q.proposeSettle(p)
		}
	}
}

// proposeSettle proposes one entry of the outbox until it is committed
// or cannot be (an entry propose queued, once); then its waiter, if any,
// hears.
func (q *Queue) proposeSettle(p pending) {
	q.commitWith(p.bytes(), p.lazy, func(index uint64, err error) {
		if p.answer != nil {
			p.answer(index, err)
		} else if err != nil && q.retry != nil && q.retry(err) {
			time.AfterFunc(retryEvery, func() { q.proposeSettle(p) })
			return
		}
		if p.done != nil {
			close(p.done)
		}
		q.setMu.Lock()
		q.inflight--
		q.setMu.Unlock()
	})
}

func (q *Queue) Ack(entries []queue.Entry)     { q.settle(Ack, entries) }
func (q *Queue) Requeue(entries []queue.Entry) { q.settle(Requeue, entries) }
func (q *Queue) Reject(entries []queue.Entry)  { q.settle(Discard, entries) }

// Expire appends an expiry at the leader's time; the leader calls it when
// the head's time may have come.
func (q *Queue) Expire() error { return q.append(encode(expire{now: time.Now().UnixMilli()})) }

// Configure changes the queue's limits, dead-lettering and message TTL
// (a policy changed): the limits through the log, so every member
// changes at the same entry; the TTL is the leader's to stamp on new
// messages.
func (q *Queue) Configure(cfg Config, ttl time.Duration) error {
	q.ttlMillis.Store(ttl.Milliseconds())
	return q.append(encode(configure{cfg: cfg}))
}

// SetTTL changes the message TTL this member stamps on new messages.
func (q *Queue) SetTTL(ttl time.Duration) { q.ttlMillis.Store(ttl.Milliseconds()) }

// Purge drops the ready messages and says how many.
func (q *Queue) Purge() (int, error) {
	ch := make(chan error, 1)
	var n int
	q.mu.Lock()
	q.nextID++
	nonce := q.nextID
	q.mu.Unlock()
	q.propose(encode(purge{node: q.node, nonce: nonce, named: true}), func(_ uint64, err error) {
		q.mu.Lock()
		n = q.purged[nonce]
		delete(q.purged, nonce)
		q.mu.Unlock()
		ch <- err
	})
	err := <-ch
	return n, q.unavailable(err)
}

// Stats are the queue's figures: ready messages and their bytes,
// messages consumers hold unsettled, and its consumers on every node.
func (q *Queue) Stats() (ready int, readyBytes int64, unacked, consumers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ready, readyBytes = q.m.Ready()
	return ready, readyBytes, q.m.CheckedOut(), q.m.ConsumerCount()
}

// HeadExpiresAt is when the message at the head of the queue expires
// (unix ms); 0 when it never does or the queue is empty.
func (q *Queue) HeadExpiresAt() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.m.HeadExpiresAt()
}

// Counts are the ready and checked-out messages.
func (q *Queue) Counts() (ready int, unacked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, _ := q.m.Ready()
	return n, q.m.CheckedOut()
}

// Apply carries out a committed entry: the machine changes, and this
// member acts on what it asks. It is the Log's to call, in index order.
func (q *Queue) Apply(index uint64, entry []byte) error {
	if entry == nil {
		return nil // Raft's own entry: nothing for the queue
	}
	q.mu.Lock()
	err := q.apply(index, entry)
	dead, ended, orphans, tidy, resume := q.dead, q.ended, q.orphans, q.tidyDue, q.resume
	q.dead, q.ended, q.orphans, q.tidyDue, q.resume = nil, nil, nil, false, nil
	q.mu.Unlock()
	if len(orphans) > 0 {
		q.post(orphans...)
	}
	if len(resume) > 0 {
		q.post(pending{entry: encode(resumeConsumers{consumers: resume})})
	}
	if tidy {
		// Off the log's loop, which calls this: Tidy's proposals wait
		// for it.
		go q.Tidy(nil)
	}
	// Dead letters are routed with no lock of the queue held, as a classic
	// queue's are.
	q.routeDead(dead)
	for _, c := range ended {
		c.Cancelled()
	}
	return err
}

// routeDead routes dead letters, with no lock of the queue held. At most
// once, they are gone from the queue already; at least once, each stays
// until its targets have it, and is routed again a second later when
// they did not take it (none bound, one refused it, one did not answer).
func (q *Queue) routeDead(dead []deadMsg) {
	for _, d := range dead {
		if !d.keep || q.deadLetterConfirmed == nil {
			q.deadLetter(d.m, d.why)
			continue
		}
		q.deadLetterConfirmed(d.m, d.why, func(ok bool) {
			if ok {
				q.commit(encode(deadLettered{ids: []uint64{d.id}}), func(uint64, error) {})
				return
			}
			time.AfterFunc(retryDeadLetter, func() { q.retryDead(d) })
		})
	}
}

// retryDeadLetter is how long an at-least-once dead letter its targets
// did not take waits before it is routed again.
const retryDeadLetter = time.Second

// retryDead routes a pending dead letter again if this member still leads
// and the message is still pending.
func (q *Queue) retryDead(d deadMsg) {
	q.mu.Lock()
	pending := false
	if !q.follower {
		for _, p := range q.m.dlx {
			if p.ID == d.id {
				pending = true
				break
			}
		}
	}
	q.mu.Unlock()
	if pending {
		q.routeDead([]deadMsg{d})
	}
}

// apply is Apply's change; q.mu is held.
func (q *Queue) apply(index uint64, entry []byte) error {
	c, err := decode(entry)
	if err != nil {
		return fmt.Errorf("quorum: the entry at %d: %w", index, err)
	}
	var effects []Effect
	switch c := c.(type) {
	case enqueue:
		q.bodies[index] = c.msg
		// What expired at the head by the entry's time goes first, so a
		// full queue makes room with it (RabbitMQ expires on every
		// command, with the command's time).
		effects = q.m.Expire(c.now)
		effects = append(effects, q.m.Enqueue(Msg{ID: index, Size: int64(len(c.msg.Body)), ExpiresAt: c.expiresAt})...)
		for _, e := range effects {
			if e.Kind == Refuse && e.Msg.ID == index {
				q.act(effects)
				return ErrRefused // the answer to its publisher
			}
		}
	case checkout:
		effects = q.m.Checkout(c.consumer, c.credit, c.noAck, c.priority)
		// A restarted member may learn of its node's earlier-run
		// consumers from entries it replays after the leader is known,
		// and so after the Tidy that leader's arrival started: nobody
		// serves them, and what they take would be held for ever.
		q.tidyDue = q.tidyDue || q.earlierRun(c.consumer)
	case get:
		effects = q.m.Get(c.consumer, c.noAck)
		if ch := q.gets[c.consumer]; ch != nil && len(effects) == 0 {
			ch <- getResult{}
		}
	case settleAny:
		effects = q.m.SettleAny(c.how, c.ids)
	case settleBy:
		effects = q.m.Settle(c.consumer, c.how, c.ids)
	case deadLettered:
		effects = q.m.DeadLettered(c.ids)
	case cancelConsumer:
		effects = q.m.Cancel(c.consumer)
	case downConsumer:
		effects = q.m.Down(c.consumer)
		if l := q.consumers[c.consumer]; l != nil {
			// Ended by the leader while this node was cut off from it:
			// the client hears (basic.cancel) and may consume again.
			delete(q.consumers, c.consumer)
			delete(q.byClient, l.c)
			q.ended = append(q.ended, l.c)
		}
	case suspectNode:
		effects = q.m.Suspect(c.node)
		if c.node == q.node {
			// This node was cut off from the leader, and is back: its
			// consumers say so (RabbitMQ's quorum queues resume a
			// consumer when its node comes back).
			q.resume = append(q.resume, q.localSuspected()...)
		}
	case resumeConsumers:
		effects = q.m.Resume(c.consumers)
	case expire:
		effects = q.m.Expire(c.now)
	case configure:
		effects = q.m.Configure(c.cfg)
	case purge:
		before := bodyIDs(q.bodies)
		n := q.m.Purge()
		q.forgetReady(before)
		// For Purge, on the node that proposed it (a purge of before
		// named nobody: nobody waits).
		if c.named && c.node == q.node {
			q.purged[c.nonce] = n
		}
	}
	q.act(effects)
	return nil
}

// act carries out effects; q.mu is held. Every member delivers to its
// own node's consumers; only the leader routes dead letters.
func (q *Queue) act(effects []Effect) {
	for _, e := range effects {
		switch e.Kind {
		case Deliver:
			q.deliver(e)
		case DeadLetter, Drop:
			m := q.bodies[e.Msg.ID]
			if !e.Keep {
				delete(q.bodies, e.Msg.ID)
			}
			delete(q.handed, e.Msg.ID)
			if !q.follower && e.Kind == DeadLetter && m != nil && q.deadLetter != nil {
				q.dead = append(q.dead, deadMsg{m: m, why: e.Reason, id: e.Msg.ID, keep: e.Keep})
			}
		case Acked, Refuse:
			delete(q.bodies, e.Msg.ID)
			delete(q.holder, e.Msg.ID)
			delete(q.handed, e.Msg.ID)
		}
	}
}

// deliver hands a committed delivery to its consumer on this node, with
// x-delivery-count as RabbitMQ 3.10.8 puts it: on every basic.get (0 the
// first time), on a consumer's delivery once the message came back;
// q.mu is held.
func (q *Queue) deliver(e Effect) {
	m := q.bodies[e.Msg.ID]
	if m == nil {
		return
	}
	if q.batched && q.gets[e.Consumer] == nil && q.consumers[e.Consumer] != nil {
		q.waiting = append(q.waiting, pendingDelivery{e, m})
		return
	}
	q.handOver(e, m)
}

// handOver hands a delivery to its consumer on this node; q.mu is held.
func (q *Queue) handOver(e Effect, m *message.Message) {
	// Whose it is first: a member applies every other node's deliveries
	// too, and must not pay for what it does not hand over.
	get := q.gets[e.Consumer]
	l := q.consumers[e.Consumer]
	if get == nil && l == nil {
		if strings.HasPrefix(string(e.Consumer), q.runPrefix) {
			// A consumer of this run that is gone here: given back.
			q.orphans = append(q.orphans, pending{how: Requeue, consumer: e.Consumer, ids: []uint64{e.Msg.ID}})
		}
		return // another node's consumer, or one this node had before
	}
	if e.Msg.DeliveryCount > 0 || get != nil {
		m = withDeliveryCount(m, e.Msg.DeliveryCount)
	}
	d := queue.Delivery{Entry: queue.Entry{Msg: m, Seq: e.Msg.ID, Deliveries: e.Msg.DeliveryCount + 1}, Redelivered: e.Redelivered}
	q.holder[e.Msg.ID] = e.Consumer
	q.handed[e.Msg.ID] = handedTo{e.Consumer, e.Msg.DeliveryCount}
	if get != nil {
		n, _ := q.m.Ready()
		get <- getResult{d: d, remaining: n, ok: true}
		return
	}
	l.waiting = append(l.waiting, d)
	q.drain(l)
}

// AppliedBatch is told, after every batch of entries the log applied,
// whether this member is current (cluster.BatchApplier): a member that is
// not (catching up, or back from a partition) keeps its consumers'
// deliveries back; once it is, they get what the machine says they hold
// and have not been handed, in order. A current member hands over the
// batch's deliveries its later entries did not take back.
func (q *Queue) AppliedBatch(current bool) {
	q.mu.Lock()
	q.batched = true
	switch {
	case !current:
		q.resync = true
		clear(q.waiting)
		q.waiting = q.waiting[:0]
	case q.resync:
		q.resync = false
		clear(q.waiting)
		q.waiting = q.waiting[:0]
		q.handOverHeld()
	default:
		waiting := q.waiting
		// A message handed to one consumer twice in a batch (given back
		// between) goes once, at its last place.
		last := make(map[uint64]int, len(waiting))
		for i, w := range waiting {
			last[w.e.Msg.ID] = i
		}
		for i, w := range waiting {
			if last[w.e.Msg.ID] == i && (q.m.Holds(w.e.Consumer, w.e.Msg.ID) || q.noAckConsumer(w.e.Consumer)) {
				q.handOver(w.e, w.m)
			}
		}
		clear(waiting)
		q.waiting = waiting[:0]
	}
	orphans, resume, ended := q.orphans, q.resume, q.ended
	q.orphans, q.resume, q.ended = nil, nil, nil
	q.mu.Unlock()
	if len(orphans) > 0 {
		q.post(orphans...)
	}
	if len(resume) > 0 {
		q.post(pending{entry: encode(resumeConsumers{consumers: resume})})
	}
	for _, c := range ended {
		c.Cancelled()
	}
}

// noAckConsumer says whether id is a no-ack consumer of this node the
// machine has and does not suspect: its deliveries are settled as they
// are made, so none is held.
func (q *Queue) noAckConsumer(id ConsumerID) bool {
	l := q.consumers[id]
	return l != nil && l.c.NoAck() && q.m.Active(id)
}

// handOverHeld gives each consumer of this node what the machine says it
// holds and its channel was not handed (what entries this member caught
// up on, or a snapshot it restored, checked out to it), oldest first; a
// consumer the machine no longer has is ended (basic.cancel), and one it
// suspects resumed. q.mu is held.
func (q *Queue) handOverHeld() {
	ids := make([]ConsumerID, 0, len(q.consumers))
	for id := range q.consumers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		l := q.consumers[id]
		held, known, suspected := q.m.heldBy(id)
		switch {
		case !known && !l.ready:
			continue // its checkout is not applied yet
		case !known:
			delete(q.consumers, id)
			delete(q.byClient, l.c)
			q.ended = append(q.ended, l.c)
			continue
		case suspected:
			if strings.HasPrefix(string(id), q.runPrefix) {
				q.resume = append(q.resume, id)
			}
			continue
		}
		for _, msg := range held {
			if q.handed[msg.ID] == (handedTo{id, msg.DeliveryCount}) {
				continue
			}
			if m := q.bodies[msg.ID]; m != nil {
				q.handOver(Effect{Kind: Deliver, Consumer: id, Msg: msg, Redelivered: msg.DeliveryCount > 0}, m)
			}
		}
	}
}

// localSuspected lists this run's consumers the machine suspects; q.mu
// is held.
func (q *Queue) localSuspected() []ConsumerID {
	var out []ConsumerID
	for _, id := range q.m.Suspected(q.node) {
		if strings.HasPrefix(string(id), q.runPrefix) && q.consumers[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

// withDeliveryCount is m with the x-delivery-count header RabbitMQ's
// quorum queues put on a redelivery.
func withDeliveryCount(m *message.Message, count uint32) *message.Message {
	return m.WithHeader("x-delivery-count", int64(count))
}

func bodyIDs(m map[uint64]*message.Message) map[uint64]bool {
	out := make(map[uint64]bool, len(m))
	for id := range m {
		out[id] = true
	}
	return out
}

// forgetReady drops the bodies of messages no consumer holds after a
// purge; q.mu is held.
func (q *Queue) forgetReady(before map[uint64]bool) {
	held := map[uint64]bool{}
	for _, c := range q.m.consumers {
		for id := range c.out {
			held[id] = true
		}
	}
	for id := range before {
		if !held[id] {
			delete(q.bodies, id)
			delete(q.handed, id)
		}
	}
}
