// Command declareqq declares N quorum queues (idle-qq-0 ...), one after
// the other on one channel, for the 1,000-quorum-queues benchmark in
// BENCHMARKS.md:
//
//	go run ./tests/bench/declareqq amqp://guest:guest@127.0.0.1:5672/ 1000
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: declareqq URL N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "declareqq: N:", err)
		os.Exit(2)
	}
	c, err := amqp.Dial(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "declareqq:", err)
		os.Exit(1)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "declareqq:", err)
		os.Exit(1)
	}
	start := time.Now()
	for i := range n {
		if _, err := ch.QueueDeclare(fmt.Sprintf("idle-qq-%d", i), true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
			fmt.Fprintln(os.Stderr, "declareqq:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("%d quorum queues declared in %v\n", n, time.Since(start).Round(time.Millisecond))
}
