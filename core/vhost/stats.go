package vhost

import (
	"time"

	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/stats"
)

// SampleRates samples the message counters of the vhost, its exchanges
// and its queues for their rates, and returns its queue totals; the
// broker's statistics sampler calls it every interval. It takes each
// queue's lock in turn, never two at once and never under the vhost's.
func (v *VHost) SampleRates(now time.Time) stats.QueueTotals {
	v.Counters.Sample(now)
	for _, x := range v.exchangeList() {
		x.Counters.Sample(now)
	}
	var totals stats.QueueTotals
	for _, t := range v.queueList() {
		if l, ok := t.(queuetype.Local); ok {
			st := l.Sample(now)
			totals.Ready += int64(st.Ready)
			totals.Unacked += int64(st.Unacked)
		}
	}
	totals.Messages = totals.Ready + totals.Unacked
	return totals
}

// MessageMemory is what the messages its Local queues hold in memory take,
// in bytes; it takes each queue's lock in turn, never under the vhost's.
func (v *VHost) MessageMemory() int64 {
	var n int64
	for _, t := range v.queueList() {
		if l, ok := t.(queuetype.Local); ok {
			n += l.MemoryBytes()
		}
	}
	return n
}
