package queue

import (
	"time"

	"github.com/warrenmq/warren/core/stats"
)

// Consumer utilisation, as RabbitMQ reports it: the share of the time
// that the queue could hand a ready message to a consumer at once. The
// queue is blocked while it holds ready messages and has consumers, none
// of which takes one (each at its prefetch, or stopped by flow control).
// dispatch notes when that changes, so the clock is read only then: a
// queue that stays blocked while acks let one delivery through at a time
// reads it no more than an idle one.
type utilisation struct {
	since   time.Time                 // when the queue became blocked; zero while it is not
	blocked time.Duration             // blocked time before since, in all
	samples stats.Pair[time.Duration] // blocked time in all at the two latest samples
	clock   func() time.Time          // nil: time.Now (a test's own otherwise)
}

func (u *utilisation) now() time.Time {
	if u.clock != nil {
		return u.clock()
	}
	return time.Now()
}

// noteBlocked notes whether the queue is blocked now; mu is held.
func (q *Queue) noteBlocked() {
	u := &q.util
	switch blocked := q.ready > 0 && len(q.consumers) > 0; {
	case blocked && u.since.IsZero():
		u.since = u.now()
	case !blocked && !u.since.IsZero():
		u.blocked += u.now().Sub(u.since)
		u.since = time.Time{}
	}
}

// blockedAt is the blocked time in all as of now; mu is held.
func (u *utilisation) blockedAt(now time.Time) time.Duration {
	if u.since.IsZero() {
		return u.blocked
	}
	return u.blocked + now.Sub(u.since)
}

// sample records the blocked time as of now, for utilisationNow; mu is
// held.
func (u *utilisation) sample(now time.Time) { u.samples.Push(u.blockedAt(now), now) }

// utilisationNow is the share of the time between the two latest samples
// that the queue was not blocked. Without consumers it is 0, as RabbitMQ
// reports it; before two samples, 1 unless the queue is blocked now. mu
// is held.
func (q *Queue) utilisationNow() float64 {
	s := &q.util.samples
	span := s.Seconds()
	switch {
	case len(q.consumers) == 0:
		return 0
	case span <= 0 && q.util.since.IsZero():
		return 1
	case span <= 0:
		return 0
	}
	return max(0, min(1, 1-(s.Last-s.Prev).Seconds()/span))
}
