package queue

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// consumer records deliveries; credit < 0 means unlimited.
type consumer struct {
	mu        sync.Mutex
	got       []Delivery
	credit    int
	noAck     bool
	exclusive bool
	cancelled bool
}

func (c *consumer) Deliver(d Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.credit == 0 {
		return false
	}
	if c.credit > 0 {
		c.credit--
	}
	c.got = append(c.got, d)
	return true
}
func (c *consumer) Cancelled()      { c.cancelled = true }
func (c *consumer) NoAck() bool     { return c.noAck }
func (c *consumer) Exclusive() bool { return c.exclusive }

func (c *consumer) bodies() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range c.got {
		out = append(out, string(d.Entry.Msg.Body))
	}
	return out
}

type events struct {
	mu        sync.Mutex
	dead      []Dead
	unused    bool
	abandoned bool
}

func (e *events) DeadLetter(q *Queue, dead []Dead) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dead = append(e.dead, dead...)
}
func (e *events) Unused(*Queue)    { e.unused = true }
func (e *events) Abandoned(*Queue) { e.abandoned = true }

func msg(t *testing.T, body string, prio uint8, persistent bool) *message.Message {
	t.Helper()
	p := protocol.Properties{}
	if prio > 0 {
		p.Flags |= protocol.FlagPriority
		p.Priority = prio
	}
	if persistent {
		p.Flags |= protocol.FlagDeliveryMode
		p.DeliveryMode = 2
	}
	raw, _ := p.Append(nil)
	m, err := message.New("", "q", p.Flags, raw, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func newQueue(t *testing.T, args protocol.Table, mod func(*Config)) (*Queue, *events) {
	t.Helper()
	s, err := ParseArgs("q", "/", args)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	c := Config{Name: "q", VHost: "/", Settings: s, Events: ev}
	if mod != nil {
		mod(&c)
	}
	return New(c), ev
}

func TestFIFOAndRequeueInPlace(t *testing.T) {
	q, _ := newQueue(t, nil, nil)
	for i := 0; i < 5; i++ {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, false))
	}
	var taken []Entry
	for i := 0; i < 3; i++ {
		d, _, ok := q.Get(false)
		if !ok {
			t.Fatal("empty")
		}
		taken = append(taken, d.Entry)
	}
	// Give back 2 then 0: they return to their places, redelivered.
	q.Requeue([]Entry{taken[2], taken[0]})
	var got []string
	for {
		d, _, ok := q.Get(true)
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s%v", d.Entry.Msg.Body, d.Redelivered))
	}
	want := "[0true 2true 3false 4false]"
	if fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
}

func TestPriorityOrder(t *testing.T) {
	q, _ := newQueue(t, protocol.Table{"x-max-priority": int32(5)}, nil)
	for i, p := range []uint8{0, 3, 9, 3, 1} { // 9 is capped at 5
		q.Enqueue(msg(t, fmt.Sprint(i), p, false))
	}
	c := &consumer{credit: -1}
	if err := q.Consume(c, nil); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.bodies()); got != "[2 1 3 4 0]" {
		t.Fatalf("got %s", got)
	}
}

func TestRoundRobinAndCredit(t *testing.T) {
	q, _ := newQueue(t, nil, nil)
	a, b := &consumer{credit: -1}, &consumer{credit: 1}
	_ = q.Consume(a, nil)
	_ = q.Consume(b, nil)
	for i := 0; i < 5; i++ {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, false))
	}
	// b takes one, then has no credit: a gets the rest.
	if fmt.Sprint(b.bodies()) != "[1]" || fmt.Sprint(a.bodies()) != "[0 2 3 4]" {
		t.Fatalf("a %v b %v", a.bodies(), b.bodies())
	}
}

func TestExclusiveConsumerAndAutoDelete(t *testing.T) {
	q, ev := newQueue(t, nil, func(c *Config) { c.AutoDelete = true })
	x := &consumer{credit: -1, exclusive: true}
	added := false
	if err := q.Consume(x, func() { added = true }); err != nil || !added {
		t.Fatal(err)
	}
	if err := q.Consume(&consumer{credit: -1}, func() { t.Fatal("added a refused consumer") }); err == nil {
		t.Fatal("a second consumer beside an exclusive one")
	}
	q.Cancel(x)
	if !ev.abandoned {
		t.Fatal("the last consumer of an auto-delete queue left and nothing happened")
	}
}

func TestLimitsAndDeadLetters(t *testing.T) {
	q, ev := newQueue(t, protocol.Table{"x-max-length": int32(2)}, nil)
	for i := 0; i < 4; i++ {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, false))
	}
	if st := q.Stats(); st.Ready != 2 || len(ev.dead) != 2 || ev.dead[0].Reason != MaxLen || string(ev.dead[0].Msg.Body) != "0" {
		t.Fatalf("drop-head: %+v %+v", st, ev.dead)
	}

	q, ev = newQueue(t, protocol.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}, nil)
	if ok, rejected, _ := q.Enqueue(msg(t, "a", 0, false)); !ok || rejected {
		t.Fatal("first refused")
	}
	if ok, rejected, _ := q.Enqueue(msg(t, "b", 0, false)); ok || !rejected {
		t.Fatal("second taken")
	}
	if len(ev.dead) != 0 {
		t.Fatal("reject-publish dead-lettered")
	}

	q, ev = newQueue(t, protocol.Table{"x-delivery-limit": int32(1)}, nil)
	q.Enqueue(msg(t, "x", 0, false))
	for i := 0; i < 2; i++ {
		d, _, _ := q.Get(false)
		q.Requeue([]Entry{d.Entry})
	}
	if len(ev.dead) != 1 || ev.dead[0].Reason != DeliveryLimit {
		t.Fatalf("delivery limit: %+v", ev.dead)
	}
}

func TestTTLExpiresAtTheHead(t *testing.T) {
	q, ev := newQueue(t, protocol.Table{"x-message-ttl": int32(1000)}, nil)
	now := int64(1_000_000)
	q.now = func() int64 { return now }
	q.Enqueue(msg(t, "old", 0, false))
	now += 500
	q.Enqueue(msg(t, "new", 0, false))
	now += 600 // "old" is past its TTL, "new" is not
	d, _, ok := q.Get(true)
	if !ok || string(d.Entry.Msg.Body) != "new" {
		t.Fatalf("got %v", d.Entry.Msg)
	}
	if len(ev.dead) != 1 || ev.dead[0].Reason != Expired {
		t.Fatalf("dead %+v", ev.dead)
	}
}

// memStore is a recovered store in memory, closed when the test ends.
func memStore(t *testing.T) *storage.Store {
	t.Helper()
	st, err := storage.Open("store", storage.Options{FS: vfs.NewMem(), Sync: storage.SyncNever, CommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Recover(nil); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPagingKeepsOrderAndMemoryBound(t *testing.T) {
	st := memStore(t)
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = st
		c.Durable = true
		c.Memory = MemoryLimit{Messages: 10}
	})
	const n = 250
	for i := 0; i < n; i++ {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, i%3 == 0))
	}
	q.mu.Lock()
	inMemory := q.mem.msgs
	q.mu.Unlock()
	if inMemory > 10 {
		t.Fatalf("%d messages in memory, bound 10", inMemory)
	}
	if st := q.Stats(); st.Ready != n {
		t.Fatalf("ready %d", st.Ready)
	}
	for i := 0; i < n; i++ {
		d, _, ok := q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != fmt.Sprint(i) {
			t.Fatalf("message %d: %v %v", i, ok, d.Entry.Msg)
		}
	}
	if _, _, ok := q.Get(true); ok {
		t.Fatal("more messages than published")
	}
}

// Reading paged messages back stays within the byte bound too: large
// messages come back a few at a time, not a whole batch of them.
func TestPageInKeepsTheByteBound(t *testing.T) {
	st := memStore(t)
	const size, bound = 1 << 10, 16 << 10
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = st
		c.Memory = MemoryLimit{Bytes: bound}
	})
	const n = 200
	for i := 0; i < n; i++ {
		q.Enqueue(msg(t, fmt.Sprintf("%0*d", size, i), 0, false))
	}
	for i := 0; i < n; i++ {
		d, _, ok := q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != fmt.Sprintf("%0*d", size, i) {
			t.Fatalf("message %d: %v", i, ok)
		}
		q.mu.Lock()
		inMemory := q.mem.bytes
		q.mu.Unlock()
		if inMemory > bound {
			t.Fatalf("after %d gets: %d bytes in memory, bound %d", i+1, inMemory, bound)
		}
	}
}

// A pooled body holds its whole buffer, a size class up to a fifth larger
// than the body, and the memory bound counts the buffer: bodies of 80 KiB
// and one byte sit in 96 KiB buffers, so a bound of four such buffers keeps
// four in memory, not the five their lengths would allow.
func TestMemoryBoundCountsPooledBuffers(t *testing.T) {
	const size = 80<<10 + 1
	pool := message.NewBodies(64 << 20)
	buf, ok := pool.Get(size)
	if !ok || cap(buf) <= size+size/8 {
		t.Fatalf("Get(%d): a buffer of %d bytes, pooled %v; the test wants one well above the body", size, cap(buf), ok)
	}
	bound := int64(4 * cap(buf))
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = memStore(t)
		c.Memory = MemoryLimit{Bytes: bound}
	})
	for i := 0; i < 8; i++ {
		m := msg(t, "", 0, false)
		if i > 0 {
			buf, _ = pool.Get(size)
		}
		m.Body = append(buf, bytes.Repeat([]byte{byte(i)}, size)...)
		m.Lend(pool)
		q.Enqueue(m)
		m.Release() // the publisher's hold: the queue holds its own
	}
	q.mu.Lock()
	inMemory, held := q.mem.msgs, q.mem.bytes
	q.mu.Unlock()
	if inMemory != 4 || held != bound {
		t.Fatalf("%d messages and %d bytes in memory, want 4 and %d", inMemory, held, bound)
	}
	for i := 0; i < 8; i++ {
		d, _, ok := q.Get(true)
		if !ok || len(d.Entry.Msg.Body) != size || d.Entry.Msg.Body[0] != byte(i) {
			t.Fatalf("message %d: %v", i, ok)
		}
		d.Entry.Msg.Release()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mem != (memory{}) {
		t.Fatalf("empty queue, %+v in memory", q.mem)
	}
}

func TestParseArgsRefusesBadValues(t *testing.T) {
	for _, args := range []protocol.Table{
		{"x-message-ttl": int32(-1)},
		{"x-message-ttl": 1.5},
		{"x-expires": int32(0)},
		{"x-max-priority": int32(256)},
		{"x-overflow": "drop-tail"},
		{"x-queue-type": "foo"},
		{"x-queue-type": int32(1)},
		{"x-dead-letter-routing-key": "k"},
		{"x-single-active-consumer": "yes"},
	} {
		if _, err := ParseArgs("q", "/", args); err == nil {
			t.Errorf("accepted %v", args)
		}
	}
	s, err := ParseArgs("q", "/", protocol.Table{"x-unknown": "kept", "x-queue-type": "classic"})
	if err != nil || s.MessageTTL != Unlimited {
		t.Fatal(err)
	}
}

// A quorum queue's x-delivery-limit is read as RabbitMQ 3.10.8 acts on
// it (checked: how many gets with a nack and requeue before the message
// is dead-lettered): a number is a limit, by its floor, none below 0;
// anything else is none. A policy's lower limit wins over no limit, as
// RabbitMQ's min over Erlang terms has it.
func TestQuorumDeliveryLimit(t *testing.T) {
	for _, tc := range []struct {
		arg  any
		want int64
	}{
		{int32(3), 3}, {int64(0), 0}, {int32(-1), 0}, {int32(-5), 0},
		{1.5, 1}, {float32(2.7), 2}, {0.5, 0}, {-0.5, 0}, {math.Inf(1), Unlimited},
		{"abc", Unlimited}, {"3", Unlimited}, {true, Unlimited},
	} {
		s, err := ParseArgs("q", "/", protocol.Table{"x-queue-type": "quorum", "x-delivery-limit": tc.arg})
		if err != nil || s.DeliveryLimit != tc.want {
			t.Errorf("x-delivery-limit %T %v: limit %d, %v; want %d", tc.arg, tc.arg, s.DeliveryLimit, err, tc.want)
		}
	}
	s, _ := ParseArgs("q", "/", protocol.Table{"x-queue-type": "quorum", "x-delivery-limit": "abc"})
	if got := s.WithPolicy(protocol.Table{"delivery-limit": float64(1)}).DeliveryLimit; got != 1 {
		t.Errorf("a string argument under a policy of 1: limit %d", got)
	}
	if _, err := ParseArgs("q", "/", protocol.Table{"x-delivery-limit": int32(-1)}); err == nil {
		t.Error("a classic queue's x-delivery-limit of -1 taken")
	}
}

// The depth rates are the change in ready and unacked messages between
// the two latest samples, per second.
func TestDepthRates(t *testing.T) {
	q, _ := newQueue(t, nil, nil)
	t0 := time.Unix(1000, 0)
	for range 4 {
		q.Enqueue(msg(t, "m", 0, false))
	}
	if st := q.SampleDepth(t0); st.ReadyRate != 0 || st.Ready != 4 {
		t.Fatalf("after one sample: %+v", st)
	}
	for range 10 {
		q.Enqueue(msg(t, "m", 0, false))
	}
	d, _, _ := q.Get(false) // one ready becomes unacked
	st := q.SampleDepth(t0.Add(2 * time.Second))
	if st.ReadyRate != 4.5 || st.UnackedRate != 0.5 {
		t.Fatalf("rates ready %v unacked %v, want 4.5 and 0.5", st.ReadyRate, st.UnackedRate)
	}
	q.Ack([]Entry{d.Entry})
}

// prioritized is a test consumer with an x-priority.
type prioritized struct {
	consumer
	priority int
}

func (p *prioritized) Priority() int { return p.priority }

// Consumer priorities: the highest with credit first, round-robin among
// equals, lower ones only while the higher are full; a cancel leaves the
// order of the rest; under single active consumer the first to come is
// the active one, whatever its priority.
func TestConsumerPriorities(t *testing.T) {
	q, _ := newQueue(t, nil, nil)
	low := &prioritized{consumer{credit: -1}, -5}
	plain := &consumer{credit: 2}
	high1 := &prioritized{consumer{credit: 2}, 7}
	high2 := &prioritized{consumer{credit: 2}, 7}
	for _, c := range []Consumer{low, plain, high1, high2} {
		if err := q.Consume(c, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, false))
	}
	got := fmt.Sprintf("high1 %v high2 %v plain %v low %v", high1.bodies(), high2.bodies(), plain.bodies(), low.bodies())
	if got != "high1 [0 2] high2 [1 3] plain [4 5] low [6 7]" {
		t.Fatal(got)
	}
	q.Cancel(high1)
	high2.mu.Lock()
	high2.credit = 1
	high2.mu.Unlock()
	plain.mu.Lock()
	plain.credit = 1
	plain.mu.Unlock()
	for i := 8; i < 11; i++ {
		q.Enqueue(msg(t, fmt.Sprint(i), 0, false))
	}
	got = fmt.Sprintf("high2 %v plain %v low %v", high2.bodies(), plain.bodies(), low.bodies())
	if got != "high2 [1 3 8] plain [4 5 9] low [6 7 10]" {
		t.Fatal(got)
	}

	sac, _ := newQueue(t, protocol.Table{"x-single-active-consumer": true}, nil)
	first := &prioritized{consumer{credit: -1}, 0}
	later := &prioritized{consumer{credit: -1}, 9}
	_ = sac.Consume(first, nil)
	_ = sac.Consume(later, nil)
	sac.Enqueue(msg(t, "x", 0, false))
	if len(first.bodies()) != 1 || len(later.bodies()) != 0 {
		t.Fatalf("single active consumer: first %v, later %v", first.bodies(), later.bodies())
	}
}

// spillCounts reads the store's count of spilled bodies and their bytes.
func spillCounts(st *storage.Store) (bodies, bytes int64) {
	s := st.Stats()
	return s["spilled_bodies"].(int64), s["spill_bytes"].(int64)
}

// A paged-out transient body large enough to be pooled goes to the queue's
// spill file, not Pebble; persistent ones stay in the store, small ones go
// inline. Order and bodies survive the trip, and the spill is empty once
// the queue has read everything back.
func TestLargeTransientBodiesSpill(t *testing.T) {
	st := memStore(t)
	const size = 100 << 10
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = st
		c.Durable = true
		c.Memory = MemoryLimit{Bytes: 3 * size}
		c.Bodies = message.NewBodies(64 << 20)
	})
	body := func(i int) string {
		if i%5 == 4 {
			return fmt.Sprint("small ", i)
		}
		return strings.Repeat(string(rune('a'+i)), size)
	}
	const n = 20
	spilled := 0
	for i := 0; i < n; i++ {
		persistent := i%3 == 0
		q.Enqueue(msg(t, body(i), 0, persistent))
		if i >= 3 && !persistent && i%5 != 4 {
			spilled++
		}
	}
	if b, _ := spillCounts(st); b != int64(spilled) {
		t.Fatalf("%d bodies spilled, want %d (the large transient ones past the bound)", b, spilled)
	}
	for i := 0; i < n; i++ {
		d, _, ok := q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != body(i) {
			t.Fatalf("message %d: %v", i, ok)
		}
	}
	if b, by := spillCounts(st); b != 0 || by != 0 {
		t.Fatalf("drained queue: %d spilled bodies, %d bytes", b, by)
	}
}

// A purge and a delete let go of every spilled body at once.
func TestPurgeAndDeleteReleaseTheSpill(t *testing.T) {
	st := memStore(t)
	const size = 100 << 10
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = st
		c.Memory = MemoryLimit{Bytes: size}
	})
	fill := func() {
		for i := 0; i < 5; i++ {
			q.Enqueue(msg(t, strings.Repeat("x", size), 0, false))
		}
		if b, _ := spillCounts(st); b != 4 {
			t.Fatalf("%d bodies spilled, want 4", b)
		}
	}
	fill()
	if n := q.Purge(); n != 5 {
		t.Fatalf("purged %d", n)
	}
	if b, by := spillCounts(st); b != 0 || by != 0 {
		t.Fatalf("after a purge: %d spilled bodies, %d bytes", b, by)
	}
	fill()
	if d, _, ok := q.Get(false); !ok || len(d.Entry.Msg.Body) != size {
		t.Fatal("get")
	}
	// With a message unacked the purge deletes entry by entry.
	if n := q.Purge(); n != 4 {
		t.Fatalf("purged %d with one unacked", n)
	}
	if b, by := spillCounts(st); b != 0 || by != 0 {
		t.Fatalf("after a purge with one unacked: %d spilled bodies, %d bytes", b, by)
	}
	fill()
	if n, err := q.Delete(false, false); n != 5 || err != nil {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if b, by := spillCounts(st); b != 0 || by != 0 {
		t.Fatalf("after a delete: %d spilled bodies, %d bytes", b, by)
	}
}

// A spill file that cannot be written (a full disk, say) leaves the body
// to the store, as before spill files, and one that cannot be read back
// loses that message alone: the queue goes on with the rest.
func TestSpillFailures(t *testing.T) {
	const size = 100 << 10
	var failWrites, failReads atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.Contains(op.Path, "spill") {
			return nil
		}
		if (op.Kind == errorfs.OpFileWriteAt && failWrites.Load()) || (op.Kind == errorfs.OpFileReadAt && failReads.Load()) {
			return errors.New("injected")
		}
		return nil
	}))
	st, err := storage.Open("store", storage.Options{FS: fs, Sync: storage.SyncNever, CommitInterval: time.Millisecond, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Recover(nil); err != nil {
		t.Fatal(err)
	}
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = st
		c.Memory = MemoryLimit{Bytes: size}
	})
	body := func(i int) string { return strings.Repeat(string(rune('a'+i)), size) }
	failWrites.Store(true)
	for i := 0; i < 3; i++ {
		q.Enqueue(msg(t, body(i), 0, false))
	}
	// The first stays in memory, the other two are placed in the spill;
	// their writes (made once the queue's lock is released) fail, and
	// their bodies stay in memory instead.
	if b, _ := spillCounts(st); b != 2 {
		t.Fatalf("%d bodies placed in the spill, want 2", b)
	}
	failWrites.Store(false)
	for i := 3; i < 6; i++ {
		q.Enqueue(msg(t, body(i), 0, false))
	}
	if b, _ := spillCounts(st); b != 5 {
		t.Fatalf("%d bodies spilled, want 5", b)
	}
	for i := 0; i < 3; i++ {
		if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != body(i) {
			t.Fatalf("message %d, whose spill write failed: %v", i, ok)
		}
	}
	failReads.Store(true)
	if d, _, ok := q.Get(true); ok {
		t.Fatalf("got message %d from spill files that cannot be read", d.Entry.Msg.Body[0]-'a')
	}
	if n := q.Stats().Ready; n != 0 {
		t.Fatalf("%d messages ready after their bodies were lost", n)
	}
	failReads.Store(false)
	q.Enqueue(msg(t, body(6), 0, false))
	if d, _, ok := q.Get(true); !ok || string(d.Entry.Msg.Body) != body(6) {
		t.Fatal("the queue did not go on after losing bodies")
	}
}

// A large body read back from the store, spilled or persistent, comes back
// in a pooled buffer, which goes back to the pool when the message leaves:
// the GC sweeps no body-sized buffer per message paged in.
func TestPagedInBodiesArePooled(t *testing.T) {
	const size = 100 << 10
	pool := message.NewBodies(64 << 20)
	q, _ := newQueue(t, nil, func(c *Config) {
		c.Store = memStore(t)
		c.Durable = true
		c.Memory = MemoryLimit{Bytes: size}
		c.Bodies = pool
	})
	body := func(i int) string { return strings.Repeat(string(rune('a'+i)), size) }
	for i := 0; i < 5; i++ {
		q.Enqueue(msg(t, body(i), 0, i%2 == 0)) // persistent and transient in turn
	}
	for i := 0; i < 5; i++ {
		d, _, ok := q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != body(i) {
			t.Fatalf("message %d: %v", i, ok)
		}
		if i == 0 {
			continue // it never left memory, and was not pooled to begin with
		}
		at := &d.Entry.Msg.Body[0]
		d.Entry.Msg.Release()    // the hold Get hands its caller
		buf, _ := pool.Get(size) // the buffer that just went back
		if &buf[:1][0] != at {
			t.Fatalf("message %d (persistent %v) was not read back into a pooled buffer", i, i%2 == 0)
		}
	}
}
