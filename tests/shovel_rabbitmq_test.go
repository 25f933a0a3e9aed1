package tests

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/tests/losscheck"
)

// Shovels between Warren and a private RabbitMQ 3.10.8 node, both ways,
// and RabbitMQ's own shovel plugin pointed at Warren: the moves an
// operator makes to bring a RabbitMQ workload over.

// declareOn declares durable queues on the broker at url.
func declareOn(t *testing.T, url string, queues ...string) {
	t.Helper()
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queues {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// Warren's shovel drains a RabbitMQ queue under confirmed load while the
// RabbitMQ node is killed (kill -9) and started again twice: every
// message RabbitMQ confirmed reaches Warren's queue.
func TestShovelFromRabbitMQThroughItsKills(t *testing.T) {
	r := startRabbitMQ(t)
	m := startWarrenMgmt(t)
	declareOn(t, r.url(), "from")
	check := losscheck.New()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		check.Publish("p", "from", 64, func() []string { return []string{r.url()} }, stop)
	}()
	go func() {
		defer wg.Done()
		check.Consume("c", "to", 100, func() []string { return []string{m.amqpURL()} }, stop)
	}()
	m.setShovel("migrate", map[string]any{"src-uri": r.url(), "src-queue": "from", "dest-uri": m.localURI(), "dest-queue": "to",
		"reconnect-delay": 0.5, "src-prefetch-count": shovelPrefetch}, 201)
	confirmed := func(n int) {
		target := check.Confirms("p") + n
		poll.Until(t, 60*time.Second, fmt.Sprint(n, " more confirms from RabbitMQ"), func() bool { return check.Confirms("p") >= target })
	}
	for range 2 {
		confirmed(2000)
		r.kill()
		r.start()
	}
	confirmed(2000)
	close(stop)
	wg.Wait()
	drain := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		check.Consume("c2", "to", 100, func() []string { return []string{m.amqpURL()} }, drain)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("checker: %s", check.Report())
			t.Logf("shovels: %s", m.call("GET", "/api/shovels", "").body)
			t.Logf("Warren's queue: %s", m.call("GET", "/api/queues/"+m.v()+"/to", "").body)
			if c, err := amqp.Dial(r.url()); err == nil {
				ch, _ := c.Channel()
				q, err := ch.QueueDeclarePassive("from", true, false, false, false, nil)
				t.Logf("RabbitMQ's queue: %d messages, %d consumers (%v)", q.Messages, q.Consumers, err)
				c.Close()
			}
			for _, l := range check.Report().Lost {
				t.Log(check.History(l))
			}
		}
	})
	poll.Until(t, 90*time.Second, "every message RabbitMQ confirmed in Warren", check.Drained)
	close(drain)
	<-done
	failOnShovelProblems(t, check)
	m.waitShovel("migrate", "running")
}

// Warren's shovel publishes into RabbitMQ: every message arrives with
// its properties and headers.
func TestShovelToRabbitMQ(t *testing.T) {
	r := startRabbitMQ(t)
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("out", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := range n {
		publish(t, ch, "", "out", amqp.Publishing{Body: []byte(fmt.Sprint(i)), ContentType: "text/plain", MessageId: fmt.Sprint("m", i),
			Headers: amqp.Table{"i": int32(i)}, DeliveryMode: amqp.Persistent, Priority: 3})
	}
	declareOn(t, r.url(), "in")
	m.setShovel("out", map[string]any{"src-uri": m.localURI(), "src-queue": "out", "dest-uri": r.url(), "dest-queue": "in"}, 201)
	c, err := amqp.Dial(r.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rch, _ := c.Channel()
	waitCount(t, rch, "in", n)
	for i := range n {
		d := get(t, rch, "in")
		if string(d.Body) != fmt.Sprint(i) || d.ContentType != "text/plain" || d.MessageId != fmt.Sprint("m", i) ||
			d.Headers["i"] != int32(i) || d.DeliveryMode != amqp.Persistent || d.Priority != 3 {
			t.Fatalf("message %d arrived in RabbitMQ as %+v", i, d)
		}
	}
	waitCount(t, ch, "out", 0)
}

// RabbitMQ's own shovel plugin, declared with rabbitmqctl, moves a
// RabbitMQ queue into Warren with on-confirm: Warren is a destination
// RabbitMQ's shovel works with unchanged.
func TestRabbitMQShovelPluginIntoWarren(t *testing.T) {
	r := startRabbitMQ(t, "rabbitmq_shovel")
	m := startWarrenMgmt(t)
	declareOn(t, r.url(), "legacy")
	c, err := amqp.Dial(r.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rch, _ := c.Channel()
	const n = 2000
	for i := range n {
		publish(t, rch, "", "legacy", amqp.Publishing{Body: []byte(fmt.Sprint(i)), DeliveryMode: amqp.Persistent})
	}
	def := fmt.Sprintf(`{"src-uri":"amqp://","src-queue":"legacy","dest-uri":%q,"dest-queue":"landed","ack-mode":"on-confirm"}`, m.amqpURL())
	out, err := exec.Command("su", "rabbitmq", "-s", "/bin/sh", "-c",
		fmt.Sprintf("rabbitmqctl -n %s@localhost set_parameter shovel into-warren '%s'", r.name, def)).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl set_parameter shovel: %v\n%s", err, out)
	}
	_, ch := m.channel()
	poll.Until(t, 30*time.Second, "RabbitMQ's shovel declaring its queue in Warren", func() bool {
		return m.call("GET", "/api/queues/"+m.v()+"/landed", "").status == 200
	})
	waitCount(t, ch, "landed", n)
	if got := drain(t, ch, "landed"); len(got) != n || got[0] != "0" || got[n-1] != fmt.Sprint(n-1) {
		t.Fatalf("landed: %d messages, first %v", len(got), got[:min(3, len(got))])
	}
	waitCount(t, rch, "legacy", 0)
}
