package tests

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// TestMigrationFromRabbitMQ walks README.md's "Moving from RabbitMQ" under
// confirmed load, with nothing lost: a RabbitMQ 3.10.8 node serves a
// producer and a consumer; its definitions are exported and imported
// into Warren; a shovel on Warren drains the RabbitMQ queue into Warren's
// with on-confirm; the consumer moves to Warren, then the producer; once
// RabbitMQ's queue is empty the shovel is deleted. Every message
// RabbitMQ or Warren confirmed reaches a consumer.
func TestMigrationFromRabbitMQ(t *testing.T) {
	r := startRabbitMQ(t, "rabbitmq_management")
	m := startWarrenMgmt(t)

	// The workload on RabbitMQ: an exchange bound to a queue, a producer
	// and a consumer.
	c, err := amqp.Dial(r.url())
	if err != nil {
		t.Fatal(err)
	}
	rch, _ := c.Channel()
	if err := rch.ExchangeDeclare("orders", "direct", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := rch.QueueDeclare("orders.new", true, false, false, false, amqp.Table{"x-max-priority": int32(5)}); err != nil {
		t.Fatal(err)
	}
	if err := rch.QueueBind("orders.new", "new", "orders", false, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	check := losscheck.New()
	check.Pace(200 * time.Microsecond)
	var wg sync.WaitGroup
	// run starts a client; its stop function returns once the client has
	// (a publisher's confirms all in).
	run := func(f func(stop chan struct{})) func() {
		stop, done := make(chan struct{}), make(chan struct{})
		wg.Add(1)
		go func() { defer wg.Done(); defer close(done); f(stop) }()
		return func() { close(stop); <-done }
	}
	onRabbit := func() []string { return []string{r.url()} }
	onWarren := func() []string { return []string{m.s.url} }
	stopProducerR := run(func(stop chan struct{}) { check.Publish("on-rabbitmq", "orders.new", 32, onRabbit, stop) })
	stopConsumerR := run(func(stop chan struct{}) { check.Consume("c-rabbitmq", "orders.new", 50, onRabbit, stop) })
	confirmed := func(who string, n int) {
		target := check.Confirms(who) + n
		poll.Until(t, 60*time.Second, fmt.Sprint(n, " more confirms to ", who), func() bool { return check.Confirms(who) >= target })
	}
	confirmed("on-rabbitmq", 1000)

	// 1. The definitions, from RabbitMQ's management API into Warren's.
	req, _ := http.NewRequest("GET", r.admin+"/api/definitions", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defs, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("RabbitMQ's definitions: %d %s", resp.StatusCode, defs)
	}
	if r := m.call("POST", "/api/definitions", string(defs)); r.status != 204 && r.status != 201 {
		t.Fatalf("importing RabbitMQ's definitions into Warren: %d %s", r.status, r.body)
	}
	var q struct {
		Arguments map[string]any `json:"arguments"`
	}
	m.expect("GET", "/api/queues/%2F/orders.new", "", 200).json(t, &q)
	if q.Arguments["x-max-priority"] != float64(5) {
		t.Fatalf("the imported queue has arguments %v", q.Arguments)
	}

	// 2. A shovel on Warren drains RabbitMQ's queue into Warren's.
	def := fmt.Sprintf(`{"value":{"src-uri":%q,"src-queue":"orders.new","dest-uri":"amqp://","dest-queue":"orders.new","ack-mode":"on-confirm"}}`, r.url())
	m.expect("PUT", "/api/parameters/shovel/%2F/from-rabbitmq", def, 201)
	poll.Until(t, 30*time.Second, "the shovel running", func() bool {
		return strings.Contains(m.call("GET", "/api/shovels/%2F", "").body, `"state":"running"`)
	})

	// 3. Consumers move to Warren, then 4. producers.
	stopConsumerW := run(func(stop chan struct{}) { check.Consume("c-warren", "orders.new", 50, onWarren, stop) })
	stopConsumerR()
	confirmed("on-rabbitmq", 1000)
	stopProducerW := run(func(stop chan struct{}) { check.Publish("on-warren", "orders.new", 32, onWarren, stop) })
	confirmed("on-warren", 500)
	stopProducerR()
	confirmed("on-warren", 1000)

	// 5. Once RabbitMQ's queue is empty, the shovel goes.
	poll.Until(t, 60*time.Second, "RabbitMQ's queue drained", func() bool {
		c, err := amqp.Dial(r.url())
		if err != nil {
			return false
		}
		defer c.Close()
		ch, _ := c.Channel()
		q, err := ch.QueueDeclarePassive("orders.new", true, false, false, false, amqp.Table{"x-max-priority": int32(5)})
		return err == nil && q.Messages == 0 && q.Consumers == 1
	})
	m.expect("DELETE", "/api/parameters/shovel/%2F/from-rabbitmq", "", 204)
	stopProducerW()
	poll.Until(t, 60*time.Second, "every confirmed message consumed", check.Drained)
	stopConsumerW()
	wg.Wait()
	failOnShovelProblems(t, check)
}
