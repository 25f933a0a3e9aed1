package tests

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/protocol"
)

var (
	stressFor  = flag.Duration("stress.duration", 8*time.Second, "how long TestRandomTopologies drives each topology (go test ./tests -run RandomTopologies -stress.duration=1m)")
	stressSeed = flag.Uint64("stress.seed", 0, "the seed TestRandomTopologies starts from; 0 picks one (the test logs it)")
)

// stressStall is how long one operation may run before the watchdog calls
// the broker stuck.
const stressStall = 10 * time.Second

// TestRandomTopologies builds random topologies out of everything that
// moves messages between queues on its own (dead-letter cycles and
// fan-outs, length limits that drop from the head or refuse, TTLs of 0,
// alternate exchanges, exchange-to-exchange cycles, delayed exchanges,
// policies) and drives each from many connections at once: publishing
// with confirms, getting, consuming, acking, rejecting, requeueing,
// purging, redeclaring, rebinding, listing. A watchdog fails the test and
// prints every goroutine when any operation stalls for 10s. It checks
// liveness, not contents: afterwards the broker must still serve and shut
// down in time.
func TestRandomTopologies(t *testing.T) {
	seed := *stressSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -stress.seed=%d)", seed, seed)
	b := newBroker(t)
	if err := b.EnablePlugin("delayed-message"); err != nil {
		t.Fatal(err)
	}
	st := &stress{t: t, b: b, url: url(b), rng: rand.New(rand.NewPCG(seed, seed>>1))}
	st.watch()
	defer st.stopWatching()

	st.build()
	st.drive(*stressFor)

	// Still serving: a fresh queue takes and gives a message.
	st.step("a last publish and get", func() error {
		c, err := amqp.Dial(st.url)
		if err != nil {
			return err
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		q, err := ch.QueueDeclare("", false, true, true, false, nil)
		if err != nil {
			return err
		}
		if err := ch.PublishWithContext(context.Background(), "", q.Name, false, false, body("alive")); err != nil {
			return err
		}
		for {
			m, ok, err := ch.Get(q.Name, true)
			if err != nil || ok {
				if ok && string(m.Body) != "alive" {
					return fmt.Errorf("got %q", m.Body)
				}
				return err
			}
		}
	})
	st.step("shutdown", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stressStall)
		defer cancel()
		return b.Shutdown(ctx)
	})
}

type stress struct {
	t   *testing.T
	b   *broker.Broker
	url string

	rngMu sync.Mutex
	rng   *rand.Rand

	queues    []stressQueue
	exchanges []stressExchange
	keys      []string

	// running maps each goroutine's current operation to when it started.
	running sync.Map // *stressOp -> struct{}
	ops     atomic.Int64
	failed  atomic.Int64 // operations that ended in an AMQP error
	done    chan struct{}
	watched sync.WaitGroup
}

type stressQueue struct {
	name    string
	durable bool
	args    amqp.Table
}

type stressExchange struct {
	name, kind string
	args       amqp.Table
}

type stressOp struct {
	what  string
	start time.Time
}

func (st *stress) intn(n int) int {
	st.rngMu.Lock()
	defer st.rngMu.Unlock()
	return st.rng.IntN(n)
}

func (st *stress) chance(percent int) bool { return st.intn(100) < percent }

func (st *stress) pickQueue() stressQueue       { return st.queues[st.intn(len(st.queues))] }
func (st *stress) pickExchange() stressExchange { return st.exchanges[st.intn(len(st.exchanges))] }
func (st *stress) pickKey() string              { return st.keys[st.intn(len(st.keys))] }

// step runs one operation under the watchdog and fails the test on error.
func (st *stress) step(what string, f func() error) {
	st.t.Helper()
	if err := st.run(what, f); err != nil {
		st.t.Fatalf("%s: %v", what, err)
	}
}

// run runs one operation under the watchdog.
func (st *stress) run(what string, f func() error) error {
	op := &stressOp{what: what, start: time.Now()}
	st.running.Store(op, struct{}{})
	defer st.running.Delete(op)
	st.ops.Add(1)
	err := f()
	if err != nil {
		st.failed.Add(1)
	}
	return err
}

// watch starts the watchdog. A stalled operation is a deadlock, which also
// stalls the test's cleanups: it prints every goroutine and ends the run.
func (st *stress) watch() {
	st.done = make(chan struct{})
	st.watched.Add(1)
	go func() {
		defer st.watched.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-st.done:
				return
			case <-tick.C:
			}
			st.running.Range(func(k, _ any) bool {
				op := k.(*stressOp)
				if since := time.Since(op.start); since > stressStall {
					buf := make([]byte, 8<<20)
					buf = buf[:runtime.Stack(buf, true)]
					fmt.Fprintf(os.Stderr, "--- FAIL: %s: %q stalled for %v (deadlock?)\n%s\n", st.t.Name(), op.what, since.Round(time.Second), buf)
					os.Exit(1)
				}
				return true
			})
		}
	}()
}

func (st *stress) stopWatching() {
	close(st.done)
	st.watched.Wait()
}

// build declares a random topology: a few exchanges of every kind with
// alternates among them, queues with limits, TTLs and dead-letter
// exchanges among those exchanges, and random bindings, cycles included.
func (st *stress) build() {
	const nExchanges, nQueues, nBindings = 8, 12, 30
	st.keys = []string{"a", "b", "a.b", "b.c", "c"}
	kinds := []string{"direct", "fanout", "topic", "headers", "x-delayed-message"}
	for i := range nExchanges {
		x := stressExchange{name: fmt.Sprintf("stress-x%d", i), kind: kinds[i%len(kinds)], args: amqp.Table{}}
		if x.kind == "x-delayed-message" {
			x.args["x-delayed-type"] = []string{"direct", "fanout", "topic"}[st.intn(3)]
		}
		if st.chance(40) {
			x.args["alternate-exchange"] = fmt.Sprintf("stress-x%d", st.intn(nExchanges))
		}
		st.exchanges = append(st.exchanges, x)
	}
	for i := range nQueues {
		q := stressQueue{name: fmt.Sprintf("stress-q%d", i), durable: st.chance(60), args: amqp.Table{}}
		if st.chance(40) {
			q.args["x-max-length"] = int32(1 + st.intn(4))
			q.args["x-overflow"] = []string{"drop-head", "drop-head", "reject-publish", "reject-publish-dlx"}[st.intn(4)]
		}
		if st.chance(40) {
			q.args["x-message-ttl"] = []int32{0, 0, 5, 50}[st.intn(4)]
		}
		if st.chance(70) {
			// A dead-letter exchange, or the default one with a key that
			// names another queue: both make cycles.
			if st.chance(70) {
				q.args["x-dead-letter-exchange"] = st.pickExchange().name
			} else {
				q.args["x-dead-letter-exchange"] = ""
				q.args["x-dead-letter-routing-key"] = fmt.Sprintf("stress-q%d", st.intn(nQueues))
			}
		}
		if st.chance(20) {
			q.args["x-delivery-limit"] = int32(st.intn(3))
		}
		if st.chance(15) {
			q.args["x-max-priority"] = int32(1 + st.intn(5))
		}
		st.queues = append(st.queues, q)
	}

	c, ch := st.dial()
	defer c.Close()
	for _, x := range st.exchanges {
		st.step("declare "+x.name, func() error { return ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, x.args) })
	}
	for _, q := range st.queues {
		st.step("declare "+q.name, func() error {
			_, err := ch.QueueDeclare(q.name, q.durable, false, false, false, q.args)
			return err
		})
	}
	for range nBindings {
		st.step("bind", func() error { return st.bindRandom(ch) })
	}
}

// bindRandom adds a random binding: to a queue, or (one time in three) to
// another exchange, which makes exchange-to-exchange cycles.
func (st *stress) bindRandom(ch *amqp.Channel) error {
	x := st.pickExchange()
	key, args := st.bindingKey(x)
	if st.chance(33) {
		return ch.ExchangeBind(st.pickExchange().name, key, x.name, false, args)
	}
	return ch.QueueBind(st.pickQueue().name, key, x.name, false, args)
}

func (st *stress) bindingKey(x stressExchange) (string, amqp.Table) {
	switch x.kind {
	case "topic":
		return []string{"#", "a.*", "*.c", "a", "b.#"}[st.intn(5)], nil
	case "headers":
		return "", amqp.Table{"x-match": []string{"any", "all"}[st.intn(2)], "k": st.pickKey()}
	}
	return st.pickKey(), nil
}

func (st *stress) dial() (*amqp.Connection, *amqp.Channel) {
	st.t.Helper()
	var c *amqp.Connection
	var ch *amqp.Channel
	st.step("connect", func() error {
		var err error
		if c, err = amqp.Dial(st.url); err != nil {
			return err
		}
		ch, err = c.Channel()
		return err
	})
	return c, ch
}

// drive runs the workers until d has passed.
func (st *stress) drive(d time.Duration) {
	const workers = 8
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.worker(w, deadline)
		}()
	}
	wg.Wait()
	st.t.Logf("%d operations in %v, %d of them refused (404 after a deletion elsewhere, say)", st.ops.Load(), d, st.failed.Load())
}

// worker does random operations on its own connection. Channel errors
// (a queue refusing a publish, a 404 after a deletion elsewhere) are part
// of the game: the channel, or the connection, is opened again.
func (st *stress) worker(id int, deadline time.Time) {
	var c *amqp.Connection
	var ch *amqp.Channel
	var confirms chan amqp.Confirmation
	defer func() {
		if c != nil {
			_ = st.run("close a connection", c.Close)
		}
	}()
	for time.Now().Before(deadline) {
		if c == nil || c.IsClosed() {
			if err := st.run("connect", func() error {
				var err error
				c, err = amqp.Dial(st.url)
				return err
			}); err != nil {
				st.t.Errorf("worker %d: connect: %v", id, err)
				return
			}
			ch = nil
		}
		if ch == nil || ch.IsClosed() {
			if err := st.run("open a channel", func() error {
				var err error
				if ch, err = c.Channel(); err != nil {
					return err
				}
				confirms = ch.NotifyPublish(make(chan amqp.Confirmation, 64))
				return ch.Confirm(false)
			}); err != nil {
				if c.IsClosed() {
					continue
				}
				st.t.Errorf("worker %d: channel: %v", id, err)
				return
			}
		}
		st.randomOp(c, ch, confirms)
	}
}

func (st *stress) randomOp(c *amqp.Connection, ch *amqp.Channel, confirms chan amqp.Confirmation) {
	switch n := st.intn(100); {
	case n < 45:
		_ = st.run("publish with confirm", func() error { return st.publish(ch, confirms) })
	case n < 60:
		_ = st.run("get and settle", func() error { return st.getAndSettle(ch) })
	case n < 70:
		_ = st.run("consume and settle", func() error { return st.consumeAndSettle(c) })
	case n < 74:
		q := st.pickQueue()
		_ = st.run("purge "+q.name, func() error { _, err := ch.QueuePurge(q.name, false); return err })
	case n < 80:
		_ = st.run("bind", func() error { return st.bindRandom(ch) })
	case n < 84:
		_ = st.run("unbind", func() error {
			x := st.pickExchange()
			key, args := st.bindingKey(x)
			return ch.QueueUnbind(st.pickQueue().name, key, x.name, args)
		})
	case n < 87:
		_ = st.run("redeclare a queue", func() error { return st.redeclareQueue(ch) })
	case n < 90:
		_ = st.run("redeclare an exchange", func() error { return st.redeclareExchange(ch) })
	case n < 93:
		_ = st.run("set or clear a policy", st.policy)
	case n < 96:
		_ = st.run("a temporary queue", func() error { return st.temporaryQueue(ch) })
	default:
		_ = st.run("list", func() error {
			v, _ := st.b.VHost("/")
			_ = v.Queues()
			_ = v.Exchanges()
			_ = v.Bindings()
			_ = st.b.Server().Connections()
			return nil
		})
	}
}

// publish sends a few messages and waits for their confirms (acks or
// nacks: a full queue refusing is an answer too).
func (st *stress) publish(ch *amqp.Channel, confirms chan amqp.Confirmation) error {
	n := 1 + st.intn(5)
	sent := 0
	for range n {
		x := st.pickExchange()
		msg := amqp.Publishing{Body: []byte("stress"), Headers: amqp.Table{"k": st.pickKey()}}
		if st.chance(50) {
			msg.DeliveryMode = amqp.Persistent
		}
		if st.chance(20) {
			msg.Expiration = []string{"0", "1", "20"}[st.intn(3)]
		}
		if st.chance(20) {
			msg.Priority = uint8(st.intn(6))
		}
		if x.kind == "x-delayed-message" {
			msg.Headers["x-delay"] = int32(st.intn(30))
		}
		name := x.name
		if st.chance(25) {
			name = "" // straight to a queue
		}
		key := st.pickKey()
		if name == "" {
			key = st.pickQueue().name
		}
		if err := ch.PublishWithContext(context.Background(), name, key, st.chance(20), false, msg); err != nil {
			return err
		}
		sent++
	}
	for range sent {
		if _, ok := <-confirms; !ok {
			return errors.New("channel closed before its confirms")
		}
	}
	return nil
}

// getAndSettle gets a message and acks, rejects or requeues it.
func (st *stress) getAndSettle(ch *amqp.Channel) error {
	m, ok, err := ch.Get(st.pickQueue().name, false)
	if err != nil || !ok {
		return err
	}
	return st.settle(m)
}

func (st *stress) settle(m amqp.Delivery) error {
	switch st.intn(4) {
	case 0:
		return m.Reject(false)
	case 1:
		return m.Nack(false, true)
	default:
		return m.Ack(false)
	}
}

// consumeAndSettle consumes from a queue on a channel of its own for a few
// deliveries, settling each, then cancels or simply closes the channel,
// which requeues what is unacked.
func (st *stress) consumeAndSettle(c *amqp.Connection) error {
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Qos(1+st.intn(5), 0, false); err != nil {
		return err
	}
	d, err := ch.Consume(st.pickQueue().name, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	idle := time.NewTimer(20 * time.Millisecond)
	defer idle.Stop()
	for range 1 + st.intn(10) {
		select {
		case m, ok := <-d:
			if !ok {
				return nil
			}
			if err := st.settle(m); err != nil {
				return err
			}
		case <-idle.C:
			return nil
		}
	}
	if st.chance(50) {
		return nil // leave the rest unacked: the close requeues them
	}
	return ch.Cancel("", false)
}

// redeclareQueue deletes a queue and declares it again as it was.
func (st *stress) redeclareQueue(ch *amqp.Channel) error {
	q := st.pickQueue()
	if _, err := ch.QueueDelete(q.name, false, false, false); err != nil {
		return err
	}
	_, err := ch.QueueDeclare(q.name, q.durable, false, false, false, q.args)
	return err
}

// redeclareExchange deletes an exchange and declares it again as it was,
// without its bindings; later binds add some back.
func (st *stress) redeclareExchange(ch *amqp.Channel) error {
	x := st.pickExchange()
	if err := ch.ExchangeDelete(x.name, false, false); err != nil {
		return err
	}
	return ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, x.args)
}

// policy sets or clears a policy that limits, expires and dead-letters
// some queues, or gives some exchanges an alternate.
func (st *stress) policy() error {
	if st.chance(40) {
		_ = st.b.ClearPolicy("/", "stress")
		return nil
	}
	if st.chance(50) {
		return st.b.SetPolicy("/", "stress", "^stress-q[0-5]$", policy.Queues, 0, protocol.Table{
			"max-length":           float64(1 + st.intn(3)),
			"message-ttl":          float64(st.intn(20)),
			"dead-letter-exchange": st.pickExchange().name,
		})
	}
	return st.b.SetPolicy("/", "stress", "^stress-x", policy.Exchanges, 0, protocol.Table{"alternate-exchange": st.pickExchange().name})
}

// temporaryQueue declares an auto-delete queue bound to an exchange,
// consumes from it briefly and cancels, which deletes it.
func (st *stress) temporaryQueue(ch *amqp.Channel) error {
	q, err := ch.QueueDeclare("", false, true, false, false, amqp.Table{"x-dead-letter-exchange": st.pickExchange().name})
	if err != nil {
		return err
	}
	x := st.pickExchange()
	key, args := st.bindingKey(x)
	if err := ch.QueueBind(q.Name, key, x.name, false, args); err != nil {
		return err
	}
	tag := fmt.Sprintf("tmp-%d", st.intn(1<<30))
	if _, err := ch.Consume(q.Name, tag, true, false, false, false, nil); err != nil {
		return err
	}
	return ch.Cancel(tag, false)
}
