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

// TestQuorumKillLosesNoConfirmedMessage kills the broker with SIGKILL
// while publishers with confirms fill a quorum queue, restarts it on the
// same data directory, and reads the queue: every confirmed message is
// there, in each publisher's order. (An unconfirmed one may be there or
// not.)
func TestQuorumKillLosesNoConfirmedMessage(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("qq-crash", true, false, false, false, quorumArgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	confirmed := map[string]bool{}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := amqp.Dial(p.url())
			if err != nil {
				return
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil || ch.Confirm(false) != nil {
				return
			}
			confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1024))
			sent := map[uint64]string{}
			go func() {
				for c := range confirms {
					if c.Ack {
						mu.Lock()
						confirmed[sent[c.DeliveryTag]] = true
						mu.Unlock()
					}
				}
			}()
			for i := 0; ; i++ {
				body := fmt.Sprintf("%d-%d", w, i)
				mu.Lock()
				sent[ch.GetNextPublishSeqNo()] = body
				mu.Unlock()
				if err := ch.PublishWithContext(context.Background(), "", "qq-crash", false, false,
					amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent}); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second)
	p.stop(syscall.SIGKILL)
	wg.Wait()
	mu.Lock()
	want := len(confirmed)
	mu.Unlock()
	if want == 0 {
		t.Fatal("nothing was confirmed before the kill")
	}

	p = startProcess(t, dir)
	_, ch = dialProcess(t, p)
	last := map[string]int{}
	found := map[string]bool{}
	ok, err := ch.QueueDeclarePassive("qq-crash", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume("qq-crash", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range ok.Messages {
		d := receive(t, deliveries)
		var w, i int
		fmt.Sscanf(string(d.Body), "%d-%d", &w, &i)
		key := fmt.Sprint(w)
		if prev, seen := last[key]; seen && i <= prev {
			t.Fatalf("publisher %d's %d after %d", w, i, prev)
		}
		last[key] = i
		found[string(d.Body)] = true
	}
	mu.Lock()
	defer mu.Unlock()
	for body := range confirmed {
		if !found[body] {
			t.Fatalf("confirmed message %s is lost (%d confirmed, %d found)", body, len(confirmed), len(found))
		}
	}
	t.Logf("%d confirmed, %d in the queue after the restart", len(confirmed), len(found))
}
