package admin

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// fakeComponent stands for a registered component (shovel): a value
// needs the key "src-uri"; it records the acting user it was given.
type fakeComponent struct {
	mu   sync.Mutex
	user string
}

func (f *fakeComponent) Check(vhost, name string, value any, user string) error {
	f.mu.Lock()
	f.user = user
	f.mu.Unlock()
	if t, isObject := value.(protocol.Table); isObject { // a list is taken as it is
		if _, ok := t["src-uri"]; !ok {
			return errors.New(`Key "src-uri" not found in fake`)
		}
	}
	return nil
}

// A registered component's parameters through /api/parameters, beside
// vhost-limits, in RabbitMQ's shapes and words.
func TestComponentParameters(t *testing.T) {
	b := newBroker(t)
	fake := &fakeComponent{}
	b.RegisterParameterComponent("fake", fake)
	h := Handler(b)
	as := func(method, path, body string) request {
		return request{method: method, path: path, user: "guest", password: "guest", body: body}
	}
	expect := func(rq request, status int, body string) {
		t.Helper()
		w := rq.serve(h)
		if w.Code != status || body != "" && strings.TrimSpace(w.Body.String()) != body {
			t.Fatalf("%s %s: %d %s, want %d %s", rq.method, rq.path, w.Code, w.Body, status, body)
		}
	}
	p := "/api/parameters/fake/%2F/s1"
	expect(as("GET", p, ""), 404, "")
	expect(as("DELETE", p, ""), 404, "")
	expect(as("PUT", p, `{"value":{"src-uri":"amqp://","n":1,"l":[true,"x"]}}`), 201, "")
	if fake.user != "guest" {
		t.Fatalf("the component checked the value for user %q, want guest", fake.user)
	}
	expect(as("PUT", p, `{"value":{"src-uri":"amqp://","n":1,"l":[true,"x"]}}`), 204, "")
	expect(as("GET", p, ""), 200, `{"value":{"l":[true,"x"],"n":1,"src-uri":"amqp://"},"vhost":"/","component":"fake","name":"s1"}`)
	expect(as("PUT", p, `{"value":{"src-uri":"amqp://b"}}`), 204, "")
	if err := b.SetVHostLimits("/", topology.Limits{"max-queues": 10}); err != nil {
		t.Fatal(err)
	}

	// Listings: everything, one component, one component in one vhost.
	all := `[{"value":{"max-queues":10},"vhost":"/","component":"vhost-limits","name":"limits"},` +
		`{"value":{"src-uri":"amqp://b"},"vhost":"/","component":"fake","name":"s1"}]`
	expect(as("GET", "/api/parameters", ""), 200, all)
	expect(as("GET", "/api/parameters/fake", ""), 200, `[{"value":{"src-uri":"amqp://b"},"vhost":"/","component":"fake","name":"s1"}]`)
	expect(as("GET", "/api/parameters/fake/%2F", ""), 200, `[{"value":{"src-uri":"amqp://b"},"vhost":"/","component":"fake","name":"s1"}]`)
	expect(as("GET", "/api/parameters/vhost-limits/%2F", ""), 200, `[{"value":{"max-queues":10},"vhost":"/","component":"vhost-limits","name":"limits"}]`)
	expect(as("GET", "/api/parameters/no-such-component", ""), 200, `[]`)

	// Refusals: RabbitMQ's words, a component's own.
	expect(as("PUT", p, `{"value":{"dest-uri":"x"}}`), 400, `{"error":"bad_request","reason":"Validation failed\n\nKey \"src-uri\" not found in fake\n"}`)
	expect(as("PUT", p, `{"value":"amqp://"}`), 400, "")
	expect(as("PUT", p, `{"nov":1}`), 400, `{"error":"bad_request","reason":"[{key_missing,value}]"}`)
	expect(as("PUT", "/api/parameters/no-such-component/%2F/s1", `{"value":{"uri":"amqp://"}}`), 400,
		`{"error":"bad_request","reason":"Validation failed\n\ncomponent no-such-component not found\n"}`)
	expect(as("PUT", "/api/parameters/fake/nowhere/s1", `{"value":{"src-uri":"amqp://"}}`), 404, "")
	expect(as("DELETE", "/api/parameters/no-such-component/%2F/s1", ""), 404, "")
	if p, _ := b.LookupVHostParameter("/", "fake", "s1"); p.Value.(protocol.Table)["src-uri"] != "amqp://b" {
		t.Fatalf("a refused value changed the parameter: %v", p.Value)
	}

	// A policymaker sees and changes the vhosts it may use only.
	pw := "pm"
	if err := b.PutUser("pm", &pw, []string{"policymaker"}); err != nil {
		t.Fatal(err)
	}
	pm := func(method, path, body string) request {
		return request{method: method, path: path, user: "pm", password: "pm", body: body}
	}
	expect(pm("GET", "/api/parameters/fake", ""), 200, `[]`)
	expect(pm("GET", p, ""), 401, "")
	expect(pm("PUT", p, `{"value":{"src-uri":"amqp://c"}}`), 401, "")
	expect(pm("DELETE", p, ""), 401, "")
	if err := b.SetPermission("/", "pm", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	expect(pm("PUT", p, `{"value":{"src-uri":"amqp://c"}}`), 204, "")
	if fake.user != "pm" {
		t.Fatalf("the component checked the value for user %q, want pm", fake.user)
	}
	expect(request{method: "PUT", path: p, user: "guest", password: "guest", body: `{"value":{"src-uri":"amqp://c"}}`,
		header: map[string]string{"Content-Type": "application/json"}}, 204, "")

	expect(as("DELETE", p, ""), 204, "")
	expect(as("DELETE", p, ""), 404, "")
	expect(as("GET", p, ""), 404, "")
	if w := as("GET", "/api/parameters/fake", "").serve(h); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != "[]" {
		t.Fatalf("after the delete: %d %s", w.Code, w.Body)
	}
}
