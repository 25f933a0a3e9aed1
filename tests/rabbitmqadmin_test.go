package tests

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
)

// rabbitmqadminPath finds RabbitMQ's own CLI for its management API, the
// one served at /cli/rabbitmqadmin: RABBITMQADMIN, else on PATH (Debian's
// rabbitmq-server package installs it in /usr/bin).
func rabbitmqadminPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RABBITMQADMIN"); p != "" {
		return p
	}
	if p, err := exec.LookPath("rabbitmqadmin"); err == nil {
		return p
	}
	skipFor(t, "rabbitmqadmin", "rabbitmqadmin not found (RABBITMQADMIN=path, or Debian's rabbitmq-server package; .ci/run fetches it)")
	return ""
}

// rabbitmqadmin works against Warren for every list, show, declare,
// delete, publish, get, purge, close and export/import verb, as the issue
// asks: it is what many operators script RabbitMQ with.
func TestRabbitmqadmin(t *testing.T) {
	script := rabbitmqadminPath(t)
	// The system's interpreter first: a version manager's shim on PATH
	// (pyenv's) can take most of a second to start, per call.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			skipFor(t, "rabbitmqadmin", "python3 not found: rabbitmqadmin is a Python script")
		}
	}
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(s.b.AdminAddr())
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(python, append([]string{script, "-H", host, "-P", port, "-u", "guest", "-p", "guest"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rabbitmqadmin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	expect := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}

	run("declare", "vhost", "name=admin-vh")
	run("declare", "user", "name=admin-user", "password=pw", "tags=monitoring")
	run("declare", "permission", "vhost=admin-vh", "user=admin-user", "configure=.*", "write=.*", "read=.*")
	run("declare", "exchange", "name=admin-x", "type=fanout", "durable=true")
	run("declare", "queue", "name=admin-q", "durable=true", `arguments={"x-max-length":100}`)
	run("declare", "binding", "source=admin-x", "destination=admin-q", "routing_key=k")
	run("declare", "policy", "name=admin-pol", "pattern=^admin-", `definition={"max-length-bytes":1048576}`, "apply-to=queues")

	expect(run("list", "vhosts"), "admin-vh")
	expect(run("list", "users"), "admin-user", "monitoring")
	expect(run("list", "permissions"), "admin-user")
	expect(run("list", "exchanges"), "admin-x", "fanout")
	expect(run("list", "queues"), "admin-q")
	expect(run("list", "bindings"), "admin-x", "admin-q")
	expect(run("list", "policies"), "admin-pol")
	expect(run("list", "nodes"), "name")
	expect(run("show", "overview"), "rabbitmq_version")

	// Operator policies, vhost limits and runtime parameters.
	run("declare", "operator_policy", "name=admin-op", "pattern=^admin-", `definition={"max-length":1000}`, "apply-to=queues")
	expect(run("list", "operator_policies"), "admin-op")
	run("delete", "operator_policy", "name=admin-op")
	run("declare", "vhost_limit", "vhost=admin-vh", "name=max-queues", "value=100")
	expect(run("list", "vhost_limits"), "max-queues")
	run("delete", "vhost_limit", "vhost=admin-vh", "name=max-queues")
	run("-V", "admin-vh", "declare", "parameter", "component=vhost-limits", "name=limits", `value={"max-connections":5}`)
	expect(run("list", "parameters"), "vhost-limits", "max-connections")
	run("-V", "admin-vh", "delete", "parameter", "component=vhost-limits", "name=limits")
	if out := run("list", "vhost_limits"); strings.Contains(out, "admin-vh") {
		t.Fatalf("vhost limits still listed after delete parameter:\n%s", out)
	}
	// A dynamic shovel, declared as RabbitMQ's shovel guide declares one.
	run("-V", "admin-vh", "declare", "parameter", "component=shovel", "name=admin-shovel",
		`value={"src-uri":"amqp:///admin-vh","src-queue":"admin-from","dest-uri":"amqp:///admin-vh","dest-queue":"admin-to"}`)
	expect(run("list", "parameters"), "shovel", "admin-shovel")
	run("-V", "admin-vh", "delete", "parameter", "component=shovel", "name=admin-shovel")
	// A federation upstream, as RabbitMQ's federation guide declares one
	// (no policy uses it, so nothing connects to it).
	run("-V", "admin-vh", "declare", "parameter", "component=federation-upstream", "name=admin-upstream",
		`value={"uri":"amqp://admin-upstream.invalid","expires":3600000}`)
	expect(run("list", "parameters"), "federation-upstream", "admin-upstream", "amqp://admin-upstream.invalid")
	run("-V", "admin-vh", "delete", "parameter", "component=federation-upstream", "name=admin-upstream")
	if out := run("list", "parameters"); strings.Contains(out, "admin-upstream") {
		t.Fatalf("the upstream still listed after delete parameter:\n%s", out)
	}

	expect(run("publish", "exchange=admin-x", "routing_key=k", "payload=hello"), "Message published")
	expect(run("get", "queue=admin-q", "ackmode=ack_requeue_true"), "hello")
	run("purge", "queue", "name=admin-q")
	expect(run("get", "queue=admin-q"), "No items")

	// A live connection, a channel and a consumer to list and close.
	conn, ch := channel(t, s)
	if _, err := ch.Consume("admin-q", "admin-consumer", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	expect(run("list", "connections"), "guest")
	expect(run("list", "channels"), "guest")
	expect(run("list", "consumers"), "admin-consumer")
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	var names []map[string]any
	if err := json.Unmarshal([]byte(run("-f", "raw_json", "list", "connections", "name")), &names); err != nil || len(names) != 1 {
		t.Fatalf("connections as raw_json: %v %v", names, err)
	}
	run("close", "connection", "name="+names[0]["name"].(string))
	if e := <-closed; e == nil || e.Code != 320 {
		t.Fatalf("closed connection got %v, want 320", e)
	}

	file := filepath.Join(t.TempDir(), "defs.json")
	expect(run("export", file), "Exported definitions")
	run("delete", "binding", "source=admin-x", "destination_type=queue", "destination=admin-q", "properties_key=k")
	run("delete", "queue", "name=admin-q")
	run("delete", "exchange", "name=admin-x")
	run("delete", "policy", "name=admin-pol")
	if out := run("list", "queues"); strings.Contains(out, "admin-q") {
		t.Fatalf("queue still listed after delete:\n%s", out)
	}
	expect(run("import", file), "Uploaded definitions")
	expect(run("list", "queues"), "admin-q")
	expect(run("list", "bindings"), "admin-x", "admin-q")
	run("delete", "permission", "vhost=admin-vh", "user=admin-user")
	run("delete", "user", "name=admin-user")
	run("delete", "vhost", "name=admin-vh")
}
