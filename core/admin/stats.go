package admin

import (
	"strconv"
	"time"

	"github.com/warrenmq/warren/core/stats"
)

// Message statistics are rendered as RabbitMQ's message_stats object: for
// each counter with a count, the count under its key (stats.Kind's name,
// RabbitMQ's where RabbitMQ has the figure) and "<key>_details":
// {"rate": per second}, plus deliver_get, the sum of every delivery and
// get. RabbitMQ shows only the counters an object has ever had an event
// of (a queue nobody published to has no message_stats at all); Warren
// shows the non-zero ones, and leaves message_stats out of an object that
// has none (the overview and vhosts always show the object, as RabbitMQ
// does). messageStats is the one place that shape is made.

// details is a "<key>_details" object. Samples, AvgRate and Avg are there
// only when the request asked for history (RabbitMQ's msg_rates_age and
// lengths_age parameters), as RabbitMQ does.
type details struct {
	Rate    float64  `json:"rate"`
	Samples []sample `json:"samples,omitempty"`
	AvgRate *float64 `json:"avg_rate,omitempty"`
	Avg     *float64 `json:"avg,omitempty"`
}

// sample is one point of a chart: the count at a moment (ms since the epoch).
type sample struct {
	Sample    float64 `json:"sample"`
	Timestamp int64   `json:"timestamp"`
}

// messageStats renders counters and rates; nil when every counter is zero.
func messageStats(v stats.Values, r stats.Rates) map[string]any {
	var out map[string]any
	put := func(key string, n uint64, rate float64) {
		if n == 0 {
			return
		}
		if out == nil {
			out = make(map[string]any, 8)
		}
		out[key] = n
		out[key+"_details"] = details{Rate: rate}
	}
	for k := stats.Kind(0); k < stats.NumKinds; k++ {
		put(k.String(), v[k], r[k])
	}
	put("deliver_get", v.DeliverGet(), r.DeliverGet())
	return out
}

// orEmpty gives a nil map as {} for objects RabbitMQ always shows.
func orEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

// history is what a request asks of the past: RabbitMQ's age and incr
// parameters, in seconds, for message rates and for queue lengths.
type history struct {
	msgAge, msgIncr, lenAge, lenIncr time.Duration
}

// historyOf reads msg_rates_age/msg_rates_incr and lengths_age/lengths_incr.
// An age without an incr (or the reverse) asks for nothing, as RabbitMQ
// ignores it; a value that is not a positive integer is a 400 naming it.
func historyOf(c *call) (history, error) {
	var h history
	for _, p := range []struct {
		age, incr   string
		dAge, dIncr *time.Duration
	}{
		{"msg_rates_age", "msg_rates_incr", &h.msgAge, &h.msgIncr},
		{"lengths_age", "lengths_incr", &h.lenAge, &h.lenIncr},
	} {
		ageS, incrS := c.query(p.age), c.query(p.incr)
		if ageS == "" || incrS == "" {
			continue
		}
		age, err1 := strconv.Atoi(ageS)
		incr, err2 := strconv.Atoi(incrS)
		if err1 != nil || age <= 0 {
			return h, badRequest("%s must be a positive integer (seconds), not %q", p.age, ageS)
		}
		if err2 != nil || incr <= 0 {
			return h, badRequest("%s must be a positive integer (seconds), not %q", p.incr, incrS)
		}
		if age/incr > 1000 {
			return h, badRequest("%s/%s asks for more than 1000 samples", p.age, p.incr)
		}
		*p.dAge, *p.dIncr = time.Duration(age)*time.Second, time.Duration(incr)*time.Second
	}
	return h, nil
}

// sampleTimes are the moments a chart of age in steps of incr shows,
// newest first, on multiples of incr as RabbitMQ aligns them.
func sampleTimes(now time.Time, age, incr time.Duration) []time.Time {
	last := now.Truncate(incr)
	n := int(age/incr) + 1
	out := make([]time.Time, n)
	for i := range out {
		out[i] = last.Add(-time.Duration(i) * incr)
	}
	return out
}

// at returns the latest point at or before t, or the oldest point when t
// is before all of them; ok is false when there are no points.
func at(points []stats.Point, t time.Time) (stats.Point, bool) {
	if len(points) == 0 {
		return stats.Point{}, false
	}
	best := points[0]
	for _, p := range points {
		if p.At.After(t) {
			break
		}
		best = p
	}
	return best, true
}

// withSamples turns a series of counts (newest first, one per moment of
// times) into a details object with RabbitMQ's avg_rate (the change over
// the whole age, per second) and avg (the mean count).
func withSamples(rate float64, counts []float64, times []time.Time) details {
	d := details{Rate: rate, Samples: make([]sample, len(counts))}
	var sum float64
	for i, n := range counts {
		d.Samples[i] = sample{Sample: n, Timestamp: times[i].UnixMilli()}
		sum += n
	}
	avg, avgRate := 0.0, 0.0
	if len(counts) > 0 {
		avg = sum / float64(len(counts))
	}
	if len(counts) > 1 {
		span := times[0].Sub(times[len(times)-1]).Seconds()
		if span > 0 {
			avgRate = (counts[0] - counts[len(counts)-1]) / span
		}
	}
	d.Avg, d.AvgRate = &avg, &avgRate
	return d
}

// messageStatsHistory is messageStats with samples from the broker's
// history: every counter is shown, zero or not, as RabbitMQ does when
// samples are asked for.
func messageStatsHistory(v stats.Values, r stats.Rates, points []stats.Point, now time.Time, age, incr time.Duration) map[string]any {
	times := sampleTimes(now, age, incr)
	inForce := pointsAt(points, times)
	out := make(map[string]any, 2*(stats.NumKinds+1))
	series := func(key string, n uint64, rate float64, of func(stats.Values) uint64) {
		counts := make([]float64, len(times))
		for i, p := range inForce {
			counts[i] = float64(of(p.Values))
		}
		out[key] = n
		out[key+"_details"] = withSamples(rate, counts, times)
	}
	for k := stats.Kind(0); k < stats.NumKinds; k++ {
		series(k.String(), v[k], r[k], func(x stats.Values) uint64 { return x[k] })
	}
	series("deliver_get", v.DeliverGet(), r.DeliverGet(), stats.Values.DeliverGet)
	return out
}

// pointsAt picks the point in force at each moment; a moment before the
// history began takes the oldest point, and no history at all gives zero
// points.
func pointsAt(points []stats.Point, times []time.Time) []stats.Point {
	out := make([]stats.Point, len(times))
	for i, t := range times {
		out[i], _ = at(points, t)
	}
	return out
}

// queueTotals is RabbitMQ's queue_totals (and a vhost's or queue's
// messages, messages_ready and messages_unacknowledged with details):
// counts with the rate at which they change.
func queueTotals(now, prev stats.QueueTotals, dt time.Duration) map[string]any {
	rate := func(a, b int64) float64 {
		if dt <= 0 {
			return 0
		}
		return float64(a-b) / dt.Seconds()
	}
	return map[string]any{
		"messages":                        now.Messages,
		"messages_details":                details{Rate: rate(now.Messages, prev.Messages)},
		"messages_ready":                  now.Ready,
		"messages_ready_details":          details{Rate: rate(now.Ready, prev.Ready)},
		"messages_unacknowledged":         now.Unacked,
		"messages_unacknowledged_details": details{Rate: rate(now.Unacked, prev.Unacked)},
	}
}

// queueTotalsHistory is queueTotals with samples.
func queueTotalsHistory(cur stats.QueueTotals, rates map[string]any, points []stats.Point, now time.Time, age, incr time.Duration) map[string]any {
	times := sampleTimes(now, age, incr)
	inForce := pointsAt(points, times)
	out := map[string]any{}
	for _, f := range []struct {
		key string
		n   int64
		of  func(stats.QueueTotals) int64
	}{
		{"messages", cur.Messages, func(q stats.QueueTotals) int64 { return q.Messages }},
		{"messages_ready", cur.Ready, func(q stats.QueueTotals) int64 { return q.Ready }},
		{"messages_unacknowledged", cur.Unacked, func(q stats.QueueTotals) int64 { return q.Unacked }},
	} {
		counts := make([]float64, len(times))
		for i, p := range inForce {
			counts[i] = float64(f.of(p.Queues))
		}
		rate := 0.0
		if d, ok := rates[f.key+"_details"].(details); ok {
			rate = d.Rate
		}
		out[f.key] = f.n
		out[f.key+"_details"] = withSamples(rate, counts, times)
	}
	return out
}
