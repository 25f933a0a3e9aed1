// Command warrenperf is Warren's load tool: producers and consumers over
// real AMQP connections, with rates and latency reported each second and
// at the end. It speaks plain AMQP 0-9-1 through the official Go client, so
// the same run can be pointed at Warren or at RabbitMQ to compare them.
//
//	warrenperf -url amqp://guest:guest@127.0.0.1:5672/ -producers 1 -consumers 1 \
//	    -size 16 -duration 20s -autoack
//
// Each message body starts with its send time (when -size >= 8), from which
// consumers measure latency; with -confirm, producers measure the time to
// each confirm too. -channels runs several producers (and consumers) on
// each connection, -queues spreads them over several queues (NAME-0,
// NAME-1, ...), and -json prints the summary as one JSON object for
// scripts. The summary gives the broker's CPU per message when -broker-pid
// names it, and always the tool's own: when that nears the machine's cores,
// the client, not the broker, caps the rates.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/procstat"
)

type options struct {
	url        string
	consumeURL string // consumers' (and the queue's declare's) broker, when not url
	producers  int
	consumers  int
	size       int
	body       string // "zeros" or "random"
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
	channels   int  // producers (consumers) per connection
	queues     int  // queues, NAME-0..NAME-(n-1) when more than one
	json       bool // the summary as JSON
	// streamURL, when set, runs the stream protocol instead (stream.go);
	// streamBatch is the producers' batch size.
	streamURL   string
	streamBatch int
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	flag.StringVar(&o.consumeURL, "consume-url", "", "consumers' broker URL, another node of a cluster (default: -url); the queue is declared there")
	flag.IntVar(&o.producers, "producers", 1, "producer connections")
	flag.IntVar(&o.consumers, "consumers", 1, "consumer connections")
	flag.IntVar(&o.size, "size", 16, "message body size in bytes")
	flag.StringVar(&o.body, "body", "zeros", `message bodies: "zeros", as RabbitMQ's PerfTest sends, or "random" bytes, which a broker cannot compress`)
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
	flag.IntVar(&o.rate, "rate", 0, "limit each producer to this many messages per second, sent a few at a time above 4,000 (0: as fast as possible)")
	flag.IntVar(&o.pmessages, "pmessages", 0, "each producer publishes this many messages and stops (0: run for -duration)")
	flag.BoolVar(&o.predeclare, "predeclared", false, "do not declare the queue; it exists")
	flag.StringVar(&o.xtype, "exchange-type", "", "declare -exchange with this type first (e.g. topic)")
	flag.IntVar(&o.extra, "extra-bindings", 0, "bind this many further patterns from -exchange to a sink queue, none matching -key (on a headers exchange, header values, none matching)")
	flag.IntVar(&o.brokerPID, "broker-pid", 0, "the broker's process id: report its CPU time per message consumed (from /proc)")
	flag.IntVar(&o.channels, "channels", 1, "channels per producer and consumer connection, each publishing (consuming) on its own")
	flag.IntVar(&o.queues, "queues", 1, "queues to spread producers and consumers over: -queue's name with -0, -1, ... appended when more than one")
	flag.BoolVar(&o.json, "json", false, "print the summary as one JSON object (the per-second lines go to stderr)")
	flag.StringVar(&o.streamURL, "stream-url", "", "speak the stream protocol to this broker (rabbitmq-stream://guest:guest@127.0.0.1:5552/) on the stream -queue, declared afresh; consumers start at -stream-offset (default next)")
	flag.IntVar(&o.streamBatch, "stream-batch", 100, "with -stream-url, the most messages a producer's client sends in one frame")
	flag.Parse()
	o.channels, o.queues = max(o.channels, 1), max(o.queues, 1)
	if o.body != "zeros" && o.body != "random" {
		fmt.Fprintf(os.Stderr, "warrenperf: -body %q: want zeros or random\n", o.body)
		os.Exit(2)
	}
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
	latencies []time.Duration // publish to delivery, a sample
	confirms  []time.Duration // publish to confirm, a sample
}

// sampleEvery is how many messages go per latency sample.
const sampleEvery = 16

// messageBody is the body every message carries: zeros, or random bytes
// (-body random), so a broker that compresses what it stores pays what
// it would for real payloads rather than for zeros.
func (o options) messageBody() []byte {
	b := make([]byte, o.size)
	if o.body == "random" {
		rand.Read(b)
	}
	return b
}

// A headers exchange (-exchange-type headers) routes on the "key" header
// rather than the routing key: each message carries -key there, beside a
// second header that every binding also names, so that an extra binding
// (x-match all) is checked against both before it fails.
const (
	routingHeader = "key"
	regionHeader  = "region"
	regionValue   = "emea"
)

// headerBinding is the arguments binding key on a headers exchange, nil for
// other types.
func (o options) headerBinding(key string) amqp.Table {
	if o.xtype != "headers" {
		return nil
	}
	return amqp.Table{"x-match": "all", regionHeader: regionValue, routingHeader: key}
}

// messageHeaders is the headers every message carries: none but for a
// headers exchange.
func (o options) messageHeaders() amqp.Table {
	if o.xtype != "headers" {
		return nil
	}
	return amqp.Table{regionHeader: regionValue, routingHeader: o.key}
}

// queueName is the i-th queue of the run.
func (o options) queueName(i int) string {
	if o.queues <= 1 {
		return o.queue
	}
	return fmt.Sprintf("%s-%d", o.queue, i%o.queues)
}

// routingKey is where the i-th producer publishes: -key, or straight to
// its queue through the default exchange.
func (o options) routingKey(i int) string {
	if o.exchange == "" {
		return o.queueName(i)
	}
	return o.key
}

func run(o options) error {
	if o.key == "" && o.exchange == "" {
		o.key = o.queue
	}
	if o.json {
		progress = os.Stderr
	}
	switch {
	case o.predeclare:
	case o.streamURL != "":
		o.queueType = "stream" // every consumer reads every message
		if err := declareStream(o); err != nil {
			return err
		}
	default:
		if err := declare(o); err != nil {
			return err
		}
	}
	st := &stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var consumers sync.WaitGroup
	ready := make(chan error, o.consumers*o.channels)
	for i := 0; i < o.consumers; i++ {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			if o.streamURL != "" {
				consumeStream(ctx, o, st, ready)
				return
			}
			consume(ctx, o, st, i, ready)
		}()
	}
	readyWanted := o.consumers * o.channels
	if o.streamURL != "" {
		readyWanted = o.consumers
	}
	for i := 0; i < readyWanted; i++ {
		if err := <-ready; err != nil {
			return err
		}
	}

	cpuBefore, _ := processCPU(o.brokerPID)
	ownBefore, ownErr := ownCPU()
	start := time.Now()
	pctx, pcancel := context.WithTimeout(ctx, o.duration)
	defer pcancel()
	var producers sync.WaitGroup
	errs := make(chan error, o.producers*o.channels)
	for i := 0; i < o.producers; i++ {
		producers.Add(1)
		go func() {
			defer producers.Done()
			if o.streamURL != "" {
				if err := produceStream(pctx, o, st); err != nil {
					errs <- err
				}
				return
			}
			if err := produce(pctx, o, st, i, errs); err != nil {
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
	ownAfter, err := ownCPU()
	clientCPU := ownAfter - ownBefore
	if err != nil || ownErr != nil {
		clientCPU = 0 // not measured: the figure is left out
	}
	cancel()
	consumers.Wait()
	if cpuErr != nil {
		return cpuErr
	}
	return summary(o, st, elapsed, drained, cpuAfter-cpuBefore, clientCPU)
}

// processCPU is the broker's CPU time, 0 without a pid.
func processCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	return procstat.CPU(pid)
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
	for i := range o.queues {
		q := o.queueName(i)
		if _, err := ch.QueueDeclare(q, o.durable || o.queueType == "quorum" || o.queueType == "stream", false, false, false, args); err != nil {
			return err
		}
		if o.queueType != "stream" { // a stream cannot be purged; use a fresh one
			if _, err := ch.QueuePurge(q, false); err != nil {
				return err
			}
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
	for i := range o.queues {
		if err := ch.QueueBind(o.queueName(i), o.key, o.exchange, false, o.headerBinding(o.key)); err != nil {
			return err
		}
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
			if err := ch.QueueBind(sink, pattern, o.exchange, true, o.headerBinding(pattern)); err != nil {
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

// produce runs producer connection n: -channels publishers on it.
func produce(ctx context.Context, o options, st *stats, n int, errs chan<- error) error {
	c, err := amqp.Dial(o.url)
	if err != nil {
		return err
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := range o.channels {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := publish(ctx, o, st, ch, o.routingKey(n*o.channels+i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	return nil
}

// publish is one publishing channel.
func publish(ctx context.Context, o options, st *stats, ch *amqp.Channel, key string) error {
	var window chan struct{}
	var sent []int64 // send times by delivery tag, modulo the window
	if o.confirm > 0 {
		if err := ch.Confirm(false); err != nil {
			return err
		}
		window = make(chan struct{}, o.confirm)
		sent = make([]int64, o.confirm)
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, o.confirm))
		go func() {
			var sample []time.Duration
			for cf := range confirms {
				if cf.Ack {
					st.confirmed.Add(1)
				} else {
					st.nacked.Add(1)
				}
				if cf.DeliveryTag%sampleEvery == 0 {
					sample = append(sample, time.Duration(time.Now().UnixNano()-sent[cf.DeliveryTag%uint64(len(sent))]))
				}
				<-window
			}
			st.mu.Lock()
			st.confirms = append(st.confirms, sample...)
			st.mu.Unlock()
		}()
	}
	mode := amqp.Transient
	if o.persistent {
		mode = amqp.Persistent
	}
	msg := amqp.Publishing{DeliveryMode: mode, Body: o.messageBody(), Headers: o.messageHeaders()}
	g := newGate(o.rate)
	defer g.stop()
	// Stopping, the loop is left for the wait below: the confirms still in
	// flight are counted before the summary.
publishing:
	for n := 0; o.pmessages == 0 || n < o.pmessages; n++ {
		if ctx.Err() != nil {
			break
		}
		if !g.wait(ctx) {
			break publishing
		}
		if window != nil {
			select {
			case window <- struct{}{}:
			case <-ctx.Done():
				break publishing
			}
		}
		now := time.Now().UnixNano()
		if o.size >= 8 {
			binary.BigEndian.PutUint64(msg.Body, uint64(now))
		}
		if sent != nil {
			// Tags count from 1, and at most len(sent) are in flight, so
			// this slot's last tag was confirmed.
			sent[(uint64(n)+1)%uint64(len(sent))] = now
		}
		if err := ch.PublishWithContext(context.Background(), o.exchange, key, false, false, msg); err != nil {
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
		_ = ch.Close() // ends NotifyPublish: the confirm sample is kept
	}
	return nil
}

// consume runs consumer connection n: -channels consumers on it.
func consume(ctx context.Context, o options, st *stats, n int, ready chan<- error) {
	c, err := amqp.Dial(o.consumerURL())
	if err != nil {
		for range o.channels {
			ready <- err
		}
		return
	}
	defer c.Close()
	var wg sync.WaitGroup
	for i := range o.channels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumeOn(ctx, o, st, c, o.queueName(n*o.channels+i), ready)
		}()
	}
	wg.Wait()
}

// consumeOn is one consuming channel.
func consumeOn(ctx context.Context, o options, st *stats, c *amqp.Connection, queue string, ready chan<- error) {
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
	deliveries, err := ch.Consume(queue, "", o.autoAck, false, false, false, args)
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
			if len(d.Body) >= 8 && n%sampleEvery == 0 {
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
			fmt.Fprintf(progress, "%5.1fs  published %8d msg/s  consumed %8d msg/s\n", time.Since(start).Seconds(), p-lastP, c-lastC)
			lastP, lastC = p, c
		}
	}
}

// output receives the summary; progress the per-second lines (stderr with
// -json, so stdout holds the JSON alone).
var (
	output   io.Writer = os.Stdout
	progress io.Writer = os.Stdout
)

// Summary is the run's result, as -json prints it.
type Summary struct {
	Producers      int      `json:"producers"`
	Consumers      int      `json:"consumers"`
	Channels       int      `json:"channels"`
	Queues         int      `json:"queues"`
	Size           int      `json:"size"`
	Confirm        int      `json:"confirm"`
	Persistent     bool     `json:"persistent"`
	Published      uint64   `json:"published"`
	PublishSeconds float64  `json:"publish_seconds"`
	PublishRate    float64  `json:"publish_rate"`
	Consumed       uint64   `json:"consumed"`
	ConsumeRate    float64  `json:"consume_rate"`
	Confirmed      uint64   `json:"confirmed"`
	Nacked         uint64   `json:"nacked"`
	Latency        *Latency `json:"latency_ms,omitempty"`         // publish to delivery
	ConfirmLatency *Latency `json:"confirm_latency_ms,omitempty"` // publish to confirm
	BrokerCPU      *float64 `json:"broker_cpu_us_per_message,omitempty"`
	// ClientCPU is this process's own CPU per message: when it nears the
	// cores the machine has, the client, not the broker, caps the rates.
	ClientCPU *float64 `json:"client_cpu_us_per_message,omitempty"`
}

// Latency is a latency sample's percentiles, in milliseconds.
type Latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50"`
	P95     float64 `json:"p95"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
}

func percentiles(d []time.Duration) *Latency {
	if len(d) == 0 {
		return nil
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e6 }
	return &Latency{Samples: len(d), P50: at(0.5), P95: at(0.95), P99: at(0.99), Max: at(1)}
}

func summary(o options, st *stats, publishing, total, brokerCPU, clientCPU time.Duration) error {
	p, c := st.published.Load(), st.consumed.Load()
	st.mu.Lock()
	sum := Summary{
		Producers: o.producers, Consumers: o.consumers, Channels: o.channels, Queues: o.queues,
		Size: o.size, Confirm: o.confirm, Persistent: o.persistent,
		Published: p, PublishSeconds: publishing.Seconds(), PublishRate: float64(p) / publishing.Seconds(),
		Consumed: c, ConsumeRate: float64(c) / total.Seconds(),
		Confirmed: st.confirmed.Load(), Nacked: st.nacked.Load(),
		Latency: percentiles(st.latencies), ConfirmLatency: percentiles(st.confirms),
	}
	st.mu.Unlock()
	if o.brokerPID > 0 && c > 0 {
		us := float64(brokerCPU.Microseconds()) / float64(c)
		sum.BrokerCPU = &us
	}
	if clientCPU > 0 && c > 0 {
		us := float64(clientCPU.Microseconds()) / float64(c)
		sum.ClientCPU = &us
	}
	if o.json {
		return json.NewEncoder(output).Encode(sum)
	}
	fmt.Fprintf(output, "summary: producers=%d consumers=%d channels=%d queues=%d size=%d confirm=%d persistent=%v autoack=%v qos=%d\n",
		o.producers, o.consumers, o.channels, o.queues, o.size, o.confirm, o.persistent, o.autoAck, o.qos)
	fmt.Fprintf(output, "summary: published %d in %.1fs = %.0f msg/s; consumed %d = %.0f msg/s\n",
		p, publishing.Seconds(), sum.PublishRate, c, sum.ConsumeRate)
	if o.confirm > 0 || o.streamURL != "" {
		fmt.Fprintf(output, "summary: confirmed %d, nacked %d\n", sum.Confirmed, sum.Nacked)
	}
	if l := sum.Latency; l != nil {
		fmt.Fprintf(output, "summary: latency median %v p95 %v p99 %v\n", ms(l.P50), ms(l.P95), ms(l.P99))
	}
	if l := sum.ConfirmLatency; l != nil {
		fmt.Fprintf(output, "summary: confirm latency median %v p95 %v p99 %v\n", ms(l.P50), ms(l.P95), ms(l.P99))
	}
	if sum.BrokerCPU != nil {
		fmt.Fprintf(output, "summary: broker CPU %.2fs = %.2f µs per message consumed\n", brokerCPU.Seconds(), *sum.BrokerCPU)
	}
	if sum.ClientCPU != nil {
		fmt.Fprintf(output, "summary: client CPU %.2fs = %.2f µs per message consumed (%.0f%% of %d cores)\n",
			clientCPU.Seconds(), *sum.ClientCPU, 100*clientCPU.Seconds()/total.Seconds()/float64(runtime.NumCPU()), runtime.NumCPU())
	}
	return nil
}

func ms(v float64) time.Duration { return time.Duration(v * 1e6) }
