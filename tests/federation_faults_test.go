package tests

import (
	"encoding/json"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// Federation through faults: a federated queue on a Warren process pulls
// from its upstream's queue while the upstream (Warren or RabbitMQ) is
// killed with kill -9 and started again, and while the downstream itself
// is killed and started again. Every message the upstream confirmed
// reaches the downstream's consumer: links use on-confirm, so a message
// leaves the upstream only once the downstream has it.

// fedPair is a downstream Warren process whose queue "fq" is federated
// from the queue "fq" of an upstream, with a confirmed publisher on the
// upstream and a consumer on the downstream.
type fedPair struct {
	down       *process
	downDir    string
	downListen string
	upURL      func() string
	check      *losscheck.Checker
	stop       chan struct{}
	wg         sync.WaitGroup
}

func (fp *fedPair) downURL() string { return "amqp://guest:guest@" + fp.downListen + "/" }

func startFedPair(t *testing.T, upURL func() string) *fedPair {
	fp := &fedPair{downDir: t.TempDir(), downListen: freeAddr(t), upURL: upURL, check: losscheck.New(), stop: make(chan struct{})}
	fp.down = startProcess(t, fp.downDir, "-listen", fp.downListen)
	declareOn(t, upURL(), "fq")
	declareOn(t, fp.downURL(), "fq")
	return fp
}

// federate makes "fq" on the downstream federated from the upstream.
func (fp *fedPair) federate(t *testing.T) {
	up, _ := json.Marshal(map[string]any{"value": map[string]any{"uri": fp.upURL(), "reconnect-delay": 0.5, "prefetch-count": 200}})
	if err := adminCall(fp.down, "PUT", "/api/parameters/federation-upstream/%2F/up", string(up)); err != nil {
		t.Fatal(err)
	}
	policy := `{"pattern": "^fq$", "apply-to": "queues", "definition": {"federation-upstream": "up"}}`
	if err := adminCall(fp.down, "PUT", "/api/policies/%2F/fed", policy); err != nil {
		t.Fatal(err)
	}
}

func (fp *fedPair) publish() {
	fp.wg.Add(1)
	go func() {
		defer fp.wg.Done()
		fp.check.Publish("p", "fq", 64, func() []string { return []string{fp.upURL()} }, fp.stop)
	}()
}

func (fp *fedPair) consume() {
	fp.wg.Add(1)
	go func() {
		defer fp.wg.Done()
		fp.check.Consume("c", "fq", 100, func() []string { return []string{fp.downURL()} }, fp.stop)
	}()
}

// confirmsPass waits until the publisher has n more messages confirmed.
func (fp *fedPair) confirmsPass(t *testing.T, n int) {
	t.Helper()
	target := fp.check.Confirms("p") + n
	poll.Until(t, 60*time.Second, fmt.Sprint(n, " more confirms"), func() bool { return fp.check.Confirms("p") >= target })
}

// finish stops the publisher and waits for every confirmed message to
// reach the downstream's consumer.
func (fp *fedPair) finish(t *testing.T) {
	t.Helper()
	close(fp.stop)
	fp.wg.Wait()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		fp.check.Consume("c2", "fq", 100, func() []string { return []string{fp.downURL()} }, stop)
	}()
	defer func() { close(stop); <-done }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("checker: %s", fp.check.Report())
			if c, err := amqp.Dial(fp.upURL()); err == nil {
				ch, _ := c.Channel()
				q, err := ch.QueueDeclarePassive("fq", true, false, false, false, nil)
				t.Logf("the upstream's queue: %d messages, %d consumers (%v)", q.Messages, q.Consumers, err)
				c.Close()
			}
			for _, l := range fp.check.Report().Lost {
				t.Log(fp.check.History(l))
			}
		}
	})
	poll.Until(t, 90*time.Second, "every confirmed message through the federation link", fp.check.Drained)
}

// Warren to Warren: the upstream killed (kill -9) and started again, then
// the downstream that runs the link, round after round. A kill of the
// upstream may make copies (a message the downstream confirmed whose ack
// the upstream had not stored), as with shovels (failOnShovelProblems).
func TestFederatedQueueThroughKills(t *testing.T) {
	skipReference(t)
	upDir, upListen := t.TempDir(), freeAddr(t)
	up := startProcess(t, upDir, "-listen", upListen)
	fp := startFedPair(t, func() string { return "amqp://guest:guest@" + upListen + "/" })
	fp.federate(t)
	fp.publish()
	fp.consume()
	for round := range 2 {
		fp.confirmsPass(t, 2000)
		up.stop(syscall.SIGKILL)
		up = startProcess(t, upDir, "-listen", upListen)
		fp.confirmsPass(t, 2000)
		fp.down.stop(syscall.SIGKILL)
		fp.down = startProcess(t, fp.downDir, "-listen", fp.downListen)
		t.Logf("round %d: %d confirmed", round+1, fp.check.Confirms("p"))
	}
	fp.confirmsPass(t, 2000)
	fp.finish(t)
	failOnShovelProblems(t, fp.check)
}

// RabbitMQ 3.10.8 as the upstream, killed and started again twice.
func TestFederatedQueueFromRabbitMQThroughItsKills(t *testing.T) {
	r := startRabbitMQ(t)
	fp := startFedPair(t, r.url)
	fp.federate(t)
	fp.publish()
	fp.consume()
	for range 2 {
		fp.confirmsPass(t, 2000)
		r.kill()
		r.start()
	}
	fp.confirmsPass(t, 2000)
	fp.finish(t)
	failOnShovelProblems(t, fp.check)
}

// The checker's self-check in the same pipeline: a reader that takes one
// message off the upstream's queue before the queue is federated loses
// it, and the checker must name it lost.
func TestFederationLossCheckSeesALoss(t *testing.T) {
	skipReference(t)
	upDir, upListen := t.TempDir(), freeAddr(t)
	startProcess(t, upDir, "-listen", upListen)
	upURL := "amqp://guest:guest@" + upListen + "/"
	fp := startFedPair(t, func() string { return upURL })
	fp.publish()
	fp.confirmsPass(t, 300)
	c, err := amqp.Dial(upURL)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.Channel()
	var stolen amqp.Delivery
	poll.Until(t, 30*time.Second, "a message to take", func() bool {
		var ok bool
		stolen, ok, err = ch.Get("fq", true)
		return err == nil && ok
	})
	c.Close()
	fp.federate(t)
	fp.consume()
	close(fp.stop)
	fp.wg.Wait()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		fp.check.Consume("c2", "fq", 100, func() []string { return []string{fp.downURL()} }, stop)
	}()
	poll.Until(t, 60*time.Second, "all but the stolen message delivered", func() bool {
		return fp.check.Report().Count["lost"] <= 1
	})
	close(stop)
	<-done
	r := fp.check.Report()
	if r.Count["lost"] != 1 || len(r.Lost) != 1 || r.Lost[0] != string(stolen.Body) {
		t.Fatalf("the checker did not name the stolen message %s lost: %s", stolen.Body, r)
	}
}
