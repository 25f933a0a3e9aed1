package tests

import (
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topic permissions, set through the management API, narrow the routing
// keys a user publishes with (write) and binds with (read) on one topic
// exchange, as in RabbitMQ 3.10.8; exchanges of other types and topic
// exchanges the user has none on are not narrowed. Against the reference
// too (WARREN_REFERENCE_ADMIN_URL).
func TestTopicPermissions(t *testing.T) {
	m := startMgmt(t)
	user := uniq(t, "tp-user")
	m.addUser(user, "pw", "management", m.vhost)
	tp := "/api/topic-permissions/" + m.v() + "/" + esc(user)
	m.expectNotFound("GET", tp)
	m.expect("PUT", tp, `{"exchange":"amq.topic","write":"^{username}\\.","read":"^eu\\."}`, 201)
	m.expect("PUT", tp, `{"exchange":"tp.other","write":"","read":""}`, 204)
	var list []map[string]string
	m.expect("GET", tp, "", 200).json(t, &list)
	if len(list) != 2 {
		t.Fatalf("listed %v", list)
	}
	var all []map[string]string
	m.expect("GET", "/api/users/"+esc(user)+"/topic-permissions", "", 200).json(t, &all)
	if len(all) != 2 || all[0]["user"] != user || all[0]["vhost"] != m.vhost {
		t.Fatalf("the user's: %v", all)
	}
	m.expect("GET", "/api/vhosts/"+m.v()+"/topic-permissions", "", 200).json(t, &all)
	if len(all) != 2 {
		t.Fatalf("the vhost's: %v", all)
	}

	c, err := amqp.Dial(strings.Replace(m.amqpURL(), "guest:guest@", user+":pw@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	q := uniq(t, "tp-q")
	// RabbitMQ 3.10.8's text does not say whether write or read failed.
	refusal := func(key, exchange string) string {
		return "ACCESS_REFUSED - access to topic '" + key + "' in exchange '" + exchange +
			"' in vhost '" + m.vhost + "' refused for user '" + user + "'"
	}
	// publish publishes on a fresh confirmed channel and says how the
	// channel ended: nil, or its 403.
	publish := func(exchange, key string) error {
		t.Helper()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		closed := ch.NotifyClose(make(chan *amqp.Error, 1))
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, false, false, amqp.Publishing{Body: []byte("m")})
		if err != nil {
			return err
		}
		select {
		case e := <-closed:
			if e == nil {
				return errors.New("closed")
			}
			return e
		case <-dc.Done():
			return nil
		case <-time.After(10 * time.Second):
			t.Fatalf("publish with key %q: neither confirmed nor refused in 10s", key)
			return nil
		}
	}
	bind := func(exchange, key string) error {
		t.Helper()
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		if _, err := ch.QueueDeclare(q, false, true, false, false, nil); err != nil {
			t.Fatal(err)
		}
		return ch.QueueBind(q, key, exchange, false, nil)
	}
	expect403 := func(what string, err error, text string) {
		t.Helper()
		var e *amqp.Error
		if !errors.As(err, &e) || e.Code != 403 || e.Reason != text {
			t.Errorf("%s: %v, want 403 %q", what, err, text)
		}
	}

	if err := publish("amq.topic", user+".a"); err != nil {
		t.Errorf("publish with the user's own prefix: %v", err)
	}
	expect403("publish with another key", publish("amq.topic", "other.a"), refusal("other.a", "amq.topic"))
	if err := publish("amq.direct", "other.a"); err != nil {
		t.Errorf("publish to a direct exchange: %v", err)
	}
	if err := bind("amq.topic", "eu.#"); err != nil {
		t.Errorf("bind with a readable key: %v", err)
	}
	expect403("bind with another key", bind("amq.topic", "us.#"), refusal("us.#", "amq.topic"))
	if err := bind("amq.direct", "us.#"); err != nil {
		t.Errorf("bind from a direct exchange: %v", err)
	}

	// The management API's publish and bind ask the same.
	pub := "/api/exchanges/" + m.v() + "/amq.topic/publish"
	r := m.callAs(user, "pw", "POST", pub, `{"properties":{},"routing_key":"other.a","payload":"m","payload_encoding":"string"}`, nil)
	if r.status != 400 || !strings.Contains(r.body, "403 ACCESS_REFUSED - access to topic 'other.a' in exchange 'amq.topic'") {
		t.Errorf("API publish with another key: %d %s", r.status, r.body)
	}
	r = m.callAs(user, "pw", "POST", "/api/bindings/"+m.v()+"/e/amq.topic/q/"+esc(q), `{"routing_key":"us.x"}`, nil)
	if r.status != 401 || !strings.Contains(r.body, "Access refused.") {
		t.Errorf("API bind with another key: %d %s", r.status, r.body)
	}

	// Cleared on one exchange, that exchange is no longer narrowed.
	m.expect("DELETE", tp+"/amq.topic", "", 204)
	if err := publish("amq.topic", "other.a"); err != nil {
		t.Errorf("publish once the permission is cleared: %v", err)
	}
	m.expect("GET", tp, "", 200).json(t, &list)
	if len(list) != 1 || list[0]["exchange"] != "tp.other" {
		t.Fatalf("left %v", list)
	}
	m.expect("DELETE", tp, "", 204)
	m.expectNotFound("GET", tp)
	m.expectNotFound("DELETE", tp)
}

// An empty expression allows only the empty routing key, as RabbitMQ
// reads it ("^$").
func TestTopicPermissionEmptyExpression(t *testing.T) {
	m := startMgmt(t)
	user := uniq(t, "tp-empty")
	m.addUser(user, "pw", "", m.vhost)
	m.expect("PUT", "/api/topic-permissions/"+m.v()+"/"+esc(user), `{"exchange":"amq.topic","write":"","read":""}`, 201)
	c, err := amqp.Dial(strings.Replace(m.amqpURL(), "guest:guest@", user+":pw@", 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, c2 := range []struct {
		key string
		ok  bool
	}{{"", true}, {"a", false}} {
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		closed := ch.NotifyClose(make(chan *amqp.Error, 1))
		dc, err := ch.PublishWithDeferredConfirm("amq.topic", c2.key, false, false, amqp.Publishing{Body: []byte("m")})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-closed:
			if c2.ok || e == nil || e.Code != 403 {
				t.Errorf("key %q: closed with %v", c2.key, e)
			}
		case <-dc.Done():
			if !c2.ok {
				t.Errorf("key %q published", c2.key)
			}
			ch.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("key %q: neither confirmed nor refused in 10s", c2.key)
		}
	}
}
