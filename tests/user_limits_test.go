package tests

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/poll"
)

// User limits set through the management API: max-connections refuses the
// user's next connection, max-channels their next channel, in RabbitMQ
// 3.10.8's words; a PUT of the user keeps them; cleared, they allow
// again. Against the reference too (WARREN_REFERENCE_ADMIN_URL).
func TestUserLimits(t *testing.T) {
	m := startMgmt(t)
	user := uniq(t, "ul")
	m.addUser(user, "pw", "", m.vhost)
	limit := "/api/user-limits/" + esc(user)
	m.expectNotFound("GET", "/api/user-limits/"+esc(uniq(t, "no-such-user")))
	m.expect("PUT", limit+"/max-connections", `{"value":1}`, 204)
	m.expect("PUT", limit+"/max-channels", `{"value":2}`, 204)
	m.expect("PUT", "/api/users/"+esc(user), `{"password":"pw","tags":""}`, 204)
	var list []struct {
		User  string
		Value map[string]int64
	}
	m.expect("GET", limit, "", 200).json(t, &list)
	if len(list) != 1 || list[0].User != user || list[0].Value["max-connections"] != 1 || list[0].Value["max-channels"] != 2 {
		t.Fatalf("listed %+v (a PUT of the user must keep them)", list)
	}
	m.expectError(m.call("PUT", limit+"/max-nothing", `{"value":3}`), 400, "bad_request",
		`Unrecognised terms [{<<"max-nothing">>,3}] in user-limits`)

	url := strings.Replace(m.amqpURL(), "guest:guest@", user+":pw@", 1)
	c, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 2 {
		if _, err := c.Channel(); err != nil {
			t.Fatal(err)
		}
	}
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	if _, err := c.Channel(); err == nil {
		t.Error("a third channel opened")
	}
	want := "NOT_ALLOWED - number of channels opened for user '" + user + "' has reached the maximum allowed user limit of (2)"
	if e := poll.Receive(t, 10*time.Second, "the connection closed", closed); e == nil || e.Code != 530 || e.Reason != want {
		t.Errorf("a channel over the limit closed the connection with %v, want 530 %q", e, want)
	}

	// The connection the channel limit closed leaves the broker's count a
	// moment after its client hears of it: until then a dial is over the
	// connection limit.
	var c2 *amqp.Connection
	poll.Until(t, 10*time.Second, "a connection once the closed one is uncounted", func() bool {
		c2, err = amqp.Dial(url)
		return err == nil
	})
	defer c2.Close()
	r := rawDial(t, m.s)
	o := defaultHandshake()
	o.user, o.password = user, "pw"
	r.startHandshake(o)
	r.expect(10, 30)
	r.method(0, 10, 31, tuneOk(2047, 131072, 0))
	r.method(0, 10, 40, connectionOpen(m.vhost))
	want = "NOT_ALLOWED - connection refused for user '" + user + "': user connection limit (1) is reached"
	if text := r.expectConnectionClose(amqp.NotAllowed); text != want {
		t.Errorf("a connection over the limit: %q, want %q", text, want)
	}
	c2.Close()

	m.expect("DELETE", limit+"/max-connections", "", 204)
	m.expect("DELETE", limit+"/max-channels", "", 204)
	m.expect("DELETE", limit+"/max-channels", "", 204)
	c3, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("a connection once the limit is cleared: %v", err)
	}
	defer c3.Close()
	if _, err := amqp.Dial(url); err != nil {
		t.Fatalf("a second connection once the limit is cleared: %v", err)
	}
	for range 3 {
		if _, err := c3.Channel(); err != nil {
			t.Fatalf("a channel once the limit is cleared: %v", err)
		}
	}
}
