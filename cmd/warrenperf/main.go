// Command warrenperf is Warren's load tool: producers and consumers over
// real AMQP connections, with rates and latency reported each second and
// at the end. It speaks plain AMQP 0-9-1 through the official Go client, so
// the same run can be pointed at Warren or at RabbitMQ to compare them.
//
//	warrenperf -url amqp://guest:guest@127.0.0.1:5672/ -producers 1 -consumers 1 \
//	    -size 16 -duration 20s -autoack
//
// Each message body starts with its send time (when -size >= 8), from which
// consumers measure latency.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

type options struct {
	url        string
	consumeURL string // consumers' (and the queue's declare's) broker, when not url
	producers  int
	consumers  int
	size       int
	duration   time.Duration
	queue      string
	exchange   string
	key        string
	autoAck    bool
	qos        int
	multiAck   int
	confirm    int
	persistent bool
	durable    bool
	queueType  string
	offset     string // x-stream-offset of a stream's consumers
	rate       int
	pmessages  int
	predeclare bool
	xtype      string
	extra      int
	brokerPID  int
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	flag.StringVar(&o.consumeURL, "consume-url", "", "consumers' broker URL, another node of a cluster (default: -url); the queue is declared there")
	flag.IntVar(&o.producers, "producers", 1, "producer connections")
	flag.IntVar(&o.consumers, "consumers", 1, "consumer connections")
	flag.IntVar(&o.size, "size", 16, "message body size in bytes")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "how long producers publish")
	flag.StringVar(&o.queue, "queue", "warrenperf", "queue to declare and consume from")
	flag.StringVar(&o.exchange, "exchange", "", "exchange to publish to (default: the default exchange, straight to -queue)")
	flag.StringVar(&o.key, "key", "", "routing key (default: the queue name)")
	flag.BoolVar(&o.autoAck, "autoack", false, "consume without acknowledgements")
	flag.IntVar(&o.qos, "qos", 0, "consumer prefetch count (0: unlimited)")
	flag.IntVar(&o.multiAck, "multi-ack", 1, "acknowledge every Nth message with multiple=true")
	flag.IntVar(&o.confirm, "confirm", 0, "publisher confirms with this many messages in flight (0: no confirms)")
	flag.BoolVar(&o.persistent, "persistent", false, "publish with delivery-mode 2")
	flag.BoolVar(&o.durable, "durable", false, "declare the queue durable")
	flag.StringVar(&o.queueType, "queue-type", "", "declare the queue with this x-queue-type (quorum and stream imply -durable)")
	flag.StringVar(&o.offset, "stream-offset", "", "consumers of a stream start here (x-stream-offset: first, last, next, a number); each reads every message")
	flag.IntVar(&o.rate, "rate", 0, "limit each producer to this many messages per second (0: as fast as possible)")
	flag.IntVar(&o.pmessages, "pmessages", 0, "each producer publishes this many messages and stops (0: run for -duration)")
	flag.BoolVar(&o.predeclare, "predeclared", false, "do not declare the queue; it exists")
	flag.StringVar(&o.xtype, "exchange-type", "", "declare -exchange with this type first (e.g. topic)")
	flag.IntVar(&o.extra, "extra-bindings", 0, "bind this many further patterns from -exchange to a sink queue, none matching -key")
	flag.IntVar(&o.brokerPID, "broker-pid", 0, "the broker's process id: report its CPU time per message consumed (from /proc)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "warrenperf:", err)
		os.Exit(1)
	}
}

type stats struct {
	published atomic.Uint64
	confirmed atomic.Uint64
	nacked    atomic.Uint64
	consumed  atomic.Uint64
	mu        sync.Mutex
	latencies []time.Duration
}

func run(o options) error {
	if o.key == "" && o.exchange == "" {
		o.key = o.queue
	}
	if !o.predeclare {
		if err := declare(o); err != nil {
			return err
		}
	}
	st := &stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var consumers sync.WaitGroup
	ready := make(chan error, o.consumers)
	for i := 0; i < o.consumers; i++ {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			consume(ctx, o, st, ready)
		}()
	}
	for i := 0; i < o.consumers; i++ {
		if err := <-ready; err != nil {
			return err
		}
	}

	cpuBefore, _ := processCPU(o.brokerPID)
	start := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, o.duration)
	defer pcancel()
	var producers sync.WaitGroup
	errs := make(chan error, o.producers)
	for i := 0; i < o.producers; i++ {
		producers.Add(1)
		go func() {
			defer producers.Done()
			if err := produce(pctx, o, st); err != nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { producers.Wait(); close(done) }()
	report(st, start, done)
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return err
	default:
	}
	// Give consumers a moment to drain what is in flight.
	drainUntil := time.Now().Add(10 * time.Second)
	for o.consumers > 0 && st.consumed.Load() < st.published.Load()*o.readsEach() && time.Now().Before(drainUntil) {
		time.Sleep(20 * time.Millisecond)
	}
	drained := time.Since(start)
	cpuAfter, cpuErr := processCPU(o.brokerPID)
	cancel()
	consumers.Wait()
	summary(o, st, elapsed, drained)
	if o.brokerPID > 0 {
		if cpuErr != nil {
			return cpuErr
		}
		if n := st.consumed.Load(); n > 0 {
			used := cpuAfter - cpuBefore
			fmt.Printf("summary: broker CPU %.2fs = %.2f µs per message consumed\n", used.Seconds(), float64(used.Microseconds())/float64(n))
		}
	}
	return nil
}

// processCPU reads a process's user plus system CPU time from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func processCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad cpu fields", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// readsEach is how many deliveries each message makes: one, or, from a
// stream, one per consumer.
func (o options) readsEach() uint64 {
	if o.queueType == "stream" {
		return uint64(o.consumers)
	}
	return 1
}

// consumerURL is where consumers connect and the queue is declared.
func (o options) consumerURL() string {
	if o.consumeURL != "" {
		return o.consumeURL
	}
	return o.url
}

func declare(o options) error {
	c, err := amqp.Dial(o.consumerURL())
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	var args amqp.Table
	if o.queueType != "" {
		args = amqp.Table{"x-queue-type": o.queueType}
	}
	if _, err := ch.QueueDeclare(o.queue, o.durable || o.queueType == "quorum" || o.queueType == "stream", false, false, false, args); err != nil {
		return err
	}
	if o.queueType != "stream" { // a stream cannot be purged; use a fresh one
		if _, err := ch.QueuePurge(o.queue, false); err != nil {
			return err
		}
	}
	if o.exchange == "" {
		return nil
	}
	if o.xtype != "" {
		if err := ch.ExchangeDeclare(o.exchange, o.xtype, false, false, false, false, nil); err != nil {
			return err
		}
	}
	if err := ch.QueueBind(o.queue, o.key, o.exchange, false, nil); err != nil {
		return err
	}
	if o.extra > 0 {
		sink := o.queue + ".sink"
		if _, err := ch.QueueDeclare(sink, false, false, false, false, nil); err != nil {
			return err
		}
		for i := 0; i < o.extra; i++ {
			var pattern string
			switch i % 4 {
			case 0:
				pattern = fmt.Sprintf("other.%d.*", i)
			case 1:
				pattern = fmt.Sprintf("#.%d", i)
			case 2:
				pattern = fmt.Sprintf("*.x%d.#", i)
			default:
				pattern = fmt.Sprintf("region.%d.orders", i)
			}
			if err := ch.QueueBind(sink, pattern, o.exchange, true, nil); err != nil {
				return err
			}
		}
		// A synchronous call after the no-wait binds: they are all in place.
		if _, err := ch.QueueDeclarePassive(sink, false, false, false, false, nil); err != nil {
			return err
		}
	}
	return nil
}

func produce(ctx context.Context, o options, st *stats) error {
	c, err := amqp.Dial(o.url)
	if err != nil {
		return err
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	var window chan struct{}
	if o.confirm > 0 {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		window = make(chan struct{}, o.confirm)
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, o.confirm))
		go func() {
			for cf := range confirms {
				if cf.Ack {
					st.confirmed.Add(1)
				} else {
					st.nacked.Add(1)
				}
				<-window
			}
		}()
	}
	mode := amqp.Transient
	if o.persistent {
		mode = amqp.Persistent
	}
	msg := amqp.Publishing{DeliveryMode: mode, Body: make([]byte, o.size)}
	var tick *time.Ticker
	if o.rate > 0 {
		tick = time.NewTicker(time.Second / time.Duration(o.rate))
		defer tick.Stop()
	}
	for n := 0; o.pmessages == 0 || n < o.pmessages; n++ {
		if ctx.Err() != nil {
			break
		}
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil
			}
		}
		if window != nil {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
		}
		if o.size >= 8 {
			binary.BigEndian.PutUint64(msg.Body, uint64(time.Now().UnixNano()))
		}
		if err := ch.PublishWithContext(context.Background(), o.exchange, o.key, false, false, msg); err != nil {
			return err
		}
		st.published.Add(1)
	}
	if window != nil {
		// Wait for the last confirms.
		deadline := time.Now().Add(10 * time.Second)
		for len(window) > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

func consume(ctx context.Context, o options, st *stats, ready chan<- error) {
	c, err := amqp.Dial(o.consumerURL())
	if err != nil {
		ready <- err
		return
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		ready <- err
		return
	}
	if o.qos > 0 {
		if err := ch.Qos(o.qos, 0, false); err != nil {
			ready <- err
			return
		}
	}
	var args amqp.Table
	if o.offset != "" {
		var offset any = o.offset
		if n, err := strconv.ParseInt(o.offset, 10, 64); err == nil {
			offset = n
		}
		args = amqp.Table{"x-stream-offset": offset}
	}
	deliveries, err := ch.Consume(o.queue, "", o.autoAck, false, false, false, args)
	if err != nil {
		ready <- err
		return
	}
	ready <- nil
	var sample []time.Duration
	n := 0
	for {
		select {
		case <-ctx.Done():
			st.mu.Lock()
			st.latencies = append(st.latencies, sample...)
			st.mu.Unlock()
			return
		case d, ok := <-deliveries:
			if !ok {
				return
			}
			n++
			if !o.autoAck && n%o.multiAck == 0 {
				_ = d.Ack(o.multiAck > 1)
			}
			if len(d.Body) >= 8 && n%16 == 0 {
				sent := int64(binary.BigEndian.Uint64(d.Body))
				sample = append(sample, time.Duration(time.Now().UnixNano()-sent))
			}
			st.consumed.Add(1)
		}
	}
}

func report(st *stats, start time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastP, lastC uint64
	for {
		select {
		case <-done:
			return
		case <-t.C:
			p, c := st.published.Load(), st.consumed.Load()
			fmt.Printf("%5.1fs  published %8d msg/s  consumed %8d msg/s\n", time.Since(start).Seconds(), p-lastP, c-lastC)
			lastP, lastC = p, c
		}
	}
}

func summary(o options, st *stats, publishing, total time.Duration) {
	p, c := st.published.Load(), st.consumed.Load()
	fmt.Printf("summary: producers=%d consumers=%d size=%d confirm=%d persistent=%v autoack=%v qos=%d\n",
		o.producers, o.consumers, o.size, o.confirm, o.persistent, o.autoAck, o.qos)
	fmt.Printf("summary: published %d in %.1fs = %.0f msg/s; consumed %d = %.0f msg/s\n",
		p, publishing.Seconds(), float64(p)/publishing.Seconds(), c, float64(c)/total.Seconds())
	if o.confirm > 0 {
		fmt.Printf("summary: confirmed %d, nacked %d\n", st.confirmed.Load(), st.nacked.Load())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.latencies) > 0 {
		sort.Slice(st.latencies, func(i, j int) bool { return st.latencies[i] < st.latencies[j] })
		pct := func(q float64) time.Duration { return st.latencies[int(q*float64(len(st.latencies)-1))] }
		fmt.Printf("summary: latency median %v p95 %v p99 %v\n", pct(0.5), pct(0.95), pct(0.99))
	}
}
