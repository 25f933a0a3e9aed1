package quorum

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/storage"
)

// A queue over a real Raft group of one, on the store: past a snapshot
// and a restart of the store, the queue holds what it held, in order,
// with what consumers had unsettled given back.
func TestQueueOnAGroupOfOne(t *testing.T) {
	dir := t.TempDir()
	open := func() (*storage.Store, *cluster.Groups, *Queue) {
		st, err := storage.Open(filepath.Join(dir, "data"), storage.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		h := cluster.NewGroups(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
		log, err := st.RaftLog(7)
		if err != nil {
			t.Fatal(err)
		}
		q := NewQueue(QueueConfig{Name: "q", VHost: "/", Machine: DefaultConfig(), Node: h.Self()})
		g, err := h.Start(cluster.GroupConfig{ID: 7, Members: []uint64{h.Self()}, Log: log, Machine: q})
		if err != nil {
			t.Fatal(err)
		}
		q.SetLog(g)
		<-g.Recovered()
		return st, h, q
	}
	st, h, q := open()
	// 3,000 taken by a no-ack consumer and gone, 2,000 more kept: past
	// the first snapshot (4,096 entries), which compacts the log up to
	// the oldest message kept, whose body stays in the log.
	const gone, n = 3000, 2000
	for i := range gone {
		if err := publish(t, q, fmt.Sprint("gone-", i)); err != nil {
			t.Fatal(err)
		}
	}
	drain := &sink{room: gone, noAck: true}
	if err := q.Consume(drain, nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the rest delivered", func() bool { return len(drain.deliveries()) == gone })
	q.Cancel(drain)
	for i := range n {
		if err := publish(t, q, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Ten taken with basic.get and acked, two taken and left unsettled.
	for i := range 12 {
		d, _, ok := q.Get(false)
		if !ok || string(d.Entry.Msg.Body) != fmt.Sprint(i) {
			t.Fatalf("get %d: %v %q", i, ok, d.Entry.Msg.Body)
		}
		if i < 10 {
			if err := q.append(encode(settleAny{how: Ack, ids: []uint64{d.Entry.Seq}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ready, unacked := q.Counts(); ready != n-12 || unacked != 2 {
		t.Fatalf("counts %d ready, %d unacked", ready, unacked)
	}
	s := q.log.Load().Log.(*cluster.Group).Status()
	if s.LogEntries >= gone {
		t.Fatalf("no snapshot compacted the log: %d entries", s.LogEntries)
	}
	if s.LogEntries < n {
		t.Fatalf("the log was compacted past messages the queue holds: %d entries", s.LogEntries)
	}
	h.Stop()
	st.Close()

	st, h, q = open()
	defer st.Close()
	defer h.Stop()
	if ready, unacked := q.Counts(); ready != n-12 || unacked != 2 {
		t.Fatalf("after a restart: %d ready, %d unacked", ready, unacked)
	}
	// The gets' holders went with the old run: the new leader gives back
	// what they held, to the back of the queue, redelivered.
	var ready, unacked int
	if !poll.Within(10*time.Second, func() bool {
		ready, unacked = q.Counts()
		return ready == n-10 && unacked == 0
	}) {
		t.Fatalf("the old run's gets were not given back: %d ready, %d unacked", ready, unacked)
	}
	for i := 12; i < n+2; i++ {
		want := i
		if i >= n {
			want = i - n + 10 // the two given back, at the back
		}
		d, _, ok := q.Get(true)
		if !ok || string(d.Entry.Msg.Body) != fmt.Sprint(want) {
			t.Fatalf("after a restart, get %d: %v %q", want, ok, d.Entry.Msg.Body)
		}
		if d.Redelivered != (i >= n) {
			t.Fatalf("message %d: redelivered %v", want, d.Redelivered)
		}
	}
	if _, _, ok := q.Get(true); ok {
		t.Fatal("more messages than were published")
	}
}
