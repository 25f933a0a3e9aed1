package admin

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
)

// newBroker starts a broker with AMQP on a free loopback port, its
// configuration changed by tweak; the tests call its admin handler
// directly.
func newBroker(t testing.TB, tweak ...func(*config.Config)) *broker.Broker {
	t.Helper()
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = nil
	cfg.MQTT.Listen = nil
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = t.TempDir()
	for _, f := range tweak {
		f(&cfg)
	}
	b, err := broker.New(cfg, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	return b
}

// request is one admin API call as a client at peer (host:port) makes it.
type request struct {
	method, path, peer string
	user, password     string // no Authorization header when user is ""
	body               string
	header             map[string]string
}

func (rq request) serve(h http.Handler) *httptest.ResponseRecorder {
	var rd io.Reader
	if rq.body != "" {
		rd = strings.NewReader(rq.body)
	}
	r := httptest.NewRequest(rq.method, rq.path, rd)
	r.RemoteAddr = rq.peer
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:40000"
	}
	if rq.user != "" {
		r.SetBasicAuth(rq.user, rq.password)
	}
	for k, v := range rq.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// asGuest is a GET as guest from loopback.
func asGuest(path string) request {
	return request{method: "GET", path: path, user: "guest", password: "guest"}
}

// jsonBody decodes a response body, failing the test when it is not JSON:
// an empty 200 is exactly what must never happen.
func jsonBody(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json (status %d, body %q)", ct, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("status %d, body %q is not JSON: %v", w.Code, w.Body, err)
	}
}

func TestEncoderErrorIsA500WithAJSONBody(t *testing.T) {
	b := newBroker(t)
	a := &api{b: b}
	unencodable := a.wrap(management, func(*call) (any, error) {
		return map[string]any{"ok": 1, "bad": math.Inf(1)}, nil
	})
	w := asGuest("/api/anything").serve(unencodable)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500; body %q", w.Code, w.Body)
	}
	var e struct{ Error, Reason string }
	jsonBody(t, w, &e)
	if e.Error != "internal_error" || !strings.Contains(e.Reason, "could not encode") {
		t.Fatalf("error body %+v", e)
	}
}

// Non-finite floats reach the broker in queue arguments, binding arguments
// and client properties; every listing that shows them must still be JSON.
func TestNonFiniteFloatsAreListedAsNames(t *testing.T) {
	b := newBroker(t)
	h := Handler(b)
	c, err := amqp.DialConfig("amqp://guest:guest@"+b.Addr().String()+"/", amqp.Config{
		Properties: amqp.Table{"weight": math.NaN()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("odd", false, false, false, false, amqp.Table{
		"x-nan": math.NaN(), "x-inf": math.Inf(1), "x-ninf": float32(math.Inf(-1)), "x-fine": 1.5,
	}); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("odd", "", "amq.headers", false, amqp.Table{"x-match": "any", "h": math.Inf(-1)}); err != nil {
		t.Fatal(err)
	}

	var queues []struct {
		Name      string
		Arguments map[string]any
	}
	w := asGuest("/api/queues").serve(h)
	jsonBody(t, w, &queues)
	want := map[string]any{"x-nan": "NaN", "x-inf": "Infinity", "x-ninf": "-Infinity", "x-fine": 1.5}
	if w.Code != http.StatusOK || len(queues) != 1 || !reflect.DeepEqual(queues[0].Arguments, want) {
		t.Fatalf("/api/queues: %d %+v", w.Code, queues)
	}

	var bindings []struct {
		Source    string
		Arguments map[string]any
	}
	w = asGuest("/api/bindings/%2F").serve(h)
	jsonBody(t, w, &bindings)
	found := false
	for _, bi := range bindings {
		found = found || bi.Source == "amq.headers" && bi.Arguments["h"] == "-Infinity"
	}
	if w.Code != http.StatusOK || !found {
		t.Fatalf("/api/bindings: %d %+v", w.Code, bindings)
	}

	var conns []struct {
		ClientProperties map[string]any `json:"client_properties"`
	}
	w = asGuest("/api/connections").serve(h)
	jsonBody(t, w, &conns)
	if w.Code != http.StatusOK || len(conns) != 1 || conns[0].ClientProperties["weight"] != "NaN" {
		t.Fatalf("/api/connections: %d %+v", w.Code, conns)
	}
}

// loopback_users applies to the admin API by the HTTP peer's address, with
// RabbitMQ's status and body.
func TestLoopbackUsersByPeerAddress(t *testing.T) {
	b := newBroker(t)
	ops := "ops-secret"
	if err := b.PutUser("ops", &ops, []string{"administrator"}); err != nil {
		t.Fatal(err)
	}
	h := Handler(b)
	const localOnly = `{"error":"not_authorised","reason":"User can only log in via localhost"}`
	// RabbitMQ 3.10.8 spells this one "not_authorized".
	const loginFailed = `{"error":"not_authorized","reason":"Login failed"}`
	cases := []struct {
		peer, user, password string
		status               int
		body                 string // exact, when set
	}{
		{"127.0.0.1:5000", "guest", "guest", http.StatusOK, ""},
		{"127.0.0.2:5000", "guest", "guest", http.StatusOK, ""}, // all of 127/8 is loopback
		{"[::1]:5000", "guest", "guest", http.StatusOK, ""},
		{"[::ffff:127.0.0.1]:5000", "guest", "guest", http.StatusOK, ""},
		{"192.0.2.1:5000", "guest", "guest", http.StatusUnauthorized, localOnly},
		{"[2001:db8::1]:5000", "guest", "guest", http.StatusUnauthorized, localOnly},
		{"[::ffff:192.0.2.1]:5000", "guest", "guest", http.StatusUnauthorized, localOnly},
		{"not an address", "guest", "guest", http.StatusUnauthorized, localOnly},
		// A wrong password says only that, wherever it comes from.
		{"192.0.2.1:5000", "guest", "wrong", http.StatusUnauthorized, loginFailed},
		{"192.0.2.1:5000", "ops", "ops-secret", http.StatusOK, ""},
	}
	for _, c := range cases {
		rq := asGuest("/api/overview")
		rq.peer, rq.user, rq.password = c.peer, c.user, c.password
		w := rq.serve(h)
		if w.Code != c.status || c.body != "" && w.Body.String() != c.body {
			t.Errorf("%s as %s/%s: %d %s, want %d %s", c.peer, c.user, c.password, w.Code, w.Body, c.status, c.body)
		}
	}
}

// A page on another site can make an administrator's browser send forms
// and simple requests to the API; none of them may change anything.
func TestForgeableRequestsAreRefused(t *testing.T) {
	b := newBroker(t)
	h := Handler(b)
	// A shipped plugin, not enabled. (Listing plugins would describe each
	// one, which compiles it: seconds, and a minute under -race.)
	const plugin, pluginType = "consistent-hash", "x-consistent-hash"
	const user = `{"password":"x","tags":["administrator"]}`
	forged := []struct {
		name   string
		rq     request
		status int
	}{
		{"form POST enabling a plugin", request{method: "POST", path: "/api/plugins/" + plugin + "/enable",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}}, http.StatusForbidden},
		{"modern browser, cross-site", request{method: "POST", path: "/api/plugins/" + plugin + "/enable",
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"sandboxed page, Origin null", request{method: "DELETE", path: "/api/vhosts/%2F",
			header: map[string]string{"Origin": "null"}}, http.StatusForbidden},
		{"form POST, no Origin (old browser)", request{method: "POST", path: "/api/plugins/" + plugin + "/enable",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType},
		{"text/plain body, same-origin page", request{method: "PUT", path: "/api/users/mallory", body: user,
			header: map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "same-origin"}}, http.StatusUnsupportedMediaType},
		{"multipart body with a cookie", request{method: "PUT", path: "/api/users/mallory", body: user,
			header: map[string]string{"Content-Type": "multipart/form-data; boundary=x", "Cookie": "s=1"}}, http.StatusUnsupportedMediaType},
		{"form body that is not JSON, no Origin", request{method: "PUT", path: "/api/users/mallory", body: "password=x&tags=administrator",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType},
	}
	for _, f := range forged {
		f.rq.user, f.rq.password = "guest", "guest"
		w := f.rq.serve(h)
		var e struct{ Error, Reason string }
		jsonBody(t, w, &e)
		if w.Code != f.status || e.Reason == "" {
			t.Errorf("%s: %d %s, want %d", f.name, w.Code, w.Body, f.status)
		}
	}
	if slices.Contains(b.Types().Names(), pluginType) {
		t.Fatalf("a forged request enabled %s", plugin)
	}
	if _, ok := b.Users().User("mallory"); ok {
		t.Fatal("a forged request created a user")
	}
	if _, ok := b.VHost("/"); !ok {
		t.Fatal("a forged request deleted a vhost")
	}

	// What warrenctl, curl and the same origin send still works.
	allowed := []struct {
		name string
		rq   request
	}{
		{"JSON body", request{method: "PUT", path: "/api/users/alice", body: user,
			header: map[string]string{"Content-Type": "application/json"}}},
		{"JSON body with charset", request{method: "PUT", path: "/api/users/bob", body: user,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}},
		{"no body, no Content-Type", request{method: "PUT", path: "/api/vhosts/orders"}},
		{"curl -d: JSON declared a form, no Origin", request{method: "PUT", path: "/api/users/carol", body: user,
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}},
		{"JSON body without Content-Type", request{method: "PUT", path: "/api/users/dave", body: user}},
		{"same origin", request{method: "DELETE", path: "/api/vhosts/orders",
			header: map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}}},
		{"Origin matching Host", request{method: "PUT", path: "/api/vhosts/orders",
			header: map[string]string{"Origin": "http://example.com"}}},
		{"cross-origin GET, unreadable to the page", request{method: "GET", path: "/api/vhosts",
			header: map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}}},
	}
	for _, a := range allowed {
		a.rq.user, a.rq.password = "guest", "guest"
		if w := a.rq.serve(h); w.Code >= 300 {
			t.Errorf("%s: %d %s", a.name, w.Code, w.Body)
		}
	}
}

// HEAD is answered as GET (the page and the API alike); other methods on
// a GET-only path are 405, as RabbitMQ answers them.
func TestHeadIsGet(t *testing.T) {
	h := Handler(newBroker(t))
	for _, path := range []string{"/", "/api/overview"} {
		rq := asGuest(path)
		rq.method = "HEAD"
		if w := rq.serve(h); w.Code != http.StatusOK {
			t.Errorf("HEAD %s: %d", path, w.Code)
		}
	}
	rq := asGuest("/api/overview")
	rq.method = "PATCH"
	if w := rq.serve(h); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PATCH /api/overview: %d, want 405", w.Code)
	}
}
