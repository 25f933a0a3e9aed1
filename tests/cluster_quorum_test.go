package tests

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Quorum queues across three Warren processes, end to end with amqp091-go.

// TestClusterQuorumFailover: publishers with confirms on two nodes and
// consumers on the same two fill and drain a quorum queue whose leader is
// on the third; that node is killed (SIGKILL) midway. The others elect a
// leader and carry on: every confirmed message is delivered, none is
// delivered again once acked, and each consumer gets each publisher's
// messages in order. With two of three nodes gone, the last one confirms nothing.
func TestClusterQuorumFailover(t *testing.T) {
	nodes := threeProcesses(t)
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	_, ch1 := n1.dial(t)
	if _, err := ch1.QueueDeclare("qq-failover", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	confirmed := map[string]bool{}
	delivered := map[string]int{}
	acked := map[string]bool{}
	last := map[string]int{} // by consumer and publisher, the last first delivery
	var failure string
	fail := func(format string, args ...any) {
		if failure == "" {
			failure = fmt.Sprintf(format, args...)
		}
	}

	for _, n := range []*clusterNode{n2, n3} {
		_, ch := n.dial(t)
		if err := ch.Qos(20, 0, false); err != nil {
			t.Fatal(err)
		}
		ds, err := ch.Consume("qq-failover", "", false, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for d := range ds {
				body := string(d.Body)
				var p string
				var i int
				fmt.Sscanf(body, "%1s-%d", &p, &i)
				mu.Lock()
				if acked[body] {
					fail("%s delivered again after it was acked", body)
				}
				if delivered[body] == 0 && !d.Redelivered {
					key := n.name + p
					if prev, seen := last[key]; seen && i <= prev {
						fail("publisher %s's %d delivered to %s after %d", p, i, n.name, prev)
					}
					last[key] = i
				}
				delivered[body]++
				acked[body] = true
				mu.Unlock()
				d.Ack(false)
			}
		}()
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range []*clusterNode{n2, n3} {
		_, ch := n.dial(t)
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 4096))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := map[uint64]string{}
			var smu sync.Mutex
			go func() {
				for c := range confirms {
					smu.Lock()
					body := sent[c.DeliveryTag]
					smu.Unlock()
					if c.Ack {
						mu.Lock()
						confirmed[body] = true
						mu.Unlock()
					}
				}
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("%s-%d", n.name[1:], i)
				smu.Lock()
				sent[ch.GetNextPublishSeqNo()] = body
				smu.Unlock()
				if err := ch.PublishWithContext(context.Background(), "", "qq-failover", false, false,
					amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}); err != nil {
					mu.Lock()
					fail("publishing through %s: %v", n.name, err)
					mu.Unlock()
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	time.Sleep(time.Second)
	n1.stop(syscall.SIGKILL)
	mu.Lock()
	before := len(confirmed)
	mu.Unlock()
	// Confirms go on once a leader is elected among n2 and n3.
	waitUntil(t, "confirms after the leader's node died", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) > before+100
	})
	close(stop)
	wg.Wait()
	waitUntil(t, "every confirmed message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for body := range confirmed {
			if delivered[body] == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(500 * time.Millisecond) // time for a wrong redelivery to show
	mu.Lock()
	if failure != "" {
		t.Fatal(failure)
	}
	t.Logf("%d confirmed (%d before the kill), %d delivered", len(confirmed), before, len(delivered))
	mu.Unlock()

	// n3 alone is a minority: a publish through it is not confirmed.
	n2.stop(syscall.SIGKILL)
	_, ch := n3.dial(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	if err := ch.PublishWithContext(context.Background(), "", "qq-failover", false, false,
		amqp.Publishing{Body: []byte("minority"), DeliveryMode: amqp.Persistent}); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-confirms:
		if c.Ack {
			t.Fatal("the minority confirmed a publish")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the minority answered nothing: a nack was due after 10 s")
	}
}
