package main

import (
	"context"
	"time"
)

// minTick is the shortest wait between a producer's sends. A ticker at a
// higher rate's own interval cannot keep up (Go's timers and the client's
// wake-ups cap it near 15,000 ticks a second), so above 1/minTick messages
// a second the messages due are sent a few at a time.
const minTick = 250 * time.Microsecond

// pacer spaces a producer's messages to a fixed rate: the messages due
// since start are rate times the time elapsed, and a message may go when
// fewer have been sent. A producer that falls behind (a pause) catches up
// by at most maxBurst's worth of time, not by a burst of everything owed.
type pacer struct {
	rate  int64 // messages per second
	start time.Time
	sent  int64
}

const maxBurst = 10 * time.Millisecond

// interval is how long the producer waits between checks.
func (p *pacer) interval() time.Duration {
	return max(time.Second/time.Duration(p.rate), minTick)
}

// take reports whether a message may be sent at now, and counts it.
func (p *pacer) take(now time.Time) bool {
	due := int64(now.Sub(p.start)) * p.rate / int64(time.Second)
	if burst := int64(maxBurst)*p.rate/int64(time.Second) + 1; due-p.sent > burst {
		p.sent = due - burst
	}
	if p.sent >= due {
		return false
	}
	p.sent++
	return true
}

// gate paces a producer to -rate (none: no wait).
type gate struct {
	tick *time.Ticker
	pace pacer
}

func newGate(rate int) *gate {
	g := &gate{}
	if rate > 0 {
		g.pace = pacer{rate: int64(rate), start: time.Now()}
		g.tick = time.NewTicker(g.pace.interval())
	}
	return g
}

// wait returns once the next message may go, false when ctx ended first.
func (g *gate) wait(ctx context.Context) bool {
	for g.tick != nil && !g.pace.take(time.Now()) {
		select {
		case <-g.tick.C:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (g *gate) stop() {
	if g.tick != nil {
		g.tick.Stop()
	}
}
