// Command chashload measures an x-consistent-hash exchange end to end:
// it binds N queues (weight 1 each), publishes messages with distinct
// routing keys and publisher confirms, and reports the rate, the broker's
// CPU per message (with -broker-pid) and how evenly the queues filled.
// It runs against Warren and RabbitMQ (with rabbitmq_consistent_hash_exchange
// enabled) alike, and deletes what it declared.
//
//	go run ./tests/bench/chashload -url amqp://guest:guest@127.0.0.1:5672/ -bindings 1000 -messages 200000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	bindings := flag.Int("bindings", 4, "queues bound, weight 1 each")
	messages := flag.Int("messages", 100000, "messages to publish")
	inFlight := flag.Int("confirm", 1000, "publishes in flight awaiting confirms")
	algorithm := flag.String("hash-algorithm", "", "Warren's hash-algorithm argument (rendezvous, rabbitmq); empty: none")
	pid := flag.Int("broker-pid", 0, "the broker's pid: report its CPU per message")
	flag.Parse()

	conn, err := amqp.Dial(*url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	const x = "chashload"
	args := amqp.Table{}
	if *algorithm != "" {
		args["hash-algorithm"] = *algorithm
	}
	if err := ch.ExchangeDeclare(x, "x-consistent-hash", false, false, false, false, args); err != nil {
		log.Fatal(err)
	}
	queues := make([]string, *bindings)
	for i := range queues {
		queues[i] = fmt.Sprintf("chashload-%d", i)
		if _, err := ch.QueueDeclare(queues[i], false, false, false, false, nil); err != nil {
			log.Fatal(err)
		}
		if err := ch.QueueBind(queues[i], "1", x, false, nil); err != nil {
			log.Fatal(err)
		}
	}
	defer func() {
		for _, q := range queues {
			ch.QueueDelete(q, false, false, false)
		}
		ch.ExchangeDelete(x, false, false)
	}()

	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	acks := ch.NotifyPublish(make(chan amqp.Confirmation, *inFlight+1))
	cpu0 := cpuTime(*pid)
	start := time.Now()
	pending, nacked := 0, 0
	for i := range *messages {
		if pending == *inFlight {
			if c := <-acks; !c.Ack {
				nacked++
			}
			pending--
		}
		key := "order-" + strconv.Itoa(i)
		if err := ch.PublishWithContext(context.Background(), x, key, false, false, amqp.Publishing{Body: []byte("0123456789abcdef")}); err != nil {
			log.Fatal(err)
		}
		pending++
	}
	for ; pending > 0; pending-- {
		if c := <-acks; !c.Ack {
			nacked++
		}
	}
	elapsed := time.Since(start)
	cpu := cpuTime(*pid) - cpu0

	total, low, high := 0, math.MaxInt, 0
	for _, q := range queues {
		st, err := ch.QueueDeclarePassive(q, false, false, false, false, nil)
		if err != nil {
			log.Fatal(err)
		}
		total += st.Messages
		low, high = min(low, st.Messages), max(high, st.Messages)
	}
	fmt.Printf("bindings=%d messages=%d confirmed_rate=%.0f msg/s", *bindings, *messages, float64(*messages)/elapsed.Seconds())
	if *pid != 0 {
		fmt.Printf(" broker_cpu=%.2f us/msg", cpu.Seconds()*1e6/float64(*messages))
	}
	fmt.Printf(" queued=%d nacked=%d per_queue=%d..%d\n", total, nacked, low, high)
}

// cpuTime reads a process's user+system CPU time from /proc.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		log.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}
