package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
)

// rabbitFixture is GET /api/definitions of a RabbitMQ 3.10.8 node, made
// with rabbitmqctl and the management API. Its users' passwords:
//
//	guest  guest     administrator                    sha256
//	alice  alice-pw  administrator                    sha256
//	bob    bob-pw    monitoring, policymaker          sha256 (limits: max-connections 10)
//	carol  carol-pw  no tags                          sha256
//	dave   none      management (password cleared)    sha256, empty hash
//	erin   erin-pw   management                       sha512 (salt 01020304)
//	frank  frank-pw  no tags                          md5 (salt 09080706)
//
// erin and frank were imported into RabbitMQ with hashes computed from
// the algorithms' definition, and RabbitMQ accepted their passwords
// (rabbitmqctl authenticate_user). Vhosts: "/", orders, staging (with
// vhost limits); carol has a topic permission.
const rabbitFixture = "testdata/rabbitmq-3.10.8-definitions.json"

// adminServer is an in-process Warren with its admin API.
type adminServer struct {
	b    *broker.Broker
	base string // http://127.0.0.1:port
}

func startAdmin(t *testing.T, tweak ...func(*config.Config)) *adminServer {
	t.Helper()
	b := startBroker(t, append(tweak, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })...)
	if err := b.ServeAdmin(admin.Handler(b)); err != nil {
		t.Fatal(err)
	}
	return &adminServer{b: b, base: "http://" + b.AdminAddr()}
}

// call makes an admin API request as user:password and returns the status
// and body.
func call(t *testing.T, method, url, user, password string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (s *adminServer) importDefs(t *testing.T, doc []byte) {
	t.Helper()
	if status, body := call(t, "POST", s.base+"/api/definitions", "guest", "guest", doc); status != http.StatusNoContent {
		t.Fatalf("POST /api/definitions: %d %s", status, body)
	}
}

func (s *adminServer) exportDefs(t *testing.T) map[string]any {
	t.Helper()
	status, body := call(t, "GET", s.base+"/api/definitions", "guest", "guest", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /api/definitions: %d %s", status, body)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func readFixture(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile(rabbitFixture)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// normalized sorts every list of a decoded document by its elements' JSON,
// so two documents compare modulo ordering.
func normalized(doc map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		if list, ok := v.([]any); ok {
			sorted := append([]any{}, list...)
			sort.Slice(sorted, func(i, j int) bool {
				a, _ := json.Marshal(sorted[i])
				b, _ := json.Marshal(sorted[j])
				return string(a) < string(b)
			})
			v = sorted
		}
		out[k] = v
	}
	return out
}

// dialAs connects as a user to a vhost of an in-process Warren.
func dialAs(t *testing.T, b *broker.Broker, user, password, vh string) (*amqp.Connection, error) {
	t.Helper()
	u := fmt.Sprintf("amqp://%s:%s@%s/%s", user, password, b.Addr(), neturl.PathEscape(vh))
	c, err := amqp.Dial(u)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func confirmedChannel(t *testing.T, c *amqp.Connection) *amqp.Channel {
	t.Helper()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	return ch
}

// RabbitMQ's export imports into Warren whole: Warren's own export then
// holds every user (hash and algorithm unchanged), vhost, permission,
// policy, queue, exchange and binding of the file, and clients log in with
// their old passwords and use the imported topology.
func TestDefinitionsFromRabbitMQ(t *testing.T) {
	s := startAdmin(t)
	fixture := readFixture(t)
	s.importDefs(t, fixture)

	var want map[string]any
	if err := json.Unmarshal(fixture, &want); err != nil {
		t.Fatal(err)
	}
	got := normalized(s.exportDefs(t))
	want = normalized(want)
	for _, section := range []string{"users", "vhosts", "permissions", "topic_permissions", "parameters", "policies", "queues", "exchanges", "bindings"} {
		w := want[section]
		if !reflect.DeepEqual(got[section], w) {
			g, _ := json.MarshalIndent(got[section], "", " ")
			ww, _ := json.MarshalIndent(w, "", " ")
			t.Errorf("%s after the import:\n%s\nwant:\n%s", section, g, ww)
		}
	}
	for _, section := range []string{"global_parameters"} {
		if list, ok := got[section].([]any); !ok || len(list) != 0 {
			t.Errorf("%s: %v, want [] (Warren skips them)", section, got[section])
		}
	}

	// Old passwords, every hashing algorithm.
	for _, c := range []struct{ user, password, vhost string }{
		{"alice", "alice-pw", "orders"}, {"bob", "bob-pw", "orders"}, {"carol", "carol-pw", "orders"},
		{"erin", "erin-pw", "staging"}, {"frank", "frank-pw", "/"},
	} {
		if _, err := dialAs(t, s.b, c.user, c.password, c.vhost); err != nil {
			t.Errorf("%s into %s: %v", c.user, c.vhost, err)
		}
	}
	if _, err := dialAs(t, s.b, "dave", "", "staging"); err == nil {
		t.Error("dave, who has no password, logged in")
	}
	if _, err := dialAs(t, s.b, "alice", "wrong", "orders"); err == nil {
		t.Error("a wrong password logged in")
	}
	if _, err := dialAs(t, s.b, "erin", "erin-pw", "orders"); err == nil {
		t.Error("erin logged in to a vhost she has no permissions in")
	}

	// The topology routes: a topic binding, the alternate exchange of a
	// policy, a fanout to a queue.
	alice, _ := dialAs(t, s.b, "alice", "alice-pw", "orders")
	ch := confirmedChannel(t, alice)
	publishConfirmed(t, ch, "orders.in", "order.eu.42", body("eu order"))
	publishConfirmed(t, ch, "orders.in", "order.us.ny.7", body("us order"))
	publishConfirmed(t, ch, "orders.in", "refund", body("unroutable"))
	publishConfirmed(t, ch, "orders.match", "", amqp.Publishing{Headers: amqp.Table{"format": "pdf", "type": "report"}, Body: []byte("report")})
	for queue, want := range map[string]string{"orders.eu": "eu order", "orders.us": "us order", "orders.lost": "unroutable", "orders.pdf": "report"} {
		if m := get(t, ch, queue); string(m.Body) != want {
			t.Errorf("%s: got %q, want %q", queue, m.Body, want)
		}
	}
	// erin (SHA-512) through amq.direct; frank (MD5) through an
	// exchange-to-exchange binding from amq.fanout, within his permissions.
	erin, _ := dialAs(t, s.b, "erin", "erin-pw", "staging")
	ech := confirmedChannel(t, erin)
	publishConfirmed(t, ech, "amq.direct", "jobs", body("job"))
	if m := get(t, ech, "jobs"); string(m.Body) != "job" {
		t.Errorf("jobs: %q", m.Body)
	}
	frank, _ := dialAs(t, s.b, "frank", "frank-pw", "/")
	fch := confirmedChannel(t, frank)
	publishConfirmed(t, fch, "events", "anything", body("event"))
	if m := get(t, fch, "audit"); string(m.Body) != "event" {
		t.Errorf("audit: %q", m.Body)
	}
}

// Warren's export imports into a fresh Warren as the same document.
func TestDefinitionsWarrenRoundTrip(t *testing.T) {
	a := startAdmin(t)
	a.importDefs(t, readFixture(t))
	// Add what only Warren made: a user with a password set here, a
	// binding with a table argument, a policy with a float.
	pw := "w-pw"
	if err := a.b.PutUser("wuser", &pw, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	v, _ := a.b.VHost("orders")
	if err := v.Bind("orders.match", exchange.Destination{Kind: exchange.ToQueue, Name: "orders.dead"}, "",
		protocol.Table{"x-match": "all", "nested": protocol.Table{"a": int64(1)}, "ratio": 0.5}, nil); err != nil {
		t.Fatal(err)
	}
	first := a.exportDefs(t)
	doc, _ := json.Marshal(first)

	b := startAdmin(t)
	b.importDefs(t, doc)
	second := b.exportDefs(t)
	if !reflect.DeepEqual(normalized(first), normalized(second)) {
		x, _ := json.MarshalIndent(first, "", " ")
		y, _ := json.MarshalIndent(second, "", " ")
		t.Fatalf("export after the round trip differs:\nfirst:  %s\nsecond: %s", x, y)
	}
	if _, err := b.b.Users().Login("wuser", "w-pw", true); err != nil {
		t.Fatalf("wuser cannot log in to the second broker: %v", err)
	}
}

// Warren's export imports into RabbitMQ, whose admin API is at
// WARREN_REFERENCE_ADMIN_URL (http://guest:guest@127.0.0.1:15672), and
// users log in there with the passwords Warren was given: one Warren
// hashed, one whose SHA-512 hash came to Warren in a definitions file.
// Warren holds the RabbitMQ fixture plus a vhost of its own making. The
// test posts Warren's whole export except users the reference has already
// (it never changes a password there), and at the end deletes the users,
// vhosts, queues, exchanges and policies the import created.
func TestDefinitionsIntoRabbitMQ(t *testing.T) {
	r := referenceRabbitAdmin(t)

	s := startAdmin(t)
	s.importDefs(t, readFixture(t))
	pw := "warren-made-pw"
	if err := s.b.PutUser("warren-made", &pw, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	sha512User := `{"users": [{"name": "warren-sha512", "hashing_algorithm": "rabbit_password_hashing_sha512", "tags": "management",
		"password_hash": "AQIDBLio9SzvEssMq/uuyJgHqD7fLrNCrOuD6XSfiO8HIlZEkTuNq9GnKc+Br8spkYiUK9z0egVQ2dCetKJi6un6XGM="}]}`
	s.importDefs(t, []byte(sha512User)) // erin's hash: the password is erin-pw
	v, err := s.b.AddVHost("warren-made")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetPermission("warren-made", "warren-made", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	if err := s.b.SetPolicy("warren-made", "cap", "^w", "queues", 1, protocol.Table{"max-length": float64(7)}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.DeclareExchange(exchange.Definition{Name: "w.x", Type: "headers", Durable: true, Args: protocol.Table{"alternate-exchange": "w.ae"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "w.q", Durable: true, Args: protocol.Table{"x-message-ttl": int64(1000)}}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("w.x", exchange.Destination{Kind: exchange.ToQueue, Name: "w.q"}, "", protocol.Table{"x-match": "any", "k": int64(1)}, nil); err != nil {
		t.Fatal(err)
	}

	before := r.definitions(t, "")
	t.Cleanup(func() { r.removeAddedSince(t, before) })
	existing := map[string]bool{}
	for _, u := range before["users"].([]any) {
		existing[u.(map[string]any)["name"].(string)] = true
	}
	doc := s.exportDefs(t)
	var users []any
	for _, u := range doc["users"].([]any) {
		if !existing[u.(map[string]any)["name"].(string)] {
			users = append(users, u)
		}
	}
	doc["users"] = users
	body, _ := json.Marshal(doc)
	if status, out := call(t, "POST", r.base+"/api/definitions", r.user, r.password, body); status != http.StatusNoContent {
		t.Fatalf("RabbitMQ refused Warren's export: %d %s", status, out)
	}
	for user, password := range map[string]string{"warren-made": pw, "warren-sha512": "erin-pw"} {
		if status, out := call(t, "GET", r.base+"/api/whoami", user, password, nil); status != http.StatusOK {
			t.Errorf("%s cannot log in to RabbitMQ with the password Warren knew: %d %s", user, status, out)
		}
	}
	// Every entity of Warren's export is in RabbitMQ's now.
	theirs := normalized(r.definitions(t, ""))
	for _, section := range []string{"vhosts", "permissions", "policies", "queues", "exchanges", "bindings"} {
		have := map[string]bool{}
		for _, e := range theirs[section].([]any) {
			j, _ := json.Marshal(e)
			have[string(j)] = true
		}
		for _, e := range doc[section].([]any) {
			if j, _ := json.Marshal(e); !have[string(j)] {
				t.Errorf("%s: RabbitMQ's export lacks %s", section, j)
			}
		}
	}
}

// rabbitAdmin is a RabbitMQ management API.
type rabbitAdmin struct{ base, user, password string }

// referenceRabbitAdmin is the reference's management API, at
// WARREN_REFERENCE_ADMIN_URL (guest:guest unless the URL names a user); a
// test without one skips.
func referenceRabbitAdmin(t *testing.T) *rabbitAdmin {
	t.Helper()
	ref := os.Getenv("WARREN_REFERENCE_ADMIN_URL")
	if ref == "" {
		t.Skip("set WARREN_REFERENCE_ADMIN_URL to a RabbitMQ management API, e.g. http://guest:guest@127.0.0.1:15672")
	}
	refURL, err := neturl.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	r := &rabbitAdmin{user: "guest", password: "guest"}
	if refURL.User != nil {
		r.user = refURL.User.Username()
		r.password, _ = refURL.User.Password()
	}
	refURL.User = nil
	r.base = strings.TrimRight(refURL.String(), "/")
	return r
}

// definitions exports the reference, or one of its vhosts.
func (r *rabbitAdmin) definitions(t *testing.T, vh string) map[string]any {
	t.Helper()
	path := "/api/definitions"
	if vh != "" {
		path += "/" + neturl.PathEscape(vh)
	}
	status, out := call(t, "GET", r.base+path, r.user, r.password, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s on the reference: %d %s", path, status, out)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// removeAddedSince deletes from the reference the users, vhosts, queues,
// exchanges and policies that are not in an earlier export (permissions
// and bindings go with them).
func (r *rabbitAdmin) removeAddedSince(t *testing.T, before map[string]any) {
	key := func(section string, e map[string]any) string {
		if section == "users" || section == "vhosts" {
			return fmt.Sprint(e["name"])
		}
		return fmt.Sprint(e["vhost"], "\x00", e["name"])
	}
	now := r.definitions(t, "")
	for _, section := range []string{"users", "policies", "queues", "exchanges", "vhosts"} {
		old := map[string]bool{}
		for _, e := range before[section].([]any) {
			old[key(section, e.(map[string]any))] = true
		}
		for _, e := range now[section].([]any) {
			e := e.(map[string]any)
			if old[key(section, e)] {
				continue
			}
			path := "/api/" + section + "/" + neturl.PathEscape(fmt.Sprint(e["name"]))
			if section != "users" && section != "vhosts" {
				path = "/api/" + section + "/" + neturl.PathEscape(fmt.Sprint(e["vhost"])) + "/" + neturl.PathEscape(fmt.Sprint(e["name"]))
			}
			if status, out := call(t, "DELETE", r.base+path, r.user, r.password, nil); status >= 300 && status != http.StatusNotFound {
				t.Errorf("cleaning up %s on the reference: %d %s", path, status, out)
			}
		}
	}
}

// Each bad value is a 400 naming the entity and the field, and a document
// with one changes nothing.
func TestDefinitionsRefusedOverHTTP(t *testing.T) {
	s := startAdmin(t)
	s.importDefs(t, readFixture(t))
	before := s.exportDefs(t)
	cases := []struct{ doc, want string }{
		{`{not json`, "document"},
		{`{"vhosts": [{"name": "new"}], "queues": [{"name": "q", "vhost": "new", "durable": "yes"}]}`, "queue 'q' in vhost 'new': durable"},
		{`{"users": [{"name": "zed", "password_hash": "AAAAAAAA", "hashing_algorithm": "rabbit_password_hashing_sha1"}]}`, "user 'zed': hashing_algorithm"},
		{`{"users": [{"name": "alice", "password_hash": "AAAA", "tags": []}]}`, "user 'alice': password_hash"},
		{`{"exchanges": [{"name": "orders.in", "vhost": "orders", "type": "direct", "durable": true}]}`, "exchange 'orders.in' in vhost 'orders': type"},
		{`{"queues": [{"name": "audit", "vhost": "/", "durable": false, "auto_delete": false}]}`, "queue 'audit' in vhost '/': durable"},
		{`{"queues": [{"name": "q2", "vhost": "/", "durable": true, "arguments": {"x-overflow": "sideways"}}]}`, "queue 'q2' in vhost '/': arguments"},
		{`{"policies": [{"vhost": "orders", "name": "ha", "pattern": ".*", "definition": {"ha-mode": "all"}}]}`, "policy 'ha' in vhost 'orders': definition"},
		{`{"permissions": [{"user": "nobody", "vhost": "orders", "configure": "", "write": "", "read": ""}]}`, "permission of user 'nobody' in vhost 'orders': user"},
		{`{"bindings": [{"source": "events", "vhost": "/", "destination": "gone", "destination_type": "queue", "routing_key": ""}]}`, "binding from exchange 'events' to queue 'gone' in vhost '/': destination"},
	}
	for _, c := range cases {
		status, body := call(t, "POST", s.base+"/api/definitions", "guest", "guest", []byte(c.doc))
		var e struct{ Error, Reason string }
		_ = json.Unmarshal(body, &e)
		if status != http.StatusBadRequest || e.Error != "bad_request" || !strings.Contains(e.Reason, c.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", c.doc, status, body, c.want)
		}
	}
	if after := s.exportDefs(t); !reflect.DeepEqual(before, after) {
		t.Fatal("a refused document changed the broker")
	}
	// Administrators only (RabbitMQ answers another tag 401 "Not
	// administrator user"); a vhost's import needs the vhost.
	if status, body := call(t, "GET", s.base+"/api/definitions", "bob", "bob-pw", nil); status != http.StatusUnauthorized || !strings.Contains(string(body), "Not administrator user") {
		t.Errorf("bob (monitoring) exported: %d %s", status, body)
	}
	if status, _ := call(t, "GET", s.base+"/api/definitions", "", "", nil); status != http.StatusUnauthorized {
		t.Errorf("no credentials: %d", status)
	}
	if status, body := call(t, "POST", s.base+"/api/definitions/nowhere", "guest", "guest", []byte(`{}`)); status != http.StatusNotFound {
		t.Errorf("import into a missing vhost: %d %s", status, body)
	}
	if status, body := call(t, "GET", s.base+"/api/definitions/"+neturl.PathEscape("/"), "alice", "alice-pw", nil); status != http.StatusOK || !strings.Contains(string(body), `"audit"`) {
		t.Errorf("GET /api/definitions/%%2F: %d %s", status, body)
	}
}

// definitions.load_file is applied at start; a bad file stops the start
// with the file's name and the bad entity in the error.
func TestDefinitionsLoadFile(t *testing.T) {
	if reference() != "" {
		t.Skip("needs Warren's configuration")
	}
	s := startWarren(t, func(c *config.Config) { c.Definitions.LoadFile = rabbitFixture })
	if _, err := dialAs(t, s.b, "erin", "erin-pw", "staging"); err != nil {
		t.Fatalf("the load file's user cannot log in: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad-defs.json")
	if err := os.WriteFile(bad, []byte(`{"exchanges": [{"name": "x", "vhost": "/", "type": "no-such-type", "durable": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = nil
	cfg.MQTT.Listen = nil
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = t.TempDir()
	cfg.Definitions.LoadFile = bad
	b, err := broker.New(cfg, zerolog.New(io.Discard))
	if err == nil {
		_ = b.Shutdown(context.Background())
		t.Fatal("a bad definitions file did not stop the start")
	}
	if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "exchange 'x' in vhost '/': type") {
		t.Fatalf("start-up error %q names neither the file nor the entity", err)
	}
}
