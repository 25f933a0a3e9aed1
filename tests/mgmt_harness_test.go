package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// The management API tests (mgmt_*_test.go) run against an in-process
// Warren serving admin.Handler, or, when WARREN_REFERENCE_ADMIN_URL (the
// management listener, e.g. http://127.0.0.1:15698) and
// WARREN_REFERENCE_URL are both set, against that RabbitMQ. Each test
// works in a vhost of its own, created through the API with guest's
// permissions and deleted at the end, so tests sharing the reference
// never meet. Tests of what only Warren has skip against the reference.

func referenceAdmin() string { return os.Getenv("WARREN_REFERENCE_ADMIN_URL") }

// mgmt is the management API under test.
type mgmt struct {
	t     testing.TB
	s     *server
	base  string // http://host:port
	vhost string // the test's own vhost
}

// isWarren reports whether the API is Warren's (not the reference's).
func (m *mgmt) isWarren() bool { return m.s.b != nil }

// startMgmt serves the API of the broker under test and makes the test's
// vhost; tweak changes Warren's configuration (not the reference's). It
// skips when only WARREN_REFERENCE_URL is set: that reference has no API
// the tests know of.
func startMgmt(t testing.TB, tweak ...func(*config.Config)) *mgmt {
	t.Helper()
	var m *mgmt
	switch {
	case reference() != "" && referenceAdmin() != "":
		m = &mgmt{t: t, s: &server{url: reference(), t: t}, base: strings.TrimSuffix(referenceAdmin(), "/")}
	case reference() != "":
		t.Skip("set WARREN_REFERENCE_ADMIN_URL to run the management tests against the reference")
	default:
		s := startWarren(t, append([]func(*config.Config){func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" }}, tweak...)...)
		if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
			t.Fatal(err)
		}
		m = &mgmt{t: t, s: s, base: "http://" + s.b.AdminAddr()}
	}
	m.vhost = uniq(t, "vh")
	t.Cleanup(func() { m.call("DELETE", "/api/vhosts/"+esc(m.vhost), "") })
	m.expect("PUT", "/api/vhosts/"+esc(m.vhost), "", 201)
	// Its creator has full permissions there already, as in RabbitMQ.
	m.expect("PUT", "/api/permissions/"+esc(m.vhost)+"/guest", `{"configure":".*","write":".*","read":".*"}`, 204)
	return m
}

// startWarrenMgmt is startMgmt for tests of Warren's own behaviour.
func startWarrenMgmt(t testing.TB) *mgmt {
	t.Helper()
	if reference() != "" {
		t.Skip("tests Warren's own behaviour")
	}
	return startMgmt(t)
}

// esc percent-encodes a path segment ("/" as %2F, as RabbitMQ's tools do).
func esc(s string) string { return neturl.PathEscape(s) }

// v is the test vhost, escaped for a path.
func (m *mgmt) v() string { return esc(m.vhost) }

// amqpURL is the AMQP URL of the test's vhost.
func (m *mgmt) amqpURL() string { return strings.TrimSuffix(m.s.url, "/") + "/" + esc(m.vhost) }

// channel opens a channel in the test's vhost on a connection of its own.
func (m *mgmt) channel() (*amqp.Connection, *amqp.Channel) {
	m.t.Helper()
	c, err := amqp.Dial(m.amqpURL())
	if err != nil {
		m.t.Fatalf("dial: %v", err)
	}
	m.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		m.t.Fatal(err)
	}
	return c, ch
}

// response is one answer of the API.
type response struct {
	status int
	body   string
	header http.Header
}

// expectBody fails t unless the body is want, byte for byte.
func (r response) expectBody(t testing.TB, want string) {
	t.Helper()
	if r.body != want {
		t.Fatalf("body %s, want %s", r.body, want)
	}
}

// json decodes the body into v.
func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("status %d, body %q is not JSON: %v", r.status, r.body, err)
	}
}

// apiClient bounds every request's wait, so a broker that never answers
// fails the test instead of hanging it; the bound is generous, for a
// plugin compiled under the race detector.
var apiClient = &http.Client{Timeout: 5 * time.Minute}

// call makes a request as guest.
func (m *mgmt) call(method, path, body string) response {
	return m.callAs("guest", "guest", method, path, body, nil)
}

// callAs makes a request as user, with extra headers.
func (m *mgmt) callAs(user, password, method, path, body string, header map[string]string) response {
	m.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, m.base+path, rd)
	if err != nil {
		m.t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// expect makes a request as guest and fails unless the status is want.
func (m *mgmt) expect(method, path, body string, want int) response {
	m.t.Helper()
	r := m.call(method, path, body)
	if r.status != want {
		m.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

// expectError checks RabbitMQ's error body: status, error and reason
// (reason only when not "").
func (m *mgmt) expectError(r response, status int, kind, reason string) {
	m.t.Helper()
	var e struct{ Error, Reason string }
	if r.status != status {
		m.t.Fatalf("status %d %s, want %d", r.status, r.body, status)
	}
	r.json(m.t, &e)
	if e.Error != kind || (reason != "" && e.Reason != reason) {
		m.t.Fatalf("error %q reason %q, want %q %q", e.Error, e.Reason, kind, reason)
	}
}

// notFound is RabbitMQ's answer for a missing object.
const notFoundBody = `{"error":"Object Not Found","reason":"Not Found"}`

func (m *mgmt) expectNotFound(method, path string) {
	m.t.Helper()
	r := m.call(method, path, "")
	if r.status != 404 || r.body != notFoundBody {
		m.t.Fatalf("%s %s: %d %s, want 404 %s", method, path, r.status, r.body, notFoundBody)
	}
}

// addUser creates a user with tags and, when vhost is not "", full
// permissions there; it is deleted when the test ends.
func (m *mgmt) addUser(name, password, tags, vhost string) {
	m.t.Helper()
	m.expect("PUT", "/api/users/"+esc(name), `{"password":"`+password+`","tags":"`+tags+`"}`, 201)
	m.t.Cleanup(func() { m.call("DELETE", "/api/users/"+esc(name), "") })
	if vhost != "" {
		m.expect("PUT", "/api/permissions/"+esc(vhost)+"/"+esc(name), `{"configure":".*","write":".*","read":".*"}`, 201)
	}
}

// waitFor polls cond for up to 30 s: RabbitMQ shows a queue's figures,
// and lists a connection or channel, only once their statistics are next
// emitted (every 5 s by default, and a queue's sometimes take three
// rounds).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// waitReady waits until the queue shows n ready messages: a publish is
// counted when the broker has taken it, after the client's call returns.
func (m *mgmt) waitReady(queue string, n int) {
	m.t.Helper()
	waitFor(m.t, fmt.Sprintf("%d messages ready in %s", n, queue), func() bool {
		var st struct {
			MessagesReady *int `json:"messages_ready"`
		}
		m.expect("GET", "/api/queues/"+m.v()+"/"+esc(queue), "", 200).json(m.t, &st)
		return st.MessagesReady != nil && *st.MessagesReady == n
	})
}
