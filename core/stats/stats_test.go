package stats

import (
	"sync"
	"testing"
	"time"
)

func TestMeterCountsAndRates(t *testing.T) {
	var m Meter
	t0 := time.Unix(1000, 0)
	m.Sample(t0) // nothing counted: no samples kept
	if m.samples != nil {
		t.Fatal("an idle meter allocated samples")
	}
	m.Add(Publish, 10)
	m.Sample(t0.Add(5 * time.Second))
	if r := m.Rates(); r[Publish] != 0 {
		t.Fatalf("rate after one sample = %v, want 0", r[Publish])
	}
	m.Add(Publish, 50)
	m.Inc(Ack)
	m.Sample(t0.Add(10 * time.Second))
	r := m.Rates()
	if r[Publish] != 10 || r[Ack] != 0.2 {
		t.Fatalf("rates = publish %v ack %v, want 10 and 0.2", r[Publish], r[Ack])
	}
	if v := m.Values(); v[Publish] != 60 || v[Ack] != 1 {
		t.Fatalf("values = %v", v)
	}
}

func TestMeterConcurrentAdds(t *testing.T) {
	var m Meter
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.Inc(Deliver)
				m.Sample(time.Now())
				_ = m.Rates()
			}
		}()
	}
	wg.Wait()
	if got := m.Values()[Deliver]; got != 4000 {
		t.Fatalf("deliver = %d, want 4000", got)
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := Kind(0); k < NumKinds; k++ {
		n := k.String()
		if n == "" || seen[n] {
			t.Fatalf("kind %d has name %q (empty or repeated)", k, n)
		}
		seen[n] = true
	}
	for _, reason := range []string{"expired", "rejected", "maxlen", "delivery_limit"} {
		if _, ok := DeadLetterKind(reason); !ok {
			t.Fatalf("no counter for reason %q", reason)
		}
	}
	if _, ok := DeadLetterKind("other"); ok {
		t.Fatal("a counter for an unknown reason")
	}
}

func TestHistoryRing(t *testing.T) {
	h := NewHistory(3)
	t0 := time.Unix(0, 0)
	if prev, last := h.Latest(); !prev.At.IsZero() || !last.At.IsZero() {
		t.Fatal("empty history has points")
	}
	for i := range 5 {
		var v Values
		v[Publish] = uint64(i * 10)
		h.Record(Point{At: t0.Add(time.Duration(i) * 5 * time.Second), Values: v})
	}
	pts := h.Since(t0.Add(20*time.Second), time.Hour)
	if len(pts) != 3 || pts[0].Values[Publish] != 20 || pts[2].Values[Publish] != 40 {
		t.Fatalf("points = %+v, want the last three oldest first", pts)
	}
	if pts := h.Since(t0.Add(20*time.Second), 5*time.Second); len(pts) != 2 {
		t.Fatalf("%d points in the last 5 s, want 2", len(pts))
	}
	prev, last := h.Latest()
	if r := last.RatesSince(prev); r[Publish] != 2 {
		t.Fatalf("rate = %v, want 2", r[Publish])
	}
}

// The cost the message path pays per counted event: one atomic add,
// uncontended (a channel's counters) or shared by every core (a vhost's).
func BenchmarkMeterInc(b *testing.B) {
	var m Meter
	for b.Loop() {
		m.Inc(Publish)
	}
}

func BenchmarkMeterIncShared(b *testing.B) {
	var m Meter
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Inc(Publish)
		}
	})
}
