// Command topicunbind measures issue 29's load against any AMQP 0-9-1
// broker (Warren or RabbitMQ alike): one topic exchange, Q queues bound
// to it with B literal keys each ("topicunbind-7.key.42"), then the
// queues deleted one by one while a publisher with confirms sends to the
// exchange. It reports how long each queue.delete took and how long the
// publisher waited for each confirm, before the deletes and during them:
// a delete that holds the exchange shows as the publisher's wait.
//
//	go run ./tests/bench/topicunbind -url amqp://guest:guest@127.0.0.1:5672/ -queues 10000 -bindings 100
//
// -delete N deletes only the first N queues (a slow broker); -cleanup=false
// leaves the rest, for a node that is thrown away afterwards. -pid reads
// the broker's CPU time from /proc for each phase.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/procstat"
)

const exchangeName = "topicunbind"

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "the broker's URL")
	queues := flag.Int("queues", 10000, "queues bound to the exchange")
	perQueue := flag.Int("bindings", 100, "literal bindings per queue")
	deletes := flag.Int("delete", 0, "queues to delete, the first ones; 0: all")
	conns := flag.Int("setup-connections", 4, "connections declaring and binding at once")
	durable := flag.Bool("durable", false, "a durable exchange and durable queues (so durable bindings)")
	baseline := flag.Duration("baseline", 3*time.Second, "how long the publisher runs before the deletes start")
	cleanup := flag.Bool("cleanup", true, "delete the queues left and the exchange at the end")
	pid := flag.Int("pid", 0, "the broker's process id, for its CPU time")
	flag.DurationVar(&heartbeat, "heartbeat", heartbeat, "the heartbeat interval asked for (amqp091-go's default; 60s is RabbitMQ's and Warren's)")
	flag.Parse()
	if *deletes <= 0 || *deletes > *queues {
		*deletes = *queues
	}
	name := func(i int) string { return fmt.Sprint("topicunbind-", i) }
	cpu := func() time.Duration {
		if *pid == 0 {
			return 0
		}
		d, err := procstat.CPU(*pid)
		if err != nil {
			log.Fatal(err)
		}
		return d
	}

	conn, ch := dial(*url)
	defer conn.Close()
	if err := ch.ExchangeDeclare(exchangeName, "topic", *durable, false, false, false, nil); err != nil {
		log.Fatal(err)
	}

	// Setup: each connection declares and binds every conns-th queue. The
	// binds do not wait for bind-ok (nowait); a passive declare at the end
	// of each connection's share waits until the broker took them all.
	start, cpu0 := time.Now(), cpu()
	var wg sync.WaitGroup
	var bound atomic.Int64
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ch := dial(*url)
			defer c.Close()
			for i := w; i < *queues; i += *conns {
				q := name(i)
				if _, err := ch.QueueDeclare(q, *durable, false, false, false, nil); err != nil {
					log.Fatal(err)
				}
				for j := range *perQueue {
					if err := ch.QueueBind(q, fmt.Sprintf("%s.key.%d", q, j), exchangeName, true, nil); err != nil {
						log.Fatal(err)
					}
				}
				if n := bound.Add(int64(*perQueue)); n%100000 < int64(*perQueue) {
					fmt.Fprintf(os.Stderr, "%d bindings, %v\n", n, time.Since(start).Round(time.Second))
				}
			}
			if _, err := ch.QueueDeclarePassive(name(w), *durable, false, false, false, nil); err != nil {
				log.Fatal(err)
			}
		}()
	}
	wg.Wait()
	setup, setupCPU := time.Since(start), cpu()-cpu0
	fmt.Printf("setup: %d queues, %d bindings in %v (%.0f bindings/s, broker CPU %v)\n",
		*queues, *queues**perQueue, setup.Round(time.Millisecond), float64(*queues**perQueue)/setup.Seconds(), setupCPU.Round(time.Millisecond))

	// The publisher: one message at a time, each waiting for its confirm.
	// Its keys match no binding, so nothing piles up in a queue; routing
	// them still needs the exchange.
	pub := startPublisher(*url)
	time.Sleep(*baseline)
	before := pub.take()

	start, cpu0 = time.Now(), cpu()
	took := make([]time.Duration, 0, *deletes)
	var failed error
	for i := range *deletes {
		t0 := time.Now()
		if _, failed = ch.QueueDelete(name(i), false, false, false); failed != nil {
			fmt.Printf("queue.delete of %s failed after %v: %v\n", name(i), time.Since(t0).Round(time.Millisecond), failed)
			*deletes = i
			break
		}
		took = append(took, time.Since(t0))
		if (i+1)%max(*deletes/10, 1) == 0 {
			fmt.Fprintf(os.Stderr, "%d deleted, %v\n", i+1, time.Since(start).Round(time.Millisecond))
		}
	}
	elapsed, deleteCPU := time.Since(start), cpu()-cpu0
	during := pub.take()
	pubErr := pub.stop()

	fmt.Printf("deleted %d queues of %d (each with %d bindings) in %v: %.1f queues/s, broker CPU %v\n",
		*deletes, *queues, *perQueue, elapsed.Round(time.Millisecond), float64(*deletes)/elapsed.Seconds(), deleteCPU.Round(time.Millisecond))
	fmt.Printf("queue.delete: %s\n", percentiles(took))
	fmt.Printf("publish→confirm before the deletes (%v): %d messages, %s\n", baseline.Round(time.Second), len(before), percentiles(before))
	fmt.Printf("publish→confirm during the deletes: %d messages, %s\n", len(during), percentiles(during))
	if pubErr != nil {
		fmt.Printf("the publisher stopped: %v\n", pubErr)
	}
	if failed != nil || pubErr != nil {
		os.Exit(1)
	}

	if *cleanup {
		for i := *deletes; i < *queues; i++ {
			if _, err := ch.QueueDelete(name(i), false, false, false); err != nil {
				log.Fatal(err)
			}
		}
		if err := ch.ExchangeDelete(exchangeName, false, false); err != nil {
			log.Fatal(err)
		}
	}
}

// heartbeat is amqp091-go's default, which Dial asks for.
var heartbeat = 10 * time.Second

func dial(url string) (*amqp.Connection, *amqp.Channel) {
	c, err := amqp.DialConfig(url, amqp.Config{Heartbeat: heartbeat, Locale: "en_US"})
	if err != nil {
		log.Fatal(err)
	}
	ch, err := c.Channel()
	if err != nil {
		log.Fatal(err)
	}
	return c, ch
}

// publisher publishes to the exchange and records each confirm's wait.
type publisher struct {
	mu    sync.Mutex
	waits []time.Duration
	err   error // what stopped it early
	quit  chan struct{}
	done  chan struct{}
}

func startPublisher(url string) *publisher {
	p := &publisher{quit: make(chan struct{}), done: make(chan struct{})}
	c, ch := dial(url)
	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	go func() {
		defer close(p.done)
		defer c.Close()
		for n := 0; ; n++ {
			select {
			case <-p.quit:
				return
			default:
			}
			t0 := time.Now()
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchangeName,
				fmt.Sprintf("probe.%d", n%100), false, false, amqp.Publishing{Body: []byte("probe")})
			if err == nil {
				var ok bool
				if ok, err = dc.WaitContext(context.Background()); err == nil && !ok {
					err = fmt.Errorf("publish %d nacked", n)
				}
			}
			if err != nil {
				p.err = err
				return
			}
			d := time.Since(t0)
			p.mu.Lock()
			p.waits = append(p.waits, d)
			p.mu.Unlock()
		}
	}()
	return p
}

// take returns the waits recorded since the last take.
func (p *publisher) take() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.waits
	p.waits = nil
	return w
}

// stop ends the publisher and returns what stopped it earlier, if anything.
func (p *publisher) stop() error {
	close(p.quit)
	<-p.done
	return p.err
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	round := func(x time.Duration) time.Duration {
		if x < time.Millisecond {
			return x.Round(time.Microsecond)
		}
		return x.Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v, p99.9 %v, max %v",
		round(at(0.5)), round(at(0.9)), round(at(0.99)), round(at(0.999)), round(at(1)))
}
