package tests

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The plugins Warren ships, enabled in a running broker and used over AMQP.

func TestShippedPluginsAreAvailable(t *testing.T) {
	s, api := startWithPlugins(t)
	_ = s
	list := listPlugins(t, api)
	for name, types := range map[string][]string{
		"consistent-hash": {"x-consistent-hash"},
		"delayed-message": {"x-delayed-message"},
		"jms":             {"x-jms-topic", "x-jms-queue"},
	} {
		p, ok := list[name]
		if !ok || p.Enabled || fmt.Sprint(p.Types) != fmt.Sprint(types) {
			t.Errorf("%s: %+v", name, p)
		}
	}
}

func TestConsistentHashExchange(t *testing.T) {
	s := startWarren(t)
	if err := s.b.EnablePlugin("consistent-hash"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	x := uniq(t, "hash")
	if err := ch.ExchangeDeclare(x, "x-consistent-hash", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	light := declareQueue(t, s, ch, "light", nil)
	heavy := declareQueue(t, s, ch, "heavy", nil)
	bind(t, ch, light, "1", x, nil)
	bind(t, ch, heavy, "2", x, nil)
	// A weight that is not a positive integer is refused.
	_, ch2 := channel(t, s)
	expectCode(t, ch2.QueueBind(light, "heavy", x, false, nil), amqp.PreconditionFailed)

	const n = 3000
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := 0; i < n; i++ {
		if err := ch.PublishWithContext(context.Background(), x, fmt.Sprint("key-", i), false, false, body("m")); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		<-confirms
	}
	l, h := count(t, ch, light), count(t, ch, heavy)
	if l+h != n || l < n/3-200 || l > n/3+200 {
		t.Fatalf("light %d, heavy %d: want about 1:2 of %d", l, h, n)
	}
	// The same key always lands in the same queue.
	drain(t, ch, light)
	drain(t, ch, heavy)
	for i := 0; i < 20; i++ {
		publishConfirmed(t, ch, x, "sticky", body("s"))
	}
	if l, h := count(t, ch, light), count(t, ch, heavy); !(l == 20 && h == 0 || l == 0 && h == 20) {
		t.Fatalf("one key spread over queues: %d and %d", l, h)
	}
}

func TestDelayedMessageExchange(t *testing.T) {
	s := startWarren(t)
	if err := s.b.EnablePlugin("delayed-message"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	x := uniq(t, "delayed")
	_, bad := channel(t, s)
	expectCode(t, bad.ExchangeDeclare(x, "x-delayed-message", false, false, false, false, nil), amqp.PreconditionFailed)
	if err := ch.ExchangeDeclare(x, "x-delayed-message", false, false, false, false, amqp.Table{"x-delayed-type": "direct"}); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "k", x, nil)
	d := consume(t, ch, q, true)

	// That the delayed one is held is a matter of time: it comes no
	// sooner than its x-delay after the publish (a slow broker only makes
	// it later), and after the undelayed one published behind it.
	start := time.Now()
	publishConfirmed(t, ch, x, "k", amqp.Publishing{Headers: amqp.Table{"x-delay": int32(300)}, Body: []byte("later")})
	publishConfirmed(t, ch, x, "k", amqp.Publishing{Body: []byte("now")})
	if m := receive(t, d); string(m.Body) != "now" {
		t.Fatalf("first delivery %q, want the undelayed message", m.Body)
	}
	m := receive(t, d)
	if string(m.Body) != "later" {
		t.Fatalf("got %q", m.Body)
	}
	if early := 300*time.Millisecond - time.Since(start); early > 0 {
		t.Fatalf("the delayed message came %v early", early)
	}
	// Its x-delay is negated, as RabbitMQ's plugin does, in its own type.
	if v, ok := m.Headers["x-delay"].(int32); !ok || v != -300 {
		t.Fatalf("the delayed message's x-delay is %#v, want int32(-300)", m.Headers["x-delay"])
	}
	// A held message counts as routed: a mandatory publish is not returned.
	if returned := !confirmPublish(t, ch, x, "k", true, amqp.Publishing{Headers: amqp.Table{"x-delay": int32(50)}, Body: []byte("held")}); returned {
		t.Fatal("a held mandatory message came back")
	}
	receive(t, d)
}

// TestDelayedTypeChecks: a declare names a delayed type that does not
// exist, or arguments that type refuses, or a binding it refuses, and is
// refused at once with 406 rather than accepted and its messages dropped
// when due.
func TestDelayedTypeChecks(t *testing.T) {
	s := startWarren(t)
	for _, p := range []string{"delayed-message", "consistent-hash"} {
		if err := s.b.EnablePlugin(p); err != nil {
			t.Fatal(err)
		}
	}
	x := uniq(t, "delayed")
	for _, c := range []struct {
		args amqp.Table
		text string
	}{
		{amqp.Table{"x-delayed-type": "x-foo"}, "'x-delayed-type' must be an existing exchange type, not 'x-foo'"},
		{amqp.Table{"x-delayed-type": "x-jms-topic"}, "not 'x-jms-topic'"}, // shipped, not enabled
		{amqp.Table{"x-delayed-type": "x-consistent-hash", "hash-header": "h", "hash-property": "message_id"}, "mutually exclusive"},
	} {
		_, ch := channel(t, s)
		expectRefusal(t, ch.ExchangeDeclare(x, "x-delayed-message", false, false, false, false, c.args), amqp.PreconditionFailed, c.text)
	}
	_, ch := channel(t, s)
	if err := ch.ExchangeDeclare(x, "x-delayed-message", false, false, false, false, amqp.Table{"x-delayed-type": "x-consistent-hash"}); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	expectRefusal(t, ch.QueueBind(q, "zero", x, false, nil), amqp.PreconditionFailed, "binding key 'zero' is not a valid weight")
	_, ch = channel(t, s)
	bind(t, ch, q, "2", x, nil)
}

func TestJMSExchanges(t *testing.T) {
	s := startWarren(t)
	if err := s.b.EnablePlugin("jms"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	topic := uniq(t, "jms-topic")
	if err := ch.ExchangeDeclare(topic, "x-jms-topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	heavy := declareQueue(t, s, ch, "heavy", nil)
	red := declareQueue(t, s, ch, "red", nil)
	bind(t, ch, heavy, "orders.*", topic, amqp.Table{"x-selector": "weight > 10"})
	bind(t, ch, red, "orders.#", topic, amqp.Table{"rjms_erlang_selector": `{'=', {'ident', <<"color">>}, <<"red">>}.`})
	_, bad := channel(t, s)
	expectCode(t, bad.QueueBind(red, "x", topic, false, amqp.Table{"x-selector": "weight >"}), amqp.PreconditionFailed)

	pub := func(key string, h amqp.Table) {
		publishConfirmed(t, ch, topic, key, amqp.Publishing{Headers: h, Body: []byte(key)})
	}
	pub("orders.eu", amqp.Table{"weight": int32(20), "color": "red"})
	pub("orders.eu", amqp.Table{"weight": int32(5), "color": "blue"})
	pub("orders.eu.big", amqp.Table{"weight": int32(50), "color": "red"})
	pub("stock.eu", amqp.Table{"weight": int32(99), "color": "red"})
	pub("orders.us", amqp.Table{"color": "green"}) // no weight: unknown, not true
	if got := count(t, ch, heavy); got != 1 {
		t.Fatalf("heavy got %d, want 1", got)
	}
	// red's binding is the JMS client's (rjms_erlang_selector): as in
	// RabbitMQ it routes on the selector alone, so stock.eu reaches it too.
	if got := count(t, ch, red); got != 3 {
		t.Fatalf("red got %d, want 3", got)
	}

	queue := uniq(t, "jms-queue")
	if err := ch.ExchangeDeclare(queue, "x-jms-queue", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "direct", nil)
	bind(t, ch, q, "exact", queue, nil)
	publishConfirmed(t, ch, queue, "exact", body("yes"))
	publishConfirmed(t, ch, queue, "exactly", body("no"))
	if got := drain(t, ch, q); len(got) != 1 || got[0] != "yes" {
		t.Fatalf("x-jms-queue delivered %v", got)
	}
}

// A persistent message held by a durable delayed exchange survives a
// restart and is delivered when due.
func TestHeldMessageSurvivesRestart(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("[plugins]\nenabled = [\"delayed-message\"]\ncache_dir = %q\n", sharedWasmCache(t))
	p := startProcessWith(t, dir, cfg)
	_, ch := dialProcess(t, p)
	if err := ch.ExchangeDeclare("later", "x-delayed-message", true, false, false, false, amqp.Table{"x-delayed-type": "fanout"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("later-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("later-q", "", "later", false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	if err := ch.PublishWithContext(context.Background(), "later", "", false, false, amqp.Publishing{
		DeliveryMode: amqp.Persistent, Headers: amqp.Table{"x-delay": int32(1500)}, Body: []byte("survivor"),
	}); err != nil {
		t.Fatal(err)
	}
	if c := <-confirms; !c.Ack {
		t.Fatal("nack")
	}
	p.stop(syscall.SIGKILL)

	p = startProcessWith(t, dir, cfg)
	_, ch = dialProcess(t, p)
	d, err := ch.Consume("later-q", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-d:
		if string(m.Body) != "survivor" {
			t.Fatalf("got %q", m.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held message never came after the restart")
	}
}
