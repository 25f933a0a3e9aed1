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

// ackSettleTime is how long before a kill -9 the broker must have processed
// an ack for the test to require that the message stays gone. Acks reach
// the OS within the store's commit interval (5 ms); the rest is slack for a
// busy machine.
const ackSettleTime = 500 * time.Millisecond

// TestKillDuringPublishingLosesNoConfirmedMessage kills the broker with
// SIGKILL while publishers are busy with confirms and a consumer acks,
// restarts it on the same data directory, and checks that every confirmed
// message is there unless it was acked, and that no message whose ack the
// broker had processed well before the kill came back. Duplicates of
// unconfirmed messages would be allowed; losses never are.
func TestKillDuringPublishingLosesNoConfirmedMessage(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	// Guarded by mu, across rounds (late confirms of a round land in the
	// next): confirmed messages; acked ones, with when the broker had
	// processed the ack (zero: sent, not known processed); each round's
	// kill time.
	confirmed := map[string]bool{}
	acked := map[string]time.Time{}
	ackRound := map[string]int{}
	var kills []time.Time
	var mu sync.Mutex
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
		// A consumer acks crash-q's messages one by one and, every 20 acks,
		// makes a synchronous call: once it returns, the broker has
		// processed the acks before it (a channel's frames are handled in
		// order).
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := amqp.Dial(p.url())
			if err != nil {
				return
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil || ch.Qos(50, 0, false) != nil {
				return
			}
			deliveries, err := ch.Consume("crash-q", "", false, false, false, false, nil)
			if err != nil {
				return
			}
			var pending []string
			for d := range deliveries {
				body := string(d.Body)
				mu.Lock()
				acked[body], ackRound[body] = time.Time{}, round
				mu.Unlock()
				if d.Ack(false) != nil {
					return
				}
				if pending = append(pending, body); len(pending) < 20 {
					continue
				}
				if _, err := ch.QueueDeclarePassive("crash-q", true, false, false, false, nil); err != nil {
					return
				}
				now := time.Now()
				mu.Lock()
				for _, b := range pending {
					acked[b] = now
				}
				mu.Unlock()
				pending = pending[:0]
			}
		}()
		// The load runs for a random while; the kill is the event under
		// test, not a synchronization.
		time.Sleep(time.Duration(500+rand.Intn(400)) * time.Millisecond)
		mu.Lock() // no confirm or ack is recorded after the kill is decided
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		kills = append(kills, time.Now())
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
			if _, ok := acked[body]; ok && q == "crash-q" {
				continue // consumed: gone or back, both allowed here
			}
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
	back, recent := 0, 0
	for body, at := range acked {
		if found["crash-q/"+body] == 0 {
			continue
		}
		if at.IsZero() || kills[ackRound[body]].Sub(at) < ackSettleTime {
			recent++
			continue
		}
		back++
		if back < 10 {
			t.Errorf("message %s came back after a kill %v after the broker processed its ack",
				body, kills[ackRound[body]].Sub(at).Round(time.Millisecond))
		}
	}
	if back > 0 {
		t.Fatalf("%d acked messages came back", back)
	}
	t.Logf("%d confirmed messages, all found unless acked; %d acked, %d of them acked just before a kill and back; %d messages in all",
		len(confirmed), len(acked), recent, len(found))
}

// TestKillTwoSecondsAfterAcksBringsNoneBack acks every message of a durable
// queue, kills the broker with SIGKILL two seconds later, and finds none of
// them back: an ack is not undone by a crash of Warren.
func TestKillTwoSecondsAfterAcksBringsNoneBack(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("acked-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishPersistent(t, ch, "", "acked-q", "a", 500)
	_, ch = dialProcess(t, p)
	for i := 0; i < 500; i++ {
		m, ok, err := ch.Get("acked-q", false)
		if err != nil || !ok {
			t.Fatalf("get %d: ok=%v err=%v", i, ok, err)
		}
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	// The broker handles a channel's frames in order: this answer says it
	// has processed every ack.
	q, err := ch.QueueDeclarePassive("acked-q", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages != 0 {
		t.Fatalf("%d messages left after acking all", q.Messages)
	}
	// The scenario of the report: the crash comes two seconds after the
	// last ack (a wait, not a synchronization).
	time.Sleep(2 * time.Second)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	p = startProcess(t, dir)
	_, ch = dialProcess(t, p)
	if back := getAll(t, ch, "acked-q"); len(back) != 0 {
		t.Fatalf("%d of 500 acked messages came back after kill -9 (first %q)", len(back), back[0].Body)
	}
}

// TestSyncNeverSurvivesKill: with sync = "never" a kill -9 (a Warren crash,
// not a machine crash) loses no declared queue and no confirmed message.
func TestSyncNeverSurvivesKill(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	never := "[storage]\nsync = \"never\"\n"
	p := startProcessWith(t, dir, never)
	c, ch := dialProcess(t, p)
	for i := 0; i < 3; i++ {
		if _, err := ch.QueueDeclare("never-"+strconv.Itoa(i), true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		pc, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		publishPersistent(t, pc, "", "never-"+strconv.Itoa(i), "n", 1000)
	}
	// A queue declared last, with a few messages: small writes at the very
	// end of the log.
	if _, err := ch.QueueDeclare("never-last", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	pc, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	publishPersistent(t, pc, "", "never-last", "l", 10)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	p = startProcessWith(t, dir, never)
	_, ch = dialProcess(t, p)
	for i := 0; i < 3; i++ {
		name := "never-" + strconv.Itoa(i)
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			t.Fatalf("durable queue %s lost: %v", name, err)
		}
		if q.Messages != 1000 {
			t.Errorf("queue %s holds %d of 1000 confirmed messages", name, q.Messages)
		}
	}
	q, err := ch.QueueDeclarePassive("never-last", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("durable queue never-last lost: %v", err)
	}
	if q.Messages != 10 {
		t.Errorf("queue never-last holds %d of 10 confirmed messages", q.Messages)
	}
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
