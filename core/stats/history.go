package stats

import (
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
)

// QueueTotals are the message counts of a set of queues at one moment,
// RabbitMQ's queue_totals.
type QueueTotals struct {
	Messages int64 `json:"messages"`
	Ready    int64 `json:"messages_ready"`
	Unacked  int64 `json:"messages_unacknowledged"`
}

// Point is one sample of the whole broker (or a vhost): its counters and
// its queue totals.
type Point struct {
	At     time.Time
	Values Values
	Queues QueueTotals
}

// History is a fixed ring of the latest Points, for charts: how the
// management API answers RabbitMQ's msg_rates_age/lengths_age queries.
type History struct {
	mu     lockorder.Mutex[lockorder.StatsHistory]
	points []Point // a ring of cap(points) once full
	next   int     // where the next point goes, once full
}

// NewHistory keeps the latest n points.
func NewHistory(n int) *History {
	return &History{points: make([]Point, 0, n)}
}

// Record adds a point, dropping the oldest once the ring is full.
func (h *History) Record(p Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.points) < cap(h.points) {
		h.points = append(h.points, p)
		return
	}
	h.points[h.next] = p
	h.next = (h.next + 1) % len(h.points)
}

// Since returns the points no older than age before now, oldest first.
func (h *History) Since(now time.Time, age time.Duration) []Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Point, 0, len(h.points))
	for i := range h.points {
		p := h.points[(h.next+i)%len(h.points)]
		if !p.At.Before(now.Add(-age)) {
			out = append(out, p)
		}
	}
	return out
}

// Latest returns the last two points recorded (prev is zero when fewer
// than two were), for rates of the totals.
func (h *History) Latest() (prev, last Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.points)
	if n == 0 {
		return Point{}, Point{}
	}
	lastIdx := n - 1
	if n == cap(h.points) {
		lastIdx = (h.next + n - 1) % n
	}
	last = h.points[lastIdx]
	if n > 1 {
		prev = h.points[(lastIdx+n-1)%n]
	}
	return prev, last
}

// Rates are the counter rates between two points.
func (p Point) RatesSince(prev Point) Rates {
	if prev.At.IsZero() {
		return Rates{}
	}
	return rates(prev.Values, p.Values, p.At.Sub(prev.At).Seconds())
}
