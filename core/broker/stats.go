package broker

import (
	"time"

	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/wasmhost"
	"github.com/warrenmq/warren/storage"
)

// historyLength is how many broker-wide samples are kept for charts: an
// hour at the default 5 s interval.
const historyLength = 720

// sampleStats samples every message counter for its rate, every
// admin.stats_interval, and records the broker-wide totals in the history
// the overview's charts read. It stops with the broker.
func (b *Broker) sampleStats() {
	defer b.wg.Done()
	tick := time.NewTicker(time.Duration(b.cfg.Admin.StatsInterval))
	defer tick.Stop()
	b.sampleOnce(time.Now())
	for {
		select {
		case <-b.stop:
			return
		case now := <-tick.C:
			b.sampleOnce(now)
		}
	}
}

func (b *Broker) sampleOnce(now time.Time) {
	p := stats.Point{At: now, Values: b.retired.Values()}
	for _, name := range b.VHosts() {
		v, ok := b.VHost(name)
		if !ok {
			continue
		}
		t := v.SampleRates(now)
		p.Queues.Messages += t.Messages
		p.Queues.Ready += t.Ready
		p.Queues.Unacked += t.Unacked
		p.Values.Add(v.Counters.Values())
	}
	b.srv.SampleRates(now)
	b.sampleProcess(now)
	b.history.Record(p)
}

// Totals are the broker-wide message counters and their rates, and the
// queue totals: the overview's message_stats and queue_totals.
func (b *Broker) Totals() (stats.Values, stats.Rates, stats.QueueTotals) {
	prev, last := b.history.Latest()
	v := b.retired.Values()
	for _, name := range b.VHosts() {
		if vh, ok := b.VHost(name); ok {
			v.Add(vh.Counters.Values())
		}
	}
	return v, last.RatesSince(prev), last.Queues
}

// History returns the broker-wide samples of the last age, oldest first.
func (b *Broker) History(age time.Duration) []stats.Point {
	return b.history.Since(time.Now(), age)
}

// StoreFigures are the store's figures for /metrics; ok is false once it
// is closed.
func (b *Broker) StoreFigures() (storage.Figures, bool) { return b.store.Figures() }

// Uptime is how long the broker has run.
func (b *Broker) Uptime() time.Duration { return time.Since(b.started) }

// PluginRouteMetrics returns each enabled plugin's route figures, by name.
func (b *Broker) PluginRouteMetrics() map[string]wasmhost.RouteMetrics {
	pm := b.plugins
	pm.mu.Lock()
	defer pm.mu.Unlock()
	out := make(map[string]wasmhost.RouteMetrics, len(pm.enabled))
	for name, p := range pm.enabled {
		out[name] = p.RouteMetrics()
	}
	return out
}
