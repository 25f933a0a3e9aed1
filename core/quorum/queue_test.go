package quorum

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/internal/poll"
)

// memLog commits every entry at once, in order: a log of one member whose
// disk never fails.
type memLog struct {
	mu      sync.Mutex
	q       *Queue
	entries [][]byte
}

func (l *memLog) Propose(entry []byte, done func(uint64, error)) {
	l.mu.Lock()
	l.entries = append(l.entries, entry)
	index := uint64(len(l.entries))
	err := l.q.Apply(index, entry)
	l.mu.Unlock()
	done(index, err)
}

// read is the log's EntryReader.
func (l *memLog) read(lo, hi uint64, each func(uint64, []byte) error) error {
	l.mu.Lock()
	entries := l.entries[:min(hi-1, uint64(len(l.entries)))]
	l.mu.Unlock()
	for i := lo; i >= 1 && i <= uint64(len(entries)); i++ {
		if err := each(i, entries[i-1]); err != nil {
			return err
		}
	}
	return nil
}

// sink is a consumer that takes up to room deliveries until it is given
// more.
type sink struct {
	mu    sync.Mutex
	got   []queue.Delivery
	room  int
	noAck bool
}

func (s *sink) Deliver(d queue.Delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.room == 0 {
		return false
	}
	s.room--
	s.got = append(s.got, d)
	return true
}

// deliveries is a copy of what it got so far.
func (s *sink) deliveries() []queue.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]queue.Delivery(nil), s.got...)
}

func (s *sink) setRoom(n int) {
	s.mu.Lock()
	s.room = n
	s.mu.Unlock()
}

func (s *sink) Cancelled()      {}
func (s *sink) NoAck() bool     { return s.noAck }
func (s *sink) Exclusive() bool { return false }
func (s *sink) Prefetch() int   { return 2 }

func newTestQueue(t *testing.T, cfg Config, dead func(*message.Message, Reason)) (*Queue, *memLog) {
	t.Helper()
	l := &memLog{}
	q := NewQueue(QueueConfig{Name: "q", VHost: "/", Log: l, Machine: cfg, DeadLetter: dead})
	l.q = q
	return q, l
}

func publish(t *testing.T, q *Queue, body string) error {
	t.Helper()
	m, err := message.New("", "q", 0, nil, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	q.Enqueue(m, func(err error) { errc <- err })
	return <-errc
}

// TestQueueDeliversWithinPrefetch: a consumer gets what its prefetch
// allows, its acks free credit, a requeue comes back at the back with
// x-delivery-count, and what its channel could not take yet waits.
func TestQueueDeliversWithinPrefetch(t *testing.T) {
	q, _ := newTestQueue(t, DefaultConfig(), nil)
	for i := range 4 {
		if err := publish(t, q, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	s := &sink{room: 1}
	added := false
	if err := q.Consume(s, func() { added = true }); err != nil || !added {
		t.Fatal(err)
	}
	// Prefetch 2: two committed to it, one taken (room 1), one waiting.
	if len(s.deliveries()) != 1 || string(s.deliveries()[0].Entry.Msg.Body) != "0" {
		t.Fatalf("got %v", s.deliveries())
	}
	if ready, out := q.Counts(); ready != 2 || out != 2 {
		t.Fatalf("ready %d, out %d", ready, out)
	}
	s.setRoom(10)
	q.Kick()
	if len(s.deliveries()) != 2 {
		t.Fatalf("after a kick: %d deliveries", len(s.deliveries()))
	}
	// Requeue the first: it goes to the back, counted, as RabbitMQ 3.10's
	// quorum queues put it. (settle is not waited for by a channel; the
	// test waits for what it frees.)
	q.Requeue([]queue.Entry{s.deliveries()[0].Entry})
	poll.Until(t, 10*time.Second, "the requeued one freeing a place", func() bool { return len(s.deliveries()) == 3 })
	if d := s.deliveries()[2]; string(d.Entry.Msg.Body) != "2" || d.Redelivered {
		t.Fatalf("after a requeue: %q redelivered=%v", d.Entry.Msg.Body, d.Redelivered)
	}
	q.Ack([]queue.Entry{s.deliveries()[1].Entry, s.deliveries()[2].Entry})
	poll.Until(t, 10*time.Second, "the acks freeing two places", func() bool { return len(s.deliveries()) == 5 })
	d := s.deliveries()[4]
	if string(s.deliveries()[3].Entry.Msg.Body) != "3" || string(d.Entry.Msg.Body) != "0" || !d.Redelivered || d.Entry.Msg.Headers()["x-delivery-count"] != int64(1) {
		t.Fatalf("redelivery: %q redelivered=%v headers=%v", d.Entry.Msg.Body, d.Redelivered, d.Entry.Msg.Headers())
	}
	if ready, out := q.Counts(); ready != 0 || out != 2 {
		t.Fatalf("ready %d, out %d", ready, out)
	}
}

// TestQueueGetRefuseDeadLetter: basic.get, reject-publish, and dead
// letters routed once the queue's lock is released.
func TestQueueGetRefuseDeadLetter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLength, cfg.Overflow, cfg.DeadLetter, cfg.DeliveryLimit = 2, RejectPublish, true, 0
	var q *Queue
	var mu sync.Mutex
	var dead []string
	deadLetters := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), dead...) }
	q, _ = newTestQueue(t, cfg, func(m *message.Message, why Reason) {
		q.Counts() // takes the queue's lock: it must be free here
		mu.Lock()
		dead = append(dead, string(m.Body)+":"+string(why))
		mu.Unlock()
	})
	// The third finds the queue at its limit and gets in, over it.
	for i, want := range []error{nil, nil, nil, ErrRefused} {
		if err := publish(t, q, fmt.Sprint(i)); err != want {
			t.Fatalf("publish %d: %v, want %v", i, err, want)
		}
	}
	d, remaining, ok := q.Get(false)
	if !ok || string(d.Entry.Msg.Body) != "0" || remaining != 2 {
		t.Fatalf("get: %v %d %v", d, remaining, ok)
	}
	// A get says x-delivery-count even the first time, as RabbitMQ's do.
	if n, ok := d.Entry.Msg.Headers()["x-delivery-count"]; !ok || n != int64(0) {
		t.Fatalf("a first get's x-delivery-count: %v (%T)", n, n)
	}
	// Delivery limit 0: a give-back dead-letters it.
	q.Requeue([]queue.Entry{d.Entry})
	poll.Until(t, 10*time.Second, "the give-back dead-lettered", func() bool { r, _ := q.Counts(); return r == 2 && len(deadLetters()) == 1 })
	if got := deadLetters(); got[0] != "0:delivery_limit" {
		t.Fatalf("dead letters %v", got)
	}
	for _, want := range []string{"1", "2"} {
		if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != want {
			t.Fatalf("no-ack get: %v %v, want %s", d, ok, want)
		}
	}
	if _, _, ok := q.Get(false); ok {
		t.Fatal("get from an empty queue")
	}
	q.mu.Lock()
	kept := len(q.bodies)
	q.mu.Unlock()
	if kept != 0 {
		t.Fatalf("%d bodies kept after everything left", kept)
	}
}

// TestQueueRestoreEndsEarlierRuns: a member that restarts and is brought
// up to date by a snapshot learns of its node's earlier-run consumers
// from it, and ends them: what they held goes back to the queue, not
// held for ever by consumers nobody serves.
func TestQueueRestoreEndsEarlierRuns(t *testing.T) {
	before, beforeLog := newTestQueue(t, DefaultConfig(), nil)
	for i := range 3 {
		if err := publish(t, before, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := before.Consume(&sink{room: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if ready, out := before.Counts(); ready != 1 || out != 2 {
		t.Fatalf("before the restart: %d ready, %d out", ready, out)
	}
	snap, err := before.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// As the leader sends it: with the bodies its log holds.
	if snap, err = before.Complete(4, snap, beforeLog.read); err != nil {
		t.Fatal(err)
	}

	// The node's next run: same node, a log that knew nothing yet.
	after, _ := newTestQueue(t, DefaultConfig(), nil)
	if err := after.Restore(4, snap); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the restored queue's counts", func() bool { ready, out := after.Counts(); return ready == 3 && out == 0 })
	var got []string
	for range 3 {
		d, _, ok := after.Get(true)
		if !ok {
			t.Fatal("a message went missing")
		}
		got = append(got, fmt.Sprintf("%s:%v", d.Entry.Msg.Body, d.Redelivered))
	}
	if fmt.Sprint(got) != "[2:false 0:true 1:true]" {
		t.Fatalf("after the restore: %v", got)
	}
}

// TestQueueReplayEndsEarlierRunsLearnedLate: a restarted member whose
// Raft elects it before its log is replayed (a group of one does) learns
// of its node's earlier-run consumers only as the replay reaches their
// checkouts, after the Tidy the new leader started; it ends them then,
// and what they held goes back to the queue.
func TestQueueReplayEndsEarlierRunsLearnedLate(t *testing.T) {
	before, beforeLog := newTestQueue(t, DefaultConfig(), nil)
	for i := range 3 {
		if err := publish(t, before, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := before.Consume(&sink{room: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if ready, out := before.Counts(); ready != 1 || out != 2 {
		t.Fatalf("before the restart: %d ready, %d out", ready, out)
	}

	// The node's next run: its Raft names it leader (which tidies), then
	// replays.
	after, afterLog := newTestQueue(t, DefaultConfig(), nil)
	after.Tidy(nil) // what LeaderChanged starts, here run to its end
	afterLog.mu.Lock()
	for i, e := range beforeLog.entries {
		afterLog.entries = append(afterLog.entries, e)
		if err := after.Apply(uint64(i+1), e); err != nil {
			t.Fatal(err)
		}
	}
	afterLog.mu.Unlock()
	poll.Until(t, 10*time.Second, "the restored queue's counts", func() bool { ready, out := after.Counts(); return ready == 3 && out == 0 })
}

// TestSnapshotLeavesBodiesInTheLog: a snapshot costs the queue's
// bookkeeping, not its bodies, which the log holds; restored from the
// log, the queue has them all, and completed for a member without the
// log, the snapshot carries them.
func TestSnapshotLeavesBodiesInTheLog(t *testing.T) {
	q, l := newTestQueue(t, DefaultConfig(), nil)
	const n, size = 1000, 8 << 10
	body := make([]byte, size)
	for i := range n {
		copy(body, fmt.Sprintf("%08d", i))
		m, err := message.New("", "q", 0, nil, body)
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		q.Enqueue(m, func(err error) { errc <- err })
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	snap, err := q.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) > n*64 {
		t.Fatalf("a snapshot of %d messages of %d bytes takes %d bytes: it copies the bodies", n, size, len(snap))
	}
	if q.OldestNeeded() != 1 {
		t.Fatalf("the oldest entry the snapshot needs is %d, want 1", q.OldestNeeded())
	}
	check := func(what string, r *Queue) {
		t.Helper()
		for i := range n {
			d, _, ok := r.Get(true)
			if !ok || string(d.Entry.Msg.Body[:8]) != fmt.Sprintf("%08d", i) || len(d.Entry.Msg.Body) != size {
				t.Fatalf("%s: message %d: %v %q", what, i, ok, d.Entry.Msg.Body[:min(8, len(d.Entry.Msg.Body))])
			}
		}
	}
	restarted, _ := newTestQueue(t, DefaultConfig(), nil)
	if err := restarted.RestoreFrom(uint64(n), snap, l.read); err != nil {
		t.Fatal(err)
	}
	check("restored from the log", restarted)
	complete, err := q.Complete(uint64(n), snap, l.read)
	if err != nil {
		t.Fatal(err)
	}
	if len(complete) < n*size {
		t.Fatalf("a completed snapshot takes %d bytes, less than its bodies", len(complete))
	}
	newMember, _ := newTestQueue(t, DefaultConfig(), nil)
	if err := newMember.Restore(uint64(n), complete); err != nil {
		t.Fatal(err)
	}
	check("restored from a completed snapshot", newMember)
	if err := newMember.Restore(uint64(n), snap); err == nil {
		t.Fatal("a snapshot that refers to the log restored without it")
	}
}

// prioritySink is a sink with an x-priority.
type prioritySink struct {
	sink
	priority int
}

func (s *prioritySink) Priority() int { return s.priority }

// TestPrioritiesBeyond32Bits: a consumer's x-priority is any long, as
// RabbitMQ compares any integer (2^40 comes before 2^31-1), through the
// log, a snapshot and a snapshot completed for another member.
func TestPrioritiesBeyond32Bits(t *testing.T) {
	q, l := newTestQueue(t, DefaultConfig(), nil)
	high, low := &prioritySink{sink: sink{room: 10}, priority: 1 << 40}, &prioritySink{sink: sink{room: 10}, priority: 1<<31 - 1}
	for _, c := range []*prioritySink{low, high} {
		if err := q.Consume(c, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := publish(t, q, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(high.deliveries()) != 2 || len(low.deliveries()) != 0 {
		t.Fatalf("the consumer of priority 2^40 got %d, the one of 2^31-1 %d", len(high.deliveries()), len(low.deliveries()))
	}
	priorities := func(m *Machine) string {
		var out []int
		for _, c := range m.consumers {
			out = append(out, c.priority)
		}
		return fmt.Sprint(out)
	}
	q.mu.Lock()
	want := priorities(q.m)
	q.mu.Unlock()
	snap, err := q.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	complete, err := q.Complete(4, snap, l.read)
	if err != nil {
		t.Fatal(err)
	}
	if complete[0] != snapshotVersion {
		t.Fatalf("a completed snapshot with a priority beyond 32 bits is of version %d", complete[0])
	}
	for _, c := range []struct {
		what    string
		snap    []byte
		entries EntryReader
	}{{"restored", snap, l.read}, {"completed", complete, nil}} {
		st, err := decodeSnapshot(DefaultConfig(), 4, c.snap, c.entries)
		if err != nil {
			t.Fatal(err)
		}
		if got := priorities(st.m); got != want {
			t.Fatalf("priorities %s, %s %s", want, c.what, got)
		}
	}

	// An entry of before, with a priority of 32 bits alone, still reads.
	old := encode(checkout{consumer: "c", credit: 1, priority: -7})
	old = old[:len(old)-8]
	r := &reader{b: old[1:]}
	r.short()
	r.u32()
	r.u8()
	if p := r.priority(); p != -7 || r.err != nil {
		t.Fatalf("an old checkout's priority reads %d, %v", p, r.err)
	}
}

// TestSnapshotKeepsRefusingPublishes: whether reject-publish refuses
// publishes depends on the queue's past (over its limit, not yet down to
// 80% of it), so snapshots keep it, and one completed for another member
// says it too; one of a queue that refuses nothing stays version 2.
func TestSnapshotKeepsRefusingPublishes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLength, cfg.Overflow = 1, RejectPublish
	q, l := newTestQueue(t, cfg, nil)
	for i := range 2 {
		if err := publish(t, q, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, refusing := range []bool{true, false} {
		if !refusing {
			// Emptied: down to 80% of the limit (0), so taking again.
			q.Get(true)
			q.Get(true)
		}
		snap, err := q.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		index := uint64(len(l.entries))
		l.mu.Unlock()
		complete, err := q.Complete(index, snap, l.read)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]byte{true: snapshotVersion, false: completeVersion}[refusing]; complete[0] != want {
			t.Fatalf("refusing %v: a completed snapshot of version %d, want %d", refusing, complete[0], want)
		}
		for _, s := range []struct {
			data    []byte
			entries EntryReader
		}{{snap, l.read}, {complete, nil}} {
			st, err := decodeSnapshot(cfg, index, s.data, s.entries)
			if err != nil {
				t.Fatal(err)
			}
			if st.m.rejecting != refusing {
				t.Fatalf("a snapshot of version %d says refusing %v, want %v", s.data[0], st.m.rejecting, refusing)
			}
		}
	}
}

// lateSettlesLog is a memLog slow to take settlements: the outbox's
// goroutine is still proposing one when the channel's next command comes.
type lateSettlesLog struct{ memLog }

func (l *lateSettlesLog) Propose(entry []byte, done func(uint64, error)) {
	if entry[0] == opSettle || entry[0] == opSettleBy {
		time.Sleep(20 * time.Millisecond)
	}
	l.memLog.Propose(entry, done)
}

// TestCommandsReachTheLogInOrder: what a channel does after a nack with
// requeue comes after it in the log, as in RabbitMQ (a channel's
// commands to a queue go to its log in turn): a get finds the message
// back, and a publish goes behind it.
func TestCommandsReachTheLogInOrder(t *testing.T) {
	l := &lateSettlesLog{}
	q := NewQueue(QueueConfig{Name: "q", VHost: "/", Log: l, Machine: DefaultConfig()})
	l.q = q
	if err := publish(t, q, "a"); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		d, _, ok := q.Get(false)
		if !ok {
			t.Fatalf("round %d: the get right after the requeue found nothing", round)
		}
		if string(d.Entry.Msg.Body) != "a" || d.Redelivered != (round > 0) {
			t.Fatalf("round %d: got %q redelivered %v", round, d.Entry.Msg.Body, d.Redelivered)
		}
		q.Requeue([]queue.Entry{d.Entry})
	}
	if err := publish(t, q, "b"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a", "b"} {
		if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != want {
			t.Fatalf("get %v %v, want %s", ok, d.Entry.Msg, want)
		}
	}
}

// handLog is a Log whose proposals the test applies: at once while auto,
// else when the test says (applyProposed), as a member cut off from its
// leader gets them only later.
type handLog struct {
	mu       sync.Mutex
	q        *Queue
	auto     bool
	index    uint64
	proposed []proposed
}

type proposed struct {
	entry []byte
	done  func(uint64, error)
}

func (l *handLog) Propose(entry []byte, done func(uint64, error)) {
	l.mu.Lock()
	if !l.auto {
		l.proposed = append(l.proposed, proposed{entry, done})
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	done(l.apply(entry))
}

// apply commits and applies entry as the log's next.
func (l *handLog) apply(entry []byte) (uint64, error) {
	l.mu.Lock()
	l.index++
	index := l.index
	l.mu.Unlock()
	return index, l.q.Apply(index, entry)
}

// applyProposed applies what was proposed meanwhile.
func (l *handLog) applyProposed() int {
	l.mu.Lock()
	ps := l.proposed
	l.proposed = nil
	l.mu.Unlock()
	for _, p := range ps {
		p.done(l.apply(p.entry))
	}
	return len(ps)
}

func enqueued(t *testing.T, body string) []byte {
	t.Helper()
	m, err := message.New("", "q", 0, nil, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return encode(enqueue{msg: m})
}

// A member cut off from its leader catches up on entries that checked
// messages out to its node's consumer, then took them back (the leader
// suspected the node) and gave them to another node's consumer, which
// acked them: the consumer here must get none of them, only what is
// current once the member is; and it resumes, as RabbitMQ's quorum
// queues resume a consumer whose node comes back.
func TestCatchingUpMemberHandsOverOnlyWhatIsCurrent(t *testing.T) {
	l := &handLog{auto: true}
	q := NewQueue(QueueConfig{Name: "q", VHost: "/", Log: l, Machine: DefaultConfig(), Node: 0xa})
	l.q = q
	s := &sink{room: 100}
	if err := q.Consume(s, nil); err != nil {
		t.Fatal(err)
	}
	q.AppliedBatch(true) // the log tells batches
	l.mu.Lock()
	l.auto = false
	l.mu.Unlock()

	q.AppliedBatch(false) // cut off: what follows comes while catching up
	for _, e := range [][]byte{
		enqueued(t, "m1"), enqueued(t, "m2"), // checked out to s's consumer
		encode(checkout{consumer: "b.1.c1", credit: 10}), // another node's
		encode(suspectNode{node: 0xa}),                   // m1, m2 to b.1.c1
	} {
		if _, err := l.apply(e); err != nil {
			t.Fatal(err)
		}
	}
	q.mu.Lock()
	held, _, _ := q.m.heldBy("b.1.c1")
	q.mu.Unlock()
	ids := make([]uint64, len(held))
	for i, m := range held {
		ids[i] = m.ID
	}
	if _, err := l.apply(encode(settleBy{consumer: "b.1.c1", how: Ack, ids: ids})); err != nil {
		t.Fatal(err)
	}
	q.AppliedBatch(false)
	// s's consumer, suspected, asks to be resumed (from the queue's
	// outbox, on its own goroutine); that comes through.
	poll.Until(t, 10*time.Second, "the suspected consumer of this node to ask to be resumed", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.proposed) > 0
	})
	l.applyProposed()
	q.AppliedBatch(true)
	if got := s.deliveries(); len(got) != 0 {
		t.Fatalf("the catching-up member handed over %d stale deliveries (first %q)", len(got), got[0].Entry.Msg.Body)
	}
	// Current, it serves s's consumer again.
	if _, err := l.apply(enqueued(t, "m3")); err != nil {
		t.Fatal(err)
	}
	q.AppliedBatch(true)
	if got := s.deliveries(); len(got) != 1 || string(got[0].Entry.Msg.Body) != "m3" || got[0].Redelivered {
		t.Fatalf("after resuming: %v", got)
	}
}

// A consumer whose checkout is applied while its member catches up, and
// whose consume-ok has not gone out yet when the member becomes current,
// still gets what the machine checked out to it.
func TestConsumerAddedWhileCatchingUpGetsItsMessages(t *testing.T) {
	l := &handLog{auto: true}
	q := NewQueue(QueueConfig{Name: "q", VHost: "/", Log: l, Machine: DefaultConfig(), Node: 0xa})
	l.q = q
	for _, body := range []string{"m1", "m2"} {
		if _, err := l.apply(enqueued(t, body)); err != nil {
			t.Fatal(err)
		}
	}
	q.AppliedBatch(true)
	l.mu.Lock()
	l.auto = false
	l.mu.Unlock()
	q.AppliedBatch(false) // catching up
	s := &sink{room: 10}
	added := make(chan error, 1)
	go func() { added <- q.Consume(s, nil) }()
	poll.Until(t, 10*time.Second, "the checkout to be proposed", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.proposed) == 1
	})
	l.mu.Lock()
	checkout := l.proposed[0]
	l.proposed = nil
	l.mu.Unlock()
	index, err := l.apply(checkout.entry) // m1 and m2 checked out to it
	q.AppliedBatch(true)                  // current before consume-ok went out
	checkout.done(index, err)
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	if got := s.deliveries(); len(got) != 2 || string(got[0].Entry.Msg.Body) != "m1" || string(got[1].Entry.Msg.Body) != "m2" {
		t.Fatalf("got %d deliveries", len(got))
	}
}

// lazyRecordingLog is a memLog that is also a lazy log (cluster.Group's
// ProposeLazily), and records which settlements came lazily.
type lazyRecordingLog struct {
	memLog
	rmu  sync.Mutex
	kind []string // "eager" or "lazy", per settlement entry, in order
}

func (l *lazyRecordingLog) record(entry []byte, how string) {
	if entry[0] == opSettle || entry[0] == opSettleBy {
		l.rmu.Lock()
		l.kind = append(l.kind, how)
		l.rmu.Unlock()
	}
}

func (l *lazyRecordingLog) Propose(entry []byte, done func(uint64, error)) {
	l.record(entry, "eager")
	l.memLog.Propose(entry, done)
}

func (l *lazyRecordingLog) ProposeLazily(entry []byte, done func(uint64, error)) {
	l.record(entry, "lazy")
	l.memLog.Propose(entry, done)
}

func (l *lazyRecordingLog) kinds() []string {
	l.rmu.Lock()
	defer l.rmu.Unlock()
	return slices.Clone(l.kind)
}

// An ack goes lazily (it may wait for the next publish and share its
// save) only while nothing is ready: an ack while messages wait may be
// what lets the next go, and a requeue hands its message on.
func TestSettlementsGoLazilyOnlyWhenNothingWaits(t *testing.T) {
	l := &lazyRecordingLog{}
	q := NewQueue(QueueConfig{Name: "q", VHost: "/", Log: l, Machine: DefaultConfig()})
	l.q = q
	for _, body := range []string{"a", "b"} {
		if err := publish(t, q, body); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	settle := func(how string, do func([]queue.Entry)) {
		t.Helper()
		d, _, ok := q.Get(false)
		if !ok {
			t.Fatal("get found nothing")
		}
		do([]queue.Entry{d.Entry})
		want = append(want, how)
		if !poll.Within(5*time.Second, func() bool { return slices.Equal(l.kinds(), want) }) {
			t.Fatalf("settlements went %v, want %v", l.kinds(), want)
		}
	}
	settle("eager", q.Ack)     // "b" waits
	settle("eager", q.Requeue) // nothing waits, but "b" goes back
	settle("lazy", q.Ack)      // "b" acked, nothing waits
	if ready, unacked := q.Counts(); ready != 0 || unacked != 0 {
		t.Fatalf("ready %d unacked %d after the acks", ready, unacked)
	}
}
