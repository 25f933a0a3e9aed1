package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// adminGet reads an admin API answer as guest into out.
func heldAPI(t *testing.T, method, url string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s %s", method, url, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
}

// Held messages across a restart, as operators see them: counted per
// exchange, listed, gone with their exchange (and not back after the
// restart), transient ones dropped and counted in the restore log, and
// purged on request.
func TestDelayedHeldMessagesOperators(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf("[plugins]\nenabled = [\"delayed-message\"]\ncache_dir = %q\n", sharedWasmCache(t))
	p := startProcessWith(t, dir, cfg)
	_, ch := dialProcess(t, p)
	for _, x := range []string{"later", "gone"} {
		if err := ch.ExchangeDeclare(x, "x-delayed-message", true, false, false, false, amqp.Table{"x-delayed-type": "direct"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 16))
	pub := func(x, key string, mode uint8) {
		if err := ch.PublishWithContext(context.Background(), x, key, false, false, amqp.Publishing{
			DeliveryMode: mode, Headers: amqp.Table{"x-delay": int32(600000)}, Body: []byte(key),
		}); err != nil {
			t.Fatal(err)
		}
		if c := <-confirms; !c.Ack {
			t.Fatal("nack")
		}
	}
	pub("later", "k1", amqp.Persistent)
	pub("later", "k2", amqp.Persistent)
	pub("later", "k3", amqp.Transient)
	for range 3 {
		pub("gone", "g", amqp.Persistent)
	}
	api := "http://" + p.admin + "/api/exchanges/%2F/"
	delayed := func(x string) int {
		var e struct {
			N *int `json:"messages_delayed"`
		}
		heldAPI(t, "GET", api+x, &e)
		if e.N == nil {
			t.Fatalf("exchange %s has no messages_delayed", x)
		}
		return *e.N
	}
	if n := delayed("later"); n != 3 {
		t.Fatalf("later holds %d, want 3", n)
	}
	var page struct {
		Total int `json:"total_count"`
		Items []struct {
			RoutingKey string `json:"routing_key"`
			Payload    string `json:"payload"`
			Bytes      int    `json:"payload_bytes"`
			DueMs      int64  `json:"due_ms"`
			Durable    bool   `json:"durable"`
		} `json:"items"`
	}
	heldAPI(t, "GET", api+"later/delayed?page=2&page_size=2", &page)
	if page.Total != 3 || len(page.Items) != 1 || page.Items[0].RoutingKey != "k3" || page.Items[0].Durable || page.Items[0].Bytes != 2 {
		t.Fatalf("page 2: %+v", page)
	}
	if err := ch.ExchangeDelete("gone", false, false); err != nil {
		t.Fatal(err)
	}
	p.stop(syscall.SIGTERM)

	p = startProcessWith(t, dir, cfg)
	api = "http://" + p.admin + "/api/exchanges/%2F/"
	log := p.logText()
	if !strings.Contains(log, `"held":2`) || !strings.Contains(log, `"held_transient_dropped":1`) {
		t.Fatalf("the restore log does not count 2 held and 1 transient dropped:\n%s", log)
	}
	_, ch = dialProcess(t, p)
	if err := ch.ExchangeDeclare("gone", "x-delayed-message", true, false, false, false, amqp.Table{"x-delayed-type": "direct"}); err != nil {
		t.Fatal(err)
	}
	if n := delayed("gone"); n != 0 {
		t.Fatalf("a deleted exchange's held messages came back: %d", n)
	}
	if n := delayed("later"); n != 2 {
		t.Fatalf("later holds %d after the restart, want 2", n)
	}
	var purged struct {
		N int `json:"message_count"`
	}
	heldAPI(t, "DELETE", api+"later/delayed", &purged)
	if purged.N != 2 || delayed("later") != 0 {
		t.Fatalf("purged %d, left %d", purged.N, delayed("later"))
	}
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`warren_delayed_messages{vhost="/"} 0`, `warren_delayed_messages_dropped_total{reason="purged",vhost="/"} 2`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// No held message comes before its x-delay, measured from before the
// publish. (A binding the via type refuses is tested in core/vhost: the
// delayed-message plugin refuses such bindings at bind time.)
func TestDelayedNotBeforeDue(t *testing.T) {
	skipReference(t)
	s := startWarren(t)
	if err := s.b.EnablePlugin("delayed-message"); err != nil {
		t.Fatal(err)
	}
	_, ch := confirmChannel(t, s)
	x := uniq(t, "delayed-due")
	if err := ch.ExchangeDeclare(x, "x-delayed-message", false, false, false, false, amqp.Table{"x-delayed-type": "fanout"}); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "", x, nil)
	d := consume(t, ch, q, true)
	for _, delay := range []int32{1, 7, 33, 120} {
		start := time.Now()
		publishConfirmed(t, ch, x, "", amqp.Publishing{Headers: amqp.Table{"x-delay": delay}, Body: []byte("due")})
		receive(t, d)
		if early := time.Duration(delay)*time.Millisecond - time.Since(start); early > 0 {
			t.Fatalf("x-delay %d ms: delivered %v early", delay, early)
		}
	}
}
