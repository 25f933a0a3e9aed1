package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"

	"github.com/warrenmq/warren/internal/poll"
)

func newBroker(t *testing.T, tweak ...func(*config.Config)) (*broker.Broker, string) {
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = nil
	cfg.MQTT.Listen = nil
	cfg.Storage.DataDir = t.TempDir()
	for _, f := range tweak {
		f(&cfg)
	}
	b, err := broker.New(cfg, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.Handler(b))
	t.Cleanup(func() {
		srv.Close()
		_ = b.Shutdown(context.Background())
	})
	return b, srv.URL
}

// ctlMust runs warrenctl against url, failing t if it fails, and gives
// its output.
func ctlMust(t *testing.T, url string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := ctl(t, url, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
}

// ctl runs warrenctl against url. Its timeout is long: under -race,
// enabling a plugin compiles it ten times slower than a user waits.
func ctl(t *testing.T, url string, args ...string) (string, error) {
	var out bytes.Buffer
	err := run(append([]string{"--url", url, "--timeout", "300"}, args...), &out)
	return out.String(), err
}

func TestPolicyFromTheSeed(t *testing.T) {
	b, url := newBroker(t)
	// The seed's command, flags after the arguments as rabbitmqctl takes them.
	if _, err := ctl(t, url, "set_policy", "AE", "^my-direct$", `{"alternate-exchange":"my-ae"}`, "--apply-to", "exchanges"); err != nil {
		t.Fatal(err)
	}
	v, _ := b.VHost("/")
	if _, err := v.DeclareExchange(exchange.Definition{Name: "my-direct", Type: "direct"}, false); err != nil {
		t.Fatal(err)
	}
	x, _ := v.Exchange("my-direct")
	if x.Alternate() != "my-ae" || x.Policy() != "AE" {
		t.Fatalf("policy not applied: alternate %q policy %q", x.Alternate(), x.Policy())
	}
	out, err := ctl(t, url, "list_policies")
	if err != nil || !strings.Contains(out, "^my-direct$") || !strings.Contains(out, "exchanges") {
		t.Fatalf("list_policies: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "clear_policy", "AE"); err != nil {
		t.Fatal(err)
	}
	if x.Alternate() != "" {
		t.Fatal("policy still applied after clear_policy")
	}
	// RabbitMQ's 404 body for any missing object.
	if _, err := ctl(t, url, "clear_policy", "AE"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing a missing policy: %v", err)
	}
}

// Operator policies as rabbitmqctl sets, lists and clears them; one that
// names a key no operator policy takes is refused, naming it.
func TestOperatorPolicies(t *testing.T) {
	b, url := newBroker(t)
	if _, err := ctl(t, url, "set_operator_policy", "--priority", "2", "--apply-to", "queues", "cap", "^q", `{"max-length": 5}`); err != nil {
		t.Fatal(err)
	}
	v, _ := b.VHost("/")
	if ops := v.OperatorPolicies(); len(ops) != 1 || ops[0].Name != "cap" || ops[0].Priority != 2 || !ops[0].Operator {
		t.Fatalf("operator policies %+v", ops)
	}
	out, err := ctl(t, url, "list_operator_policies")
	if err != nil || !strings.Contains(out, "cap") || !strings.Contains(out, "max-length") {
		t.Fatalf("list_operator_policies: %v\n%s", err, out)
	}
	if out, err := ctl(t, url, "list_policies"); err != nil || strings.Contains(out, "cap") {
		t.Fatalf("list_policies lists the operator policy: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "set_operator_policy", "dlx", ".*", `{"dead-letter-exchange": "x"}`); err == nil || !strings.Contains(err.Error(), "dead-letter-exchange") {
		t.Fatalf("an operator policy with dead-letter-exchange: %v", err)
	}
	if _, err := ctl(t, url, "clear_operator_policy", "cap"); err != nil {
		t.Fatal(err)
	}
	if len(v.OperatorPolicies()) != 0 {
		t.Fatal("operator policy still there after clear_operator_policy")
	}
	if _, err := ctl(t, url, "clear_operator_policy", "cap"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing a missing operator policy: %v", err)
	}
}

// Global parameters as rabbitmqctl sets, lists and clears them.
func TestGlobalParameters(t *testing.T) {
	b, url := newBroker(t)
	if _, err := ctl(t, url, "set_global_parameter", "mine", `{"a": [1, "b"]}`); err != nil {
		t.Fatal(err)
	}
	if g := b.GlobalParameters(); g["mine"] == nil {
		t.Fatalf("global parameters %v", g)
	}
	out, err := ctl(t, url, "list_global_parameters")
	if err != nil || !strings.Contains(out, "cluster_name") || !strings.Contains(out, "mine") {
		t.Fatalf("list_global_parameters: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "set_global_parameter", "bad", "{not json"); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("a value that is not JSON: %v", err)
	}
	if _, err := ctl(t, url, "clear_global_parameter", "mine"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.GlobalParameters()["mine"]; ok {
		t.Fatal("global parameter still there after clear_global_parameter")
	}
	if _, err := ctl(t, url, "clear_global_parameter", "mine"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing a missing global parameter: %v", err)
	}
}

// The health checks of rabbitmq-diagnostics: their success lines, and a
// failed one as an error main exits 69 for, in text and JSON.
func TestHealthChecks(t *testing.T) {
	b, url := newBroker(t)
	if err := b.Start(); err != nil { // its listeners, and its resource watch
		t.Fatal(err)
	}
	for verb, want := range map[string]string{
		"check_running":                "is fully booted and running",
		"check_local_alarms":           "reported no local alarms",
		"check_alarms":                 "reported no alarms, local or clusterwide",
		"check_port_connectivity":      "Successfully connected to ports",
		"check_virtual_hosts":          "reported all vhosts as running",
		"check_certificate_expiration": "No certificates are expiring within 4 weeks.",
		"listeners":                    "protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0",
	} {
		if out, err := ctl(t, url, verb); err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s", verb, err, out)
		}
	}
	if out, err := ctl(t, url, "check_local_alarms", "--formatter", "json"); err != nil || strings.TrimSpace(out) != `{"result":"ok"}` {
		t.Errorf("check_local_alarms as JSON: %v\n%s", err, out)
	}
	// A memory alarm: the watermark far below what the broker uses.
	if _, err := ctl(t, url, "set_vm_memory_high_watermark", "absolute", "1MiB"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the memory alarm", func() bool { raised, _, _ := b.Alarm().State(); return raised })
	for _, verb := range []string{"check_local_alarms", "check_alarms"} {
		_, err := ctl(t, url, verb)
		var failed *checkFailed
		if !errors.As(err, &failed) || !strings.Contains(err.Error(), "Memory alarm on node") {
			t.Errorf("%s under a memory alarm: %v", verb, err)
		}
	}
	out, err := ctl(t, url, "check_local_alarms", "--formatter", "json")
	var failed *checkFailed
	if !errors.As(err, &failed) || !strings.Contains(out, `"result":"error"`) || !strings.Contains(out, "Memory alarm") {
		t.Errorf("check_local_alarms as JSON under a memory alarm: %v\n%s", err, out)
	}
}

// memory_breakdown prints each category, largest first, in the unit asked,
// with its share; --formatter json prints the API's breakdown in bytes.
func TestMemoryBreakdown(t *testing.T) {
	_, url := newBroker(t)
	out, err := ctl(t, url, "memory_breakdown", "--unit", "mb")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 9 || !strings.HasPrefix(lines[0], "Reporting memory breakdown on node ") {
		t.Fatalf("memory_breakdown:\n%s", out)
	}
	line := regexp.MustCompile(`^([a-z_]+): ([0-9]+\.[0-9]{4}) mb \(([0-9.]+)%\)$`)
	prev := math.Inf(1)
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not \"category: N mb (P%%)\"", l)
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		if v > prev {
			t.Errorf("%s comes after a smaller category:\n%s", m[1], out)
		}
		prev, seen[m[1]] = v, true
	}
	for _, want := range []string{"queue_messages", "heap_other", "goroutine_stacks", "allocated_unused"} {
		if !seen[want] {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	out, err = ctl(t, url, "memory_breakdown", "--formatter", "json")
	var mem map[string]any
	if err != nil || json.Unmarshal([]byte(out), &mem) != nil || mem["strategy"] != "rss" {
		t.Errorf("memory_breakdown as JSON: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "memory_breakdown", "--unit", "parsecs"); err == nil || !strings.Contains(err.Error(), "--unit") {
		t.Errorf("an unknown unit: %v", err)
	}
}

// quorum_status lists a quorum queue's members with their state; on a
// node of its own, the node leads alone.
func TestQuorumStatus(t *testing.T) {
	b, url := newBroker(t)
	v, _ := b.VHost("/")
	if _, err := v.Declare(topology.QueueDef{Name: "qq", Durable: true, Args: protocol.Table{"x-queue-type": "quorum"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Declare(topology.QueueDef{Name: "cq", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the quorum queue's leader", func() bool {
		out, err := ctl(t, url, "quorum_status", "qq")
		return err == nil && strings.Contains(out, b.NodeName()) && strings.Contains(out, "leader")
	})
	out, err := ctl(t, url, "quorum_status", "qq", "--formatter", "json")
	if err != nil || !strings.Contains(out, `"Raft State":"leader"`) || !strings.Contains(out, `"Node Name":"`+b.NodeName()+`"`) {
		t.Fatalf("quorum_status as JSON: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "quorum_status", "cq"); err == nil || !strings.Contains(err.Error(), "not a quorum queue") {
		t.Fatalf("quorum_status of a classic queue: %v", err)
	}
	if _, err := ctl(t, url, "quorum_status", "nope"); err == nil {
		t.Fatal("quorum_status of a missing queue succeeded")
	}
	if out, err := ctl(t, url, "check_if_node_is_quorum_critical"); err != nil || !strings.Contains(out, "single node cluster") {
		t.Fatalf("check_if_node_is_quorum_critical: %v\n%s", err, out)
	}
}

func TestUsersVHostsPermissions(t *testing.T) {
	b, url := newBroker(t)
	steps := [][]string{
		{"add_vhost", "orders"},
		{"add_user", "alice", "s3cret"},
		{"set_permissions", "-p", "orders", "alice", "^alice-.*", ".*", ".*"},
		{"set_user_tags", "alice", "monitoring"},
	}
	for _, s := range steps {
		if _, err := ctl(t, url, s...); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
	if _, err := b.Users().Login("alice", "s3cret", false); err != nil {
		t.Fatalf("alice cannot log in after set_user_tags kept her password: %v", err)
	}
	p, ok := b.Users().Permission("orders", "alice")
	if !ok || !p.CanConfigure("alice-q") || p.CanConfigure("bob-q") {
		t.Fatal("permissions not applied")
	}
	out, _ := ctl(t, url, "list_users")
	if !strings.Contains(out, "alice") || !strings.Contains(out, "monitoring") {
		t.Fatalf("list_users:\n%s", out)
	}
	// Tags decide as in RabbitMQ: monitoring reads its vhosts' objects and
	// changes no vhost; no management tag, nothing at all.
	if _, err := ctl(t, url, "--user", "alice", "--password", "s3cret", "-p", "orders", "list_queues"); err != nil {
		t.Fatalf("a monitoring user could not list the queues of its vhost: %v", err)
	}
	if _, err := ctl(t, url, "--user", "alice", "--password", "s3cret", "add_vhost", "mine"); err == nil || !strings.Contains(err.Error(), "Not administrator user") {
		t.Fatalf("a monitoring user added a vhost: %v", err)
	}
	if _, err := ctl(t, url, "set_user_tags", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t, url, "--user", "alice", "--password", "s3cret", "list_queues"); err == nil || !strings.Contains(err.Error(), "Not management user") {
		t.Fatalf("a user without tags used the API: %v", err)
	}
	if _, err := ctl(t, url, "--password", "wrong", "list_queues"); err == nil || !strings.Contains(err.Error(), "Login failed") {
		t.Fatalf("bad password: %v", err)
	}
	if _, err := ctl(t, url, "set_permissions", "-p", "nope", "alice", ".*", ".*", ".*"); err == nil || !strings.Contains(err.Error(), "vhost_or_user_not_found") {
		t.Fatalf("missing vhost: %v", err)
	}
	if _, err := ctl(t, url, "delete_vhost", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Users().Permission("orders", "alice"); ok {
		t.Fatal("permissions survived their vhost")
	}
}

func TestListings(t *testing.T) {
	b, url := newBroker(t)
	v, _ := b.VHost("/")
	if _, err := v.DeclareExchange(exchange.Definition{Name: "ex", Type: "topic"}, false); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t, url, "list_exchanges")
	if err != nil || !strings.Contains(out, "amq.topic\ttopic\n") || !strings.Contains(out, "\nex\ttopic\n") {
		t.Fatalf("list_exchanges: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "bogus"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := ctl(t, url, "set_policy", "x", ".*", "{not json"); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("bad definition: %v", err)
	}
	if _, err := ctl(t, url, "set_policy", "x", ".*", `{"max-lenght": 1}`); err == nil || !strings.Contains(err.Error(), "max-lenght") {
		t.Fatalf("misspelt definition key: %v", err)
	}
}

// A NaN queue argument made /api/queues answer an empty 200 and
// list_queues fail to parse it.
func TestListQueuesWithNonFiniteArguments(t *testing.T) {
	b, url := newBroker(t)
	v, _ := b.VHost("/")
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "odd", Args: protocol.Table{"x-weight": math.NaN()}}, false); err != nil {
		t.Fatal(err)
	}
	if err := v.Bind("amq.fanout", exchange.Destination{Name: "odd", Kind: exchange.ToQueue}, "", protocol.Table{"w": math.Inf(1)}, nil); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t, url, "list_queues")
	if err != nil || !strings.Contains(out, "odd") {
		t.Fatalf("list_queues: %v\n%s", err, out)
	}
	out, err = ctl(t, url, "list_bindings")
	if err != nil || !strings.Contains(out, `{"w":"Infinity"}`) {
		t.Fatalf("list_bindings: %v\n%s", err, out)
	}
}

// Listings take rabbitmqctl's column arguments and formatters: a header
// and a "Listing" line by default, no banner with -q, no header either
// with -s, JSON with the columns in order with --formatter json.
func TestListingColumnsAndFormatters(t *testing.T) {
	b, url := newBroker(t)
	v, _ := b.VHost("/")
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "orders", Durable: true}, false); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t, url, "list_queues")
	if err != nil || out != "Listing queues for vhost / ...\nname\tmessages\norders\t0\n" {
		t.Fatalf("list_queues: %v\n%q", err, out)
	}
	out, err = ctl(t, url, "list_queues", "name", "durable", "consumers", "-q")
	if err != nil || out != "name\tdurable\tconsumers\norders\ttrue\t0\n" {
		t.Fatalf("list_queues -q with columns: %v\n%q", err, out)
	}
	out, err = ctl(t, url, "-s", "list_queues", "messages", "name")
	if err != nil || out != "0\torders\n" {
		t.Fatalf("list_queues -s: %v\n%q", err, out)
	}
	out, err = ctl(t, url, "list_queues", "name", "durable", "--formatter", "json")
	if err != nil || out != `[{"name":"orders","durable":true}]`+"\n" {
		t.Fatalf("list_queues --formatter json: %v\n%q", err, out)
	}
	if _, err := ctl(t, url, "list_queues", "nmae"); err == nil || !strings.Contains(err.Error(), `unknown column "nmae"`) {
		t.Fatalf("a misspelt column: %v", err)
	}
	if _, err := ctl(t, url, "list_queues", "--formatter", "xml"); err == nil || !strings.Contains(err.Error(), "--formatter") {
		t.Fatalf("a bad formatter: %v", err)
	}
	out, err = ctl(t, url, "-q", "list_bindings")
	if err != nil || !strings.Contains(out, "\texchange\torders\tqueue\torders\t") {
		t.Fatalf("list_bindings (the default exchange's binding): %v\n%q", err, out)
	}
}

// The resource limits change at run time through warrenctl, with
// rabbitmqctl's argument forms.
func TestSetLimits(t *testing.T) {
	b, url := newBroker(t)
	if _, err := ctl(t, url, "set_vm_memory_high_watermark", "absolute", "512MiB"); err != nil {
		t.Fatal(err)
	}
	if got := b.Resources().MemoryLimit; got != 512<<20 {
		t.Fatalf("memory limit %d, want 512 MiB", got)
	}
	if _, err := ctl(t, url, "set_vm_memory_high_watermark", "0.5"); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Resources().MemoryLimit, broker.SystemMemory()/2; got < want-1 || got > want+1 {
		t.Fatalf("memory limit %d, want half of %d", got, broker.SystemMemory())
	}
	if _, err := ctl(t, url, "set_vm_memory_high_watermark", "2"); err == nil || !strings.Contains(err.Error(), "at most 1") {
		t.Fatalf("a watermark above 1: %v", err)
	}
	if _, err := ctl(t, url, "set_disk_free_limit", "2GB"); err != nil {
		t.Fatal(err)
	}
	if got := b.Resources().DiskLimit; got != 2e9 {
		t.Fatalf("disk limit %d, want 2 GB", got)
	}
	if _, err := ctl(t, url, "set_disk_free_limit", "lots"); err == nil || !strings.Contains(err.Error(), "not a size") {
		t.Fatalf("a bad size: %v", err)
	}
}

// cluster_status and forget_cluster_node, on a node of its own and on a
// cluster of one (the three-node cluster is tests/cluster_test.go's).
func TestClusterVerbs(t *testing.T) {
	_, url := newBroker(t)
	out, err := ctl(t, url, "cluster_status")
	if err != nil || !strings.Contains(out, "Running Nodes\n\nwarren@") || !strings.Contains(out, "Role: leader") {
		t.Fatalf("cluster_status of a node of its own: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "forget_cluster_node", "other"); err == nil || !strings.Contains(err.Error(), "not clustered") {
		t.Fatalf("forget_cluster_node on a node of its own: %v", err)
	}
	if _, err := ctl(t, url, "join_cluster", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "[cluster]") {
		t.Fatalf("join_cluster on a node of its own: %v", err)
	}

	_, url = newBroker(t, func(c *config.Config) {
		c.Cluster = config.Cluster{NodeName: "solo", Listen: "127.0.0.1:0", Secret: "sixteen+ characters",
			ChangeTimeout: config.Duration(5 * time.Second)}
	})
	out, err = ctl(t, url, "cluster_status")
	if err != nil || !strings.Contains(out, "Disk Nodes\n\nsolo\n") || !strings.Contains(out, "Leader: solo") {
		t.Fatalf("cluster_status of a cluster of one: %v\n%s", err, out)
	}
	out, err = ctl(t, url, "--formatter", "json", "cluster_status")
	if err != nil || !strings.Contains(out, `"clustered":true`) {
		t.Fatalf("cluster_status as JSON: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "forget_cluster_node", "nobody"); err == nil || !strings.Contains(err.Error(), `no node "nobody"`) {
		t.Fatalf("forgetting a node that is not a member: %v", err)
	}
}

// warrenctl pointed at RabbitMQ's management plugin (or anything else)
// says so instead of misreading its answers.
func TestRefusesAnotherProduct(t *testing.T) {
	rabbit := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "Cowboy")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"product_name":"RabbitMQ","product_version":"3.10.8"}`))
	}))
	defer rabbit.Close()
	if _, err := ctl(t, rabbit.URL, "list_queues"); err == nil || !strings.Contains(err.Error(), "RabbitMQ 3.10.8 answered") {
		t.Fatalf("against RabbitMQ: %v", err)
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "nginx")
		http.NotFound(w, r)
	}))
	defer other.Close()
	if _, err := ctl(t, other.URL, "status"); err == nil || !strings.Contains(err.Error(), "nginx") {
		t.Fatalf("against nginx: %v", err)
	}
}

// The verbs that act on live objects, against a started broker with an
// AMQP client: listings of connections, channels and consumers, purge,
// delete with conditions, close_connection, and the broker verbs.
func TestObjectVerbs(t *testing.T) {
	b, url := newBroker(t)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial("amqp://guest:guest@" + b.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("work", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("jobs", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("events", "fanout", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ch.Publish("", "jobs", false, false, amqp.Publishing{Body: []byte("j")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.Consume("work", "worker-1", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ctlOK := ctlMust(t, url)
	waitFor := func(what string, args []string, want string) {
		t.Helper()
		if !poll.Within(10*time.Second, func() bool { return strings.Contains(ctlOK(args...), want) }) {
			t.Fatalf("%s: %v never showed %q", what, args, want)
		}
	}

	if out := ctlOK("-q", "list_connections"); !strings.Contains(out, "guest\t127.0.0.1\t") || !strings.Contains(out, "running") {
		t.Fatalf("list_connections:\n%s", out)
	}
	if out := ctlOK("-q", "list_channels", "user", "consumer_count", "number"); !strings.Contains(out, "guest\t1\t1\n") {
		t.Fatalf("list_channels:\n%s", out)
	}
	if out := ctlOK("-q", "list_consumers", "queue_name", "consumer_tag", "ack_required"); !strings.Contains(out, "work\tworker-1\ttrue\n") {
		t.Fatalf("list_consumers:\n%s", out)
	}
	waitFor("two messages in jobs", []string{"-s", "list_queues", "name", "messages"}, "jobs\t2\n")
	if _, err := ctl(t, url, "delete_queue", "jobs", "--if-empty"); err == nil {
		t.Fatal("delete_queue --if-empty removed a queue with messages")
	}
	ctlOK("purge_queue", "jobs")
	waitFor("jobs purged", []string{"-s", "list_queues", "name", "messages"}, "jobs\t0\n")
	ctlOK("delete_queue", "jobs", "--if-empty")
	if _, err := ctl(t, url, "delete_queue", "work", "--if-unused"); err == nil {
		t.Fatal("delete_queue --if-unused removed a queue with a consumer")
	}
	ctlOK("delete_exchange", "events")
	if out := ctlOK("-s", "list_exchanges", "name"); strings.Contains(out, "events") {
		t.Fatalf("events still listed:\n%s", out)
	}

	status := ctlOK("status")
	for _, want := range []string{"Version: Warren ", "Alarms: none", "Listeners: amqp ", "File descriptors: "} {
		if !strings.Contains(status, want) {
			t.Fatalf("status lacks %q:\n%s", want, status)
		}
	}
	if out := ctlOK("ping"); out != "Ping succeeded\n" {
		t.Fatalf("ping: %q", out)
	}
	if out := ctlOK("-q", "list_alarms"); out != "" {
		t.Fatalf("list_alarms with no alarm: %q", out)
	}
	if out := ctlOK("version"); out != broker.Version+"\n" {
		t.Fatalf("version: %q", out)
	}
	ctlOK("await_startup", "--timeout", "5")

	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	var conns []map[string]any
	if err := json.Unmarshal([]byte(ctlOK("list_connections", "name", "--formatter", "json")), &conns); err != nil || len(conns) != 1 {
		t.Fatalf("list_connections --formatter json: %v %v", conns, err)
	}
	ctlOK("close_connection", conns[0]["name"].(string), "maintenance window")
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced || !strings.Contains(e.Reason, "maintenance window") {
			t.Fatalf("the client saw %v, want 320 with the reason", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("close_connection did not close the connection")
	}
	if _, err := ctl(t, url, "close_connection", "", "x"); err == nil || !strings.Contains(err.Error(), "name is empty") {
		t.Errorf("close_connection of an empty name: %v", err)
	}
	if _, err := ctl(t, url, "close_connection", "nobody", "x"); err == nil {
		t.Fatal("closing a connection that does not exist succeeded")
	}
	poll.Until(t, 10*time.Second, "the connection gone", func() bool { return len(b.Server().Connections()) == 0 })
}

// list_queues shows a quorum queue's type, leader, members and online
// members, as rabbitmqctl's does.
func TestListQuorumQueues(t *testing.T) {
	b, url := newBroker(t)
	v, _ := b.VHost("/")
	if _, err := v.Declare(topology.QueueDef{Name: "qq", Durable: true, Args: protocol.Table{"x-queue-type": "quorum"}}, false); err != nil {
		t.Fatal(err)
	}
	node := b.NodeName()
	out, err := ctl(t, url, "list_queues", "name", "type", "leader", "members", "online", "-q")
	want := "name\ttype\tleader\tmembers\tonline\nqq\tquorum\t" + node + "\t" + node + "\t" + node + "\n"
	if err != nil || out != want {
		t.Fatalf("list_queues: %v\n%q, want %q", err, out, want)
	}
}

// threeNodes starts a cluster of three brokers, a, b and c, with their
// admin APIs' URLs.
func threeNodes(t *testing.T) (brokers []*broker.Broker, urls []string) {
	t.Helper()
	seed := ""
	for _, name := range []string{"a", "b", "c"} {
		b, url := newBroker(t, func(c *config.Config) {
			c.Cluster = config.Cluster{NodeName: name, Listen: "127.0.0.1:0", Secret: "sixteen+ characters",
				ChangeTimeout: config.Duration(5 * time.Second)}
			if seed != "" {
				c.Cluster.Seeds = []string{seed}
			}
		})
		if seed == "" {
			seed = b.Cluster().Addr()
		}
		brokers, urls = append(brokers, b), append(urls, url)
	}
	poll.Until(t, 15*time.Second, "a cluster of three", func() bool { return len(brokers[0].Cluster().Members()) >= 3 })
	return brokers, urls
}

// rebalance spreads the leaders of quorum queues over the nodes: six
// queues of three members, all led by a, end two on each node.
func TestRebalance(t *testing.T) {
	brokers, urls := threeNodes(t)
	v, _ := brokers[0].VHost("/")
	queues := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	leaderOf := func(q string) string {
		info, ok := v.QueueInfo(q)
		if !ok {
			return ""
		}
		view, _ := info.QuorumStatus()
		return view.Leader
	}
	for _, q := range queues {
		def := topology.QueueDef{Name: q, Durable: true, Args: protocol.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int64(3)}}
		if _, err := v.Declare(def, false); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 15*time.Second, q+" led", func() bool { return leaderOf(q) != "" })
		if err := v.LeadQueue(q, "a"); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 15*time.Second, q+" led by a", func() bool { return leaderOf(q) == "a" })
	}
	out, err := ctl(t, urls[1], "--formatter", "json", "rebalance", "quorum")
	if err != nil {
		t.Fatalf("rebalance: %v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("rebalance printed %v\n%s", err, out)
	}
	for _, r := range rows {
		if r["Number of quorum queues"] != float64(2) {
			t.Errorf("after the rebalance: %v", rows)
		}
	}
	led := map[string]int{}
	for _, q := range queues {
		led[leaderOf(q)]++
	}
	if led["a"] != 2 || led["b"] != 2 || led["c"] != 2 {
		t.Errorf("leaders after the rebalance: %v", led)
	}
	// Balanced already: nothing moves.
	if out, err := ctl(t, urls[2], "rebalance", "all"); err != nil || !strings.Contains(out, "Re-balancing leaders of all queues...") {
		t.Errorf("rebalance all: %v\n%s", err, out)
	}
	if _, err := ctl(t, urls[0], "rebalance", "mirrored"); err == nil {
		t.Error("rebalance of an unknown type")
	}
}

// add_member, delete_member, grow and shrink on three brokers, and
// list_queues' leader, members and online columns.
func TestQuorumMembershipVerbs(t *testing.T) {
	brokers, urls := threeNodes(t)
	v, _ := brokers[0].VHost("/")
	for _, q := range []string{"q1", "q2"} {
		def := topology.QueueDef{Name: q, Durable: true, Args: protocol.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": int64(1)}}
		if _, err := v.Declare(def, false); err != nil {
			t.Fatal(err)
		}
	}
	// waitMembers waits until list_queues through c shows q with want
	// as its members, and a leader.
	waitMembers := func(q, want string) {
		t.Helper()
		var out string
		if !poll.Within(15*time.Second, func() bool {
			var err error
			out, err = ctl(t, urls[2], "--formatter", "json", "list_queues", "name", "members", "leader")
			if err != nil {
				t.Fatal(err)
			}
			var rows []struct {
				Name    string   `json:"name"`
				Members []string `json:"members"`
				Leader  string   `json:"leader"`
			}
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, r := range rows {
				if r.Name == q && r.Leader != "" && strings.Join(r.Members, ",") == want {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("%s's members are not %s with a leader: %s", q, want, out)
		}
	}
	waitMembers("q1", "a")
	if _, err := ctl(t, urls[1], "add_member", "q1", "b"); err != nil {
		t.Fatal(err)
	}
	waitMembers("q1", "a,b")
	if _, err := ctl(t, urls[1], "add_member", "q1", "b"); err == nil || !strings.Contains(err.Error(), "already a member") {
		t.Fatalf("add_member twice: %v", err)
	}
	if _, err := ctl(t, urls[1], "add_member", "nothing", "b"); err == nil || !strings.Contains(err.Error(), "no queue 'nothing'") {
		t.Fatalf("add_member of no queue: %v", err)
	}
	// grow c all: both queues get c.
	out, err := ctl(t, urls[0], "grow", "c", "all")
	if err != nil || !strings.Contains(out, "q1\t3\tok") || !strings.Contains(out, "q2\t2\tok") {
		t.Fatalf("grow: %v\n%s", err, out)
	}
	waitMembers("q2", "a,c")
	// shrink a: q1 keeps b and c, q2 keeps c.
	out, err = ctl(t, urls[2], "shrink", "a")
	if err != nil || !strings.Contains(out, "q1\t2\tok") || !strings.Contains(out, "q2\t1\tok") {
		t.Fatalf("shrink: %v\n%s", err, out)
	}
	waitMembers("q1", "b,c")
	if _, err := ctl(t, urls[0], "delete_member", "q2", "c"); err == nil || !strings.Contains(err.Error(), "last member") {
		t.Fatalf("deleting the last member: %v", err)
	}
	if _, err := ctl(t, urls[0], "delete_member", "q1", "b"); err != nil {
		t.Fatal(err)
	}
	waitMembers("q1", "c")
}

func TestPluginsListAndConfigure(t *testing.T) {
	_, url := newBroker(t)
	if _, err := ctl(t, url, "plugins", "enable", "delayed-message"); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(t, url, "plugins", "list")
	if err != nil {
		t.Fatal(err)
	}
	// The header, then a row per shipped plugin with its ABI, features
	// and hash.
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "delayed-message") {
			row = l
		}
	}
	if !strings.Contains(out, "abi") || !strings.Contains(out, "hash") || !strings.Contains(row, "1.1") || !strings.Contains(row, "headers") {
		t.Fatalf("plugins list:\n%s", out)
	}
	if _, err := ctl(t, url, "plugins", "configure", "delayed-message", "speed", "3"); err == nil ||
		!strings.Contains(err.Error(), "plugin 'delayed-message' takes no settings (asked to set 'speed')") {
		t.Fatalf("configure of a setting the plugin lacks: %v", err)
	}
	if _, err := ctl(t, url, "plugins", "configure", "delayed-message", "speed"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Fatalf("configure without a value: %v", err)
	}
}

// warrenctl rides the API, so the API's name check is its: a vhost, user
// or queue named with a control, bidi or invalid byte is refused, said
// so, and nothing is stored.
func TestRefusesNamesThatLie(t *testing.T) {
	b, url := newBroker(t)
	defs := filepath.Join(t.TempDir(), "defs.json")
	if err := os.WriteFile(defs, []byte(`{"queues": [{"name": "q\nx", "vhost": "/", "durable": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"add_vhost", "a\x00b"}, `vhost name "a\x00b" holds a control character (U+0000 at byte 1)`},
		{[]string{"add_vhost", "bad\xff"}, `vhost name "bad\xff" is not valid UTF-8 (byte 3)`},
		{[]string{"add_vhost", strings.Repeat("v", 256)}, "is longer than 255 bytes (256 bytes)"},
		{[]string{"add_user", "admin\u202egnp", "pw"}, `user name "admin\u202egnp" holds a bidirectional formatting character (U+202E at byte 5)`},
		{[]string{"import_definitions", defs}, `queue name "q\nx" holds a control character (U+000A at byte 1)`},
	} {
		_, err := ctl(t, url, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want an error saying %s", tc.args, err, tc.says)
		}
	}
	if len(b.VHosts()) != 1 || len(b.Users().Users()) != 1 {
		t.Fatalf("stored: vhosts %q, users %d", b.VHosts(), len(b.Users().Users()))
	}
	v, _ := b.VHost("/")
	if v.HasQueue("q\nx") {
		t.Fatal("the queue was declared")
	}
}

// A switch is on alone, and as its value says: --force=false is off, as
// rabbitmqctl reads it; a value that is not a boolean is refused.
func TestSwitchesTakeAValue(t *testing.T) {
	type switches struct{ force, ifEmpty, ifUnused, quiet, silent bool }
	for _, c := range []struct {
		argv []string
		want switches
	}{
		{[]string{"--force", "x"}, switches{force: true}},
		{[]string{"--force=false", "x"}, switches{}},
		{[]string{"--if-empty=false", "--if-unused=true", "x"}, switches{ifUnused: true}},
		{[]string{"-q=false", "-s", "x"}, switches{silent: true}},
		{[]string{"--quiet=1", "x"}, switches{quiet: true}},
	} {
		o, err := parse(c.argv)
		if err != nil {
			t.Fatalf("%v: %v", c.argv, err)
		}
		if got := (switches{o.force, o.ifEmpty, o.ifUnused, o.quiet, o.silent}); got != c.want {
			t.Fatalf("%v: %+v, want %+v", c.argv, got, c.want)
		}
	}
	if _, err := parse([]string{"--force=maybe", "x"}); err == nil || !strings.Contains(err.Error(), "--force=maybe") {
		t.Fatalf("--force=maybe: %v", err)
	}
}

// The topic permission verbs, as rabbitmqctl's: set, list per vhost and
// per user, clear one exchange's or all.
func TestTopicPermissionVerbs(t *testing.T) {
	b, url := newBroker(t)
	for _, s := range [][]string{
		{"add_vhost", "orders"},
		{"add_user", "alice", "s3cret"},
		{"set_topic_permissions", "-p", "orders", "alice", "amq.topic", "^{username}\\.", "^eu\\."},
		{"set_topic_permissions", "-p", "orders", "alice", "events", ".*", ".*"},
	} {
		if _, err := ctl(t, url, s...); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
	g, _ := b.Users().Grant("orders", "alice")
	if g.PublishTopic("amq.topic", "alice.x") != nil || g.PublishTopic("amq.topic", "bob.x") == nil {
		t.Fatal("the topic permission is not applied")
	}
	out, err := ctl(t, url, "list_topic_permissions", "-p", "orders")
	if err != nil || !strings.Contains(out, "alice") || !strings.Contains(out, `^eu\.`) || !strings.Contains(out, "events") {
		t.Fatalf("list_topic_permissions: %v\n%s", err, out)
	}
	out, err = ctl(t, url, "list_user_topic_permissions", "alice")
	if err != nil || !strings.Contains(out, "orders") || !strings.Contains(out, "amq.topic") {
		t.Fatalf("list_user_topic_permissions: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "set_topic_permissions", "-p", "orders", "alice", "amq.topic", "(", ".*"); err == nil || !strings.Contains(err.Error(), "bad write topic permission") {
		t.Fatalf("a bad expression: %v", err)
	}
	if _, err := ctl(t, url, "clear_topic_permissions", "-p", "orders", "alice", "amq.topic"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Users().TopicPermission("orders", "alice", "amq.topic"); ok {
		t.Fatal("cleared, still there")
	}
	if _, err := ctl(t, url, "clear_topic_permissions", "-p", "orders", "alice"); err != nil {
		t.Fatal(err)
	}
	if len(b.Users().TopicPermissions()) != 0 {
		t.Fatalf("left %v", b.Users().TopicPermissions())
	}
	if _, err := ctl(t, url, "clear_topic_permissions", "-p", "orders", "alice"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Fatalf("clearing what is not there: %v", err)
	}
}

// set_vhost_limits makes the limits the JSON's, leaving out what it
// leaves out; clear_vhost_limits clears them all.
func TestVHostLimitVerbs(t *testing.T) {
	b, url := newBroker(t)
	if _, err := ctl(t, url, "set_vhost_limits", `{"max-connections": 64, "max-queues": 10}`); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t, url, "set_vhost_limits", `{"max-queues": 20}`); err != nil {
		t.Fatal(err)
	}
	v, _ := b.VHost("/")
	if l := v.Limits(); len(l) != 1 || l["max-queues"] != 20 {
		t.Fatalf("limits %v, want max-queues 20 alone", l)
	}
	out, err := ctl(t, url, "list_vhost_limits")
	if err != nil || !strings.Contains(out, "max-queues") {
		t.Fatalf("list_vhost_limits: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "set_vhost_limits", `{"max-channels": 1}`); err == nil || !strings.Contains(err.Error(), "Unrecognised terms") {
		t.Fatalf("an unknown limit: %v", err)
	}
	if l := v.Limits(); l["max-queues"] != 20 {
		t.Fatalf("a refused set_vhost_limits changed the limits: %v", l)
	}
	if _, err := ctl(t, url, "clear_vhost_limits"); err != nil {
		t.Fatal(err)
	}
	if l := v.Limits(); len(l) != 0 {
		t.Fatalf("limits %v after clear_vhost_limits", l)
	}
}

// set_user_limits adds to a user's limits, clear_user_limits clears one
// or all, list_user_limits shows them.
func TestUserLimitVerbs(t *testing.T) {
	b, url := newBroker(t)
	if _, err := ctl(t, url, "set_user_limits", "guest", `{"max-connections": 5}`); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t, url, "set_user_limits", "guest", `{"max-channels": 7}`); err != nil {
		t.Fatal(err)
	}
	u, _ := b.Users().User("guest")
	if len(u.Limits) != 2 || u.Limits["max-connections"] != 5 || u.Limits["max-channels"] != 7 {
		t.Fatalf("limits %v", u.Limits)
	}
	out, err := ctl(t, url, "list_user_limits", "guest")
	if err != nil || !strings.Contains(out, "max-channels") {
		t.Fatalf("list_user_limits: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "clear_user_limits", "guest", "max-channels"); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.Users().User("guest"); len(u.Limits) != 1 {
		t.Fatalf("limits %v after clearing one", u.Limits)
	}
	if _, err := ctl(t, url, "clear_user_limits", "guest", "all"); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.Users().User("guest"); len(u.Limits) != 0 {
		t.Fatalf("limits %v after clearing all", u.Limits)
	}
}

// change_password keeps the user's tags; authenticate_user checks a
// password; list_user_permissions lists a user's; close_all_connections
// closes a vhost's connections, or all.
func TestUserAndConnectionVerbs(t *testing.T) {
	b, url := newBroker(t)
	for _, s := range [][]string{
		{"add_user", "ann", "old"},
		{"set_user_tags", "ann", "monitoring"},
		{"change_password", "ann", "new"},
		{"set_permissions", "ann", ".*", "^w", "^r"},
	} {
		if _, err := ctl(t, url, s...); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
	}
	if u, _ := b.Users().User("ann"); !u.HasTag("monitoring") {
		t.Fatal("change_password dropped the tags")
	}
	if out, err := ctl(t, url, "authenticate_user", "ann", "new"); err != nil || !strings.Contains(out, "Success") {
		t.Fatalf("authenticate_user with the new password: %v %s", err, out)
	}
	if _, err := ctl(t, url, "authenticate_user", "ann", "old"); err == nil {
		t.Fatal("the old password authenticated")
	}
	if out, err := ctl(t, url, "list_user_permissions", "ann"); err != nil || !strings.Contains(out, "^w") {
		t.Fatalf("list_user_permissions: %v\n%s", err, out)
	}
	if _, err := ctl(t, url, "close_all_connections", "maintenance"); err != nil {
		t.Fatalf("close_all_connections with none open: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t, url, "add_vhost", "other"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl(t, url, "set_permissions", "-p", "other", "guest", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	var closed []chan *amqp.Error
	for _, vh := range []string{"", "other"} {
		c, err := amqp.Dial("amqp://guest:guest@" + b.Addr().String() + "/" + vh)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closed = append(closed, c.NotifyClose(make(chan *amqp.Error, 1)))
	}
	poll.Until(t, 10*time.Second, "two connections listed", func() bool { return len(b.Server().Connections()) == 2 })
	if _, err := ctl(t, url, "close_all_connections", "-p", "other", "maintenance"); err != nil {
		t.Fatal(err)
	}
	if e := poll.Receive(t, 10*time.Second, "the other vhost's connection closed", closed[1]); e == nil || !strings.Contains(e.Reason, "maintenance") {
		t.Fatalf("the other vhost's connection closed with %v", e)
	}
	poll.Until(t, 10*time.Second, "the other vhost's connection gone", func() bool { return len(b.Server().Connections()) == 1 })
	if len(closed[0]) != 0 || b.Server().Connections()[0].VHost != "/" {
		t.Fatal("close_all_connections -p other closed a connection of another vhost")
	}
	if _, err := ctl(t, url, "close_all_connections", "bye"); err != nil {
		t.Fatal(err)
	}
	if e := poll.Receive(t, 10*time.Second, "the last connection closed", closed[0]); e == nil || !strings.Contains(e.Reason, "bye") {
		t.Fatalf("the last connection closed with %v", e)
	}
}
