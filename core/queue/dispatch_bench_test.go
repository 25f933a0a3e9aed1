package queue

import (
	"fmt"
	"testing"

	"github.com/warrenmq/warren/core/message"
)

// counter is a no-ack consumer that takes everything, or nothing when
// full, and only counts.
type counter struct {
	n        int
	full     bool
	priority int
}

func (c *counter) Deliver(Delivery) bool {
	if c.full {
		return false
	}
	c.n++
	return true
}
func (c *counter) Cancelled()      {}
func (c *counter) NoAck() bool     { return true }
func (c *counter) Exclusive() bool { return false }
func (c *counter) Priority() int   { return c.priority }

// BenchmarkDispatchPriorities is the cost of handing one message to one
// of 10 consumers: all of one priority (round-robin, as without
// x-priority), of 10 different priorities with the highest taking
// everything, and the same with the 5 highest blocked (each message is
// offered to 5 full consumers first).
//
//	go test ./core/queue -run - -bench DispatchPriorities -benchmem
func BenchmarkDispatchPriorities(b *testing.B) {
	m, err := message.New("", "q", 0, nil, []byte("0123456789abcdef"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		priorities bool
		blocked    int
	}{{"same-priority", false, 0}, {"10-priorities", true, 0}, {"10-priorities-5-blocked", true, 5}} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := ParseArgs("q", "/", nil)
			q := New(Config{Name: "q", VHost: "/", Settings: s, Events: &events{}})
			for i := range 10 {
				c := &counter{}
				if tc.priorities {
					c.priority = 10 - i
					c.full = i < tc.blocked
				}
				if err := q.Consume(c, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				q.Enqueue(m)
			}
			b.StopTimer()
			if st := q.Stats(); st.Ready != 0 {
				b.Fatal(fmt.Sprint(st.Ready, " left undelivered"))
			}
		})
	}
}
