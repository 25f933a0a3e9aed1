package quorum

import (
	"testing"

	"github.com/warrenmq/warren/core/message"
)

// BenchmarkSnapshot8KiB takes a snapshot of a queue holding 10,000
// messages of 8 KiB: what a group's loop spends on it, and what it
// writes (bytes/op is the snapshot's size).
func BenchmarkSnapshot8KiB(b *testing.B) {
	q, _ := newTestQueue(&testing.T{}, DefaultConfig(), nil)
	body := make([]byte, 8<<10)
	for range 10000 {
		m, err := message.New("", "q", 0, nil, body)
		if err != nil {
			b.Fatal(err)
		}
		q.Enqueue(m, func(error) {})
	}
	b.ResetTimer()
	var size int
	for range b.N {
		snap, err := q.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		size = len(snap)
	}
	b.ReportMetric(float64(size), "snapshot-bytes")
}
