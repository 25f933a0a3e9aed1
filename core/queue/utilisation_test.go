package queue

import (
	"testing"
	"time"
)

// Utilisation is the share of a sample interval the consumers could take
// a message at once: blocked (ready messages that no consumer takes) for
// 3 s of 10 is 0.7; 0 without consumers, as RabbitMQ has it; before two
// samples, 1 while not blocked.
func TestConsumerUtilisation(t *testing.T) {
	q, _ := newQueue(t, nil, nil)
	now := time.Unix(1000, 0)
	q.util.clock = func() time.Time { return now }
	c := &consumer{credit: 0} // takes nothing: the queue is blocked once it holds a message
	if err := q.Consume(c, nil); err != nil {
		t.Fatal(err)
	}
	if st := q.SampleDepth(now); !st.HasUtilisation || st.ConsumerUtilisation != 1 {
		t.Fatalf("utilisation from one sample, not blocked: %+v", st)
	}
	now = now.Add(5 * time.Second) // idle with a consumer: not blocked
	q.Enqueue(msg(t, "a", 0, false))
	now = now.Add(3 * time.Second) // blocked
	c.mu.Lock()
	c.credit = -1
	c.mu.Unlock()
	q.Kick() // the consumer takes it: not blocked
	now = now.Add(2 * time.Second)
	st := q.SampleDepth(now)
	if !st.HasUtilisation || st.ConsumerUtilisation < 0.69 || st.ConsumerUtilisation > 0.71 {
		t.Fatalf("utilisation after 3 s blocked of 10: %+v", st)
	}
	// Blocked for the whole next interval.
	c.mu.Lock()
	c.credit = 0
	c.mu.Unlock()
	q.Enqueue(msg(t, "b", 0, false))
	now = now.Add(10 * time.Second)
	if st := q.SampleDepth(now); !st.HasUtilisation || st.ConsumerUtilisation != 0 {
		t.Fatalf("utilisation blocked throughout: %+v", st)
	}
	q.Cancel(c)
	if st := q.Stats(); st.ConsumerUtilisation != 0 {
		t.Fatalf("utilisation without consumers: %+v", st)
	}
}
