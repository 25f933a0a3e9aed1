package tests

import (
	"encoding/json"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// shovelPrefetch is the fault tests' shovels' src-prefetch-count.
const shovelPrefetch = 200

// shovelPair is a source broker and the destination broker that runs an
// on-confirm shovel from the source's queue "from" to its own queue "to",
// both Warren processes with fixed AMQP ports (so that a restarted
// source is where the shovel's URI says).
type shovelPair struct {
	src, dst       *process
	srcListen      string
	srcDir, dstDir string
	dstListen      string
	check          *losscheck.Checker
	stop           chan struct{}
	wg             sync.WaitGroup
}

func startShovelPair(t *testing.T, ackMode string) *shovelPair {
	skipReference(t)
	sp := &shovelPair{srcListen: freeAddr(t), dstListen: freeAddr(t), srcDir: t.TempDir(), dstDir: t.TempDir(),
		check: losscheck.New(), stop: make(chan struct{})}
	sp.src = startProcess(t, sp.srcDir, "-listen", sp.srcListen)
	sp.dst = startProcess(t, sp.dstDir, "-listen", sp.dstListen)
	for _, p := range []*process{sp.src, sp.dst} {
		c, err := amqp.Dial(p.url())
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := c.Channel()
		for _, q := range []string{"from", "to"} {
			if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	def, _ := json.Marshal(map[string]any{"value": map[string]any{"src-uri": sp.src.url(), "src-queue": "from",
		"dest-uri": "amqp://", "dest-queue": "to", "ack-mode": ackMode, "reconnect-delay": 0.5, "src-prefetch-count": shovelPrefetch}})
	if err := adminCall(sp.dst, "PUT", "/api/parameters/shovel/%2F/move", string(def)); err != nil {
		t.Fatal(err)
	}
	sp.wg.Add(2)
	go func() {
		defer sp.wg.Done()
		sp.check.Publish("p", "from", 64, func() []string { return []string{"amqp://guest:guest@" + sp.srcListen + "/"} }, sp.stop)
	}()
	go func() {
		defer sp.wg.Done()
		sp.check.Consume("c", "to", 100, func() []string { return []string{"amqp://guest:guest@" + sp.dstListen + "/"} }, sp.stop)
	}()
	return sp
}

// confirmsPass waits until the publisher has n more messages confirmed.
func (sp *shovelPair) confirmsPass(t *testing.T, n int) {
	t.Helper()
	target := sp.check.Confirms("p") + n
	poll.Until(t, max(60*time.Second, time.Duration(n)*time.Millisecond), strconv.Itoa(n)+" more confirms", func() bool { return sp.check.Confirms("p") >= target })
}

// finish stops the publisher, waits for every confirmed message to reach
// the destination's consumer, and stops the clients.
func (sp *shovelPair) finish(t *testing.T) {
	t.Helper()
	close(sp.stop)
	sp.wg.Wait()
	consumerStop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sp.check.Consume("c2", "to", 100, func() []string { return []string{"amqp://guest:guest@" + sp.dstListen + "/"} }, consumerStop)
	}()
	defer func() { close(consumerStop); <-done }()
	poll.Until(t, 5*time.Minute, "every confirmed message delivered through the shovel", sp.check.Drained)
}

// shovelRounds is how many times the source is killed (kill -9) and the
// destination restarted, and shovelPhase how many messages are confirmed
// between two faults; SHOVEL_FAULT_ROUNDS and SHOVEL_FAULT_PHASE raise
// them for a long run (BENCHMARKS.md's million messages: 2 and 200000).
func shovelRounds() int { return envInt("SHOVEL_FAULT_ROUNDS", 2) }
func shovelPhase() int  { return envInt("SHOVEL_FAULT_PHASE", 3000) }

func envInt(name string, or int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return or
}

// An on-confirm shovel between two Warren processes loses no confirmed
// message while its source is killed with kill -9 and restarted, and
// the node that runs it (the destination) is restarted, round after
// round. A kill may duplicate: a message the destination confirmed and
// the shovel acked, whose ack died with the source before the source
// stored it, comes again after the restart (with every AMQP 0-9-1
// shovel, RabbitMQ's too: nothing tells the copy from a message
// published twice); those are counted, as is the order the redeliveries
// break (failOnShovelProblems).
func TestShovelLosesNothingThroughKillsAndRestarts(t *testing.T) {
	sp := startShovelPair(t, "on-confirm")
	for round := range shovelRounds() {
		sp.confirmsPass(t, shovelPhase())
		sp.src.stop(syscall.SIGKILL)
		sp.src = startProcess(t, sp.srcDir, "-listen", sp.srcListen)
		sp.confirmsPass(t, shovelPhase())
		sp.dst.stop(syscall.SIGTERM)
		sp.dst = startProcess(t, sp.dstDir, "-listen", sp.dstListen)
		t.Logf("round %d: %d confirmed", round+1, sp.check.Confirms("p"))
	}
	sp.confirmsPass(t, shovelPhase())
	sp.finish(t)
	failOnShovelProblems(t, sp.check)
}

// failOnShovelProblems fails on a loss. A kill of a shovel's source may
// make copies: a message the destination confirmed and the shovel acked,
// whose ack the killed source had not stored yet, comes again. The
// checker sees a copy as a message delivered as new again (after an ack,
// if it came late), and the source's redeliveries break the order; how
// many there are depends on how lazily the source stores acks (RabbitMQ's
// classic queues: a journal flushed now and then), so they are logged,
// not bounded.
func failOnShovelProblems(t *testing.T, check *losscheck.Checker) {
	t.Helper()
	failOnProblems(t, check, "delivered as new again", "acked, then redelivered", "out of order")
}

// A shovel stopped on purpose (its node shut down, a restart through the
// API) first waits for the confirms of what it published and acks them,
// so it duplicates nothing and keeps the order.
func TestShovelRestartsDuplicateNothing(t *testing.T) {
	sp := startShovelPair(t, "on-confirm")
	for range shovelRounds() {
		sp.confirmsPass(t, shovelPhase())
		sp.dst.stop(syscall.SIGTERM)
		sp.dst = startProcess(t, sp.dstDir, "-listen", sp.dstListen)
		sp.confirmsPass(t, shovelPhase())
		if err := adminCall(sp.dst, "DELETE", "/api/shovels/vhost/%2F/move/restart", ""); err != nil {
			t.Fatal(err)
		}
	}
	sp.confirmsPass(t, shovelPhase())
	sp.finish(t)
	failOnProblems(t, sp.check)
}

// The checker's self-check in the same pipeline: a reader that takes one
// message off the source behind the shovel's back loses it, and the
// checker must name it lost.
func TestShovelLossCheckSeesALoss(t *testing.T) {
	sp := startShovelPair(t, "on-confirm")
	sp.confirmsPass(t, 500)
	if err := adminCall(sp.dst, "DELETE", "/api/parameters/shovel/%2F/move", ""); err != nil {
		t.Fatal(err)
	}
	sp.confirmsPass(t, 100) // now they stay in "from"
	c, err := amqp.Dial(sp.src.url())
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := c.Channel()
	var stolen amqp.Delivery
	poll.Until(t, 30*time.Second, "a message to take", func() bool {
		var ok bool
		stolen, ok, err = ch.Get("from", true)
		return err == nil && ok
	})
	c.Close()
	def, _ := json.Marshal(map[string]any{"value": map[string]any{"src-uri": sp.src.url(), "src-queue": "from",
		"dest-uri": "amqp://", "dest-queue": "to"}})
	if err := adminCall(sp.dst, "PUT", "/api/parameters/shovel/%2F/move", string(def)); err != nil {
		t.Fatal(err)
	}
	close(sp.stop)
	sp.wg.Wait()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sp.check.Consume("c2", "to", 100, func() []string { return []string{"amqp://guest:guest@" + sp.dstListen + "/"} }, stop)
	}()
	poll.Until(t, 60*time.Second, "all but the stolen message delivered", func() bool {
		return sp.check.Report().Count["lost"] <= 1
	})
	close(stop)
	<-done
	r := sp.check.Report()
	if r.Count["lost"] != 1 || len(r.Lost) != 1 || r.Lost[0] != string(stolen.Body) {
		t.Fatalf("the checker did not name the stolen message %s lost: %s", stolen.Body, r)
	}
}
