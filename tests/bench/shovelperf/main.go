// Command shovelperf measures a shovel's throughput for BENCHMARKS.md: it
// fills a source queue with N persistent messages (with confirms), then
// declares a shovel through the admin API of the broker that runs it
// (Warren's, or RabbitMQ's with rabbitmq_shovel_management: the same
// PUT /api/parameters/shovel/...), and times the messages' arrival in the
// destination queue, with the CPU the given broker processes used
// meanwhile:
//
//	go run ./tests/bench/shovelperf -src amqp://guest:guest@127.0.0.1:5672/ \
//	    -dst amqp://guest:guest@127.0.0.1:5673/ -admin http://127.0.0.1:15673 \
//	    -src-uri amqp://guest:guest@127.0.0.1:5672/ -dest-uri amqp:// \
//	    -ack-mode on-confirm -n 200000 -size 1024 -pids "PID1 PID2"
//
// -src-uri and -dest-uri are the shovel's, as the broker running it
// reaches the two ends (amqp:// is that broker itself).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	src := flag.String("src", "", "AMQP URL of the source broker, for filling the queue")
	dst := flag.String("dst", "", "AMQP URL of the destination broker, for counting")
	admin := flag.String("admin", "", "admin API of the broker that runs the shovel")
	srcURI := flag.String("src-uri", "", "the shovel's src-uri")
	destURI := flag.String("dest-uri", "amqp://", "the shovel's dest-uri")
	ackMode := flag.String("ack-mode", "on-confirm", "on-confirm, on-publish or no-ack")
	prefetch := flag.Int("prefetch", 1000, "src-prefetch-count")
	n := flag.Int("n", 100000, "messages")
	size := flag.Int("size", 1024, "body bytes")
	pids := flag.String("pids", "", "broker processes whose CPU is counted")
	queue := flag.String("queue", "shovelperf", "source queue; the destination is QUEUE-to")
	flag.Parse()
	if *src == "" || *dst == "" || *admin == "" || *srcURI == "" {
		flag.Usage()
		os.Exit(2)
	}
	to := *queue + "-to"
	for _, u := range []string{*src, *dst} {
		withChannel(u, func(ch *amqp.Channel) {
			for _, q := range []string{*queue, to} {
				_, _ = ch.QueueDelete(q, false, false, false)
			}
		})
	}
	withChannel(*dst, func(ch *amqp.Channel) { must(ch.QueueDeclare(to, true, false, false, false, nil)) })
	fill(*src, *queue, *n, *size)

	cpu0 := cpu(*pids)
	start := time.Now()
	def, _ := json.Marshal(map[string]any{"value": map[string]any{"src-uri": *srcURI, "src-queue": *queue,
		"dest-uri": *destURI, "dest-queue": to, "ack-mode": *ackMode, "src-prefetch-count": *prefetch}})
	call("PUT", *admin+"/api/parameters/shovel/%2F/shovelperf", def)
	c, err := amqp.Dial(*dst)
	must(0, err)
	ch, err := c.Channel()
	must(0, err)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		q, err := ch.QueueDeclarePassive(to, true, false, false, false, nil)
		must(0, err)
		if q.Messages >= *n {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "shovelperf: %d of %d moved after 10 minutes\n", q.Messages, *n)
			os.Exit(1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	ticks := cpu(*pids) - cpu0
	c.Close()
	call("DELETE", *admin+"/api/parameters/shovel/%2F/shovelperf", nil)
	fmt.Printf("ack-mode %s: %d messages of %d B in %.2f s: %.0f msg/s; broker CPU %.2f s, %.1f µs per message\n",
		*ackMode, *n, *size, elapsed.Seconds(), float64(*n)/elapsed.Seconds(), float64(ticks)/100,
		float64(ticks)*1e4/float64(*n))
}

// fill publishes n persistent messages to queue, 256 confirms in flight.
func fill(url, queue string, n, size int) {
	withChannel(url, func(ch *amqp.Channel) {
		must(ch.QueueDeclare(queue, true, false, false, false, nil))
		must(0, ch.Confirm(false))
		body := bytes.Repeat([]byte("x"), size)
		var pending []*amqp.DeferredConfirmation
		for i := range n {
			dc, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{Body: body, DeliveryMode: 2})
			must(0, err)
			pending = append(pending, dc)
			if len(pending) == 256 || i == n-1 {
				for _, p := range pending {
					if !p.Wait() {
						fmt.Fprintln(os.Stderr, "shovelperf: a publish was nacked")
						os.Exit(1)
					}
				}
				pending = pending[:0]
			}
		}
	})
}

func withChannel(url string, f func(*amqp.Channel)) {
	c, err := amqp.Dial(url)
	must(0, err)
	defer c.Close()
	ch, err := c.Channel()
	must(0, err)
	f(ch)
}

func call(method, url string, body []byte) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	must(0, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(0, err)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		fmt.Fprintf(os.Stderr, "shovelperf: %s %s: %s\n", method, url, resp.Status)
		os.Exit(1)
	}
}

// cpu is the user and system ticks (1/100 s) the processes used so far.
func cpu(pids string) int {
	total := 0
	for _, p := range strings.Fields(pids) {
		b, err := os.ReadFile("/proc/" + p + "/stat")
		must(0, err)
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		total += u + s
	}
	return total
}

func must[T any](_ T, err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "shovelperf:", err)
		os.Exit(1)
	}
}
