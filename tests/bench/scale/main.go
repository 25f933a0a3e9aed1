// Command scale runs the scale benchmarks of BENCHMARKS.md against any
// AMQP 0-9-1 broker (Warren or RabbitMQ alike), reading the broker's
// resident memory and CPU time from /proc when given its pid:
//
//	scale -url URL -pid PID queues 100000        declare idle classic queues
//	scale -url URL -pid PID connections 10000    open idle connections (60 s heartbeats)
//	scale -url URL -pid PID consumers 1000       1,000 consumers on one queue, then a load through it
//	scale -url URL -pid PID fanout 10000         one publish fanned out to 10,000 queues
//	scale -url URL -pid PID backlog 10000000     fill a durable queue with persistent 16-byte messages
//	scale -url URL -pid PID drain 10000000       consume that backlog to the end
//
// Each prints one line: what it did, how fast, and the broker's memory and
// CPU figures for it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/procstat"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "the broker's URL")
	pid := flag.Int("pid", 0, "the broker's process id, for its memory and CPU from /proc")
	channels := flag.Int("channels", 8, "channels declaring at once (queues, fanout)")
	messages := flag.Int("messages", 100, "messages to publish (consumers, fanout)")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: scale [flags] queues|connections|consumers|fanout|backlog|drain N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(flag.Arg(1))
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "scale: N: %q is not a positive number\n", flag.Arg(1))
		os.Exit(2)
	}
	b := broker{url: *url, pid: *pid}
	switch flag.Arg(0) {
	case "queues":
		err = b.queues(n, *channels)
	case "connections":
		err = b.connections(n)
	case "consumers":
		err = b.consumers(n, *messages)
	case "fanout":
		err = b.fanout(n, *channels, *messages)
	case "backlog":
		err = b.backlog(n, *channels)
	case "drain":
		err = b.drain(n)
	default:
		err = fmt.Errorf("unknown benchmark %q", flag.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

type broker struct {
	url string
	pid int
}

// rss is the broker's resident memory in bytes, 0 without a pid.
func (b broker) rss() int64 {
	n, _ := procstat.RSS(b.pid)
	return n
}

// cpu is the broker's CPU time (user and system), 0 without a pid.
func (b broker) cpu() time.Duration {
	d, _ := procstat.CPU(b.pid)
	return d
}

// settle waits for the broker's memory to stop moving after a change (a
// collection, a flush) and returns it.
func (b broker) settle() int64 {
	last := b.rss()
	for range 20 {
		time.Sleep(500 * time.Millisecond)
		now := b.rss()
		if d := now - last; d < 1<<20 && d > -(1<<20) {
			return now
		}
		last = now
	}
	return last
}

// dial opens a connection and a channel on it.
func (b broker) dial() (*amqp.Connection, *amqp.Channel, error) {
	c, err := amqp.Dial(b.url)
	if err != nil {
		return nil, nil, err
	}
	ch, err := c.Channel()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, ch, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// declareQueues declares name-0 .. name-(n-1) over the given number of
// channels at once.
func (b broker) declareQueues(c *amqp.Connection, name string, n, channels int, bind func(ch *amqp.Channel, q string) error) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, channels)
	for range channels {
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ch.Close()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				q := fmt.Sprintf("%s-%d", name, i)
				if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
					errs <- err
					return
				}
				if bind != nil {
					if err := bind(ch, q); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func (b broker) queues(n, channels int) error {
	c, err := amqp.Dial(b.url)
	if err != nil {
		return err
	}
	defer c.Close()
	before := b.settle()
	start := time.Now()
	if err := b.declareQueues(c, "scale-idle", n, channels, nil); err != nil {
		return err
	}
	took := time.Since(start)
	after := b.settle()
	fmt.Printf("queues: %d declared in %v = %.0f declares/s; resident %s -> %s = %.0f bytes per queue\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), mib(before), mib(after), float64(after-before)/float64(n))
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := ch.QueueDelete(fmt.Sprintf("scale-idle-%d", i), false, false, false); err != nil {
			return err
		}
	}
	return nil
}

func (b broker) connections(n int) error {
	before := b.settle()
	start := time.Now()
	conns := make([]*amqp.Connection, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := amqp.DialConfig(b.url, amqp.Config{Heartbeat: 60 * time.Second})
		if err != nil {
			return fmt.Errorf("connection %d: %w", len(conns)+1, err)
		}
		conns = append(conns, c)
	}
	took := time.Since(start)
	after := b.settle()
	cpu0 := b.cpu()
	time.Sleep(10 * time.Second)
	idle := b.cpu() - cpu0
	fmt.Printf("connections: %d opened in %v = %.0f/s; resident %s -> %s = %.0f bytes per connection; idle CPU %.1f%% of a core\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), mib(before), mib(after), float64(after-before)/float64(n),
		100*idle.Seconds()/10)
	return nil
}

func (b broker) consumers(n, messages int) error {
	c, ch, err := b.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	q, err := ch.QueueDeclare("scale-consumers", false, false, false, false, nil)
	if err != nil {
		return err
	}
	defer ch.QueueDelete(q.Name, false, false, false)
	// Consumers on 10 connections, on channels of 10 consumers each.
	var got atomic.Int64
	done := make(chan struct{})
	before := b.settle()
	var conns []*amqp.Connection
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := 0; i < n; {
		cc, err := amqp.Dial(b.url)
		if err != nil {
			return err
		}
		conns = append(conns, cc)
		for k := 0; k < n/10+1 && i < n; {
			cch, err := cc.Channel()
			if err != nil {
				return err
			}
			if err := cch.Qos(10, 0, false); err != nil {
				return err
			}
			for j := 0; j < 10 && i < n; j, k, i = j+1, k+1, i+1 {
				ds, err := cch.Consume(q.Name, "", false, false, false, false, nil)
				if err != nil {
					return err
				}
				go func() {
					for d := range ds {
						d.Ack(false)
						if got.Add(1) == int64(messages) {
							close(done)
						}
					}
				}()
			}
		}
	}
	took := time.Since(start)
	after := b.settle()
	cpu0 := b.cpu()
	pstart := time.Now()
	ctx := context.Background()
	for range messages {
		if err := ch.PublishWithContext(ctx, "", q.Name, false, false, amqp.Publishing{Body: []byte("0123456789abcdef")}); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("%d of %d messages consumed", got.Load(), messages)
	}
	ptook := time.Since(pstart)
	cpu := b.cpu() - cpu0
	fmt.Printf("consumers: %d on one queue, added in %v; resident %s -> %s = %.0f bytes per consumer; %d messages through them in %v = %.0f msg/s, broker CPU %.1f µs per message\n",
		n, took.Round(time.Millisecond), mib(before), mib(after), float64(after-before)/float64(n),
		messages, ptook.Round(time.Millisecond), float64(messages)/ptook.Seconds(), float64(cpu.Microseconds())/float64(messages))
	return nil
}

func (b broker) fanout(n, channels, messages int) error {
	c, ch, err := b.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ch.ExchangeDeclare("scale-fanout", "fanout", false, true, false, false, nil); err != nil {
		return err
	}
	bind := func(ch *amqp.Channel, q string) error { return ch.QueueBind(q, "", "scale-fanout", false, nil) }
	start := time.Now()
	if err := b.declareQueues(c, "scale-fan", n, channels, bind); err != nil {
		return err
	}
	took := time.Since(start)
	// Publish with confirms, one at a time: a confirm says every queue
	// has the message.
	if err := ch.Confirm(false); err != nil {
		return err
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	cpu0 := b.cpu()
	pstart := time.Now()
	ctx := context.Background()
	for range messages {
		if err := ch.PublishWithContext(ctx, "scale-fanout", "", false, false, amqp.Publishing{Body: []byte("0123456789abcdef")}); err != nil {
			return err
		}
		if cf := <-confirms; !cf.Ack {
			return fmt.Errorf("publish nacked")
		}
	}
	ptook := time.Since(pstart)
	cpu := b.cpu() - cpu0
	deliveries := float64(n) * float64(messages)
	fmt.Printf("fanout: %d queues declared and bound in %v; %d messages to all of them in %v = %.0f queue deliveries/s, %.0f µs per publish, broker CPU %.2f µs per queue delivery\n",
		n, took.Round(time.Millisecond), messages, ptook.Round(time.Millisecond), deliveries/ptook.Seconds(),
		float64(ptook.Microseconds())/float64(messages), float64(cpu.Microseconds())/deliveries)
	for i := range n {
		if _, err := ch.QueueDelete(fmt.Sprintf("scale-fan-%d", i), false, false, false); err != nil {
			return err
		}
	}
	return nil
}

// backlogQueue is the durable queue backlog fills and drain empties.
const backlogQueue = "scale-backlog"

// backlog publishes n persistent 16-byte messages to backlogQueue over
// the given number of channels, each with 1,000 confirms in flight.
func (b broker) backlog(n, channels int) error {
	c, ch, err := b.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := ch.QueueDeclare(backlogQueue, true, false, false, false, nil); err != nil {
		return err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, channels)
	start := time.Now()
	cpu0 := b.cpu()
	for range channels {
		pch, err := c.Channel()
		if err != nil {
			return err
		}
		if err := pch.Confirm(false); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			const inFlight = 1000
			confirms := pch.NotifyPublish(make(chan amqp.Confirmation, inFlight))
			pending := 0
			msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("0123456789abcdef")}
			for next.Add(1) <= int64(n) {
				if pending == inFlight {
					if cf := <-confirms; !cf.Ack {
						errs <- fmt.Errorf("publish nacked")
						return
					}
					pending--
				}
				if err := pch.PublishWithContext(context.Background(), "", backlogQueue, false, false, msg); err != nil {
					errs <- err
					return
				}
				pending++
			}
			for ; pending > 0; pending-- {
				if cf := <-confirms; !cf.Ack {
					errs <- fmt.Errorf("publish nacked")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	took := time.Since(start)
	cpu := b.cpu() - cpu0
	rss := b.settle()
	fmt.Printf("backlog: %d persistent messages confirmed in %v = %.0f msg/s, broker CPU %.1f µs per message; resident while full %s\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(cpu.Microseconds())/float64(n), mib(rss))
	return nil
}

// drain consumes backlogQueue's n messages, acknowledging every 500th
// with multiple.
func (b broker) drain(n int) error {
	c, ch, err := b.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := ch.Qos(2000, 0, false); err != nil {
		return err
	}
	rss := b.rss()
	start := time.Now()
	cpu0 := b.cpu()
	ds, err := ch.Consume(backlogQueue, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		select {
		case d, ok := <-ds:
			if !ok {
				return fmt.Errorf("consumer closed after %d messages", i-1)
			}
			if i%500 == 0 || i == n {
				if err := d.Ack(true); err != nil {
					return err
				}
			}
		case <-time.After(time.Minute):
			return fmt.Errorf("%d of %d messages drained, then nothing for a minute", i-1, n)
		}
	}
	took := time.Since(start)
	cpu := b.cpu() - cpu0
	fmt.Printf("drain: %d messages in %v = %.0f msg/s, broker CPU %.1f µs per message; resident at the start %s, at the end %s\n",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(cpu.Microseconds())/float64(n), mib(rss), mib(b.settle()))
	_, err = ch.QueueDelete(backlogQueue, false, false, false)
	return err
}
