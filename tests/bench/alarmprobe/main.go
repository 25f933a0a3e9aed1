// Command alarmprobe measures a broker's memory alarm, for BENCHMARKS.md:
// producers publish transient messages to a queue nobody consumes until the
// broker blocks them (connection.blocked), then the queue is purged from
// another connection (every 100 ms, until unblocked) and the probe reports
// how long the broker takes to unblock them. tests/bench/memalarm.sh reads the broker's peak resident
// memory around it. It speaks plain AMQP 0-9-1, so it runs against Warren
// and RabbitMQ alike.
//
//	alarmprobe -url amqp://guest:guest@127.0.0.1:5672/ -size 1024 -producers 2
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	queue := flag.String("queue", "alarmprobe", "queue to fill and purge")
	size := flag.Int("size", 1024, "message body size in bytes")
	producers := flag.Int("producers", 2, "publishing connections")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up waiting for a block or an unblock after this long")
	flag.Parse()
	if err := run(*url, *queue, *size, *producers, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "alarmprobe:", err)
		os.Exit(1)
	}
}

func run(url, queue string, size, producers int, timeout time.Duration) error {
	admin, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer admin.Close()
	ach, err := admin.Channel()
	if err != nil {
		return err
	}
	if _, err := ach.QueueDeclare(queue, false, false, false, false, nil); err != nil {
		return err
	}

	events := make(chan amqp.Blocking, 16*producers)
	var published atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for p := 0; p < producers; p++ {
		// A long heartbeat: a broker blocking the connection stops reading
		// it, and the client's own heartbeat timeout would close it first.
		c, err := amqp.DialConfig(url, amqp.Config{Heartbeat: 10 * time.Minute})
		if err != nil {
			return err
		}
		blocked := c.NotifyBlocked(make(chan amqp.Blocking, 16))
		go func() {
			for b := range blocked {
				events <- b
			}
		}()
		ch, err := c.Channel()
		if err != nil {
			return err
		}
		go func() {
			body := make([]byte, size)
			for ctx.Err() == nil {
				if ch.PublishWithContext(ctx, "", queue, false, false, amqp.Publishing{Body: body}) != nil {
					return
				}
				published.Add(1)
			}
		}()
	}

	start := time.Now()
	if err := await(events, true, timeout); err != nil {
		return err
	}
	blockedAfter := time.Since(start)
	n := published.Load()
	fmt.Printf("blocked after %.2fs: %d messages of %d B published (%d MB)\n",
		blockedAfter.Seconds(), n, size, n*int64(size)/1e6)

	// Purge, and purge again every 100 ms: messages the broker had read but
	// not yet enqueued (RabbitMQ's channel processes hold thousands under
	// its credit flow) arrive after the first purge and would keep memory
	// up on their own.
	purgedAt := time.Now()
	purged := 0
	unblocked := make(chan error, 1)
	go func() { unblocked <- await(events, false, timeout) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		n, err := ach.QueuePurge(queue, false)
		if err != nil {
			return err
		}
		purged += n
		select {
		case err := <-unblocked:
			if err != nil {
				return err
			}
			done = true
		case <-tick.C:
		}
	}
	fmt.Printf("purged %d messages; unblocked %.2fs after the first purge\n", purged, time.Since(purgedAt).Seconds())

	// The producers' connections are left to the process's exit: a client
	// blocked in a publish cannot close cleanly.
	stop()
	_, err = ach.QueueDelete(queue, false, false, false)
	return err
}

// await waits for a connection.blocked (active) or connection.unblocked
// from any producer.
func await(events <-chan amqp.Blocking, active bool, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case b := <-events:
			if b.Active == active {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no connection.blocked active=%v within %v", active, timeout)
		}
	}
}
