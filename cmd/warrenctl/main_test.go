package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

func newBroker(t *testing.T) (*broker.Broker, string) {
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Storage.DataDir = t.TempDir()
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

func ctl(t *testing.T, url string, args ...string) (string, error) {
	var out bytes.Buffer
	err := run(append([]string{"--url", url}, args...), &out)
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
	if _, _, err := v.DeclareQueue(vhost.QueueDef{Name: "odd", Args: protocol.Table{"x-weight": math.NaN()}}, false); err != nil {
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
	if _, _, err := v.DeclareQueue(vhost.QueueDef{Name: "orders", Durable: true}, false); err != nil {
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
