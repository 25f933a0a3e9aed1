package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/federation"
)

// fakeLinks are links as the engine reports them, one of each kind and
// state, out of order.
func fakeLinks() []broker.FederationLink {
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	return []broker.FederationLink{
		{Node: "n2", Status: federation.Status{ID: "q1", Type: federation.QueueLink, VHost: "/", Queue: "jobs", UpstreamQueue: "jobs-up",
			ConsumerTag: "federation-link-jobs", Upstream: "up1", State: federation.Error, Error: "connection refused",
			URI: "amqp://upstream", Since: at}},
		{Node: "n1", Status: federation.Status{ID: "x1", Type: federation.ExchangeLink, VHost: "/", Exchange: "events",
			UpstreamExchange: "events", Upstream: "up1", State: federation.Running, LocalConnection: "federation link x1",
			URI: "amqp://upstream", Since: at}},
		{Node: "n1", Status: federation.Status{ID: "x2", Type: federation.ExchangeLink, VHost: "other", Exchange: "events",
			UpstreamExchange: "events", Upstream: "up2", State: federation.Starting, URI: "amqp://elsewhere", Since: at}},
	}
}

// asJSON is v as the API encodes it.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A link's JSON has RabbitMQ's fields in RabbitMQ's order: those of its
// type (exchange or queue) and its state (running or error) only.
func TestFederationLinkJSON(t *testing.T) {
	all := func(string) bool { return true }
	got := asJSON(t, federationLinkList(fakeLinks(), all, false))
	want := `[` +
		`{"node":"n1","exchange":"events","upstream_exchange":"events","type":"exchange","vhost":"/","upstream":"up1","id":"x1",` +
		`"status":"running","local_connection":"federation link x1","uri":"amqp://upstream","timestamp":"2024-05-06 07:08:09"},` +
		`{"node":"n2","queue":"jobs","upstream_queue":"jobs-up","consumer_tag":"federation-link-jobs","type":"queue","vhost":"/","upstream":"up1","id":"q1",` +
		`"status":"error","error":"connection refused","uri":"amqp://upstream","timestamp":"2024-05-06 07:08:09"},` +
		`{"node":"n1","exchange":"events","upstream_exchange":"events","type":"exchange","vhost":"other","upstream":"up2","id":"x2",` +
		`"status":"starting","uri":"amqp://elsewhere","timestamp":"2024-05-06 07:08:09"}]`
	if got != want {
		t.Fatalf("links:\n%s\nwant\n%s", got, want)
	}

	// An error without words still says it is one; an empty consumer tag
	// is still there.
	l := fakeLinks()[0]
	l.Error, l.ConsumerTag = "", ""
	if got := asJSON(t, federationLinkView(l)); !strings.Contains(got, `"consumer_tag":"",`) || !strings.Contains(got, `"error":"",`) {
		t.Fatalf("a link with empty fields: %s", got)
	}

	// state/down: neither running nor starting.
	if got := asJSON(t, federationLinkList(fakeLinks(), all, true)); !strings.HasPrefix(got, `[{"node":"n2","queue":"jobs"`) || strings.Count(got, `"node"`) != 1 {
		t.Fatalf("down links: %s", got)
	}
	// The vhosts the caller keeps, and an empty list as [] (not null).
	if got := asJSON(t, federationLinkList(fakeLinks(), func(v string) bool { return v == "other" }, false)); strings.Count(got, `"id"`) != 1 || !strings.Contains(got, `"id":"x2"`) {
		t.Fatalf("links of vhost other: %s", got)
	}
	if got := asJSON(t, federationLinkList(fakeLinks(), func(string) bool { return false }, false)); got != "[]" {
		t.Fatalf("no links: %s", got)
	}
}

// The routes against a broker, which runs no link until federation is
// configured: who may ask, which vhost a path names, and the 404s.
func TestFederationLinkRoutes(t *testing.T) {
	b := newBroker(t)
	h := Handler(b)
	for _, u := range []struct{ name, tag string }{{"mon", "monitoring"}, {"pm", "policymaker"}, {"mgmt", "management"}} {
		pw := u.name
		if err := b.PutUser(u.name, &pw, []string{u.tag}); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user, method, path string) request {
		return request{method: method, path: path, user: user, password: user}
	}
	expect := func(rq request, status int, body string) {
		t.Helper()
		w := rq.serve(h)
		if w.Code != status || body != "" && strings.TrimSpace(w.Body.String()) != body {
			t.Fatalf("%s %s as %s: %d %s, want %d %s", rq.method, rq.path, rq.user, w.Code, w.Body, status, body)
		}
	}
	const notFound = `{"error":"Object Not Found","reason":"Not Found"}`
	restart := "/api/federation-links/vhost/%2F/no-such-link/" + b.NodeName() + "/restart"

	expect(as("guest", "GET", "/api/federation-links"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/%2F"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/state/down"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/%2F/state/down"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/nowhere"), 404, notFound)
	expect(as("guest", "GET", "/api/federation-links/nowhere/state/down"), 404, notFound)
	expect(as("guest", "DELETE", restart), 404, notFound)
	expect(as("guest", "DELETE", "/api/federation-links/vhost/nowhere/no-such-link/"+b.NodeName()+"/restart"), 404, notFound)
	expect(as("guest", "DELETE", "/api/federation-links/vhost/%2F/no-such-link/no-such-node/restart"), 404, notFound)
	expect(as("guest", "GET", restart), 405, "")

	// A vhost called "state": its own path is the vhost route, and
	// state/down stays the literal route (RabbitMQ's dispatch), whether
	// or not the vhost exists.
	expect(as("guest", "GET", "/api/federation-links/state"), 404, notFound)
	expect(as("guest", "GET", "/api/federation-links/state/state/down"), 404, notFound)
	if _, err := b.AddVHost("state"); err != nil {
		t.Fatal(err)
	}
	expect(as("guest", "GET", "/api/federation-links/state"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/state/state/down"), 200, `[]`)
	expect(as("guest", "GET", "/api/federation-links/state/down"), 200, `[]`)

	// Monitoring reads, in the vhosts it may use; management may not;
	// a restart asks policymaker, as changing an upstream does.
	expect(as("mgmt", "GET", "/api/federation-links"), 401, `{"error":"not_authorised","reason":"Not monitor user"}`)
	expect(as("pm", "GET", "/api/federation-links"), 401, `{"error":"not_authorised","reason":"Not monitor user"}`)
	expect(as("mon", "GET", "/api/federation-links"), 200, `[]`)
	expect(as("mon", "GET", "/api/federation-links/%2F"), 401, `{"error":"not_authorised","reason":"User not authorised to access virtual host"}`)
	expect(as("mon", "DELETE", restart), 401, `{"error":"not_authorised","reason":"Not policymaker user"}`)
	expect(as("pm", "DELETE", restart), 401, `{"error":"not_authorised","reason":"User not authorised to access virtual host"}`)
	for _, u := range []string{"mon", "pm"} {
		if err := b.SetPermission("/", u, "", "", ""); err != nil {
			t.Fatal(err)
		}
	}
	expect(as("mon", "GET", "/api/federation-links/%2F/state/down"), 200, `[]`)
	expect(as("pm", "DELETE", restart), 404, notFound)
	if w := as("mon", "HEAD", "/api/federation-links").serve(h); w.Code != http.StatusOK {
		t.Fatalf("HEAD: %d %s", w.Code, w.Body)
	}
}
