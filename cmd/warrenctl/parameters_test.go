package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
)

// fakeComponent stands for a registered component (shovel): a value
// needs the key "src-uri".
type fakeComponent struct{}

func (fakeComponent) Check(vhost, name string, value any, user string) error {
	if t, isObject := value.(protocol.Table); isObject { // a list is taken as it is
		if _, ok := t["src-uri"]; !ok {
			return errors.New(`Key "src-uri" not found in fake`)
		}
	}
	return nil
}

// Runtime parameters as rabbitmqctl sets, lists and clears them.
func TestParameters(t *testing.T) {
	b, url := newBroker(t)
	b.RegisterParameterComponent("fake", fakeComponent{})
	if _, err := b.AddVHost("v"); err != nil {
		t.Fatal(err)
	}
	run := ctlMust(t, url)
	run("set_parameter", "fake", "s1", `{"src-uri": "amqp://", "n": 2}`)
	run("set_parameter", "-p", "v", "fake", "s2", `{"src-uri": "amqp://v"}`)
	if p, ok := b.LookupVHostParameter("/", "fake", "s1"); !ok || p.Value.(protocol.Table)["n"] != int64(2) {
		t.Fatalf("parameter s1: %+v %v", p, ok)
	}
	if _, ok := b.LookupVHostParameter("v", "fake", "s2"); !ok {
		t.Fatal("parameter s2 not set in vhost v")
	}
	if err := b.SetVHostLimits("/", topology.Limits{"max-queues": 9}); err != nil {
		t.Fatal(err)
	}
	out := run("list_parameters")
	want := "Listing runtime parameters for vhost / ...\ncomponent\tname\tvalue\n" +
		"vhost-limits\tlimits\t{\"max-queues\":9}\nfake\ts1\t{\"n\":2,\"src-uri\":\"amqp://\"}\n"
	if out != want {
		t.Fatalf("list_parameters:\n%s\nwant\n%s", out, want)
	}
	if out := run("list_parameters", "-p", "v", "-q"); out != "component\tname\tvalue\nfake\ts2\t{\"src-uri\":\"amqp://v\"}\n" {
		t.Fatalf("list_parameters -p v:\n%s", out)
	}
	if _, err := ctl(t, url, "set_parameter", "fake", "bad", `{"dest-uri": "x"}`); err == nil || !strings.Contains(err.Error(), "Validation failed\n\nKey \"src-uri\" not found in fake") {
		t.Fatalf("a value the component refuses: %v", err)
	}
	if _, err := ctl(t, url, "set_parameter", "no-such-component", "s", `{"uri": "x"}`); err == nil || !strings.Contains(err.Error(), "component no-such-component not found") {
		t.Fatalf("a component not registered: %v", err)
	}
	if _, err := ctl(t, url, "set_parameter", "fake", "bad", "{not json"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("a value that is not JSON: %v", err)
	}
	run("clear_parameter", "fake", "s1")
	if _, ok := b.LookupVHostParameter("/", "fake", "s1"); ok {
		t.Fatal("parameter still there after clear_parameter")
	}
	if _, err := ctl(t, url, "clear_parameter", "fake", "s1"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing a missing parameter: %v", err)
	}
}

// A shovel set as a parameter, its status, a restart and its deletion,
// as rabbitmqctl's shovel commands.
func TestShovelCommands(t *testing.T) {
	b, url := newBroker(t)
	if err := b.Start(); err != nil { // shovels run once the broker serves
		t.Fatal(err)
	}
	run := ctlMust(t, url)
	run("set_parameter", "shovel", "s1", `{"src-uri": "amqp://", "src-queue": "from", "dest-uri": "amqp://", "dest-queue": "to"}`)
	poll.Until(t, 30*time.Second, "the shovel running", func() bool {
		out := run("shovel_status", "-q")
		return strings.Contains(out, "s1\t/\tdynamic\trunning\tamqp://\tfrom\tamqp://\tto")
	})
	run("restart_shovel", "s1")
	poll.Until(t, 30*time.Second, "the shovel running again", func() bool {
		return strings.Contains(run("shovel_status", "-q"), "s1\t/\tdynamic\trunning")
	})
	run("delete_shovel", "s1")
	if _, ok := b.LookupVHostParameter("/", "shovel", "s1"); ok {
		t.Fatal("delete_shovel left the parameter")
	}
	if _, err := ctl(t, url, "restart_shovel", "s1"); err == nil {
		t.Fatal("restart_shovel of a deleted shovel succeeded")
	}
}

// federation_status and restart_federation_link, as rabbitmqctl's
// federation commands: against a broker, which runs no link until an
// upstream and a policy make one, and against an admin API that lists
// links, to see the rows and the restart each id makes.
func TestFederationCommands(t *testing.T) {
	_, url := newBroker(t)
	run := ctlMust(t, url)
	header := strings.Join(federationColumns, "\t") + "\n"
	if out := run("federation_status"); out != "Listing federation links ...\n"+header {
		t.Fatalf("federation_status with no links:\n%s", out)
	}
	if out := run("federation_status", "--only-down"); out != "Listing federation links which are down ...\n"+header {
		t.Fatalf("federation_status --only-down with no links:\n%s", out)
	}
	if _, err := ctl(t, url, "restart_federation_link", "no-such-link"); err == nil || err.Error() != "Link with the given ID was not found" {
		t.Fatalf("restarting a link that is not there: %v", err)
	}

	// Links as the API lists them: an exchange's running on n1 in vhost
	// "a/b", a queue's failed on n2, and the same id on two nodes.
	const links = `[` +
		`{"node":"n1","exchange":"x","upstream_exchange":"ux","type":"exchange","vhost":"a/b","upstream":"up","id":"x1",` +
		`"status":"running","local_connection":"conn 1","uri":"amqp://u","timestamp":"2024-05-06 07:08:09"},` +
		`{"node":"n2","queue":"q","upstream_queue":"uq","consumer_tag":"t","type":"queue","vhost":"/","upstream":"up","id":"q1",` +
		`"status":"error","error":"refused","uri":"amqp://u","timestamp":"2024-05-06 07:08:10"},` +
		`{"node":"n3","queue":"q","upstream_queue":"uq","consumer_tag":"t","type":"queue","vhost":"/","upstream":"up","id":"q1",` +
		`"status":"starting","uri":"amqp://u","timestamp":"2024-05-06 07:08:11"}]`
	var mu sync.Mutex
	var asked []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Server", "Warren")
		switch {
		case r.Method == "GET" && r.URL.Path == "/api/federation-links":
			_, _ = io.WriteString(w, links)
		case r.Method == "GET" && r.URL.Path == "/api/federation-links/state/down":
			_, _ = io.WriteString(w, `[]`)
		case r.Method == "DELETE":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	fake := ctlMust(t, api.URL)
	want := header +
		"x1\texchange\ta/b\tx\tux\t\t\tup\tamqp://u\trunning\tconn 1\t\t2024-05-06 07:08:09\tn1\n" +
		"q1\tqueue\t/\t\t\tq\tuq\tup\tamqp://u\terror\t\trefused\t2024-05-06 07:08:10\tn2\n" +
		"q1\tqueue\t/\t\t\tq\tuq\tup\tamqp://u\tstarting\t\t\t2024-05-06 07:08:11\tn3\n"
	if out := fake("federation_status", "-q"); out != want {
		t.Fatalf("federation_status:\n%s\nwant\n%s", out, want)
	}
	fake("federation_status", "--only-down")
	if out := fake("restart_federation_link", "x1"); out != "Restarting federation link x1 on node n1\n" {
		t.Fatalf("restart_federation_link x1 said %q", out)
	}
	fake("restart_federation_link", "q1")
	wantAsked := []string{
		"GET /api/federation-links",
		"GET /api/federation-links/state/down",
		"GET /api/federation-links", "DELETE /api/federation-links/vhost/a%2Fb/x1/n1/restart",
		"GET /api/federation-links", "DELETE /api/federation-links/vhost/%2F/q1/n2/restart", "DELETE /api/federation-links/vhost/%2F/q1/n3/restart",
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, wantAsked) {
		t.Fatalf("the API was asked\n%s\nwant\n%s", strings.Join(asked, "\n"), strings.Join(wantAsked, "\n"))
	}
}
