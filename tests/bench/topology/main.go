// Command topology times topology changes on a cluster as a client sees
// them: each round declares a queue through one node, publishes to it
// with mandatory through another at once, binds it to an exchange through
// the first and publishes through the second again, then deletes it. It
// prints the latency of declare, bind and delete (median, p99) and how
// many publishes came back unroutable, for BENCHMARKS.md:
//
//	go run ./tests/bench/topology -declare amqp://guest:guest@127.0.0.1:5701/ \
//	    -publish amqp://guest:guest@127.0.0.1:5703/ -n 1000
//
// It runs unchanged against RabbitMQ (node URLs of its cluster).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	declareURL := flag.String("declare", "amqp://guest:guest@127.0.0.1:5701/", "the node changes go through")
	publishURL := flag.String("publish", "amqp://guest:guest@127.0.0.1:5702/", "the node publishes go through")
	n := flag.Int("n", 1000, "rounds")
	quorum := flag.Bool("quorum", false, "declare quorum queues")
	flag.Parse()
	if err := run(*declareURL, *publishURL, *n, *quorum); err != nil {
		fmt.Fprintln(os.Stderr, "topology:", err)
		os.Exit(1)
	}
}

func channel(url string) (*amqp.Connection, *amqp.Channel, error) {
	c, err := amqp.Dial(url)
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

func run(declareURL, publishURL string, n int, quorum bool) error {
	dc, dch, err := channel(declareURL)
	if err != nil {
		return err
	}
	defer dc.Close()
	pc, pch, err := channel(publishURL)
	if err != nil {
		return err
	}
	defer pc.Close()
	if err := pch.Confirm(false); err != nil {
		return err
	}
	returns := pch.NotifyReturn(make(chan amqp.Return, 1))
	// publish sends one mandatory message and says whether it came back
	// (a return comes before its publish's ack).
	publish := func(exchange, key string) (bool, error) {
		dconf, err := pch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, true, false, amqp.Publishing{Body: []byte(key)})
		if err != nil {
			return false, err
		}
		if ok := dconf.Wait(); !ok {
			return false, fmt.Errorf("publish to %q %q nacked", exchange, key)
		}
		select {
		case <-returns:
			return true, nil
		default:
			return false, nil
		}
	}
	var args amqp.Table
	if quorum {
		args = amqp.Table{"x-queue-type": "quorum"}
	}
	if err := dch.ExchangeDeclare("topology-x", "direct", true, false, false, false, nil); err != nil {
		return err
	}
	var declares, binds, deletes []time.Duration
	unroutable := map[string]int{}
	timed := func(into *[]time.Duration, f func() error) error {
		start := time.Now()
		err := f()
		*into = append(*into, time.Since(start))
		return err
	}
	prefix := fmt.Sprintf("topology-%d-", time.Now().UnixNano())
	for i := range n {
		q := fmt.Sprint(prefix, i)
		if err := timed(&declares, func() error {
			_, err := dch.QueueDeclare(q, true, false, false, false, args)
			return err
		}); err != nil {
			return err
		}
		if back, err := publish("", q); err != nil {
			return err
		} else if back {
			unroutable["after declare"]++
		}
		if err := timed(&binds, func() error { return dch.QueueBind(q, q, "topology-x", false, nil) }); err != nil {
			return err
		}
		if back, err := publish("topology-x", q); err != nil {
			return err
		} else if back {
			unroutable["after bind"]++
		}
		if err := timed(&deletes, func() error {
			_, err := dch.QueueDelete(q, false, false, false)
			return err
		}); err != nil {
			return err
		}
	}
	for _, s := range []struct {
		what string
		d    []time.Duration
	}{{"declare", declares}, {"bind", binds}, {"delete", deletes}} {
		slices.Sort(s.d)
		fmt.Printf("%-8s median %v  p99 %v\n", s.what, s.d[len(s.d)/2].Round(10*time.Microsecond), s.d[len(s.d)*99/100].Round(10*time.Microsecond))
	}
	fmt.Printf("unroutable: %d of %d after declare, %d of %d after bind\n", unroutable["after declare"], n, unroutable["after bind"], n)
	return dch.ExchangeDelete("topology-x", false, false)
}
