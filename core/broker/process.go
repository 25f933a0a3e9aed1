package broker

import (
	"os"
	"runtime/metrics"
	"time"

	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/internal/procstat"
)

// This node's process counters that RabbitMQ's /api/nodes entry has too,
// each with its rate between the two latest statistics samples (the
// entry's "<name>_details").

// The process counters, indexes into ProcessCounters.
const (
	ConnectionsCreated = iota
	ConnectionsClosed
	ChannelsCreated
	ChannelsClosed
	GCNum            // garbage collections
	GCBytesReclaimed // bytes the collector freed, in all
	ContextSwitches
	IOReadCount // read calls
	IOReadBytes // bytes that came from the disk
	IOWriteCount
	IOWriteBytes
	numProcessCounters
)

// ProcessCounters are the counters, since the process started.
type ProcessCounters [numProcessCounters]uint64

// ProcessRates are the counters' rates per second.
type ProcessRates [numProcessCounters]float64

// gcSamples are the runtime's cumulative figures GCNum and
// GCBytesReclaimed read (runtime/metrics: no stop of the world).
var gcSamples = [...]string{"/gc/cycles/total:gc-cycles", "/gc/heap/frees:bytes"}

// ProcessCounters reads the counters now. One that cannot be read (no
// /proc) is 0.
func (b *Broker) ProcessCounters() ProcessCounters {
	var c ProcessCounters
	churn := b.srv.Churn()
	c[ConnectionsCreated], c[ConnectionsClosed] = churn.ConnectionsOpened, churn.ConnectionsClosed
	c[ChannelsCreated], c[ChannelsClosed] = churn.ChannelsOpened, churn.ChannelsClosed
	samples := make([]metrics.Sample, len(gcSamples))
	for i, name := range gcSamples {
		samples[i].Name = name
	}
	metrics.Read(samples)
	for i, idx := range [...]int{GCNum, GCBytesReclaimed} {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			c[idx] = samples[i].Value.Uint64()
		}
	}
	pid := os.Getpid()
	if n, err := procstat.ContextSwitches(pid); err == nil {
		c[ContextSwitches] = n
	}
	if io, err := procstat.ProcessIO(pid); err == nil {
		c[IOReadCount], c[IOReadBytes], c[IOWriteCount], c[IOWriteBytes] = io.ReadCalls, io.ReadBytes, io.WriteCalls, io.WriteBytes
	}
	return c
}

// sampleProcess records the counters for their rates; the statistics
// sampler's one goroutine calls it, and readers load the pair it stores.
func (b *Broker) sampleProcess(now time.Time) {
	p := stats.Pair[ProcessCounters]{}
	if old := b.processSamples.Load(); old != nil {
		p = *old
	}
	p.Push(b.ProcessCounters(), now)
	b.processSamples.Store(&p)
}

// ProcessRates are the counters' rates between the two latest samples;
// zeros until there are two.
func (b *Broker) ProcessRates() ProcessRates {
	var r ProcessRates
	p := b.processSamples.Load()
	if p == nil {
		return r
	}
	if dt := p.Seconds(); dt > 0 {
		for i := range r {
			if p.Last[i] >= p.Prev[i] {
				r[i] = float64(p.Last[i]-p.Prev[i]) / dt
			}
		}
	}
	return r
}
