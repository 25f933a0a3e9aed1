package tests

import (
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Permissions on the exchanges that arguments name: an alternate exchange
// or a dead-letter exchange receives messages published elsewhere, so
// naming one needs write permission on it, as in RabbitMQ.

// limitedUserName may configure anything but write and read only names
// containing ".mine". Against the reference broker the user must exist:
//
//	rabbitmqctl add_user warren-test-limited warren-test-limited
//	rabbitmqctl set_permissions -p / warren-test-limited '.*' '.*\.mine.*' '.*\.mine.*'
const limitedUserName = "warren-test-limited"

// limitedUser returns a connection as limitedUserName and a function that
// opens a fresh channel on it (each 403 closes the channel it happened on).
func limitedUser(t *testing.T, s *server) (*amqp.Connection, func() *amqp.Channel) {
	t.Helper()
	if s.b != nil {
		pw := limitedUserName
		if err := s.b.PutUser(limitedUserName, &pw, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.b.SetPermission("/", limitedUserName, ".*", `.*\.mine.*`, `.*\.mine.*`); err != nil {
			t.Fatal(err)
		}
	}
	u := strings.Replace(s.url, "guest:guest@", limitedUserName+":"+limitedUserName+"@", 1)
	c, err := amqp.Dial(u)
	if err != nil {
		if s.b == nil {
			t.Skipf("the reference broker needs user %s (see limitedUserName): %v", limitedUserName, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, func() *amqp.Channel {
		t.Helper()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
}

// expectRefused fails unless err is RabbitMQ's 403 for the named resource.
func expectRefused(t *testing.T, err error, kind, name string) {
	t.Helper()
	want := fmt.Sprintf("ACCESS_REFUSED - access to %s '%s' in vhost '/' refused for user '%s'", kind, name, limitedUserName)
	e, ok := err.(*amqp.Error)
	if !ok || e.Code != amqp.AccessRefused || e.Reason != want {
		t.Fatalf("got %v, want 403 %q", err, want)
	}
}

func TestAlternateExchangeNeedsWritePermission(t *testing.T) {
	s := start(t)
	_, admin := channel(t, s)
	_, open := limitedUser(t, s)
	forbidden := declareExchange(t, s, admin, "forbidden-ae", "fanout", nil)
	fq := declareQueue(t, s, admin, "forbidden-q", nil)
	bind(t, admin, fq, "", forbidden, nil)

	// Naming an AE the user may not write to: refused, nothing declared.
	x := uniq(t, "mine-x")
	s.ownExchange(x)
	err := open().ExchangeDeclare(x, "direct", false, false, false, false, amqp.Table{"alternate-exchange": forbidden})
	expectRefused(t, err, "exchange", forbidden)
	expectCode(t, open().ExchangeDeclarePassive(x, "direct", false, false, false, false, nil), amqp.NotFound)

	// The default exchange as AE is checked under its permission name.
	err = open().ExchangeDeclare(uniq(t, "mine-x2"), "direct", false, true, false, false, amqp.Table{"alternate-exchange": ""})
	expectRefused(t, err, "exchange", "amq.default")

	// With an AE, the exchange declared must be readable too.
	other := uniq(t, "other-x")
	s.ownExchange(other)
	err = open().ExchangeDeclare(other, "direct", false, false, false, false, amqp.Table{"alternate-exchange": uniq(t, "mine-ae")})
	expectRefused(t, err, "exchange", other)
	// Without one, configure permission is enough.
	other2 := uniq(t, "other-x2")
	s.ownExchange(other2)
	if err := open().ExchangeDeclare(other2, "direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	// Allowed both ways, it works.
	ch := open()
	if err := ch.ExchangeDeclare(x, "direct", false, false, false, false, amqp.Table{"alternate-exchange": uniq(t, "mine-ae")}); err != nil {
		t.Fatal(err)
	}

	// Redeclaring an existing exchange checks nothing more (its arguments
	// must match anyway), as in RabbitMQ.
	existing := declareExchange(t, s, admin, "existing", "direct", amqp.Table{"alternate-exchange": forbidden})
	if err := ch.ExchangeDeclare(existing, "direct", false, false, false, false, amqp.Table{"alternate-exchange": forbidden}); err != nil {
		t.Fatalf("redeclare: %v", err)
	}
	if n := count(t, admin, fq); n != 0 {
		t.Fatalf("%d messages in the forbidden exchange's queue", n)
	}
}

func TestDeadLetterExchangeNeedsWritePermission(t *testing.T) {
	s := start(t)
	_, admin := channel(t, s)
	_, open := limitedUser(t, s)
	forbidden := declareExchange(t, s, admin, "forbidden-dlx", "fanout", nil)

	q := uniq(t, "mine-q")
	s.ownQueue(q)
	_, err := open().QueueDeclare(q, false, false, false, false, amqp.Table{"x-dead-letter-exchange": forbidden})
	expectRefused(t, err, "exchange", forbidden)
	_, err = open().QueueDeclarePassive(q, false, false, false, false, nil)
	expectCode(t, err, amqp.NotFound)

	// A server-named queue needs read permission on its generated name,
	// which this user lacks.
	_, err = open().QueueDeclare("", false, true, true, false, amqp.Table{"x-dead-letter-exchange": uniq(t, "mine-dlx")})
	if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.AccessRefused || !strings.HasPrefix(e.Reason, "ACCESS_REFUSED - access to queue 'amq.gen-") {
		t.Fatalf("server-named queue: got %v, want 403 on its amq.gen- name", err)
	}

	// The default exchange as DLX is checked under its permission name.
	_, err = open().QueueDeclare(q, false, false, false, false, amqp.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": q})
	expectRefused(t, err, "exchange", "amq.default")

	// With a DLX, the queue must be readable too.
	other := uniq(t, "other-q")
	s.ownQueue(other)
	_, err = open().QueueDeclare(other, false, false, false, false, amqp.Table{"x-dead-letter-exchange": uniq(t, "mine-dlx")})
	expectRefused(t, err, "queue", other)
	other2 := uniq(t, "other-q2")
	s.ownQueue(other2)
	if _, err := open().QueueDeclare(other2, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	ch := open()
	if _, err := ch.QueueDeclare(q, false, false, false, false, amqp.Table{"x-dead-letter-exchange": uniq(t, "mine-dlx")}); err != nil {
		t.Fatal(err)
	}

	// Redeclaring an existing queue checks nothing more, as in RabbitMQ.
	existing := declareQueue(t, s, admin, "existing", amqp.Table{"x-dead-letter-exchange": forbidden})
	if _, err := ch.QueueDeclare(existing, false, false, false, false, amqp.Table{"x-dead-letter-exchange": forbidden}); err != nil {
		t.Fatalf("redeclare: %v", err)
	}
}

// A server-named queue's configure permission is checked on the name the
// broker gives it (amq.gen-...), as RabbitMQ checks it, not on "". Against
// the reference broker the user must exist:
//
//	rabbitmqctl add_user warren-test-gen warren-test-gen
//	rabbitmqctl set_permissions -p / warren-test-gen '^amq\.gen-' '.*' '.*'
func TestServerNamedQueueCheckedUnderItsName(t *testing.T) {
	s := start(t)
	const user = "warren-test-gen"
	if s.b != nil {
		pw := user
		if err := s.b.PutUser(user, &pw, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.b.SetPermission("/", user, `^amq\.gen-`, ".*", ".*"); err != nil {
			t.Fatal(err)
		}
	}
	c, err := amqp.Dial(strings.Replace(s.url, "guest:guest@", user+":"+user+"@", 1))
	if err != nil {
		if s.b == nil {
			t.Skipf("the reference broker needs user %s: %v", user, err)
		}
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatalf("server-named declare: %v", err)
	}
	if !strings.HasPrefix(q.Name, "amq.gen-") {
		t.Fatalf("queue named %q", q.Name)
	}
	// A name of the user's own choosing is still refused.
	_, err = ch.QueueDeclare(uniq(t, "chosen"), false, true, true, false, nil)
	expectCode(t, err, amqp.AccessRefused)
}
