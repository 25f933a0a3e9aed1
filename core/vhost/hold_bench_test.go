package vhost_test

import (
	"encoding/binary"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// BenchmarkHeldMillions holds N persistent messages (16-byte bodies) in a
// durable exchange of a vhost with a store on disk, due one every 100 us
// (10,000 a second) from a little after the fill, and reports the
// process's resident memory while they are held and the lateness of the
// releases (delivery time less due time) over the first
// WARREN_HOLD_MEASURE seconds (default 15) of messages due after the fill
// ended. N is WARREN_HOLD_N (default 1,000,000); run it once:
//
//	go test ./core/vhost -run '^$' -bench HeldMillions -benchtime 1x
//	WARREN_HOLD_N=10000000 go test ./core/vhost -run '^$' -bench HeldMillions -benchtime 1x -timeout 30m
func BenchmarkHeldMillions(b *testing.B) {
	n := envInt("WARREN_HOLD_N", 1_000_000)
	measure := time.Duration(envInt("WARREN_HOLD_MEASURE", 15)) * time.Second
	st, err := storage.Open(b.TempDir(), storage.Options{Logger: zerolog.Nop(), Sync: storage.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	// Closed after the vhost: cleanups run last registered first.
	b.Cleanup(func() { st.Close() })
	if _, err := st.Recover(nil); err != nil {
		b.Fatal(err)
	}
	types := exchange.NewRegistry()
	if err := types.Register(holdType{}); err != nil {
		b.Fatal(err)
	}
	v := newVHost(b, vhost.Config{Types: types, Store: st})
	x, err := v.DeclareExchange(exchange.Definition{Name: "later", Type: "x-test-hold", Durable: true, Args: protocol.Table{"via": "direct"}}, false)
	if err != nil {
		b.Fatal(err)
	}
	l, _, err := v.DeclareQueue(topology.QueueDef{Name: "q"}, false)
	if err != nil {
		b.Fatal(err)
	}
	if err := v.Bind("later", exchange.Destination{Kind: exchange.ToQueue, Name: "q"}, "k", nil, nil); err != nil {
		b.Fatal(err)
	}
	c := &latenessConsumer{}
	q, _ := classicqueue.Of(l)
	if err := q.Consume(c, nil); err != nil {
		b.Fatal(err)
	}
	const gap = 100 * time.Microsecond
	start := time.Now()
	t0 := start.Add(time.Duration(n/100_000)*time.Second + 3*time.Second)
	props, _ := (&protocol.Properties{Flags: protocol.FlagDeliveryMode, DeliveryMode: 2}).Append(nil)
	var wg sync.WaitGroup
	const workers = 2
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, 16)
			for i := w; i < n; i += workers {
				due := t0.Add(time.Duration(i) * gap)
				binary.BigEndian.PutUint64(body, uint64(due.UnixNano()))
				m, _ := message.New("later", "k", protocol.FlagDeliveryMode, props, slices.Clone(body))
				v.Held().Add(x.Name, x.Durable, m, "direct", time.Until(due))
			}
		}()
	}
	wg.Wait()
	fillEnd := time.Now()
	runtime.GC()
	rssHeld := rssMB()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("held %d in %v (%.0f/s); resident %.0f MB, Go heap %.0f MB, %d in memory; due from %v after the fill",
		n, fillEnd.Sub(start).Round(time.Millisecond), float64(n)/fillEnd.Sub(start).Seconds(), rssHeld,
		float64(ms.HeapInuse)/1e6, v.Held().InMemory(), t0.Sub(fillEnd).Round(time.Millisecond))

	from := fillEnd.Add(time.Second)
	if from.Before(t0) {
		from = t0
	}
	until := from.Add(measure)
	time.Sleep(time.Until(until) + 500*time.Millisecond)
	rssReleasing := rssMB()
	late := c.lateness(from, until)
	if len(late) == 0 {
		b.Fatal("nothing released in the measured window")
	}
	slices.Sort(late)
	pct := func(p float64) float64 { return late[int(p*float64(len(late)-1))].Seconds() * 1000 }
	b.ReportMetric(rssHeld, "rss_held_MB")
	b.ReportMetric(rssReleasing, "rss_releasing_MB")
	b.ReportMetric(pct(0.5), "p50_ms")
	b.ReportMetric(pct(0.99), "p99_ms")
	b.ReportMetric(late[len(late)-1].Seconds()*1000, "max_ms")
	b.ReportMetric(float64(len(late))/measure.Seconds(), "released/s")
	if early := late[0]; early < 0 {
		b.Errorf("a message came %v before its due time", -early)
	}
}

// latenessConsumer records each delivery's due time (from its body) and
// when it came.
type latenessConsumer struct {
	mu  sync.Mutex
	due []int64
	at  []int64
}

func (c *latenessConsumer) Deliver(d queue.Delivery) bool {
	now := time.Now().UnixNano()
	due := int64(binary.BigEndian.Uint64(d.Entry.Msg.Body))
	c.mu.Lock()
	c.due, c.at = append(c.due, due), append(c.at, now)
	c.mu.Unlock()
	return true
}
func (c *latenessConsumer) Cancelled()      {}
func (c *latenessConsumer) NoAck() bool     { return true }
func (c *latenessConsumer) Exclusive() bool { return false }

// lateness returns how late each message due in [from, until) came.
func (c *latenessConsumer) lateness(from, until time.Time) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for i, due := range c.due {
		if due >= from.UnixNano() && due < until.UnixNano() {
			out = append(out, time.Duration(c.at[i]-due))
		}
	}
	return out
}

func envInt(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return def
}

// rssMB is the process's resident set, from /proc (0 elsewhere).
func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
