package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Durability tests run the warren binary, restart it on the same data
// directory (cleanly with SIGTERM, or with kill -9), and check what came back.

func skipReference(t *testing.T) {
	if reference() != "" {
		t.Skip("restarts the warren binary")
	}
}

func dialProcess(t *testing.T, p *process) (*amqp.Connection, *amqp.Channel) {
	t.Helper()
	c, err := amqp.Dial(p.url())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return c, ch
}

// publishPersistent publishes n persistent messages "prefix-i" with
// confirms and waits for every confirm. It listens for confirms with a
// NotifyPublish of its own, so a channel may be used for it only once:
// amqp091-go blocks when an earlier listener's buffer is full.
func publishPersistent(t *testing.T, ch *amqp.Channel, exchange, key, prefix string, n int) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := 0; i < n; i++ {
		msg := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte(fmt.Sprintf("%s-%d", prefix, i))}
		if err := ch.PublishWithContext(context.Background(), exchange, key, false, false, msg); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case c := <-confirms:
			if !c.Ack {
				t.Fatalf("message %d nacked", c.DeliveryTag)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d confirms", i, n)
		}
	}
}

func getAll(t *testing.T, ch *amqp.Channel, q string) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	for {
		m, ok, err := ch.Get(q, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

// drainBodies consumes every message queue q holds (as a passive declare
// counts them) with automatic acks, and returns their bodies: for
// queues too deep to empty one basic.get at a time.
func drainBodies(t *testing.T, ch *amqp.Channel, q string) []string {
	t.Helper()
	n := queueDepth(t, ch, q)
	deliveries := consume(t, ch, q, true)
	out := make([]string, 0, n)
	for range n {
		out = append(out, string(receive(t, deliveries).Body))
	}
	return out
}

// streamBodies reads every message stream q holds (as a passive declare
// counts them), from the first, and returns their bodies.
func streamBodies(t *testing.T, ch *amqp.Channel, q string) []string {
	t.Helper()
	return readStreamOn(t, ch, q, q, queueDepth(t, ch, q))
}

func TestPersistentMessagesSurviveRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("durable-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("transient-q", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishPersistent(t, ch, "", "durable-q", "p", 100)
	publishPersistent(t, ch, "", "transient-q", "t", 5)
	// A transient message in the durable queue does not survive.
	if err := ch.PublishWithContext(context.Background(), "", "durable-q", false, false, amqp.Publishing{Body: []byte("transient")}); err != nil {
		t.Fatal(err)
	}
	// Two delivered but unacked: they come back redelivered.
	m1, _, _ := ch.Get("durable-q", false)
	m2, _, _ := ch.Get("durable-q", false)
	if string(m1.Body) != "p-0" || string(m2.Body) != "p-1" || m1.Redelivered {
		t.Fatalf("got %q %q", m1.Body, m2.Body)
	}
	// And one acked: it is gone for good.
	m3, _, _ := ch.Get("durable-q", false)
	if err := m3.Ack(false); err != nil {
		t.Fatal(err)
	}
	// The broker handles a channel's frames in order: once this answer
	// comes, it has processed the ack.
	if _, err := ch.QueueDeclarePassive("durable-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	p.stop(syscall.SIGTERM)

	p = startProcess(t, dir)
	_, ch = dialProcess(t, p)
	if _, err := ch.QueueDeclarePassive("transient-q", false, false, false, false, nil); amqpCode(err) != amqp.NotFound {
		t.Fatalf("transient queue after restart: %v", err)
	}
	_, ch = dialProcess(t, p)
	got := getAll(t, ch, "durable-q")
	if len(got) != 99 {
		t.Fatalf("got %d messages back, want 99 (100 persistent, one acked)", len(got))
	}
	for i, m := range got {
		want := "p-" + strconv.Itoa(i)
		if i >= 2 {
			want = "p-" + strconv.Itoa(i+1)
		}
		if string(m.Body) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Body, want)
		}
		if m.Redelivered != (i < 2) {
			t.Fatalf("message %q redelivered=%v", m.Body, m.Redelivered)
		}
		if m.DeliveryMode != amqp.Persistent {
			t.Fatalf("delivery mode %d", m.DeliveryMode)
		}
	}
}

func TestTopologySurvivesRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	c, ch := dialProcess(t, p)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.ExchangeDeclare("d-topic", "topic", true, false, false, false, amqp.Table{"alternate-exchange": "d-ae"}))
	must(ch.ExchangeDeclare("d-ae", "fanout", true, false, false, false, nil))
	must(ch.ExchangeDeclare("t-direct", "direct", false, false, false, false, nil))
	_, err := ch.QueueDeclare("d-q", true, false, false, false, amqp.Table{"x-max-length": int32(10), "x-message-ttl": int64(60000)})
	must(err)
	_, err = ch.QueueDeclare("d-unrouted", true, false, false, false, nil)
	must(err)
	_, err = ch.QueueDeclare("d-exclusive", true, false, true, false, nil)
	must(err)
	must(ch.QueueBind("d-q", "*.stock.#", "d-topic", false, nil))
	must(ch.QueueBind("d-unrouted", "", "d-ae", false, nil))
	must(ch.ExchangeBind("d-ae", "x.#", "d-topic", false, nil))
	must(ch.QueueBind("d-q", "k", "t-direct", false, nil)) // transient source: not kept
	_ = c
	// Users, vhosts, permissions and policies go through the admin API.
	ctl := func(method, path, body string) {
		t.Helper()
		if err := adminCall(p, method, path, body); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	ctl("PUT", "/api/vhosts/other", "")
	ctl("PUT", "/api/users/alice", `{"password":"pw","tags":["monitoring"]}`)
	ctl("PUT", "/api/permissions/other/alice", `{"configure":".*","write":".*","read":".*"}`)
	ctl("PUT", "/api/policies/%2F/ttl", `{"pattern":"^d-q$","definition":{"max-length":3},"apply-to":"queues","priority":1}`)
	ctl("PUT", "/api/operator-policies/%2F/cap", `{"pattern":"^d-q$","definition":{"max-length":2},"apply-to":"queues"}`)
	p.stop(syscall.SIGTERM)

	p = startProcess(t, dir)
	_, ch = dialProcess(t, p)
	for _, x := range []string{"d-topic", "d-ae"} {
		if err := ch.ExchangeDeclarePassive(x, "", true, false, false, false, nil); err != nil {
			t.Fatalf("durable exchange %s lost: %v", x, err)
		}
	}
	// Redeclaring with the same arguments is accepted: they came back exact.
	must(ch.ExchangeDeclare("d-topic", "topic", true, false, false, false, amqp.Table{"alternate-exchange": "d-ae"}))
	_, err = ch.QueueDeclare("d-q", true, false, false, false, amqp.Table{"x-max-length": int32(10), "x-message-ttl": int64(60000)})
	must(err)
	expectCode(t, ch.ExchangeDeclarePassive("t-direct", "direct", false, false, false, false, nil), amqp.NotFound)
	_, ch = dialProcess(t, p)
	if _, err := ch.QueueDeclarePassive("d-exclusive", true, false, true, false, nil); amqpCode(err) != amqp.NotFound {
		t.Fatalf("exclusive queue came back: %v", err)
	}
	_, ch = dialProcess(t, p)
	must(ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 4))
	for _, key := range []string{"usd.stock", "x.y", "nothing"} {
		must(ch.PublishWithContext(context.Background(), "d-topic", key, false, false, amqp.Publishing{Body: []byte(key)}))
		<-confirms
	}
	if got := getAll(t, ch, "d-q"); len(got) != 1 || string(got[0].Body) != "usd.stock" {
		t.Fatalf("d-q got %d messages", len(got))
	}
	// x.y goes through the e2e binding, "nothing" through the alternate exchange.
	if got := getAll(t, ch, "d-unrouted"); len(got) != 2 {
		t.Fatalf("d-unrouted got %d messages", len(got))
	}
	// The policy and the operator policy came back and apply (the
	// operator's max-length 2 beats the policy's 3 and the argument's 10).
	for i := 0; i < 5; i++ {
		must(ch.PublishWithContext(context.Background(), "d-topic", "a.stock", false, false, amqp.Publishing{Body: []byte{byte('0' + i)}}))
		<-confirms
	}
	if got := getAll(t, ch, "d-q"); len(got) != 2 {
		t.Fatalf("d-q holds %d messages, want 2 (operator policy max-length)", len(got))
	}
	c2, err := amqp.Dial("amqp://alice:pw@" + p.addr + "/other")
	if err != nil {
		t.Fatalf("alice cannot log in to vhost other after restart: %v", err)
	}
	c2.Close()
}

// adminCall makes one admin API request as guest.
func adminCall(p *process, method, path, body string) error {
	return httpJSON(method, "http://"+p.admin+path, body)
}

func TestDataDirectoryErrors(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	// A second Warren on the same directory is refused with a clear error.
	out, err := runBinary(t, "-listen", "127.0.0.1:0", "-data", dir)
	if err == nil || !strings.Contains(out, "in use by another Warren") {
		t.Fatalf("second Warren on a locked directory: %v\n%s", err, out)
	}
	p.stop(syscall.SIGTERM)

	// A file where the directory should be.
	file := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(file, []byte("x"), 0o644)
	out, err = runBinary(t, "-listen", "127.0.0.1:0", "-data", file)
	if err == nil || !strings.Contains(out, file) {
		t.Fatalf("data directory that is a file: %v\n%s", err, out)
	}
}

// TestStoredStateAfterAcksPurgesDeletesAndDeadLetters checks what a restart
// brings back after the operations that remove messages: an ack from one of
// two queues sharing a message, a purge, a queue deletion, and a
// dead-letter move between durable queues.
func TestStoredStateAfterAcksPurgesDeletesAndDeadLetters(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	c, ch := dialProcess(t, p)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pub := func(exchange, key, prefix string, n int) {
		t.Helper()
		pc, err := c.Channel()
		must(err)
		publishPersistent(t, pc, exchange, key, prefix, n)
		must(pc.Close())
	}
	must(ch.ExchangeDeclare("fan", "fanout", true, false, false, false, nil))
	for _, q := range []string{"fan-a", "fan-b", "purged", "deleted", "dlq"} {
		_, err := ch.QueueDeclare(q, true, false, false, false, nil)
		must(err)
	}
	_, err := ch.QueueDeclare("work", true, false, false, false, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
	must(err)
	must(ch.QueueBind("fan-a", "", "fan", false, nil))
	must(ch.QueueBind("fan-b", "", "fan", false, nil))
	pub("fan", "", "shared", 20)
	pub("", "purged", "p", 5)
	pub("", "deleted", "d", 5)
	pub("", "work", "w", 3)

	// Ack everything from fan-a; fan-b keeps its references.
	for _, m := range getAll(t, ch, "fan-a") {
		must(m.Ack(false))
	}
	_, err = ch.QueuePurge("purged", false)
	must(err)
	_, err = ch.QueueDelete("deleted", false, false, false)
	must(err)
	// Reject two of three: they move to dlq.
	got := getAll(t, ch, "work")
	must(got[0].Reject(false))
	must(got[1].Reject(false))
	must(got[2].Nack(false, true))
	// A synchronous call after the acks: they have all been processed.
	_, err = ch.QueueDeclarePassive("work", true, false, false, false, nil)
	must(err)
	p.stop(syscall.SIGTERM)

	p = startProcess(t, dir)
	_, ch = dialProcess(t, p)
	counts := map[string]int{}
	for _, q := range []string{"fan-a", "fan-b", "purged", "dlq", "work"} {
		counts[q] = len(getAll(t, ch, q))
	}
	want := map[string]int{"fan-a": 0, "fan-b": 20, "purged": 0, "dlq": 2, "work": 1}
	for q, n := range want {
		if counts[q] != n {
			t.Errorf("%s holds %d messages after the restart, want %d", q, counts[q], n)
		}
	}
	if _, err := ch.QueueDeclarePassive("deleted", true, false, false, false, nil); amqpCode(err) != amqp.NotFound {
		t.Fatalf("deleted queue came back: %v", err)
	}
	_, ch = dialProcess(t, p)
	q, err := ch.QueueDeclare("deleted", true, false, false, false, nil)
	must(err)
	if q.Messages != 0 {
		t.Fatalf("a redeclared queue found %d old messages", q.Messages)
	}
}
