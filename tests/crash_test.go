package tests

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestKillDuringPublishingLosesNoConfirmedMessage kills the broker with
// SIGKILL while publishers are busy with confirms, restarts it on the same
// data directory, and checks that every confirmed message is there.
// Duplicates of unconfirmed messages would be allowed; losses never are.
func TestKillDuringPublishingLosesNoConfirmedMessage(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	confirmed := map[string]bool{}
	var mu sync.Mutex // guards confirmed, across rounds: late confirms of a round land in the next
	for round := 0; round < rounds; round++ {
		p := startProcess(t, dir)
		_, ch := dialProcess(t, p)
		if _, err := ch.QueueDeclare("crash-q", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare("crash-fanout-a", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.QueueDeclare("crash-fanout-b", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.ExchangeDeclare("crash-fanout", "fanout", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"crash-fanout-a", "crash-fanout-b"} {
			if err := ch.QueueBind(q, "", "crash-fanout", false, nil); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func(w int) {
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
				exchange, key := "", "crash-q"
				if w == 2 {
					exchange, key = "crash-fanout", "" // shared message, two queues
				}
				for i := 0; ; i++ {
					body := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false,
						amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(body)})
					if err != nil {
						return
					}
					go func() {
						if ok, err := dc.WaitContext(context.Background()); err == nil && ok {
							mu.Lock()
							confirmed[body] = true
							mu.Unlock()
						}
					}()
				}
			}(w)
		}
		time.Sleep(time.Duration(200+rand.Intn(400)) * time.Millisecond)
		mu.Lock() // no confirm is recorded after the kill is decided
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		n := len(confirmed)
		mu.Unlock()
		wg.Wait()
		if n == 0 {
			t.Fatalf("round %d: no confirms before the kill", round)
		}
		t.Logf("round %d: %d messages confirmed so far", round, n)
	}

	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	found := map[string]int{}
	for _, q := range []string{"crash-q", "crash-fanout-a", "crash-fanout-b"} {
		for _, m := range getAll(t, ch, q) {
			found[q+"/"+string(m.Body)]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for body := range confirmed {
		queues := []string{"crash-q"}
		if isFanout(body) {
			queues = []string{"crash-fanout-a", "crash-fanout-b"}
		}
		for _, q := range queues {
			if found[q+"/"+body] == 0 {
				lost++
				if lost < 10 {
					t.Errorf("confirmed message %s lost from %s", body, q)
				}
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d confirmed messages lost of %d", lost, len(confirmed))
	}
	t.Logf("%d confirmed messages, all found; %d messages in all", len(confirmed), len(found))
}

func isFanout(body string) bool {
	var round, w, i int
	_, _ = fmt.Sscanf(body, "r%d-w%d-%d", &round, &w, &i)
	return w == 2
}

// TestKillRightAfterDeclareOk kills the broker the moment a durable
// declare is answered: the -ok is sent only once the change is on disk.
func TestKillRightAfterDeclareOk(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		p := startProcess(t, dir)
		_, ch := dialProcess(t, p)
		name := "declared-" + strconv.Itoa(i)
		if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		publishPersistent(t, ch, "", name, name, 1)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
	}
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	for i := 0; i < 3; i++ {
		name := "declared-" + strconv.Itoa(i)
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("queue %s lost: %v", name, err)
		}
		if q.Messages != 1 {
			t.Fatalf("queue %s holds %d messages, want the confirmed one", name, q.Messages)
		}
	}
}
