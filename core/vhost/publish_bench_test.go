package vhost_test

import (
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/vhost"
)

// BenchmarkPublishOneQueue is the vhost's share of a transient publish:
// a 16-byte message routed by the default exchange into one classic
// queue with no consumer (purged every 1,024 messages).
func BenchmarkPublishOneQueue(b *testing.B) {
	v := newTestVHost(b, false)
	q := mustQueue(b, v, "q", nil)
	x, err := v.Exchange("")
	if err != nil {
		b.Fatal(err)
	}
	var r vhost.RouteBuffers
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, _ := message.New("", "q", 0, nil, []byte("0123456789abcdef"))
		if _, err := v.Publish(x, m, &r); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 1023 {
			q.Purge()
		}
	}
}
