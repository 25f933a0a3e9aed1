package main

import (
	"testing"
	"time"
)

// The pacer sends what is due, a few at a time above 1/minTick a second,
// and catches up after a pause by at most maxBurst's worth.
func TestPacer(t *testing.T) {
	start := time.Unix(0, 0)
	for _, tc := range []struct {
		rate     int64
		interval time.Duration
		perTick  int
	}{
		{rate: 1000, interval: time.Millisecond, perTick: 1},
		{rate: 20000, interval: minTick, perTick: 5},
		{rate: 100000, interval: minTick, perTick: 25},
	} {
		p := pacer{rate: tc.rate, start: start}
		if got := p.interval(); got != tc.interval {
			t.Errorf("rate %v: interval %v, want %v", tc.rate, got, tc.interval)
		}
		total := 0
		now := start
		for tick := 1; tick <= 400; tick++ {
			now = start.Add(time.Duration(tick) * p.interval())
			n := 0
			for p.take(now) {
				n++
			}
			if n != tc.perTick {
				t.Fatalf("rate %v: tick %d sent %d, want %d", tc.rate, tick, n, tc.perTick)
			}
			total += n
		}
		if want := int(tc.rate * int64(now.Sub(start)) / int64(time.Second)); total != want {
			t.Errorf("rate %v: %d sent over %v, want %d", tc.rate, total, now.Sub(start), want)
		}
		// A one-second pause: at most maxBurst's worth (and one) go at once.
		now = now.Add(time.Second)
		n := 0
		for p.take(now) {
			n++
		}
		if limit := int(tc.rate*int64(maxBurst)/int64(time.Second)) + 1; n > limit {
			t.Errorf("rate %v: %d sent after a pause, more than %d", tc.rate, n, limit)
		}
	}
}
