package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitFullFixture is GET /api/definitions of a RabbitMQ 3.10.8 node
// holding one of everything a definitions file carries: a vhost "full"
// with limits (max-connections 100, max-queues 50), an operator policy
// (op-cap: max-length 1000 on ^app queues), a policy (app-ttl), a topic
// exchange bound to a quorum queue and a stream, a classic queue; users
// ops (ops-pw, administrator) and app (app-pw, management, user limits
// max-connections 10 and max-channels 20) with permissions, and app's
// topic permission (write ^app\. on amq.topic); global parameters
// cluster_name, app-setting (an object) and RabbitMQ's own
// internal_cluster_id. Made through the management API.
const rabbitFullFixture = "testdata/rabbitmq-3.10.8-full-definitions.json"

// fullSections are the sections a round trip must keep whole.
var fullSections = []string{"users", "vhosts", "permissions", "topic_permissions", "parameters", "global_parameters",
	"policies", "queues", "exchanges", "bindings"}

// withoutRabbitInternals drops what a broker says of itself, not of its
// definitions: RabbitMQ's internal_cluster_id.
func withoutRabbitInternals(doc map[string]any) map[string]any {
	if gs, ok := doc["global_parameters"].([]any); ok {
		doc["global_parameters"] = slices.DeleteFunc(slices.Clone(gs), func(g any) bool {
			return g.(map[string]any)["name"] == "internal_cluster_id"
		})
	}
	return doc
}

func readFullFixture(t *testing.T) ([]byte, map[string]any) {
	t.Helper()
	doc, err := os.ReadFile(rabbitFullFixture)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return doc, m
}

// sameSections reports each section of want that got does not hold as it
// is (lists compared modulo order).
func sameSections(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	got, want = normalized(withoutRabbitInternals(got)), normalized(withoutRabbitInternals(want))
	for _, section := range fullSections {
		if !reflect.DeepEqual(got[section], want[section]) {
			g, _ := json.MarshalIndent(got[section], "", " ")
			w, _ := json.MarshalIndent(want[section], "", " ")
			t.Errorf("%s: %s\n%s\nwant:\n%s", what, section, g, w)
		}
	}
}

// A RabbitMQ 3.10.8 export with everything in it imports into Warren, and
// Warren's export is the same document: topic permissions, vhost and
// user limits, an operator policy, global parameters, quorum and stream
// queues included. What it says is in force.
func TestDefinitionsFullFromRabbitMQ(t *testing.T) {
	s := startAdmin(t)
	doc, want := readFullFixture(t)
	s.importDefs(t, doc)
	sameSections(t, "Warren's export after importing RabbitMQ's", s.exportDefs(t), want)

	// In force: the topic permission, the limits, the operator policy.
	app, err := dialAs(t, s.b, "app", "app-pw", "full")
	if err != nil {
		t.Fatal(err)
	}
	ch := confirmedChannel(t, app)
	publishConfirmed(t, ch, "amq.topic", "app.ok", body("allowed"))
	// The refusal closes the channel: its close says why (a call made
	// meanwhile would only hear that the channel is closed).
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	if err := ch.Publish("amq.topic", "billing.secret", false, false, body("refused")); err != nil {
		t.Fatalf("publishing outside the topic permission: %v", err)
	}
	expectClose(t, closed, amqp.AccessRefused)
	v, _ := s.b.VHost("full")
	if n, ok := v.Limit("max-queues"); !ok || n != 50 {
		t.Errorf("max-queues of vhost full: %d, %v", n, ok)
	}
	if u, ok := s.b.Users().User("app"); !ok || u.Limits["max-channels"] != 20 || u.Limits["max-connections"] != 10 {
		t.Errorf("app's limits: %+v", u)
	}
	var q struct {
		Type            string         `json:"type"`
		OperatorPolicy  string         `json:"operator_policy"`
		EffectivePolicy map[string]any `json:"effective_policy_definition"`
	}
	status, out := call(t, "GET", s.base+"/api/queues/full/app.classic", "guest", "guest", nil)
	if err := json.Unmarshal(out, &q); status != http.StatusOK || err != nil || q.OperatorPolicy != "op-cap" ||
		q.EffectivePolicy["message-ttl"] != float64(60000) || q.EffectivePolicy["max-length"] != float64(1000) {
		t.Errorf("app.classic: %d %s", status, out)
	}
	for name, typ := range map[string]string{"app.quorum": "quorum", "app.stream": "stream"} {
		status, out := call(t, "GET", s.base+"/api/queues/full/"+name, "guest", "guest", nil)
		if err := json.Unmarshal(out, &q); status != http.StatusOK || err != nil || q.Type != typ {
			t.Errorf("%s: %d %s", name, status, out)
		}
	}
	if g := s.b.GlobalParameters()["app-setting"]; g == nil {
		t.Errorf("global parameter app-setting not kept: %v", s.b.GlobalParameters())
	}
}

// The round trip RabbitMQ → Warren → RabbitMQ loses nothing: Warren's
// export of the full fixture, imported into the RabbitMQ node at
// WARREN_REFERENCE_ADMIN_URL once the fixture's own vhost, users and
// global parameter are gone from it, makes that node export the fixture
// again. Users the reference had before keep their passwords (they are
// left out of what it is given, as TestDefinitionsIntoRabbitMQ does).
func TestDefinitionsFullRoundTripThroughRabbitMQ(t *testing.T) {
	r := referenceRabbitAdmin(t)

	s := startAdmin(t)
	doc, want := readFullFixture(t)
	s.importDefs(t, doc)
	ours := s.exportDefs(t)

	for _, path := range []string{"/api/vhosts/full", "/api/users/app", "/api/users/ops", "/api/global-parameters/app-setting"} {
		if status, out := call(t, "DELETE", r.base+path, r.user, r.password, nil); status >= 300 && status != http.StatusNotFound {
			t.Fatalf("DELETE %s on the reference: %d %s", path, status, out)
		}
	}
	before := r.definitions(t, "")
	t.Cleanup(func() { r.removeAddedSince(t, before) })
	theirs := map[string]bool{}
	for _, u := range before["users"].([]any) {
		theirs[fmt.Sprint(u.(map[string]any)["name"])] = true
	}
	ours["users"] = slices.DeleteFunc(ours["users"].([]any), func(u any) bool { return theirs[fmt.Sprint(u.(map[string]any)["name"])] })
	given, _ := json.Marshal(ours)
	if status, out := call(t, "POST", r.base+"/api/definitions", r.user, r.password, given); status != http.StatusNoContent {
		t.Fatalf("POST /api/definitions to the reference: %d %s", status, out)
	}
	back := r.definitions(t, "")
	// The reference's own users and cluster name are its own; the rest is
	// the fixture's.
	for _, doc := range []map[string]any{back, want} {
		doc["users"] = slices.DeleteFunc(slices.Clone(doc["users"].([]any)), func(u any) bool { return theirs[fmt.Sprint(u.(map[string]any)["name"])] })
		doc["global_parameters"] = slices.DeleteFunc(slices.Clone(doc["global_parameters"].([]any)), func(g any) bool {
			return g.(map[string]any)["name"] == "cluster_name"
		})
		for _, section := range []string{"vhosts", "permissions"} {
			doc[section] = slices.DeleteFunc(slices.Clone(doc[section].([]any)), func(e any) bool {
				m := e.(map[string]any)
				return m["name"] == "/" || m["vhost"] == "/" || (section == "permissions" && theirs[fmt.Sprint(m["user"])] && m["vhost"] != "full")
			})
		}
	}
	sameSections(t, "RabbitMQ's export after importing Warren's", back, want)
}
