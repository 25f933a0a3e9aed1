package tests

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
)

// Dynamic shovels (issue 34): runtime parameters of component shovel,
// run by the broker as a client of both ends, with RabbitMQ 3.10.8's
// definition keys and status API.

// shovelStatus is one entry of /api/shovels.
type shovelStatus struct {
	Node, Timestamp, Name, VHost, Type, State, Reason string
	SrcURI                                            string  `json:"src_uri"`
	DestURI                                           string  `json:"dest_uri"`
	SrcQueue                                          string  `json:"src_queue"`
	DestQueue                                         string  `json:"dest_queue"`
	SrcExchange                                       string  `json:"src_exchange"`
	DestExchange                                      *string `json:"dest_exchange"`
}

// setShovel sets a shovel parameter in the test's vhost.
func (m *mgmt) setShovel(name string, def map[string]any, want int) response {
	m.t.Helper()
	b, err := json.Marshal(map[string]any{"value": def})
	if err != nil {
		m.t.Fatal(err)
	}
	return m.expect("PUT", "/api/parameters/shovel/"+m.v()+"/"+esc(name), string(b), want)
}

// shovel is the named shovel's status, if the node runs it.
func (m *mgmt) shovel(name string) (shovelStatus, bool) {
	m.t.Helper()
	var all []shovelStatus
	m.expect("GET", "/api/shovels/"+m.v(), "", 200).json(m.t, &all)
	for _, s := range all {
		if s.Name == name {
			return s, true
		}
	}
	return shovelStatus{}, false
}

// waitShovel waits for the named shovel to be in state.
func (m *mgmt) waitShovel(name, state string) shovelStatus {
	m.t.Helper()
	var s shovelStatus
	waitFor(m.t, "shovel "+name+" "+state, func() bool {
		var ok bool
		s, ok = m.shovel(name)
		return ok && s.State == state
	})
	return s
}

// localURI is this broker's address for a shovel: no host.
func (m *mgmt) localURI() string { return "amqp:///" + m.v() }

// waitCount waits for a queue to hold n messages.
func waitCount(t testing.TB, ch *amqp.Channel, queue string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d messages in %s", n, queue), func() bool { return count(t, ch, queue) == n })
}

// Each ack mode moves every message, in order, with its properties, from
// a queue to a queue the shovel declares; deleting the parameter stops
// it.
func TestShovelMovesAQueueInEachAckMode(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	const n = 1000
	for _, mode := range []string{"on-confirm", "on-publish", "no-ack"} {
		src, dst := "src-"+mode, "dst-"+mode
		if _, err := ch.QueueDeclare(src, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			publish(t, ch, "", src, amqp.Publishing{Body: []byte(fmt.Sprint(i)), ContentType: "text/plain",
				Headers: amqp.Table{"i": int32(i)}, DeliveryMode: amqp.Persistent})
		}
		m.setShovel(mode, map[string]any{"src-uri": m.localURI(), "src-queue": src, "dest-uri": m.localURI(), "dest-queue": dst,
			"ack-mode": mode}, 201)
		s := m.waitShovel(mode, "running")
		if s.SrcURI != "amqp:///"+m.v() || s.SrcQueue != src || s.DestQueue != dst || s.Type != "dynamic" || s.Node == "" {
			t.Fatalf("%s: status %+v", mode, s)
		}
		waitCount(t, ch, dst, n)
		waitCount(t, ch, src, 0)
		for i := range n {
			d := get(t, ch, dst)
			if string(d.Body) != fmt.Sprint(i) || d.ContentType != "text/plain" || d.Headers["i"] != int32(i) || d.DeliveryMode != amqp.Persistent {
				t.Fatalf("%s: message %d arrived as %q %q %v %d", mode, i, d.Body, d.ContentType, d.Headers, d.DeliveryMode)
			}
		}
		m.expect("DELETE", "/api/parameters/shovel/"+m.v()+"/"+mode, "", 204)
		waitFor(t, "shovel "+mode+" gone", func() bool { _, ok := m.shovel(mode); return !ok })
		publish(t, ch, "", src, body("after"))
		if get(t, ch, src).Body == nil {
			t.Fatal("a deleted shovel still moves messages")
		}
	}
}

// delete-after: queue-length moves what the queue held when the shovel
// started and deletes the shovel; a count moves that many.
func TestShovelDeletesItselfAfterItsTransfer(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	for _, q := range []string{"a", "b"} {
		if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			publish(t, ch, "", q, body(fmt.Sprint(i)))
		}
	}
	m.setShovel("all", map[string]any{"src-uri": m.localURI(), "src-queue": "a", "dest-uri": m.localURI(), "dest-queue": "a2",
		"src-delete-after": "queue-length"}, 201)
	m.setShovel("some", map[string]any{"src-uri": m.localURI(), "src-queue": "b", "dest-uri": m.localURI(), "dest-queue": "b2",
		"src-delete-after": 30, "src-prefetch-count": 7}, 201)
	for _, name := range []string{"all", "some"} {
		waitFor(t, "shovel "+name+"'s parameter gone", func() bool {
			return m.call("GET", "/api/parameters/shovel/"+m.v()+"/"+name, "").status == 404
		})
	}
	waitCount(t, ch, "a2", 100)
	waitCount(t, ch, "a", 0)
	waitCount(t, ch, "b2", 30)
	waitCount(t, ch, "b", 70)
	if got := drain(t, ch, "b2"); !slices.Equal(got, seq(0, 30)) {
		t.Fatalf("b2 holds %v", got)
	}
	if got := drain(t, ch, "b"); !slices.Equal(got, seq(30, 100)) {
		t.Fatalf("b kept %v", got)
	}
}

// An exchange source (a server-named queue bound with the key), an
// exchange destination with its own key, RabbitMQ's forwarding and
// timestamp headers, and publish properties set over the message's.
func TestShovelFromAnExchangeWithHeaders(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	for _, x := range []string{"in", "out"} {
		if err := ch.ExchangeDeclare(x, "direct", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.QueueDeclare("landed", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	bind(t, ch, "landed", "to", "out", nil)
	m.setShovel("x", map[string]any{"src-uri": m.localURI(), "src-exchange": "in", "src-exchange-key": "from",
		"dest-uri": m.localURI(), "dest-exchange": "out", "dest-exchange-key": "to",
		"dest-add-forward-headers": true, "dest-add-timestamp-header": true,
		"dest-publish-properties": map[string]any{"delivery_mode": 2, "app_id": "shovelled"}}, 201)
	s := m.waitShovel("x", "running")
	if s.SrcExchange != "in" || s.DestExchange == nil || *s.DestExchange != "out" {
		t.Fatalf("status %+v", s)
	}
	before := time.Now().Unix()
	publish(t, ch, "in", "from", amqp.Publishing{Body: []byte("hello"), Headers: amqp.Table{"x-shovelled": []any{amqp.Table{"shovel-name": "earlier"}}}})
	waitCount(t, ch, "landed", 1)
	d := get(t, ch, "landed")
	if string(d.Body) != "hello" || d.DeliveryMode != 2 || d.AppId != "shovelled" || d.RoutingKey != "to" || d.Exchange != "out" {
		t.Fatalf("delivered %+v", d)
	}
	hops, _ := d.Headers["x-shovelled"].([]any)
	if len(hops) != 2 {
		t.Fatalf("x-shovelled = %v, want this shovel's entry before the earlier one", d.Headers["x-shovelled"])
	}
	hop, _ := hops[0].(amqp.Table)
	want := amqp.Table{"shovel-type": "dynamic", "shovel-name": "x", "shovel-vhost": m.vhost, "src-uri": m.localURI(),
		"dest-uri": m.localURI(), "src-exchange": "in", "src-exchange-key": "from", "dest-exchange": "out", "dest-exchange-key": "to"}
	for k, v := range want {
		if hop[k] != v {
			t.Errorf("x-shovelled %s = %v, want %v", k, hop[k], v)
		}
	}
	if hop["shovelled-by"] == "" {
		t.Error("x-shovelled has no shovelled-by")
	}
	if earlier, _ := hops[1].(amqp.Table); earlier["shovel-name"] != "earlier" {
		t.Errorf("the earlier hop became %v", hops[1])
	}
	if ts, _ := d.Headers["x-shovelled-timestamp"].(int64); ts < before || ts > time.Now().Unix() {
		t.Errorf("x-shovelled-timestamp = %v", d.Headers["x-shovelled-timestamp"])
	}
}

// A destination that refuses (its exchange is missing) terminates the
// shovel with the reason and loses nothing under on-confirm: once the
// exchange exists the shovel, restarting after its delay, moves every
// message. The restart route restarts a running shovel.
func TestShovelSurvivesARefusingDestination(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("pending", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		publish(t, ch, "", "pending", body(fmt.Sprint(i)))
	}
	m.setShovel("r", map[string]any{"src-uri": m.localURI(), "src-queue": "pending", "dest-uri": m.localURI(),
		"dest-exchange": "not-yet", "reconnect-delay": 0.2}, 201)
	s := m.waitShovel("r", "terminated")
	if !strings.Contains(s.Reason, "not-yet") {
		t.Fatalf("terminated with reason %q, want one naming the missing exchange", s.Reason)
	}
	waitCount(t, ch, "pending", 50)
	if err := ch.ExchangeDeclare("not-yet", "fanout", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("arrived", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	bind(t, ch, "arrived", "", "not-yet", nil)
	m.waitShovel("r", "running")
	waitCount(t, ch, "arrived", 50)
	waitCount(t, ch, "pending", 0)
	if got := drain(t, ch, "arrived"); !slices.Equal(got, seq(0, 50)) {
		t.Fatalf("arrived: %v", got)
	}

	first, _ := m.shovel("r")
	time.Sleep(1100 * time.Millisecond) // the status's timestamp is in seconds
	m.expect("DELETE", "/api/shovels/vhost/"+m.v()+"/r/restart", "", 204)
	again := m.waitShovel("r", "running")
	if again.Timestamp == first.Timestamp {
		t.Fatalf("restarted shovel keeps its timestamp %s", first.Timestamp)
	}
	m.expectNotFound("DELETE", "/api/shovels/vhost/"+m.v()+"/nothing/restart")
	m.expect("DELETE", "/api/shovels/vhost/"+m.v()+"/r", "", 204)
	m.expectNotFound("GET", "/api/parameters/shovel/"+m.v()+"/r")
}

// A shovel to another broker over the network, with credentials, and
// with several URIs of which the first refuses connections.
func TestShovelToAnotherBroker(t *testing.T) {
	m := startWarrenMgmt(t)
	other := startWarren(t)
	_, ch := m.channel()
	_, och := channel(t, other)
	if _, err := ch.QueueDeclare("outbound", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		publish(t, ch, "", "outbound", body(fmt.Sprint(i)))
	}
	dead, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	m.setShovel("out", map[string]any{"src-uri": m.localURI(), "src-queue": "outbound",
		"dest-uri": []any{"amqp://guest:guest@" + deadAddr + "/", other.url}, "dest-queue": "inbound"}, 201)
	s := m.waitShovel("out", "running")
	if strings.Contains(s.DestURI, "guest") {
		t.Fatalf("the status shows credentials: %s", s.DestURI)
	}
	waitCount(t, och, "inbound", 200)
	if got := drain(t, och, "inbound"); !slices.Equal(got, seq(0, 200)) {
		t.Fatalf("inbound: %v", got)
	}
}

// Definitions are checked as RabbitMQ checks them, naming the bad key,
// and a user may only point a local URI at a vhost it may use.
func TestShovelDefinitionsAreChecked(t *testing.T) {
	m := startWarrenMgmt(t)
	for _, tc := range []struct {
		def  string
		want string
	}{
		{`{"src-queue":"q","dest-uri":"amqp://"}`, `Key "src-uri" not found in shovel`},
		{`{"src-uri":"amqp://","dest-uri":"amqp://"}`, "Must specify 'src-exchange' or 'src-queue'"},
		{`{"src-uri":"amqp://","dest-uri":"amqp://","src-queue":"q","ack-mode":"later"}`, `ack-mode should be one of`},
		{`{"src-uri":"amqp://","dest-uri":"amqp://","src-queue":"q","src-delete-after":"soon"}`, `src-delete-after should be a number`},
		{`{"src-uri":"amqp://","dest-uri":"amqp://","src-queue":"q","colour":1}`, `Unrecognised terms colour in shovel`},
		{`"not an object"`, ""},
	} {
		r := m.call("PUT", "/api/parameters/shovel/"+m.v()+"/bad", `{"value":`+tc.def+`}`)
		var e struct{ Reason string }
		_ = json.Unmarshal([]byte(r.body), &e)
		if r.status != 400 || !strings.HasPrefix(e.Reason, "Validation failed\n\n") || !strings.Contains(e.Reason, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.def, r.status, r.body, tc.want)
		}
	}
	m.expectNotFound("GET", "/api/parameters/shovel/"+m.v()+"/bad")

	other := uniq(t, "vh-other")
	m.expect("PUT", "/api/vhosts/"+esc(other), "", 201)
	t.Cleanup(func() { m.call("DELETE", "/api/vhosts/"+esc(other), "") })
	m.addUser("pm", "pm", "policymaker", m.vhost)
	def := `{"value":{"src-uri":"amqp:///` + esc(other) + `","src-queue":"q","dest-uri":"amqp://"}}`
	r := m.callAs("pm", "pm", "PUT", "/api/parameters/shovel/"+m.v()+"/sneaky", def, nil)
	if r.status != 400 || !strings.Contains(r.body, "may not connect to vhost") {
		t.Fatalf("a shovel into a vhost its author may not use: %d %s", r.status, r.body)
	}
}

// A shovel is a definition like any other: exported, imported, and
// listed by the parameters routes.
func TestShovelInDefinitions(t *testing.T) {
	m := startWarrenMgmt(t)
	m.setShovel("d", map[string]any{"src-uri": m.localURI(), "src-queue": "dq", "dest-uri": m.localURI(), "dest-queue": "dq2"}, 201)
	var defs struct {
		Parameters []struct {
			VHost, Component, Name string
			Value                  map[string]any
		}
	}
	m.expect("GET", "/api/definitions", "", 200).json(t, &defs)
	found := false
	for _, p := range defs.Parameters {
		if p.Component == "shovel" && p.Name == "d" && p.VHost == m.vhost && p.Value["src-queue"] == "dq" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the export has no shovel: %+v", defs.Parameters)
	}
	m.expect("DELETE", "/api/parameters/shovel/"+m.v()+"/d", "", 204)
	imp := fmt.Sprintf(`{"parameters":[{"vhost":%q,"component":"shovel","name":"d2","value":{"src-uri":%q,"src-queue":"dq","dest-uri":%q,"dest-queue":"dq2"}}]}`,
		m.vhost, m.localURI(), m.localURI())
	if r := m.call("POST", "/api/definitions", imp); r.status != 204 && r.status != 201 {
		t.Fatalf("import: %d %s", r.status, r.body)
	}
	m.waitShovel("d2", "running")
	bad := fmt.Sprintf(`{"parameters":[{"vhost":%q,"component":"shovel","name":"d3","value":{"src-queue":"dq"}}]}`, m.vhost)
	if r := m.call("POST", "/api/definitions", bad); r.status != 400 || !strings.Contains(r.body, "src-uri") {
		t.Fatalf("import of a bad shovel: %d %s", r.status, r.body)
	}
}

// A static shovel (broker.toml's [[shovels]]) runs from the broker's
// start, shows as static, restarts, and cannot be deleted through the
// API; a bad definition stops start-up naming the shovel and the key.
func TestStaticShovel(t *testing.T) {
	def := map[string]any{"src-uri": "amqp://", "src-queue": "static-from", "dest-uri": "amqp://", "dest-queue": "static-to",
		"dest-add-forward-headers": true}
	m := startMgmt(t, func(c *config.Config) {
		c.Shovels = []config.Shovel{{Name: "boot", Definition: def}}
	})
	if !m.isWarren() {
		t.Skip("tests Warren's configuration")
	}
	c, err := amqp.Dial(m.s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, _ := c.Channel()
	var all []shovelStatus
	waitFor(t, "the static shovel running", func() bool {
		all = nil
		m.expect("GET", "/api/shovels", "", 200).json(t, &all)
		return len(all) == 1 && all[0].State == "running"
	})
	if all[0].Type != "static" || all[0].Name != "boot" || all[0].VHost != "/" {
		t.Fatalf("status %+v", all[0])
	}
	publish(t, ch, "", "static-from", body("hello"))
	waitCount(t, ch, "static-to", 1)
	d := get(t, ch, "static-to")
	if hop, _ := d.Headers["x-shovelled"].([]any); len(hop) != 1 || hop[0].(amqp.Table)["shovel-type"] != "static" {
		t.Fatalf("x-shovelled = %v", d.Headers["x-shovelled"])
	}
	m.expect("DELETE", "/api/shovels/vhost/%2F/boot/restart", "", 204)
	r := m.call("DELETE", "/api/shovels/vhost/%2F/boot", "")
	if r.status != 400 || !strings.Contains(r.body, "static") {
		t.Fatalf("deleting a static shovel: %d %s", r.status, r.body)
	}

	cfg := config.Default()
	cfg.Storage.DataDir = t.TempDir()
	cfg.Shovels = []config.Shovel{{Name: "bad", Definition: map[string]any{"src-uri": "amqp://", "src-queue": "q", "ack-mode": "later"}}}
	if _, err := broker.New(cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), `"bad"`) ||
		!strings.Contains(err.Error(), "dest-uri") || !strings.Contains(err.Error(), "ack-mode") {
		t.Fatalf("a bad static shovel: %v", err)
	}
}

// A destination queue that is full and rejects publishes nacks them: the
// shovel puts them back in the source, stops with the reason, and tries
// again after its reconnect delay, neither spinning nor losing any; once
// the destination has room it moves the rest.
func TestShovelStopsOnARefusingQueue(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("full", true, false, false, false, amqp.Table{"x-max-length": int32(5), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("waiting", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		publish(t, ch, "", "waiting", body(fmt.Sprint(i)))
	}
	m.setShovel("nack", map[string]any{"src-uri": m.localURI(), "src-queue": "waiting", "dest-uri": m.localURI(), "dest-queue": "full",
		"reconnect-delay": 1}, 201)
	s := m.waitShovel("nack", "terminated")
	if !strings.Contains(s.Reason, "refused") {
		t.Fatalf("terminated with reason %q", s.Reason)
	}
	waitCount(t, ch, "full", 5)
	waitCount(t, ch, "waiting", 15)
	var got []string
	waitFor(t, "every message moved as the destination makes room", func() bool {
		got = append(got, drain(t, ch, "full")...)
		return len(got) == 20
	})
	slices.Sort(got)
	want := seq(0, 20)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("moved %v", got)
	}
}

// A shovel to a broker over TLS (amqps), its CA given in the URI as
// RabbitMQ's URIs give it (cacertfile); with verify_none a certificate
// the URI does not vouch for is taken, and without it refused.
func TestShovelOverTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	remote := startWarren(t, func(c *config.Config) {
		c.AMQP.Listen = nil
		c.AMQPS = config.AMQPS{Listen: config.Addrs{"127.0.0.1:0"}, CertFile: certFile, KeyFile: keyFile}
	})
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("to-tls", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		publish(t, ch, "", "to-tls", body(fmt.Sprint(i)))
	}
	addr := remote.b.Addr().String()
	m.setShovel("no-ca", map[string]any{"src-uri": m.localURI(), "src-queue": "to-tls",
		"dest-uri": "amqps://guest:guest@" + addr + "/", "dest-queue": "over-tls", "reconnect-delay": 60}, 201)
	if s := m.waitShovel("no-ca", "terminated"); !strings.Contains(s.Reason, "certificate") {
		t.Fatalf("a server certificate nobody vouched for: terminated with %q", s.Reason)
	}
	m.expect("DELETE", "/api/parameters/shovel/"+m.v()+"/no-ca", "", 204)
	m.setShovel("with-ca", map[string]any{"src-uri": m.localURI(), "src-queue": "to-tls",
		"dest-uri": "amqps://guest:guest@" + addr + "/?cacertfile=" + certFile, "dest-queue": "over-tls"}, 201)
	m.waitShovel("with-ca", "running")
	c, err := amqp.DialTLS("amqps://guest:guest@"+addr+"/", &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rch, _ := c.Channel()
	waitCount(t, rch, "over-tls", 10)
	m.expect("DELETE", "/api/parameters/shovel/"+m.v()+"/with-ca", "", 204)
	publish(t, ch, "", "to-tls", body("unverified"))
	m.setShovel("insecure", map[string]any{"src-uri": m.localURI(), "src-queue": "to-tls",
		"dest-uri": "amqps://guest:guest@" + addr + "/?verify=verify_none", "dest-queue": "over-tls"}, 201)
	waitCount(t, rch, "over-tls", 11)
}

// A destination under a resource alarm blocks the shovel's connection:
// the status says so (blocked_status, as RabbitMQ 3.12's), and once the
// alarm clears the shovel moves everything.
func TestShovelShowsABlockedDestination(t *testing.T) {
	m := startWarrenMgmt(t)
	_, ch := m.channel()
	if _, err := ch.QueueDeclare("before-alarm", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		publish(t, ch, "", "before-alarm", body(fmt.Sprint(i)))
	}
	waitCount(t, ch, "before-alarm", 100)
	m.s.b.Alarm().Set(true, "memory")
	m.setShovel("blocked", map[string]any{"src-uri": m.localURI(), "src-queue": "before-alarm", "dest-uri": m.localURI(), "dest-queue": "after-alarm"}, 201)
	waitFor(t, "the shovel shown blocked", func() bool {
		var all []map[string]any
		m.expect("GET", "/api/shovels/"+m.v(), "", 200).json(t, &all)
		return len(all) == 1 && all[0]["blocked_status"] == "blocked" && strings.Contains(fmt.Sprint(all[0]["reason"]), "blocked")
	})
	m.s.b.Alarm().Set(false, "")
	waitCount(t, ch, "after-alarm", 100)
	waitFor(t, "the shovel shown running", func() bool {
		var all []map[string]any
		m.expect("GET", "/api/shovels/"+m.v(), "", 200).json(t, &all)
		return len(all) == 1 && all[0]["blocked_status"] == "running"
	})
}
