package tests

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Calls RabbitMQ 3.10 applications make that are not about routing:
// rotating a connection's secret, closing it twice, exclusive queues
// declared durable. Each runs against the reference broker too.

// connection.update-secret is answered, and the connection goes on: a
// client that rotates its token (amqplib's updateSecret, amqp091-go's
// UpdateSecret) keeps working. RabbitMQ's internal backend takes any
// new secret, since its credentials do not expire.
func TestUpdateSecret(t *testing.T) {
	s := start(t)
	conn, err := amqp.Dial(s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, secret := range []string{"guest", "a rotated token"} {
		if err := conn.UpdateSecret(secret, "rotation"); err != nil {
			t.Fatalf("update-secret %q: %v", secret, err)
		}
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatalf("after update-secret: %v", err)
	}
}

// A user deleted since the login has its new secret refused: 530, and
// the connection closes. (RabbitMQ closes a deleted user's connections
// at once, so it never gets that far: Warren only.)
func TestUpdateSecretOfDeletedUser(t *testing.T) {
	s := startWarren(t)
	pw := "pw"
	if err := s.b.PutUser("rotor", &pw, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetPermission("/", "rotor", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(fmt.Sprintf("amqp://rotor:pw@%s/", s.b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	if err := s.b.DeleteUser("rotor"); err != nil {
		t.Fatal(err)
	}
	// The call fails; which error it returns races in amqp091-go (the
	// close, or 503 when the call sees its closed reply channel first),
	// so the broker's answer is read from the connection's close.
	if err := conn.UpdateSecret("pw2", "rotation"); err == nil {
		t.Fatal("update-secret of a deleted user succeeded")
	}
	expectClose(t, closed, amqp.NotAllowed)
}

// Two connection.close in a row (amqp091-go closing from two goroutines)
// are each answered with close-ok, and the broker leaves the socket for
// the client to close rather than resetting it under the second answer.
func TestDoubleConnectionClose(t *testing.T) {
	s := start(t)
	c := rawDial(t, s)
	c.handshake(defaultHandshake())
	closeArgs := appendShortStr([]byte{0, 200}, "bye")
	closeArgs = append(closeArgs, 0, 0, 0, 0)
	c.method(0, 10, 50, closeArgs)
	c.method(0, 10, 50, closeArgs)
	c.expect(10, 51)
	c.expect(10, 51)
	switch f, err := c.read(time.Second); {
	case err == nil:
		cl, m := f.classMethod()
		t.Fatalf("after two close-ok, a frame: type %d method %d.%d", f.typ, cl, m)
	case !errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("the broker hung up under the client: %v", err)
	}
}

// An exclusive queue declared durable is not durable (it ends with its
// connection): a redeclare with either value matches, and a redeclare
// that differs in exclusivity is 405 before any other difference is 406.
func TestExclusiveDurableQueue(t *testing.T) {
	s := start(t)
	owner, other := dial(t, s), dial(t, s)
	declare := func(c *amqp.Connection, durable, autoDelete, exclusive bool) error {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		_, err = ch.QueueDeclare("excl-durable", durable, autoDelete, exclusive, false, nil)
		return err
	}
	if err := declare(owner, true, false, true); err != nil {
		t.Fatal(err)
	}
	if err := declare(owner, false, false, true); err != nil {
		t.Fatalf("redeclared durable=false by its owner: %v", err)
	}
	if err := declare(owner, true, false, true); err != nil {
		t.Fatalf("redeclared durable=true by its owner: %v", err)
	}
	expectCode(t, declare(owner, false, false, false), amqp.ResourceLocked) // not exclusive: 405, not 406 durable
	expectCode(t, declare(owner, true, true, true), amqp.PreconditionFailed)
	expectCode(t, declare(other, true, false, true), amqp.ResourceLocked)
	expectCode(t, declare(other, false, true, false), amqp.ResourceLocked)
	if s.b != nil {
		v, _ := s.b.VHost("/")
		for _, e := range v.QueueEntries() {
			if e.Name == "excl-durable" && e.Durable {
				t.Fatal("the exclusive queue is listed durable")
			}
		}
	}

	// A durable queue that exists is not made exclusive by a redeclare:
	// 405, not 406 for the durable flag an exclusive declare drops.
	ch, _ := other.Channel()
	defer ch.Close()
	if _, err := ch.QueueDeclare("durable-plain", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	s.ownQueue("durable-plain")
	ch2, _ := owner.Channel()
	_, err := ch2.QueueDeclare("durable-plain", true, false, true, false, nil)
	expectCode(t, err, amqp.ResourceLocked)
}

// basic.consume's x-priority: a queue serves its highest-priority
// consumers that have room (round-robin among equals) and lower ones only
// when those are blocked; a priority that is not an integer is 406. For
// classic and quorum queues alike.
func TestConsumerPriorities(t *testing.T) {
	s := start(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			name := "consumer-prio-" + typ
			s.ownQueue(name)
			conn := dial(t, s)
			pub, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pub.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": typ}); err != nil {
				t.Fatal(err)
			}
			for _, bad := range []any{"high", 2.5, true} {
				ch, _ := conn.Channel()
				_, err := ch.Consume(name, "", false, false, false, false, amqp.Table{"x-priority": bad})
				expectRefusal(t, err, amqp.PreconditionFailed, "invalid arg 'x-priority' for queue '"+name+"' in vhost '/': \"expected integer, got")
			}
			// Each consumer on its own channel, prefetch 3: high1 and
			// high2 (priority 10) share the first six; low (-1, below the
			// default) and mid (0, none given) get nothing until both are
			// full, then mid first.
			consume := func(tag string, args amqp.Table) <-chan amqp.Delivery {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				if err := ch.Qos(3, 0, false); err != nil {
					t.Fatal(err)
				}
				d, err := ch.Consume(name, tag, false, false, false, false, args)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			low := consume("low", amqp.Table{"x-priority": int32(-1)})
			mid := consume("mid", nil)
			high1 := consume("high1", amqp.Table{"x-priority": int64(10)})
			high2 := consume("high2", amqp.Table{"x-priority": int16(10)})
			for i := range 10 {
				if err := pub.Publish("", name, false, false, amqp.Publishing{Body: []byte(fmt.Sprint(i))}); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string][]string{}
			take := func(tag string, ds <-chan amqp.Delivery, n int) {
				t.Helper()
				for range n {
					select {
					case d := <-ds:
						got[tag] = append(got[tag], string(d.Body))
					case <-time.After(5 * time.Second):
						t.Fatalf("%s got %v, waited for %d; all: %v", tag, got[tag], n, got)
					}
				}
			}
			take("high1", high1, 3)
			take("high2", high2, 3)
			take("mid", mid, 3)
			take("low", low, 1)
			for tag, want := range map[string]string{"high1": "[0 2 4]", "high2": "[1 3 5]", "mid": "[6 7 8]", "low": "[9]"} {
				if fmt.Sprint(got[tag]) != want {
					t.Fatalf("deliveries %v, want high1 [0 2 4], high2 [1 3 5], mid [6 7 8], low [9]", got)
				}
			}
		})
	}
}

// A consumer's x-priority is any integer, as RabbitMQ compares any: a
// long of 2^40 comes before an int of 2^31-1 (checked against RabbitMQ
// 3.10.8, which takes both), for classic and quorum queues alike.
func TestConsumerPrioritiesBeyond32Bits(t *testing.T) {
	s := start(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			name := uniq(t, "")
			s.ownQueue(name)
			conn, pub := channel(t, s)
			if _, err := pub.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": typ}); err != nil {
				t.Fatal(err)
			}
			consumers := map[string]<-chan amqp.Delivery{}
			for tag, priority := range map[string]any{"long": int64(1) << 40, "int": int32(1<<31 - 1)} {
				ch, err := conn.Channel()
				if err != nil {
					t.Fatal(err)
				}
				if err := ch.Qos(3, 0, false); err != nil {
					t.Fatal(err)
				}
				if consumers[tag], err = ch.Consume(name, tag, false, false, false, false, amqp.Table{"x-priority": priority}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 4 {
				publish(t, pub, "", name, body(fmt.Sprint(i)))
			}
			if got := bodies(t, consumers["long"], 3); fmt.Sprint(got) != "[0 1 2]" {
				t.Fatalf("the consumer of priority 2^40 got %v, want [0 1 2]", got)
			}
			if got := bodies(t, consumers["int"], 1); fmt.Sprint(got) != "[3]" {
				t.Fatalf("the consumer of priority 2^31-1 got %v, want [3]", got)
			}
		})
	}
}

// Under single active consumer the first consumer is the active one,
// whatever the priorities of those that come later (RabbitMQ 3.10; 3.12
// changed it for quorum queues).
func TestConsumerPriorityWithSingleActiveConsumer(t *testing.T) {
	s := start(t)
	for _, typ := range []string{"classic", "quorum"} {
		t.Run(typ, func(t *testing.T) {
			name := "consumer-prio-sac-" + typ
			s.ownQueue(name)
			conn := dial(t, s)
			pub, err := conn.Channel()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pub.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": typ, "x-single-active-consumer": true}); err != nil {
				t.Fatal(err)
			}
			consume := func(args amqp.Table) <-chan amqp.Delivery {
				ch, _ := conn.Channel()
				d, err := ch.Consume(name, "", true, false, false, false, args)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			first := consume(nil)
			later := consume(amqp.Table{"x-priority": int32(9)})
			if err := pub.Publish("", name, false, false, amqp.Publishing{Body: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-first:
			case <-later:
				t.Fatal("the later consumer of higher priority became the active one")
			case <-time.After(5 * time.Second):
				t.Fatal("no delivery")
			}
		})
	}
}

// Direct reply-to: a client consumes amq.rabbitmq.reply-to (no-ack),
// publishes a request whose reply_to is that name, and gets the reply a
// server publishes to the token it finds there, straight to its channel,
// with no queue; the misuses get RabbitMQ's codes, and a reply to a
// channel that is gone is unroutable.
func TestDirectReplyTo(t *testing.T) {
	s := start(t)
	conn := dial(t, s)
	channel := func() *amqp.Channel {
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	const pseudo = "amq.rabbitmq.reply-to"

	// Misuses.
	_, err := channel().Consume(pseudo, "", false, false, false, false, nil)
	expectRefusal(t, err, amqp.PreconditionFailed, "reply consumer cannot acknowledge")
	ch := channel()
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Publish("", "anywhere", false, false, amqp.Publishing{ReplyTo: pseudo, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	expectRefusal(t, expectClose(t, closed, amqp.PreconditionFailed), amqp.PreconditionFailed, "fast reply consumer does not exist")
	ch = channel()
	if _, err := ch.Consume(pseudo, "one", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = ch.Consume(pseudo, "two", true, false, false, false, nil)
	expectRefusal(t, err, amqp.PreconditionFailed, "reply consumer already set")
	_, _, err = channel().Get(pseudo, true)
	expectCode(t, err, amqp.NotFound)
	expectCode(t, channel().QueueBind(pseudo, "k", "amq.direct", false, nil), amqp.NotFound)
	for _, passive := range []bool{true, false} {
		ch := channel()
		q, err := ch.QueueDeclare(pseudo, false, false, false, false, nil)
		if passive {
			q, err = ch.QueueDeclarePassive(pseudo, false, false, false, false, nil)
		}
		if err != nil || q.Name != pseudo || q.Messages != 0 || q.Consumers != 1 {
			t.Fatalf("declare (passive %v) of %s: %+v %v", passive, pseudo, q, err)
		}
	}

	// A round trip: the server's queue, a client with its reply consumer.
	server := channel()
	rpc, err := server.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	requests, err := server.Consume(rpc.Name, "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := channel()
	replies, err := client.Consume(pseudo, "replies", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for i := range 3 {
		corr := fmt.Sprint("c", i)
		if err := client.Publish("", rpc.Name, false, false, amqp.Publishing{ReplyTo: pseudo, CorrelationId: corr, Body: []byte("ping")}); err != nil {
			t.Fatal(err)
		}
		req := <-requests
		if !strings.HasPrefix(req.ReplyTo, pseudo+".") || token != "" && req.ReplyTo != token {
			t.Fatalf("request %d: reply_to %q (before: %q)", i, req.ReplyTo, token)
		}
		token = req.ReplyTo
		if err := server.Publish("", req.ReplyTo, true, false, amqp.Publishing{CorrelationId: req.CorrelationId, Body: []byte("pong")}); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-replies:
			if string(d.Body) != "pong" || d.CorrelationId != corr || d.Exchange != "" || d.RoutingKey != token || d.ConsumerTag != "replies" || d.Redelivered {
				t.Fatalf("reply %d: %q corr %q exchange %q key %q tag %q", i, d.Body, d.CorrelationId, d.Exchange, d.RoutingKey, d.ConsumerTag)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no reply %d", i)
		}
	}
	if q, err := server.QueueDeclarePassive(token, false, false, false, false, nil); err != nil || q.Consumers != 1 {
		t.Fatalf("passive declare of a live token: %+v %v", q, err)
	}

	// A reply to a token nobody holds, or to a channel that closed, is
	// unroutable: returned when mandatory.
	returns := server.NotifyReturn(make(chan amqp.Return, 2))
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{pseudo + ".not-a-token", token} {
		if err := server.Publish("", to, true, false, amqp.Publishing{Body: []byte("late")}); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-returns:
			if r.ReplyCode != amqp.NoRoute || r.RoutingKey != to {
				t.Fatalf("returned %d %q for %q", r.ReplyCode, r.RoutingKey, to)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a reply to %q was not returned", to)
		}
	}
	_, err = channel().QueueDeclarePassive(token, false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)
}
