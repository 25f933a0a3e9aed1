package stream

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/internal/poll"
)

// counter reads a stream and checks as it goes: offsets follow one
// another from where it started, each body names its offset.
type counter struct {
	mu    sync.Mutex
	first uint64
	next  uint64
	n     int
	err   error
}

func (c *counter) Deliver(d queue.Delivery) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	off := d.Entry.Seq
	if c.n == 0 {
		c.first, c.next = off, off
	}
	if c.err == nil && (off != c.next || string(d.Entry.Msg.Body) != fmt.Sprint(off) || d.Entry.Msg.Headers()["x-stream-offset"] != int64(off)) {
		c.err = fmt.Errorf("delivery %d: offset %d (want %d), body %q", c.n, off, c.next, d.Entry.Msg.Body)
	}
	c.next = off + 1
	c.n++
	return true
}
func (c *counter) Cancelled()      {}
func (c *counter) NoAck() bool     { return false }
func (c *counter) Exclusive() bool { return false }

func (c *counter) state() (first uint64, n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first, c.n, c.err
}

// TestStreamMillion publishes a million messages (fewer under the race
// detector), then reads them from first, from an offset, from a
// timestamp and from next, concurrently, while more are appended: each
// reader gets every message from its start, in order, with its offset.
func TestStreamMillion(t *testing.T) {
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	st := openStore(t, vfs.NewMem())
	defer st.Close()
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	s, err := Open(Config{Name: "big", VHost: "/", ID: 1, Store: st, Now: clk.Now, SegmentBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	publish := func(from, to int) {
		var wg sync.WaitGroup
		wg.Add(to - from)
		for i := from; i < to; i++ {
			m, err := message.New("", "big", 0, nil, []byte(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			s.Append(m, func(err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	start := time.Now()
	publish(0, n/2+1)
	clk.add(time.Hour) // the second half is appended an hour later
	publish(n/2+1, n)
	t.Logf("%d messages appended in %v", n, time.Since(start))

	readers := map[string]*counter{}
	wants := map[string]struct {
		offset Offset
		first  uint64
	}{
		"first":     {Offset{Kind: First}, 0},
		"offset":    {Offset{Kind: At, N: uint64(n / 4)}, uint64(n / 4)},
		"timestamp": {Offset{Kind: Time, Time: clk.Now().Add(-30 * time.Minute)}, uint64(n/2 + 1)},
		"next":      {Offset{Kind: Next}, uint64(n)},
	}
	start = time.Now()
	for name, w := range wants {
		c := &counter{}
		readers[name] = c
		if err := s.Consume(c, w.offset, nil); err != nil {
			t.Fatal(err)
		}
	}
	const more = 1000
	publish(n, n+more)
	for name, c := range readers {
		want := n + more - int(wants[name].first)
		var first uint64
		var got int
		if !poll.Within(2*time.Minute, func() bool {
			var err error
			if first, got, err = c.state(); err != nil {
				t.Fatalf("reader %s: %v", name, err)
			}
			return got == want
		}) {
			t.Fatalf("reader %s: %d of %d", name, got, want)
		}
		if first != wants[name].first {
			t.Fatalf("reader %s started at %d, want %d", name, first, wants[name].first)
		}
	}
	t.Logf("four readers read %d messages in %v", 4*(n+more)-n/4-n/2-1-n, time.Since(start))
}
