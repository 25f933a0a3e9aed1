package tests

import (
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
)

// Queues: declare (server-named, passive, exclusive, auto-delete),
// arguments, bind, purge and delete, and their errors.

func TestServerNamedQueue(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	q1, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	q2, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(q1.Name, "amq.gen-") || !strings.HasPrefix(q2.Name, "amq.gen-") || q1.Name == q2.Name {
		t.Fatalf("server-named queues %q and %q", q1.Name, q2.Name)
	}
	// The server-chosen name works like any other.
	d := consume(t, ch, q1.Name, true)
	publish(t, ch, "", q1.Name, body("hi"))
	receive(t, d)
}

func TestQueueDeclarePassive(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	_, err := ch.QueueDeclarePassive(uniq(t, "missing"), false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)

	ch, _ = c.Channel()
	ch.Confirm(false)
	q := declareQueue(t, s, ch, "q", amqp.Table{"x-max-length": int32(10)})
	publishConfirmed(t, ch, "", q, body("1"))
	publishConfirmed(t, ch, "", q, body("2"))
	other, _ := c.Channel()
	other.Qos(1, 0, false)
	if _, err := other.Consume(q, "", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	// Passive ignores flags and arguments, and reports the counts. One
	// message went to the consumer, so one is ready.
	info, err := ch.QueueDeclarePassive(q, true, true, false, false, amqp.Table{"x-max-length": int32(99)})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != q || info.Consumers != 1 {
		t.Fatalf("passive declare: %+v", info)
	}
	eventually(t, "one message delivered", func() bool { return count(t, ch, q) == 1 })
}

func TestQueueDeclareOkCounts(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	for i := 0; i < 3; i++ {
		publishConfirmed(t, ch, "", q, body("m"))
	}
	info, err := ch.QueueDeclare(q, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Messages != 3 || info.Consumers != 0 {
		t.Fatalf("declare-ok: %d messages, %d consumers", info.Messages, info.Consumers)
	}
}

func TestExclusiveQueue(t *testing.T) {
	s := start(t)
	owner, och := channel(t, s)
	name := uniq(t, "")
	s.ownQueue(name)
	if _, err := och.QueueDeclare(name, false, false, true, false, nil); err != nil {
		t.Fatal(err)
	}
	x := declareExchange(t, s, och, "x", "fanout", nil)

	// Other connections get 405 RESOURCE_LOCKED for every use but publish.
	c2 := dial(t, s)
	uses := map[string]func(ch *amqp.Channel) error{
		"declare": func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(name, false, false, true, false, nil)
			return err
		},
		"declare non-exclusive": func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(name, false, false, false, false, nil)
			return err
		},
		"passive": func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclarePassive(name, false, false, true, false, nil)
			return err
		},
		"consume": func(ch *amqp.Channel) error {
			_, err := ch.Consume(name, "", true, false, false, false, nil)
			return err
		},
		"get": func(ch *amqp.Channel) error {
			_, _, err := ch.Get(name, true)
			return err
		},
		"bind":  func(ch *amqp.Channel) error { return ch.QueueBind(name, "", x, false, nil) },
		"purge": func(ch *amqp.Channel) error { _, err := ch.QueuePurge(name, false); return err },
		"delete": func(ch *amqp.Channel) error {
			_, err := ch.QueueDelete(name, false, false, false)
			return err
		},
	}
	for what, use := range uses {
		ch, err := c2.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := use(ch); amqpCode(err) != amqp.ResourceLocked {
			t.Errorf("%s from another connection: %v, expected 405", what, err)
		}
	}
	// Other channels of the owning connection may use it.
	och2, _ := owner.Channel()
	if _, err := och2.Consume(name, "", true, false, false, false, nil); err != nil {
		t.Fatalf("consume from another channel of the owner: %v", err)
	}
	och2.Close()

	// Publishing to it from elsewhere is allowed.
	ch2, _ := c2.Channel()
	ch2.Confirm(false)
	publishConfirmed(t, ch2, "", name, body("from outside"))
	if m := get(t, och, name); string(m.Body) != "from outside" {
		t.Fatalf("got %q", m.Body)
	}

	// It goes with its connection.
	owner.Close()
	eventually(t, "the exclusive queue deleted", func() bool {
		ch, err := c2.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.QueueDeclarePassive(name, false, false, true, false, nil)
		if err == nil {
			ch.Close()
			return false
		}
		if amqpCode(err) != amqp.NotFound && amqpCode(err) != amqp.ResourceLocked {
			t.Fatalf("passive declare: %v", err)
		}
		return amqpCode(err) == amqp.NotFound
	})
}

func TestAutoDeleteQueue(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	declareAD := func(suffix string) string {
		name := uniq(t, suffix)
		s.ownQueue(name)
		if _, err := ch.QueueDeclare(name, false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return name
	}
	exists := func(name string) bool {
		probe, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = probe.QueueDeclarePassive(name, false, true, false, false, nil)
		if err == nil {
			probe.Close()
			return true
		}
		if amqpCode(err) != amqp.NotFound {
			t.Fatalf("passive declare %s: %v", name, err)
		}
		return false
	}

	// Never consumed from: it stays.
	never := declareAD("never")
	if !exists(never) {
		t.Fatal("an auto-delete queue that never had a consumer was deleted")
	}

	// Deleted when its last consumer cancels.
	q := declareAD("q")
	if _, err := ch.Consume(q, "c1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Consume(q, "c2", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.Cancel("c1", false); err != nil {
		t.Fatal(err)
	}
	if !exists(q) {
		t.Fatal("deleted while a consumer remained")
	}
	if err := ch.Cancel("c2", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "auto-delete after the last cancel", func() bool { return !exists(q) })

	// Or when the consumer's channel closes.
	q2 := declareAD("q2")
	cch, _ := c.Channel()
	if _, err := cch.Consume(q2, "c", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	cch.Close()
	eventually(t, "auto-delete after the consumer's channel closed", func() bool { return !exists(q2) })
}

func TestQueuePurge(t *testing.T) {
	s := start(t)
	_, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "", nil)
	for i := 0; i < 5; i++ {
		publishConfirmed(t, ch, "", q, body("m"))
	}
	// An unacked message is not ready, so not purged.
	if _, ok, err := ch.Get(q, false); err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	n, err := ch.QueuePurge(q, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("purge-ok counted %d, expected 4", n)
	}
	if n, _ := ch.QueuePurge(q, false); n != 0 {
		t.Fatalf("second purge counted %d", n)
	}
	_, err = ch.QueuePurge(uniq(t, "missing"), false)
	expectCode(t, err, amqp.NotFound)
}

func TestQueueDelete(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "q", nil)
	for i := 0; i < 3; i++ {
		publishConfirmed(t, ch, "", q, body("m"))
	}

	// if-empty: refused while it has messages.
	_, err := ch.QueueDelete(q, false, true, false)
	expectCode(t, err, amqp.PreconditionFailed)

	// if-unused: refused while it has a consumer.
	ch, _ = c.Channel()
	cch, _ := c.Channel()
	if _, err := cch.Consume(q, "c", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = ch.QueueDelete(q, true, false, false)
	expectCode(t, err, amqp.PreconditionFailed)
	cch.Close() // the three deliveries go back to the queue

	// delete-ok counts the messages deleted.
	ch, _ = c.Channel()
	eventually(t, "messages requeued", func() bool { return count(t, ch, q) == 3 })
	n, err := ch.QueueDelete(q, true, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("delete-ok counted %d, expected 3", n)
	}
	_, err = ch.QueueDeclarePassive(q, false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)

	// Deleting an empty, unused queue with both flags works.
	ch, _ = c.Channel()
	q2 := declareQueue(t, s, ch, "q2", nil)
	if n, err := ch.QueueDelete(q2, true, true, false); err != nil || n != 0 {
		t.Fatalf("delete: %d %v", n, err)
	}
	// Deleting a queue that does not exist is not an error (RabbitMQ 3.x).
	if _, err := ch.QueueDelete(uniq(t, "missing"), false, false, false); err != nil {
		t.Fatalf("delete of a missing queue: %v", err)
	}
}

// A channel that deletes a queue it consumes from gets queue.delete-ok,
// then its consumer's basic.cancel, whatever the queue's type: the order
// RabbitMQ 3.10.8 keeps (amqplib's channel_api tests count on it).
func TestQueueDeleteOkBeforeCancel(t *testing.T) {
	s := start(t)
	c := rawDial(t, s)
	c.handshake(defaultHandshake())
	c.openChannel(1)
	c.method(1, 60, 10, []byte{0, 0, 0, 0, 0, 10, 0}) // basic.qos 10: a stream's consumer needs one
	c.expect(60, 11)
	for _, qtype := range []string{"classic", "quorum", "stream"} {
		q := uniq(t, qtype)
		s.ownQueue(q)
		declare := appendShortStr([]byte{0, 0}, q)
		declare = append(declare, 0x02) // durable
		c.method(1, 50, 10, appendTable(declare, map[string]any{"x-queue-type": qtype}))
		c.expect(50, 11)
		c.consume(1, q, false)
		c.expect(60, 21)
		c.method(1, 50, 40, append(appendShortStr([]byte{0, 0}, q), 0))
		c.expect(50, 41)
		if f := c.expect(60, 30); f.channel != 1 {
			t.Fatalf("%s: basic.cancel on channel %d", qtype, f.channel)
		}
	}
}

func TestQueueNames(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	prefix := uniq(t, "")
	long := prefix + strings.Repeat("x", 255-len(prefix))
	utf := prefix + strings.Repeat("é", (255-len(prefix))/2) // two bytes each
	for _, name := range []string{long, utf, prefix + " with spaces/and.dots#*"} {
		s.ownQueue(name)
		if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
			t.Fatalf("declare %q (%d bytes): %v", name, len(name), err)
		}
		publishConfirmed(t, ch, "", name, body(name))
		if m := get(t, ch, name); string(m.Body) != name || m.RoutingKey != name {
			t.Fatalf("got %q via %q", m.Body, m.RoutingKey)
		}
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			t.Fatal(err)
		}
	}

	// The amq. prefix is reserved.
	reserved := "amq." + prefix
	s.ownQueue(reserved)
	_, err := ch.QueueDeclare(reserved, false, false, false, false, nil)
	expectCode(t, err, amqp.AccessRefused)
	ch, _ = c.Channel()
	_, err = ch.QueueDeclarePassive(reserved, false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
}

// Warren refuses queue types it does not implement rather than ignoring
// them (semantics.md); RabbitMQ would create a stream.
func TestClassicQueueTypeAccepted(t *testing.T) {
	s := start(t)
	_, ch := channel(t, s)
	declareQueue(t, s, ch, "", amqp.Table{"x-queue-type": "classic"})
}

func TestQueueArgumentValidation(t *testing.T) {
	s := start(t)
	c := dial(t, s)
	for _, tc := range []struct {
		name string
		args amqp.Table
	}{
		{"ttl as a string", amqp.Table{"x-message-ttl": "100"}},
		{"negative ttl", amqp.Table{"x-message-ttl": int32(-1)}},
		{"zero expires", amqp.Table{"x-expires": int32(0)}},
		{"expires as a string", amqp.Table{"x-expires": "1000"}},
		{"negative max-length", amqp.Table{"x-max-length": int32(-1)}},
		{"max-length as a string", amqp.Table{"x-max-length": "10"}},
		{"max-length-bytes as a bool", amqp.Table{"x-max-length-bytes": true}},
		{"unknown overflow", amqp.Table{"x-overflow": "drop-tail"}},
		{"overflow as a number", amqp.Table{"x-overflow": int32(1)}},
		{"dlx as a number", amqp.Table{"x-dead-letter-exchange": int32(1)}},
		{"dl routing key without dlx", amqp.Table{"x-dead-letter-routing-key": "k"}},
		{"priority too large", amqp.Table{"x-max-priority": int32(256)}},
		{"negative priority", amqp.Table{"x-max-priority": int32(-1)}},
		{"priority as a string", amqp.Table{"x-max-priority": "5"}},
	} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		name := uniq(t, "")
		s.ownQueue(name)
		_, err = ch.QueueDeclare(name, false, false, false, false, tc.args)
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Errorf("%s: %v, expected 406", tc.name, err)
		}
	}
	// Arguments the broker does not know are accepted.
	ch, _ := c.Channel()
	declareQueue(t, s, ch, "unknown-arg", amqp.Table{"x-whatever": "x", "plain": int32(1)})
}

func TestQueueRedeclare(t *testing.T) {
	s := start(t)
	c, ch := channel(t, s)
	args := amqp.Table{"x-message-ttl": int32(60000), "x-max-length": int32(10), "x-unknown": "a"}
	q := declareQueue(t, s, ch, "", args)

	// The same: a no-op. An integer of another width is the same value;
	// arguments the broker does not know are not compared.
	if _, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-message-ttl": int64(60000), "x-max-length": int16(10), "x-unknown": "b"}); err != nil {
		t.Fatalf("equivalent redeclare: %v", err)
	}
	for _, tc := range []struct {
		name                string
		durable, autoDelete bool
		args                amqp.Table
	}{
		{"durable", true, false, args},
		{"auto-delete", false, true, args},
		{"different ttl", false, false, amqp.Table{"x-message-ttl": int32(1000), "x-max-length": int32(10)}},
		{"missing ttl", false, false, amqp.Table{"x-max-length": int32(10)}},
		{"extra argument", false, false, amqp.Table{"x-message-ttl": int32(60000), "x-max-length": int32(10), "x-expires": int32(100000)}},
		{"no arguments", false, false, nil},
	} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = ch.QueueDeclare(q, tc.durable, tc.autoDelete, false, false, tc.args)
		if amqpCode(err) != amqp.PreconditionFailed {
			t.Errorf("redeclare with %s: %v, expected 406", tc.name, err)
		}
	}
}

func TestQueueBindErrors(t *testing.T) {
	s := start(t)
	c, ch := confirmChannel(t, s)
	q := declareQueue(t, s, ch, "q", nil)
	x := declareExchange(t, s, ch, "x", "direct", nil)
	expectCode(t, ch.QueueBind(q, "k", uniq(t, "missing"), false, nil), amqp.NotFound)
	ch, _ = c.Channel()
	expectCode(t, ch.QueueBind(uniq(t, "missing"), "k", x, false, nil), amqp.NotFound)

	// Binding twice is one binding; unbinding something never bound is
	// fine.
	ch, _ = c.Channel()
	ch.Confirm(false)
	bind(t, ch, q, "k", x, nil)
	bind(t, ch, q, "k", x, nil)
	publishConfirmed(t, ch, x, "k", body("once"))
	if got := drain(t, ch, q); len(got) != 1 {
		t.Fatalf("got %q", got)
	}
	if err := ch.QueueUnbind(q, "k", x, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueUnbind(q, "never-bound", x, nil); err != nil {
		t.Fatalf("unbind of a binding that does not exist: %v", err)
	}
	publishConfirmed(t, ch, x, "k", body("unbound"))
	if got := drain(t, ch, q); len(got) != 0 {
		t.Fatalf("got %q after unbind", got)
	}
}

// A Warren-only check of the loopback rule for guest is in the broker's
// own tests; here, a user configured in Warren logs in from loopback.
func TestConfiguredUser(t *testing.T) {
	s := startWarren(t, func(c *config.Config) {
		c.Defaults.User, c.Defaults.Password = "alice", "s3cret"
		c.Defaults.VHost = "/prod"
		c.Defaults.LoopbackUsers = nil
	})
	u := strings.Replace(s.url, "guest:guest@", "alice:s3cret@", 1) + "%2Fprod"
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatalf("dial as alice on /prod: %v", err)
	}
	defer conn.Close()
	if _, err := amqp.Dial(s.url); err == nil {
		t.Fatal("guest logged in although not configured")
	}
}
