package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// Policies through the API; a definition with a wrong value is refused
// with RabbitMQ's 400 "Validation failed" (Warren's reason also names the
// key) and never stored.
func TestMgmtPolicies(t *testing.T) {
	m := startMgmt(t)
	p := "/api/policies/" + m.v() + "/p1"
	for _, def := range []string{
		`{"max-length":"abc"}`, `{"max-length":1.5}`, `{"message-ttl":-1}`, `{"overflow":"nope"}`,
		`{"bogus-key":1}`, `{}`,
	} {
		r := m.call("PUT", p, `{"pattern":"^q","definition":`+def+`}`)
		var e struct{ Error, Reason string }
		if r.status == 400 {
			r.json(t, &e)
		}
		if r.status != 400 || e.Error != "bad_request" || !strings.HasPrefix(e.Reason, "Validation failed\n\n") {
			t.Errorf("definition %s: %d %s", def, r.status, r.body)
		}
		if m.isWarren() && def != `{}` {
			key := strings.Split(def, `"`)[1]
			if !strings.Contains(e.Reason, key) {
				t.Errorf("definition %s: the reason does not name %s: %s", def, key, e.Reason)
			}
		}
	}
	m.expectError(m.call("PUT", p, `{"definition":{"max-length":10}}`), 400, "bad_request", "[{key_missing,pattern}]")
	if r := m.call("PUT", p, `{"pattern":"^q","definition":{"max-length":10},"apply-to":"bogus"}`); r.status != 400 {
		t.Fatalf("apply-to bogus: %d %s", r.status, r.body)
	}
	if r := m.call("PUT", p, `{"pattern":"^q","definition":{"max-length":10},"priority":"x"}`); r.status != 400 {
		t.Fatalf("priority x: %d %s", r.status, r.body)
	}
	m.expectNotFound("GET", p) // nothing refused was stored

	m.expect("PUT", p, `{"pattern":"^q","definition":{"max-length":10,"overflow":"reject-publish"},"priority":1,"apply-to":"queues"}`, 201)
	m.expect("PUT", p, `{"pattern":"^q","definition":{"max-length":10},"priority":1,"apply-to":"queues"}`, 204)
	r := m.expect("GET", p, "", 200)
	if want := `{"vhost":"` + m.vhost + `","name":"p1","pattern":"^q","apply-to":"queues","definition":{"max-length":10},"priority":1}`; r.body != want {
		t.Fatalf("policy: %s, want %s", r.body, want)
	}
	m.expect("PUT", "/api/queues/"+m.v()+"/q1", `{}`, 201)
	waitFor(t, "the policy shown on q1", func() bool {
		var q struct {
			Policy    *string
			Effective map[string]any `json:"effective_policy_definition"`
		}
		m.expect("GET", "/api/queues/"+m.v()+"/q1", "", 200).json(t, &q)
		return q.Policy != nil && *q.Policy == "p1" && q.Effective["max-length"] == 10.0
	})
	var list []map[string]any
	m.expect("GET", "/api/policies/"+m.v(), "", 200).json(t, &list)
	if len(list) != 1 {
		t.Fatalf("policies: %v", list)
	}
	m.expect("DELETE", p, "", 204)
	m.expectNotFound("DELETE", p)
}

// Operator policies through the API, as RabbitMQ 3.10.8 has them: only
// their keys (limits), the stricter of a number the user's policy also
// sets, and what a queue shows of both.
func TestMgmtOperatorPolicies(t *testing.T) {
	m := startMgmt(t)
	op := "/api/operator-policies/" + m.v() + "/op1"
	for _, def := range []string{`{"dead-letter-exchange":"x"}`, `{"max-length":"ten"}`, `{"overflow":"reject-publish"}`, `{"queue-mode":"lazy"}`} {
		r := m.call("PUT", op, `{"pattern":"^q","definition":`+def+`}`)
		var e struct{ Error, Reason string }
		if r.status == 400 {
			r.json(t, &e)
		}
		if r.status != 400 || e.Error != "bad_request" || !strings.HasPrefix(e.Reason, "Validation failed\n\n") {
			t.Errorf("definition %s: %d %s", def, r.status, r.body)
		}
		if key := strings.Split(def, `"`)[1]; m.isWarren() && !strings.Contains(e.Reason, key) {
			t.Errorf("definition %s: the reason does not name %s: %s", def, key, e.Reason)
		}
	}
	m.expectError(m.call("PUT", op, `{"definition":{"max-length":10}}`), 400, "bad_request", "[{key_missing,pattern}]")
	m.expectNotFound("GET", op)

	m.expect("PUT", op, `{"pattern":"^opq","definition":{"max-length":10,"message-ttl":5000},"priority":1,"apply-to":"queues"}`, 201)
	m.expect("PUT", op, `{"pattern":"^opq","definition":{"max-length":10,"message-ttl":5000},"priority":1,"apply-to":"queues"}`, 204)
	if r, want := m.expect("GET", op, "", 200), `{"vhost":"`+m.vhost+`","name":"op1","pattern":"^opq","apply-to":"queues","definition":{"max-length":10,"message-ttl":5000},"priority":1}`; r.body != want {
		t.Fatalf("operator policy: %s, want %s", r.body, want)
	}
	var list []map[string]any
	m.expect("GET", "/api/operator-policies/"+m.v(), "", 200).json(t, &list)
	if len(list) != 1 || list[0]["name"] != "op1" {
		t.Fatalf("operator policies: %v", list)
	}
	m.expect("GET", "/api/policies/"+m.v(), "", 200).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("an operator policy is listed with the policies: %v", list)
	}
	up := "/api/policies/" + m.v() + "/up1"
	m.expect("PUT", up, `{"pattern":"^opq1$","definition":{"max-length":20,"message-ttl":1000,"dead-letter-exchange":"dlx"},"apply-to":"queues"}`, 201)
	t.Cleanup(func() { m.call("DELETE", up, "") })
	for _, q := range []string{"opq1", "opq2"} {
		m.expect("PUT", "/api/queues/"+m.v()+"/"+q, `{"durable":true}`, 201)
	}
	type shown struct {
		Policy         *string
		OperatorPolicy *string        `json:"operator_policy"`
		Effective      map[string]any `json:"effective_policy_definition"`
	}
	str := func(s *string) string {
		if s == nil {
			return "null"
		}
		return *s
	}
	want := map[string]string{
		"opq1": `up1 op1 map[dead-letter-exchange:dlx max-length:10 message-ttl:1000]`,
		"opq2": `null op1 map[max-length:10 message-ttl:5000]`,
	}
	for q, w := range want {
		waitFor(t, "both policies shown on "+q, func() bool {
			var s shown
			m.expect("GET", "/api/queues/"+m.v()+"/"+q, "", 200).json(t, &s)
			return fmt.Sprintf("%s %s %v", str(s.Policy), str(s.OperatorPolicy), s.Effective) == w
		})
	}
	m.expect("DELETE", op, "", 204)
	m.expectNotFound("DELETE", op)
	waitFor(t, "the operator policy gone from opq2", func() bool {
		var s shown
		m.expect("GET", "/api/queues/"+m.v()+"/opq2", "", 200).json(t, &s)
		return s.OperatorPolicy == nil && len(s.Effective) == 0
	})
}

// Feature flags as RabbitMQ 3.10.8 lists them, every one enabled;
// enabling one is a no-op, an unknown one refused.
func TestMgmtFeatureFlags(t *testing.T) {
	m := startMgmt(t)
	var flags []struct{ Name, State, Stability string }
	m.expect("GET", "/api/feature-flags", "", 200).json(t, &flags)
	var names []string
	for _, f := range flags {
		if f.State != "enabled" || f.Stability != "stable" {
			t.Errorf("flag %+v", f)
		}
		names = append(names, f.Name)
	}
	want := []string{"classic_mirrored_queue_version", "drop_unroutable_metric", "empty_basic_get_metric", "implicit_default_bindings",
		"maintenance_mode_status", "quorum_queue", "stream_queue", "user_limits", "virtual_host_metadata"}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Errorf("flags %v, want %v", names, want)
	}
	m.expect("PUT", "/api/feature-flags/quorum_queue/enable", `{}`, 204)
	m.expectError(m.call("PUT", "/api/feature-flags/nope/enable", `{}`), 400, "bad_request", "unsupported")
}

// Global parameters: cluster_name, and any JSON value an operator sets
// under another name, as RabbitMQ 3.10.8 keeps them.
func TestMgmtGlobalParameters(t *testing.T) {
	m := startMgmt(t)
	var list []struct {
		Name  string
		Value any
	}
	m.expect("GET", "/api/global-parameters", "", 200).json(t, &list)
	if len(list) == 0 || list[0].Name != "cluster_name" {
		t.Fatalf("global parameters %+v, want cluster_name first", list)
	}
	p := "/api/global-parameters/mgmt-test-param"
	t.Cleanup(func() { m.call("DELETE", p, "") })
	m.expectNotFound("GET", p)
	m.expectError(m.call("PUT", p, `{"nov":1}`), 400, "bad_request", "[{key_missing,value}]")
	m.expect("PUT", p, `{"value":{"a":1,"b":[true,"x"]}}`, 201)
	if r := m.expect("GET", p, "", 200); r.body != `{"value":{"a":1,"b":[true,"x"]},"name":"mgmt-test-param"}` {
		t.Fatalf("global parameter: %s", r.body)
	}
	m.expect("PUT", p, `{"value":"x"}`, 204)
	m.expect("GET", "/api/global-parameters", "", 200).json(t, &list)
	found := false
	for _, g := range list {
		found = found || g.Name == "mgmt-test-param" && g.Value == "x"
	}
	if !found {
		t.Fatalf("global parameters %+v lack the one set", list)
	}
	m.expect("DELETE", p, "", 204)
	m.expectNotFound("DELETE", p)
	m.expectNotFound("GET", p)
}

// Runtime parameters: a vhost's limits as component vhost-limits, named
// limits, replaced whole; a component Warren does not have is refused by
// name, as RabbitMQ refuses one whose plugin is not enabled.
func TestMgmtParameters(t *testing.T) {
	m := startMgmt(t)
	p := "/api/parameters/vhost-limits/" + m.v() + "/limits"
	m.expectError(m.call("PUT", "/api/parameters/no-such-component/"+m.v()+"/s1", `{"value":{"uri":"amqp://"}}`), 400, "bad_request",
		"Validation failed\n\ncomponent no-such-component not found\n")
	m.expect("GET", "/api/parameters/vhost-limits/"+m.v(), "", 200).expectBody(t, "[]")
	m.expectNotFound("GET", p)
	m.expectNotFound("DELETE", p)
	m.expectError(m.call("PUT", p, `{"nov":1}`), 400, "bad_request", "[{key_missing,value}]")
	if r := m.call("PUT", p, `{"value":{"bogus":1}}`); r.status != 400 {
		t.Fatalf("an unknown limit: %d %s", r.status, r.body)
	}
	m.expect("PUT", p, `{"value":{"max-queues":100,"max-connections":5}}`, 201)
	m.expect("PUT", p, `{"value":{"max-connections":6}}`, 204)
	m.expect("GET", p, "", 200).expectBody(t, `{"value":{"max-connections":6},"vhost":"`+m.vhost+`","component":"vhost-limits","name":"limits"}`)
	m.expect("GET", "/api/vhost-limits/"+m.v(), "", 200).expectBody(t, `[{"vhost":"`+m.vhost+`","value":{"max-connections":6}}]`)
	var all []map[string]any
	m.expect("GET", "/api/parameters", "", 200).json(t, &all)
	found := false
	for _, x := range all {
		found = found || x["vhost"] == m.vhost && x["component"] == "vhost-limits"
	}
	if !found {
		t.Fatalf("/api/parameters %v lacks the vhost's limits", all)
	}
	m.expect("DELETE", p, "", 204)
	m.expect("GET", "/api/vhost-limits/"+m.v(), "", 200).expectBody(t, "[]")
}

// A queue's actions, sync and cancel_sync: RabbitMQ 3.10.8 takes both for
// a queue that has no mirrors, and Warren mirrors none.
func TestMgmtQueueActions(t *testing.T) {
	m := startMgmt(t)
	q := "/api/queues/" + m.v() + "/actq"
	m.expect("PUT", q, `{"durable":true}`, 201)
	m.expect("POST", q+"/actions", `{"action":"sync"}`, 204)
	m.expect("POST", q+"/actions", `{"action":"cancel_sync"}`, 204)
	m.expectError(m.call("POST", q+"/actions", `{}`), 400, "bad_request", "[{key_missing,action}]")
	if r := m.call("POST", q+"/actions", `{"action":"nope"}`); r.status != 400 {
		t.Fatalf("an unknown action: %d %s", r.status, r.body)
	}
}

// The health checks, with RabbitMQ 3.10.8's answers.
func TestMgmtHealthChecks(t *testing.T) {
	m := startMgmt(t)
	hc := "/api/health/checks/"
	for _, path := range []string{"/api/aliveness-test/" + m.v(), hc + "alarms", hc + "local-alarms", hc + "virtual-hosts",
		hc + "certificate-expiration/1/months", hc + "protocol-listener/amqp", hc + "protocol-listener/amqp091"} {
		r := m.expect("GET", path, "", 200)
		if !strings.HasPrefix(r.body, `{"status":"ok"`) {
			t.Errorf("%s: %s", path, r.body)
		}
	}
	for _, path := range []string{hc + "node-is-quorum-critical", hc + "node-is-mirror-sync-critical"} {
		if r := m.expect("GET", path, "", 200); r.body != `{"status":"ok","reason":"single node cluster"}` {
			t.Errorf("%s: %s", path, r.body)
		}
	}
	port := amqpPort(t, m)
	if r := m.expect("GET", hc+"port-listener/"+port, "", 200); r.body != `{"status":"ok","port":`+port+`}` {
		t.Errorf("port-listener: %s", r.body)
	}
	var failed struct {
		Status, Reason string
		Missing        any
	}
	m.expect("GET", hc+"port-listener/1", "", 503).json(t, &failed)
	if failed.Status != "failed" || failed.Reason != "No active listener" || failed.Missing != 1.0 {
		t.Errorf("port-listener/1: %+v", failed)
	}
	m.expect("GET", hc+"protocol-listener/stomp", "", 503).json(t, &failed)
	if failed.Status != "failed" || failed.Missing != "stomp" {
		t.Errorf("protocol-listener/stomp: %+v", failed)
	}
	if m.isWarren() {
		if r := m.expect("GET", hc+"protocol-listener/mqtt", "", 200); r.body != `{"status":"ok","protocol":"mqtt"}` {
			t.Errorf("protocol-listener/mqtt: %s", r.body)
		}
	}
	m.expectError(m.call("GET", hc+"port-listener/abc", ""), 400, "bad_request", "Invalid port")
	m.expectError(m.call("GET", hc+"certificate-expiration/1/bogus", ""), 400, "bad_request",
		"Time unit not recognised. Supported units: days, weeks, months, years.")
	m.expectError(m.call("GET", hc+"certificate-expiration/x/days", ""), 400, "bad_request", "Invalid expiration value.")
	m.expectNotFound("GET", "/api/aliveness-test/no-such-vhost")
	m.expectNotFound("GET", hc+"nope")
}

// amqpPort is the AMQP listener's port, from the broker under test's URL.
func amqpPort(t testing.TB, m *mgmt) string {
	u := strings.TrimSuffix(m.s.url, "/")
	return u[strings.LastIndex(u, ":")+1:]
}

// The overview, nodes, vhosts and cluster name.
func TestMgmtOverviewNodesVHosts(t *testing.T) {
	m := startMgmt(t)
	var ov map[string]any
	m.expect("GET", "/api/overview", "", 200).json(t, &ov)
	for _, k := range []string{"management_version", "rabbitmq_version", "product_name", "product_version", "cluster_name",
		"node", "exchange_types", "message_stats", "queue_totals", "object_totals", "listeners", "statistics_db_event_queue"} {
		if _, ok := ov[k]; !ok {
			t.Errorf("overview has no %s", k)
		}
	}
	types, _ := ov["exchange_types"].([]any)
	if len(types) < 4 || types[0].(map[string]any)["description"] == nil {
		t.Errorf("exchange_types: %v", ov["exchange_types"])
	}
	totals, _ := ov["object_totals"].(map[string]any)
	for _, k := range []string{"connections", "channels", "exchanges", "queues", "consumers"} {
		if _, ok := totals[k]; !ok {
			t.Errorf("object_totals has no %s", k)
		}
	}
	found := false
	for _, l := range ov["listeners"].([]any) {
		l := l.(map[string]any)
		found = found || l["protocol"] == "amqp" && strconv.Itoa(int(l["port"].(float64))) == amqpPort(t, m)
	}
	if !found {
		t.Errorf("listeners: %v", ov["listeners"])
	}
	// Samples for the web UI's charts.
	m.expect("GET", "/api/overview?lengths_age=60&lengths_incr=5&msg_rates_age=60&msg_rates_incr=5", "", 200).json(t, &ov)
	// RabbitMQ leaves queue_totals and message_stats empty until its
	// statistics database has seen a queue and a publish (a fresh node);
	// Warren always has them.
	qt := ov["queue_totals"].(map[string]any)
	if len(qt) > 0 || m.isWarren() {
		d, _ := qt["messages_details"].(map[string]any)
		if samples, _ := d["samples"].([]any); len(samples) != 13 || d["avg_rate"] == nil || d["avg"] == nil {
			t.Errorf("queue_totals.messages_details: %v", d)
		}
	}
	// RabbitMQ has publish_details once its node saw a publish (a node
	// that only delivered has message_stats without it); Warren always.
	if ms, _ := ov["message_stats"].(map[string]any); ms["publish_details"] != nil || m.isWarren() {
		if d, _ := ms["publish_details"].(map[string]any); d == nil || len(d["samples"].([]any)) != 13 {
			t.Errorf("message_stats.publish_details: %v", ms["publish_details"])
		}
	}

	var nodes []map[string]any
	m.expect("GET", "/api/nodes", "", 200).json(t, &nodes)
	if len(nodes) != 1 {
		t.Fatalf("nodes: %v", nodes)
	}
	for _, k := range []string{"name", "mem_used", "mem_limit", "mem_alarm", "disk_free", "disk_free_limit", "disk_free_alarm",
		"fd_used", "fd_total", "uptime", "running", "sockets_used", "proc_used", "proc_total",
		"auth_mechanisms", "applications", "contexts", "log_files", "db_dir", "cluster_links", "connection_created",
		"connection_closed", "channel_created", "channel_closed", "gc_num", "gc_bytes_reclaimed", "context_switches",
		"io_read_count", "io_read_bytes", "io_write_count", "io_write_bytes"} {
		if _, ok := nodes[0][k]; !ok {
			t.Errorf("node has no %s", k)
		}
	}
	for _, k := range []string{"connection_created", "connection_closed", "channel_created", "channel_closed", "gc_num",
		"gc_bytes_reclaimed", "context_switches", "io_read_count", "io_read_bytes", "io_write_count", "io_write_bytes"} {
		if d, ok := nodes[0][k+"_details"].(map[string]any); !ok || d["rate"] == nil {
			t.Errorf("node has no %s_details with a rate: %v", k, nodes[0][k+"_details"])
		}
	}
	// What monitoring checks divide (check_rabbitmq_server): a node in
	// good health is far below its totals.
	used, _ := nodes[0]["proc_used"].(float64)
	total, _ := nodes[0]["proc_total"].(float64)
	if total == 0 || used/total > 0.5 {
		t.Errorf("proc_used %v of proc_total %v", used, total)
	}
	name := nodes[0]["name"].(string)
	m.expect("GET", "/api/nodes/"+esc(name), "", 200)

	// The memory breakdown (what rabbitmq-diagnostics memory_breakdown
	// reads), alone and in the node's entry.
	var mem struct{ Memory map[string]any }
	m.expect("GET", "/api/nodes/"+esc(name)+"/memory", "", 200).json(t, &mem)
	checkMemoryBreakdown(t, mem.Memory)
	var withMemory struct{ Memory map[string]any }
	m.expect("GET", "/api/nodes/"+esc(name)+"?memory=true", "", 200).json(t, &withMemory)
	checkMemoryBreakdown(t, withMemory.Memory)

	var vh map[string]any
	m.expect("GET", "/api/vhosts/"+m.v(), "", 200).json(t, &vh)
	if vh["name"] != m.vhost {
		t.Errorf("vhost: %v", vh)
	}
	m.expect("PUT", "/api/vhosts/"+m.v(), "", 204)
	m.expectNotFound("GET", "/api/vhosts/no-such-vhost")
	m.expectNotFound("DELETE", "/api/vhosts/no-such-vhost")

	var cn struct{ Name string }
	m.expect("GET", "/api/cluster-name", "", 200).json(t, &cn)
	if cn.Name == "" {
		t.Fatal("no cluster name")
	}
	m.expectError(m.call("PUT", "/api/cluster-name", `{}`), 400, "bad_request", "[{key_missing,name}]")
	m.expect("PUT", "/api/cluster-name", `{"name":"renamed"}`, 204)
	t.Cleanup(func() { m.call("PUT", "/api/cluster-name", `{"name":"`+cn.Name+`"}`) })
	m.expect("GET", "/api/cluster-name", "", 200).json(t, &cn)
	if cn.Name != "renamed" {
		t.Fatalf("cluster name %q after renaming", cn.Name)
	}
}

// checkMemoryBreakdown checks a node's "memory" as RabbitMQ shapes it: bytes
// by category, "total" by strategy, the strategy in force.
func checkMemoryBreakdown(t *testing.T, mem map[string]any) {
	t.Helper()
	total, _ := mem["total"].(map[string]any)
	if rss, _ := total["rss"].(float64); rss <= 0 {
		t.Errorf("memory total %v has no rss", mem["total"])
	}
	if strategy, _ := mem["strategy"].(string); strategy == "" {
		t.Errorf("memory has no strategy: %v", mem)
	}
	var categories int
	for _, v := range mem {
		if _, ok := v.(float64); ok {
			categories++
		}
	}
	if categories < 5 {
		t.Errorf("memory has %d categories: %v", categories, mem)
	}
}

// Warren's memory breakdown adds up: its categories are what Go and the
// store hold, and what lies outside them makes up the resident set; a
// queue's messages in memory show in queue_messages.
func TestMgmtWarrenMemoryBreakdown(t *testing.T) {
	m := startWarrenMgmt(t)
	breakdown := func() (map[string]float64, float64, float64) {
		var mem struct {
			Memory map[string]any
		}
		m.expect("GET", "/api/nodes/"+esc(m.s.b.NodeName())+"/memory", "", 200).json(t, &mem)
		cats := map[string]float64{}
		for k, v := range mem.Memory {
			if n, ok := v.(float64); ok {
				cats[k] = n
			}
		}
		total := mem.Memory["total"].(map[string]any)
		return cats, total["rss"].(float64), total["allocated"].(float64)
	}
	cats, rss, allocated := breakdown()
	var sum float64
	for k, v := range cats {
		if k != "outside_go" {
			sum += v
		}
	}
	if sum != allocated || sum+cats["outside_go"] != max(rss, allocated) {
		t.Errorf("categories %v add up to %.0f (%.0f with outside_go); allocated %.0f, rss %.0f", cats, sum, sum+cats["outside_go"], allocated, rss)
	}

	// 4 MiB of bodies in a classic queue (under its 64 MiB in memory).
	_, ch := m.channel()
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 64<<10)
	for range 64 {
		if err := ch.Publish("", q.Name, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "the queue's messages counted in memory", func() bool {
		cats, _, _ := breakdown()
		return cats["queue_messages"] >= 4<<20
	})
	// The queue's own figure: its messages' bytes in memory.
	var qj struct{ Memory *int64 }
	m.expect("GET", "/api/queues/"+m.v()+"/"+esc(q.Name), "", 200).json(t, &qj)
	if qj.Memory == nil || *qj.Memory < 4<<20 {
		t.Errorf("the queue's memory: %v", qj.Memory)
	}
}

// A node's counters have rates between statistics samples, as RabbitMQ's
// node entry has them: connections opened show in
// connection_created_details.
func TestMgmtWarrenNodeRates(t *testing.T) {
	s := startWarren(t, func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.Admin.StatsInterval = config.Duration(time.Second)
	})
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	rate := func(key string) float64 {
		code, body := adminGet(t, "http://"+s.b.AdminAddr()+"/api/nodes/"+esc(s.b.NodeName()), "guest", "guest")
		var n map[string]any
		if code != 200 || json.Unmarshal([]byte(body), &n) != nil {
			t.Fatalf("GET /api/nodes/{node}: %d %s", code, body)
		}
		d, _ := n[key+"_details"].(map[string]any)
		r, _ := d["rate"].(float64)
		return r
	}
	poll.Until(t, 20*time.Second, "connections opened counted in connection_created's rate", func() bool {
		c, err := amqp.Dial(s.url)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		return rate("connection_created") > 0 && rate("connection_closed") > 0
	})
	if r := rate("gc_num"); r < 0 {
		t.Errorf("gc_num_details.rate %v", r)
	}
}

// Warren's own: unknown nodes, plugins with their description.
func TestMgmtWarrenNodeAndPlugins(t *testing.T) {
	m := startWarrenMgmt(t)
	m.expectNotFound("GET", "/api/nodes/rabbit@elsewhere")
	var plugins []struct {
		Name  string
		Types []string
	}
	m.expect("GET", "/api/plugins", "", 200).json(t, &plugins)
	if len(plugins) == 0 {
		t.Fatal("no plugins listed")
	}
	for _, p := range plugins {
		if p.Name == "" || p.Types == nil {
			t.Errorf("plugin %+v", p)
		}
	}
}

// A raised resource alarm fails the alarm checks with 503 and RabbitMQ's
// reason; Warren's alarm is raised here by hand.
func TestMgmtAlarmHealthCheckFails(t *testing.T) {
	m := startWarrenMgmt(t)
	m.s.b.Alarm().Set(true, "memory: above the watermark of 1 bytes")
	var failed struct {
		Status, Reason string
		Alarms         []map[string]any
	}
	for _, path := range []string{"/api/health/checks/alarms", "/api/health/checks/local-alarms"} {
		m.expect("GET", path, "", 503).json(t, &failed)
		if failed.Status != "failed" || failed.Reason != "resource alarm(s) in effect in the cluster" ||
			len(failed.Alarms) != 1 || failed.Alarms[0]["resource"] != "memory" {
			t.Fatalf("%s: %+v", path, failed)
		}
	}
	var node struct {
		MemAlarm bool `json:"mem_alarm"`
	}
	var nodes []json.RawMessage
	m.expect("GET", "/api/nodes", "", 200).json(t, &nodes)
	if err := json.Unmarshal(nodes[0], &node); err != nil || !node.MemAlarm {
		t.Fatalf("mem_alarm not shown: %s", nodes[0])
	}
	m.s.b.Alarm().Set(false, "")
	m.expect("GET", "/api/health/checks/alarms", "", 200)
	m.expect("DELETE", "/api/vhosts/"+m.v(), "", 204)
	m.expectNotFound("GET", "/api/vhosts/"+m.v())
}

// A vhost's description and tags are what its last PUT said (what a PUT
// leaves out is cleared), as RabbitMQ 3.10.8 keeps them.
func TestMgmtVHostMetadata(t *testing.T) {
	m := startMgmt(t)
	name := uniq(t, "meta")
	t.Cleanup(func() { m.call("DELETE", "/api/vhosts/"+esc(name), "") })
	type vh struct {
		Description string
		Tags        []string
		Metadata    struct {
			Description string
			Tags        []string
		}
	}
	for _, c := range []struct {
		body, desc string
		tags       []string
		status     int
	}{
		{`{"description":"first","tags":"a,b"}`, "first", []string{"a", "b"}, 201},
		{`{"description":"second"}`, "second", []string{}, 204},
		{`{"tags":["x"]}`, "", []string{"x"}, 204},
	} {
		m.expect("PUT", "/api/vhosts/"+esc(name), c.body, c.status)
		var got vh
		m.expect("GET", "/api/vhosts/"+esc(name), "", 200).json(t, &got)
		if got.Description != c.desc || !slices.Equal(got.Tags, c.tags) || got.Metadata.Description != c.desc || !slices.Equal(got.Metadata.Tags, c.tags) {
			t.Errorf("after %s: %+v, want %q %v", c.body, got, c.desc, c.tags)
		}
	}
}
