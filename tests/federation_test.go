package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// Federation, as RabbitMQ 3.10.8's rabbitmq_federation plugin does it,
// end to end and black-box: upstreams and upstream sets are runtime
// parameters, a policy federates the exchanges and queues it matches,
// and /api/federation-links reports the links. Each scenario is a
// function of "sites" (a broker, its management API and a vhost of the
// scenario's own), so the same scenario runs between in-process Warren
// brokers (TestFederation...) and between private RabbitMQ 3.10.8 nodes
// (TestFederationReference..., which shows the scenarios' expectations
// are RabbitMQ's); federation_rabbitmq_test.go links Warren and RabbitMQ.

// fedNode is one broker of a federation test.
type fedNode struct {
	host    string // host:port of its AMQP listener
	admin   string // http://host:port of its management API
	cluster string // its cluster name, as /api/overview shows it
	node    string // its node name, as /api/overview shows it
}

// fedSite is a vhost of a fedNode, where a scenario works.
type fedSite struct {
	*fedNode
	t     testing.TB
	vhost string
}

// fedAPI bounds every request of these tests: a broker that does not
// answer fails the test rather than hanging it.
var fedAPI = &http.Client{Timeout: 30 * time.Second}

// fedCall makes a request of a management API as guest.
func fedCall(t testing.TB, base, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := fedAPI.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newFedNode learns a broker's cluster and node names from its API.
func newFedNode(t testing.TB, host, admin string) *fedNode {
	t.Helper()
	n := &fedNode{host: host, admin: admin}
	status, body := fedCall(t, admin, "GET", "/api/overview", "")
	var o struct {
		ClusterName string `json:"cluster_name"`
		Node        string `json:"node"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &o) != nil || o.ClusterName == "" || o.Node == "" {
		t.Fatalf("GET /api/overview: %d %s", status, body)
	}
	n.cluster, n.node = o.ClusterName, o.Node
	return n
}

// warrenFedNodes starts n in-process Warren brokers with their
// management API, each with a node name (so a cluster name) of its own:
// fed-a@localhost, fed-b@localhost, ...
func warrenFedNodes(t *testing.T, n int) []*fedNode {
	t.Helper()
	var out []*fedNode
	for i := range n {
		name := fmt.Sprintf("fed-%c@localhost", 'a'+i)
		s := startWarren(t, func(c *config.Config) {
			c.NodeName = name
			c.Admin.Listen = "127.0.0.1:0"
		})
		if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
			t.Fatal(err)
		}
		out = append(out, newFedNode(t, s.b.Addr().String(), "http://"+s.b.AdminAddr()))
	}
	return out
}

// rabbitFedPlugins are what a RabbitMQ node needs for these tests: the
// federation plugin, its management extension (/api/federation-links)
// and the management API.
var rabbitFedPlugins = []string{"rabbitmq_federation", "rabbitmq_federation_management", "rabbitmq_management"}

// rabbitFedNodes starts n private RabbitMQ 3.10.8 nodes at once, with
// rabbitFedPlugins. Each node's cluster name is its own (name@host).
func rabbitFedNodes(t *testing.T, n int) []*fedNode {
	t.Helper()
	var out []*fedNode
	for _, r := range startRabbitMQs(t, n, rabbitFedPlugins...) {
		out = append(out, newFedNode(t, fmt.Sprintf("127.0.0.1:%d", r.amqpPort), r.admin))
	}
	return out
}

// site makes vhost on the node, with guest's permissions, for t; it is
// deleted when t ends (which stops its links).
func (n *fedNode) site(t testing.TB, vhost string) *fedSite {
	t.Helper()
	s := &fedSite{fedNode: n, t: t, vhost: vhost}
	s.expect("PUT", "/api/vhosts/"+esc(vhost), "", 201, 204)
	t.Cleanup(func() { fedCall(t, n.admin, "DELETE", "/api/vhosts/"+esc(vhost), "") })
	s.expect("PUT", "/api/permissions/"+esc(vhost)+"/guest", `{"configure":".*","write":".*","read":".*"}`, 201, 204)
	return s
}

// fedSites makes the vhost on each node.
func fedSites(t testing.TB, vhost string, nodes ...*fedNode) []*fedSite {
	t.Helper()
	var out []*fedSite
	for _, n := range nodes {
		out = append(out, n.site(t, vhost))
	}
	return out
}

// v is the site's vhost, escaped for a path.
func (s *fedSite) v() string { return esc(s.vhost) }

// url is the site's AMQP URL, as guest: an upstream's "uri".
func (s *fedSite) url() string { return "amqp://guest:guest@" + s.host + "/" + esc(s.vhost) }

// shownURI is the site's URL as the links and x-received-from show an
// upstream's: without its credentials.
func (s *fedSite) shownURI() string { return "amqp://" + s.host + "/" + esc(s.vhost) }

// expect makes a request of the site's API and fails unless its status
// is one of want; it returns the body.
func (s *fedSite) expect(method, path, body string, want ...int) string {
	s.t.Helper()
	status, got := fedCall(s.t, s.admin, method, path, body)
	if !slices.Contains(want, status) {
		s.t.Fatalf("%s %s%s: %d %s, want %v", method, s.admin, path, status, got, want)
	}
	return got
}

// getJSON decodes a GET of the site's API into v.
func (s *fedSite) getJSON(path string, v any) {
	s.t.Helper()
	b := s.expect("GET", path, "", 200)
	if err := json.Unmarshal([]byte(b), v); err != nil {
		s.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

func (s *fedSite) putJSON(path string, v any, want ...int) {
	s.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	s.expect("PUT", path, string(b), want...)
}

// setUpstream sets a federation-upstream parameter; def is its value.
func (s *fedSite) setUpstream(name string, def map[string]any) {
	s.t.Helper()
	s.putJSON("/api/parameters/federation-upstream/"+s.v()+"/"+esc(name), map[string]any{"value": def}, 201, 204)
}

// setUpstreamSet sets a federation-upstream-set parameter: its members,
// each {"upstream": name} with overrides.
func (s *fedSite) setUpstreamSet(name string, members ...map[string]any) {
	s.t.Helper()
	s.putJSON("/api/parameters/federation-upstream-set/"+s.v()+"/"+esc(name), map[string]any{"value": members}, 201, 204)
}

// setPolicy sets a policy of the site's vhost.
func (s *fedSite) setPolicy(name, pattern, applyTo string, def map[string]any) {
	s.t.Helper()
	s.putJSON("/api/policies/"+s.v()+"/"+esc(name),
		map[string]any{"pattern": pattern, "apply-to": applyTo, "definition": def, "priority": 0}, 201, 204)
}

// fedLink is one entry of /api/federation-links.
type fedLink struct {
	Node, Type, VHost, Upstream, ID, Status, URI, Timestamp string
	Exchange                                                string
	UpstreamExchange                                        string `json:"upstream_exchange"`
	Queue                                                   string
	UpstreamQueue                                           string `json:"upstream_queue"`
	ConsumerTag                                             string `json:"consumer_tag"`
	LocalConnection                                         string `json:"local_connection"`
	Error                                                   any    // a string in RabbitMQ ("econnrefused")
}

func (l fedLink) String() string {
	what := l.Exchange
	if l.Type == "queue" {
		what = l.Queue
	}
	s := fmt.Sprintf("%s %s <- %s: %s", l.Type, what, l.Upstream, l.Status)
	if l.Error != nil {
		s += fmt.Sprintf(" (%v)", l.Error)
	}
	return s
}

// links is the site's vhost's links.
func (s *fedSite) links() []fedLink {
	s.t.Helper()
	var ls []fedLink
	s.getJSON("/api/federation-links/"+s.v(), &ls)
	return ls
}

// link finds the link of an exchange or queue (by kind) from upstream.
func (s *fedSite) link(kind, name, upstream string) (fedLink, bool) {
	s.t.Helper()
	for _, l := range s.links() {
		if l.Type == kind && l.Upstream == upstream && (kind == "exchange" && l.Exchange == name || kind == "queue" && l.Queue == name) {
			return l, true
		}
	}
	return fedLink{}, false
}

// waitLink waits until the link of the exchange or queue (kind) from
// upstream is in state; it fails naming every link's state otherwise.
func (s *fedSite) waitLink(kind, name, upstream, state string) fedLink {
	s.t.Helper()
	var l fedLink
	if !poll.WithinEvery(30*time.Second, 20*time.Millisecond, func() bool {
		var ok bool
		l, ok = s.link(kind, name, upstream)
		return ok && l.Status == state
	}) {
		s.t.Fatalf("%s: no %s link of %s from %s %s within 30s; the links: %v", s.cluster, kind, name, upstream, state, s.links())
	}
	return l
}

// fedBinding is one entry of an exchange's bindings.
type fedBinding struct {
	Source, Destination string
	DestinationType     string `json:"destination_type"`
	RoutingKey          string `json:"routing_key"`
	Arguments           map[string]any
}

// bindings are the bindings of the site's vhost.
func (s *fedSite) bindings() []fedBinding {
	s.t.Helper()
	var bs []fedBinding
	s.getJSON("/api/bindings/"+s.v(), &bs)
	return bs
}

// linkBound says whether a link has bound something other than the
// site's own queues to its exchange with key: how a downstream's binding
// shows on its upstream.
func (s *fedSite) linkBound(exchange, key string, own ...string) bool {
	s.t.Helper()
	for _, b := range s.bindings() {
		if b.Source == exchange && b.RoutingKey == key && !(b.DestinationType == "queue" && slices.Contains(own, b.Destination)) {
			return true
		}
	}
	return false
}

// waitLinkBound waits until the downstream's binding key has reached
// (bound) or left (!bound) the site's exchange.
func (s *fedSite) waitLinkBound(exchange, key string, bound bool, own ...string) {
	s.t.Helper()
	what := fmt.Sprintf("%s: a link's binding of %s with key %q", s.cluster, exchange, key)
	if !bound {
		what += " gone"
	}
	waitFor(s.t, what, func() bool { return s.linkBound(exchange, key, own...) == bound })
}

// channel opens a channel in the site's vhost, in confirm mode, on a
// connection of its own.
func (s *fedSite) channel() *amqp.Channel {
	s.t.Helper()
	c, err := amqp.Dial(s.url())
	if err != nil {
		s.t.Fatalf("dial %s: %v", s.cluster, err)
	}
	s.t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		s.t.Fatal(err)
	}
	return ch
}

// fedDeclare declares a durable exchange (kind != "") or queue (kind == "").
func fedDeclare(t testing.TB, ch *amqp.Channel, kind, name string) {
	t.Helper()
	var err error
	if kind == "" {
		_, err = ch.QueueDeclare(name, true, false, false, false, nil)
	} else {
		err = ch.ExchangeDeclare(name, kind, true, false, false, false, nil)
	}
	if err != nil {
		t.Fatalf("declaring %s: %v", name, err)
	}
}

// fedReceivedFrom is a delivery's x-received-from, each entry's values in
// fmt's rendering (so an integer is the same whatever its field type).
func fedReceivedFrom(d amqp.Delivery) []map[string]string {
	var out []map[string]string
	l, _ := d.Headers["x-received-from"].([]any)
	for _, e := range l {
		tab, _ := e.(amqp.Table)
		m := map[string]string{}
		for k, v := range tab {
			m[k] = fmt.Sprint(v)
		}
		out = append(out, m)
	}
	return out
}

// fedExchangeHop is the x-received-from entry of an exchange link from up.
func fedExchangeHop(up *fedSite, exchange string) map[string]string {
	return map[string]string{"uri": up.shownURI(), "exchange": exchange, "redelivered": "false",
		"cluster-name": up.cluster, "vhost": up.vhost}
}

// fedExpectHops fails unless the delivery's x-received-from is want.
func fedExpectHops(t testing.TB, d amqp.Delivery, want ...map[string]string) {
	t.Helper()
	got := fedReceivedFrom(d)
	if len(got) != len(want) {
		t.Fatalf("%q: x-received-from %v, want %v", d.Body, d.Headers["x-received-from"], want)
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("%q: x-received-from %v, want %v", d.Body, got, want)
		}
	}
}

// fedInbox collects a consumer's deliveries, for a test that waits until
// a set of messages has arrived and then checks what did.
type fedInbox struct {
	mu  sync.Mutex
	got []amqp.Delivery
}

func fedCollect(d <-chan amqp.Delivery) *fedInbox {
	in := &fedInbox{}
	go func() {
		for m := range d {
			in.mu.Lock()
			in.got = append(in.got, m)
			in.mu.Unlock()
		}
	}()
	return in
}

// all is what the inbox holds so far.
func (in *fedInbox) all() []amqp.Delivery {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.got)
}

// waitBodies waits until every one of bodies has arrived.
func (in *fedInbox) waitBodies(t testing.TB, what string, bodies []string) {
	t.Helper()
	if !poll.Within(30*time.Second, func() bool {
		seen := map[string]bool{}
		for _, d := range in.all() {
			seen[string(d.Body)] = true
		}
		for _, b := range bodies {
			if !seen[b] {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("waited 30s for %s: %d of the %d messages expected; got %v", what, len(in.all()), len(bodies), fedBodyList(in.all()))
	}
}

func fedBodyList(ds []amqp.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}

// fedPublish publishes each body with key through exchange on a channel
// in confirm mode, and waits until the broker confirmed them all.
func fedPublish(t testing.TB, ch *amqp.Channel, exchange, key string, bodies []string, headers amqp.Table) {
	t.Helper()
	var dcs []*amqp.DeferredConfirmation
	for _, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirm(exchange, key, false, false,
			amqp.Publishing{Body: []byte(b), Headers: headers, ContentType: "text/plain", MessageId: b})
		if err != nil {
			t.Fatalf("publish %s: %v", b, err)
		}
		dcs = append(dcs, dc)
	}
	for _, dc := range dcs {
		select {
		case <-dc.Done():
			if !dc.Acked() {
				t.Fatalf("publish to %q with key %q was nacked", exchange, key)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no confirm within 30s for a publish to %q", exchange)
		}
	}
}

// fedSameJSON says whether a and b are the same JSON (a number whatever its
// Go type).
func fedSameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func fedNumbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// --- Scenario 1: exchange federation, down <- up ---

// fedExchangeScenario federates down's fed.x from up's: a queue bound on
// down with key k gets, in order, exactly the messages published to up's
// fed.x with k, each with one x-received-from entry naming up; the
// binding reaches up, and unbinding takes it away again.
func fedExchangeScenario(t *testing.T, down, up *fedSite) {
	dch, uch := down.channel(), up.channel()
	fedDeclare(t, uch, "direct", "fed.x")
	fedDeclare(t, dch, "direct", "fed.x")
	fedDeclare(t, dch, "", "in")
	bind(t, dch, "in", "k", "fed.x", nil)
	bind(t, dch, "in", "marker", "fed.x", nil)
	down.setUpstream("up", map[string]any{"uri": up.url(), "reconnect-delay": 1})
	down.setPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream-set": "all"})
	l := down.waitLink("exchange", "fed.x", "up", "running")
	if l.UpstreamExchange != "fed.x" || l.VHost != down.vhost || l.URI != up.shownURI() {
		t.Fatalf("link %+v", l)
	}
	up.waitLinkBound("fed.x", "k", true)
	up.waitLinkBound("fed.x", "marker", true)

	d := consume(t, dch, "in", true)
	const n = 100
	for i := range n {
		fedPublish(t, uch, "fed.x", "k", []string{fmt.Sprint("k-", i)}, amqp.Table{"i": int32(i)})
		fedPublish(t, uch, "fed.x", "other", []string{fmt.Sprint("other-", i)}, nil)
	}
	fedPublish(t, uch, "fed.x", "marker", []string{"end"}, nil)
	for i := range n {
		m := receive(t, d)
		if string(m.Body) != fmt.Sprint("k-", i) {
			t.Fatalf("delivery %d is %q (key %q), want k-%d", i, m.Body, m.RoutingKey, i)
		}
		if m.Exchange != "fed.x" || m.RoutingKey != "k" || m.ContentType != "text/plain" || m.MessageId != string(m.Body) ||
			fmt.Sprint(m.Headers["i"]) != fmt.Sprint(i) {
			t.Fatalf("%q arrived as %+v", m.Body, m)
		}
		fedExpectHops(t, m, fedExchangeHop(up, "fed.x"))
	}
	if m := receive(t, d); string(m.Body) != "end" {
		t.Fatalf("after the k messages came %q (key %q), want the marker", m.Body, m.RoutingKey)
	}

	// Unbinding k on down takes k off up: what up's fed.x gets with k then
	// goes nowhere, and the marker after it is down's next delivery.
	if err := dch.QueueUnbind("in", "k", "fed.x", nil); err != nil {
		t.Fatal(err)
	}
	up.waitLinkBound("fed.x", "k", false)
	fedPublish(t, uch, "fed.x", "k", []string{"late"}, nil)
	fedPublish(t, uch, "fed.x", "marker", []string{"end-2"}, nil)
	if m := receive(t, d); string(m.Body) != "end-2" {
		t.Fatalf("after unbinding k, down got %q (key %q) before the marker", m.Body, m.RoutingKey)
	}
}

// --- Scenario 2: a ring of three ---

// fedRingScenario makes a ring of the sites: each federates fed.x from
// the next (so messages flow from site i+1 to site i) with maxHops, and
// binds a queue with key k. n messages published at each site reach each
// site that is at most maxHops links downstream of it, once each, in
// their order: the cycle check (x-received-from's cluster names) stops a
// message coming back to a site it passed. The check is exact: a second
// round, published once the first has arrived everywhere, follows on
// every link whatever the first sent over it, so once the second is in,
// a copy that went further than it should (past maxHops, or round the
// ring) is in too.
func fedRingScenario(t *testing.T, sites []*fedSite, maxHops, n int) {
	k := len(sites)
	chans := make([]*amqp.Channel, k)
	inboxes := make([]*fedInbox, k)
	for i, s := range sites {
		chans[i] = s.channel()
		fedDeclare(t, chans[i], "direct", "fed.x")
		fedDeclare(t, chans[i], "", "in")
		bind(t, chans[i], "in", "k", "fed.x", nil)
	}
	for i, s := range sites {
		next := sites[(i+1)%k]
		s.setUpstream("next", map[string]any{"uri": next.url(), "max-hops": maxHops, "reconnect-delay": 1})
		s.setPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream-set": "all"})
	}
	for i, s := range sites {
		s.waitLink("exchange", "fed.x", "next", "running")
		sites[(i+1)%k].waitLinkBound("fed.x", "k", true, "in")
	}
	for i, s := range sites {
		c, err := amqp.Dial(s.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ch, err := c.Channel()
		if err != nil {
			t.Fatal(err)
		}
		inboxes[i] = fedCollect(consume(t, ch, "in", true))
	}
	// hops is how many links a message published at site o takes to site
	// x, if it gets there.
	hops := func(o, x int) int { return (o - x + k) % k }
	reaches := func(o, x int) bool { return hops(o, x) <= maxHops }
	round := func(name string, count int) {
		for o, s := range sites {
			fedPublish(t, chans[o], "fed.x", "k", fedNumbered(fmt.Sprint(name, "-", s.cluster), 0, count), nil)
		}
		for x, s := range sites {
			var want []string
			for o, src := range sites {
				if reaches(o, x) {
					want = append(want, fedNumbered(fmt.Sprint(name, "-", src.cluster), 0, count)...)
				}
			}
			inboxes[x].waitBodies(t, fmt.Sprintf("%s at %s", name, s.cluster), want)
		}
	}
	round("m", n)
	round("fence", 1)

	for x, s := range sites {
		got := inboxes[x].all()
		byOrigin := map[int][]string{}
		for _, d := range got {
			o := slices.IndexFunc(sites, func(src *fedSite) bool {
				return strings.HasPrefix(string(d.Body), "m-"+src.cluster+"-") || strings.HasPrefix(string(d.Body), "fence-"+src.cluster+"-")
			})
			if o < 0 || !reaches(o, x) {
				t.Fatalf("%s got %q, which should not reach it (x-received-from %v)", s.cluster, d.Body, fedReceivedFrom(d))
			}
			byOrigin[o] = append(byOrigin[o], string(d.Body))
			// The entries name the sites the message passed, the last
			// one it came from first.
			var want []map[string]string
			for h := 1; h <= hops(o, x); h++ {
				want = append(want, fedExchangeHop(sites[(x+h)%k], "fed.x"))
			}
			fedExpectHops(t, d, want...)
		}
		for o, src := range sites {
			var want []string
			if reaches(o, x) {
				want = append(fedNumbered("m-"+src.cluster, 0, n), "fence-"+src.cluster+"-0")
			}
			if !slices.Equal(byOrigin[o], want) {
				t.Fatalf("%s got from %s %d messages, want %d once each in order: %v", s.cluster, src.cluster, len(byOrigin[o]), len(want), byOrigin[o])
			}
		}
	}
}

// --- Scenario 3: queue federation, down <- up ---

// fedQueueScenario federates down's fed.q from up's. The link consumes
// from up's queue only while down's has a consumer (and no messages
// ready), with a lower priority (-1) than up's own consumers: so what
// up's queue holds reaches down's consumer, in order; an up consumer
// with room takes all that is published after; one at its prefetch
// limit leaves the rest to the link.
func fedQueueScenario(t *testing.T, down, up *fedSite) {
	dch, uch := down.channel(), up.channel()
	fedDeclare(t, uch, "", "fed.q")
	const n = 20
	fedPublish(t, uch, "", "fed.q", fedNumbered("held", 0, n), nil)
	down.setUpstream("up", map[string]any{"uri": up.url(), "reconnect-delay": 1})
	down.setPolicy("fed", `^fed\.`, "queues", map[string]any{"federation-upstream": "up"})
	fedDeclare(t, dch, "", "fed.q")
	l := down.waitLink("queue", "fed.q", "up", "running")
	if l.UpstreamQueue != "fed.q" || l.URI != up.shownURI() {
		t.Fatalf("link %+v", l)
	}
	if c := count(t, uch, "fed.q"); c != n {
		t.Fatalf("up's queue holds %d messages before down has a consumer, want %d", c, n)
	}

	d := consume(t, dch, "fed.q", true)
	for i := range n {
		m := receive(t, d)
		if string(m.Body) != fmt.Sprint("held-", i) || m.RoutingKey != "fed.q" || m.MessageId != string(m.Body) {
			t.Fatalf("delivery %d is %q (exchange %q key %q), want held-%d", i, m.Body, m.Exchange, m.RoutingKey, i)
		}
		if m.Headers["x-original-exchange"] != "" || m.Headers["x-original-routing-key"] != "fed.q" {
			t.Fatalf("%q: headers %v", m.Body, m.Headers)
		}
		fedExpectHops(t, m, map[string]string{"uri": up.shownURI(), "queue": "fed.q", "redelivered": "false", "visit-count": "1"})
	}
	waitFor(t, "up's queue emptied by the link's acks", func() bool { return count(t, uch, "fed.q") == 0 })

	// A consumer on up with room for everything takes everything: each
	// message goes to one consumer, so the link gets none, and the marker
	// published once up's consumer is gone is down's next delivery.
	uc, err := amqp.Dial(up.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	ucch, err := uc.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ud, err := ucch.Consume("fed.q", "up-consumer", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fedPublish(t, uch, "", "fed.q", fedNumbered("roomy", 0, n), nil)
	if got := bodies(t, ud, n); !slices.Equal(got, fedNumbered("roomy", 0, n)) {
		t.Fatalf("up's own consumer got %v", got)
	}
	if err := ucch.Cancel("up-consumer", false); err != nil {
		t.Fatal(err)
	}
	fedPublish(t, uch, "", "fed.q", []string{"after-roomy"}, nil)
	if m := receive(t, d); string(m.Body) != "after-roomy" {
		t.Fatalf("down got %q, want nothing before the marker", m.Body)
	}

	// An up consumer at its prefetch limit is blocked: the rest goes to
	// the link, in order.
	const prefetch = 3
	if err := ucch.Qos(prefetch, 0, false); err != nil {
		t.Fatal(err)
	}
	ud, err = ucch.Consume("fed.q", "up-limited", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fedPublish(t, uch, "", "fed.q", fedNumbered("limited", 0, n), nil)
	if got := bodies(t, ud, prefetch); !slices.Equal(got, fedNumbered("limited", 0, prefetch)) {
		t.Fatalf("up's own consumer got %v, want the first %d", got, prefetch)
	}
	if got := bodies(t, d, n-prefetch); !slices.Equal(got, fedNumbered("limited", prefetch, n)) {
		t.Fatalf("down got %v, want the rest in order", got)
	}
}

// --- Scenario 4: the links API ---

// fedTimestamp is RabbitMQ's timestamp format: the hour unpadded.
var fedTimestamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{1,2}:\d{2}:\d{2}$`)

// fedLinksScenario checks /api/federation-links: a link per federated
// exchange or queue and upstream, with its fields; an upstream nothing
// listens on shows status error with the reason; the restart route
// restarts a link by id and node; what a link makes on its upstream,
// named as RabbitMQ names it; an upstream's parameters where they show.
func fedLinksScenario(t *testing.T, down, up *fedSite) {
	dch, uch := down.channel(), up.channel()
	for _, ch := range []*amqp.Channel{dch, uch} {
		fedDeclare(t, ch, "direct", "fed.x")
		fedDeclare(t, ch, "", "fed.q")
	}
	fedDeclare(t, dch, "", "in")
	bind(t, dch, "in", "k", "fed.x", nil)
	dead, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	down.setUpstream("up", map[string]any{"uri": up.url(), "expires": 3600000, "message-ttl": 600000, "max-hops": 2,
		"prefetch-count": 77, "ack-mode": "on-confirm", "reconnect-delay": 1})
	down.setUpstream("dead", map[string]any{"uri": "amqp://guest:guest@" + deadAddr + "/" + down.v(), "reconnect-delay": 1})
	down.setUpstreamSet("both", map[string]any{"upstream": "up"}, map[string]any{"upstream": "dead"})
	down.setPolicy("fed", `^fed\.`, "all", map[string]any{"federation-upstream-set": "both"})

	x := down.waitLink("exchange", "fed.x", "up", "running")
	q := down.waitLink("queue", "fed.q", "up", "running")
	for _, l := range []fedLink{x, q} {
		if l.VHost != down.vhost || l.URI != up.shownURI() || l.Node != down.node || l.ID == "" ||
			!fedTimestamp.MatchString(l.Timestamp) || l.LocalConnection == "" || l.Error != nil {
			t.Fatalf("link %+v", l)
		}
	}
	if x.Exchange != "fed.x" || x.UpstreamExchange != "fed.x" || x.Queue != "" {
		t.Fatalf("exchange link %+v", x)
	}
	if q.Queue != "fed.q" || q.UpstreamQueue != "fed.q" || q.ConsumerTag != "federation-link-up" || q.Exchange != "" {
		t.Fatalf("queue link %+v", q)
	}
	deadURI := "amqp://" + deadAddr + "/" + down.v()
	var downIDs []string
	for _, kind := range []string{"exchange", "queue"} {
		name := map[string]string{"exchange": "fed.x", "queue": "fed.q"}[kind]
		l := down.waitLink(kind, name, "dead", "error")
		if reason := fmt.Sprint(l.Error); l.Error == nil || !strings.Contains(reason, "refused") || l.URI != deadURI || l.ID == "" {
			t.Fatalf("the link to a closed port: %+v", l)
		}
		downIDs = append(downIDs, l.ID)
	}
	if x.ID == q.ID || slices.Contains(downIDs, x.ID) || slices.Contains(downIDs, q.ID) || downIDs[0] == downIDs[1] {
		t.Fatalf("link ids %s %s %v are not distinct", x.ID, q.ID, downIDs)
	}
	if ls := down.links(); len(ls) != 4 {
		t.Fatalf("%d links, want 4: %v", len(ls), ls)
	}
	// state/down lists the links not running (all vhosts': RabbitMQ
	// 3.10.8 has no route for one vhost's).
	waitFor(t, "state/down listing the two links in error", func() bool {
		var ls []fedLink
		down.getJSON("/api/federation-links/state/down", &ls)
		ls = slices.DeleteFunc(ls, func(l fedLink) bool { return l.VHost != down.vhost })
		return len(ls) == 2 && ls[0].Upstream == "dead" && ls[1].Upstream == "dead"
	})

	// On up, the exchange link has a queue, named after down's exchange
	// and cluster, bound to an internal exchange of that name with the
	// suffix A or B (it alternates as the link restarts), which fed.x
	// feeds with down's binding keys.
	qname := "federation: fed.x -> " + down.cluster
	var uq struct {
		Durable    bool
		AutoDelete bool `json:"auto_delete"`
		Arguments  map[string]any
	}
	up.getJSON("/api/queues/"+up.v()+"/"+esc(qname), &uq)
	if !uq.Durable || uq.AutoDelete || !fedSameJSON(uq.Arguments, map[string]any{
		"x-expires": 3600000, "x-message-ttl": 600000, "x-internal-purpose": "federation"}) {
		t.Fatalf("up's queue %q: %+v", qname, uq)
	}
	var xname string
	for _, b := range up.bindings() {
		if b.Destination == qname && b.DestinationType == "queue" && b.Source != "" {
			xname = b.Source
		}
	}
	if xname != qname+" A" && xname != qname+" B" {
		t.Fatalf("up's queue %q is bound from %q, want an exchange named after it with A or B; bindings %v", qname, xname, up.bindings())
	}
	var ux struct {
		Type       string
		Durable    bool
		AutoDelete bool `json:"auto_delete"`
		Internal   bool
		Arguments  map[string]any
	}
	up.getJSON("/api/exchanges/"+up.v()+"/"+esc(xname), &ux)
	if ux.Type != "x-federation-upstream" || !ux.Durable || !ux.AutoDelete || !ux.Internal ||
		!fedSameJSON(ux.Arguments, map[string]any{"x-downstream-name": down.cluster, "x-downstream-vhost": down.vhost,
			"x-internal-purpose": "federation", "x-max-hops": 2}) {
		t.Fatalf("up's exchange %q: %+v", xname, ux)
	}
	up.waitLinkBound("fed.x", "k", true)
	for _, b := range up.bindings() {
		if b.Source == "fed.x" && (b.Destination != xname || b.DestinationType != "exchange" || b.RoutingKey != "k") {
			t.Fatalf("up's fed.x has a binding %+v", b)
		}
	}

	// The consumers the links hold on up: the exchange link's on its
	// queue, with the upstream's prefetch-count; the queue link's on
	// fed.q, at priority -1, only while down's fed.q has a consumer.
	type consumer struct {
		Queue         struct{ Name string }
		ConsumerTag   string `json:"consumer_tag"`
		PrefetchCount int    `json:"prefetch_count"`
		AckRequired   bool   `json:"ack_required"`
		Arguments     map[string]any
	}
	consumers := func() []consumer {
		var cs []consumer
		up.getJSON("/api/consumers/"+up.v(), &cs)
		return cs
	}
	on := func(queue string) (consumer, bool) {
		for _, c := range consumers() {
			if c.Queue.Name == queue {
				return c, true
			}
		}
		return consumer{}, false
	}
	if c, ok := on("fed.q"); ok {
		t.Fatalf("the queue link consumes with no consumer downstream: %+v", c)
	}
	dq, err := dch.Consume("fed.q", "down-consumer", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the links' consumers on up", func() bool {
		_, x := on(qname)
		_, q := on("fed.q")
		return x && q
	})
	if c, _ := on(qname); c.PrefetchCount != 77 || !c.AckRequired {
		t.Fatalf("the exchange link's consumer on up: %+v", c)
	}
	if c, _ := on("fed.q"); c.ConsumerTag != "federation-link-up" || c.PrefetchCount != 77 || !c.AckRequired ||
		!fedSameJSON(c.Arguments, map[string]any{"x-priority": -1}) {
		t.Fatalf("the queue link's consumer on up: %+v", c)
	}
	fedPublish(t, uch, "", "fed.q", []string{"via-queue-link"}, nil)
	if m := receive(t, dq); string(m.Body) != "via-queue-link" {
		t.Fatalf("down's fed.q got %q", m.Body)
	}
	if err := dch.Cancel("down-consumer", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the queue link's consumer on up gone with down's", func() bool { _, ok := on("fed.q"); return !ok })

	// Restart: by id and node; 404 for an id no link has.
	d := consume(t, dch, "in", true)
	down.expect("DELETE", "/api/federation-links/vhost/"+down.v()+"/"+esc(x.ID)+"/"+esc(x.Node)+"/restart", "", 204)
	status, body := fedCall(t, down.admin, "DELETE", "/api/federation-links/vhost/"+down.v()+"/nosuchid/"+esc(x.Node)+"/restart", "")
	if status != 404 || body != notFoundBody {
		t.Fatalf("restarting a link no one has: %d %s", status, body)
	}
	// The restarted link runs again, on a connection of its own, with
	// the same id.
	var again fedLink
	waitFor(t, "the exchange link running again on a new connection", func() bool {
		var ok bool
		again, ok = down.link("exchange", "fed.x", "up")
		return ok && again.Status == "running" && again.LocalConnection != x.LocalConnection
	})
	if again.ID != x.ID {
		t.Fatalf("the restarted link's id is %s, was %s", again.ID, x.ID)
	}
	up.waitLinkBound("fed.x", "k", true)
	fedPublish(t, uch, "fed.x", "k", []string{"after-restart"}, nil)
	if m := receive(t, d); string(m.Body) != "after-restart" {
		t.Fatalf("after the restart down got %q", m.Body)
	}

	// Deleting an upstream ends its links.
	down.expect("DELETE", "/api/parameters/federation-upstream/"+down.v()+"/dead", "", 204)
	waitFor(t, "the dead upstream's links gone", func() bool {
		for _, l := range down.links() {
			if l.Upstream == "dead" {
				return false
			}
		}
		return true
	})
	if ls := down.links(); len(ls) != 2 {
		t.Fatalf("links after deleting an upstream: %v", ls)
	}
}

// --- Warren sites ---

func TestFederationExchange(t *testing.T) {
	n := warrenFedNodes(t, 2)
	s := fedSites(t, "fed-exchange", n...)
	fedExchangeScenario(t, s[0], s[1])
}

func TestFederationRing(t *testing.T) {
	n := warrenFedNodes(t, 3)
	for _, hops := range []int{1, 3} {
		t.Run(fmt.Sprint("max-hops-", hops), func(t *testing.T) {
			fedRingScenario(t, fedSites(t, fmt.Sprint("fed-ring-", hops), n...), hops, 200)
		})
	}
}

func TestFederationQueue(t *testing.T) {
	n := warrenFedNodes(t, 2)
	s := fedSites(t, "fed-queue", n...)
	fedQueueScenario(t, s[0], s[1])
}

func TestFederationLinks(t *testing.T) {
	n := warrenFedNodes(t, 2)
	s := fedSites(t, "fed-links", n...)
	fedLinksScenario(t, s[0], s[1])
}

// --- The same scenarios on RabbitMQ 3.10.8 nodes ---

// TestFederationReference runs every scenario between three private
// RabbitMQ nodes, started at once, each scenario in vhosts of its own.
func TestFederationReference(t *testing.T) {
	n := rabbitFedNodes(t, 3)
	t.Run("Exchange", func(t *testing.T) {
		s := fedSites(t, "fed-exchange", n[0], n[1])
		fedExchangeScenario(t, s[0], s[1])
	})
	for _, hops := range []int{1, 3} {
		t.Run(fmt.Sprint("Ring/max-hops-", hops), func(t *testing.T) {
			fedRingScenario(t, fedSites(t, fmt.Sprint("fed-ring-", hops), n...), hops, 200)
		})
	}
	t.Run("Queue", func(t *testing.T) {
		s := fedSites(t, "fed-queue", n[0], n[1])
		fedQueueScenario(t, s[0], s[1])
	})
	t.Run("Links", func(t *testing.T) {
		s := fedSites(t, "fed-links", n[0], n[1])
		fedLinksScenario(t, s[0], s[1])
	})
}

// Each ack mode moves every message, in order: on-confirm acks upstream
// once this broker confirmed, on-publish once published, no-ack never.
func TestFederationAckModes(t *testing.T) {
	n := warrenFedNodes(t, 2)
	for _, mode := range []string{"on-confirm", "on-publish", "no-ack"} {
		t.Run(mode, func(t *testing.T) {
			s := fedSites(t, "fed-ack-"+mode, n...)
			down, up := s[0], s[1]
			dch, uch := down.channel(), up.channel()
			fedDeclare(t, uch, "topic", "fed.x")
			fedDeclare(t, dch, "topic", "fed.x")
			fedDeclare(t, dch, "", "in")
			bind(t, dch, "in", "k.#", "fed.x", nil)
			down.setUpstream("up", map[string]any{"uri": up.url(), "ack-mode": mode, "prefetch-count": 10})
			down.setPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream": "up"})
			down.waitLink("exchange", "fed.x", "up", "running")
			up.waitLinkBound("fed.x", "k.#", true)
			bodies := fedNumbered("m", 0, 500)
			fedPublish(t, uch, "fed.x", "k.a", bodies, nil)
			d := consume(t, dch, "in", true)
			for _, want := range bodies {
				if m := receive(t, d); string(m.Body) != want {
					t.Fatalf("got %q, want %q", m.Body, want)
				}
			}
		})
	}
}

// A downstream queue that refuses (full, reject-publish) makes the link
// stop with the reason and try again after its reconnect-delay: nothing
// is lost, the refused messages wait upstream, and they arrive once the
// queue has room.
func TestFederationRefusingDownstream(t *testing.T) {
	n := warrenFedNodes(t, 2)
	s := fedSites(t, "fed-refuse", n...)
	down, up := s[0], s[1]
	dch, uch := down.channel(), up.channel()
	fedDeclare(t, uch, "direct", "fed.x")
	fedDeclare(t, dch, "direct", "fed.x")
	if _, err := dch.QueueDeclare("small", true, false, false, false, amqp.Table{"x-max-length": int32(10), "x-overflow": "reject-publish"}); err != nil {
		t.Fatal(err)
	}
	bind(t, dch, "small", "k", "fed.x", nil)
	down.setUpstream("up", map[string]any{"uri": up.url(), "reconnect-delay": 0.2, "prefetch-count": 5})
	down.setPolicy("fed", `^fed\.`, "exchanges", map[string]any{"federation-upstream": "up"})
	down.waitLink("exchange", "fed.x", "up", "running")
	up.waitLinkBound("fed.x", "k", true)
	bodies := fedNumbered("m", 0, 50)
	fedPublish(t, uch, "fed.x", "k", bodies, nil)
	l := down.waitLink("exchange", "fed.x", "up", "error")
	if reason := fmt.Sprint(l.Error); !strings.Contains(reason, "refused") {
		t.Fatalf("the link stopped for %q", reason)
	}
	// Each once: a refused message goes back upstream and comes again,
	// one the queue took is acked upstream, never both.
	var got []string
	waitFor(t, "all 50 through the small queue", func() bool {
		got = append(got, drain(t, dch, "small")...)
		return len(got) >= len(bodies)
	})
	slices.Sort(got)
	want := slices.Clone(bodies)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the small queue took %v, want each of %v once", got, want)
	}
}

// A RabbitMQ definitions file with federation upstreams, an upstream set
// (a list, not an object) and a federation policy imports, links, and
// exports again as it came; a bad upstream is refused naming its key.
func TestFederationInDefinitions(t *testing.T) {
	m := startWarrenMgmt(t)
	up := startWarren(t)
	_, uch := channel(t, up)
	fedDeclare(t, uch, "fanout", "fed.d")
	_, ch := m.channel()
	fedDeclare(t, ch, "fanout", "fed.d")
	imp := fmt.Sprintf(`{"parameters": [
		{"vhost": %[1]q, "component": "federation-upstream", "name": "east", "value": {"uri": %[2]q, "max-hops": 2}},
		{"vhost": %[1]q, "component": "federation-upstream-set", "name": "both", "value": [{"upstream": "east"}, {"upstream": "west", "prefetch-count": 5}]}],
	 "policies": [{"vhost": %[1]q, "name": "fed", "pattern": "^fed\\.", "apply-to": "exchanges", "priority": 0,
		"definition": {"federation-upstream-set": "both"}}]}`, m.vhost, up.url)
	if r := m.call("POST", "/api/definitions", imp); r.status != 204 && r.status != 201 {
		t.Fatalf("import: %d %s", r.status, r.body)
	}
	waitFor(t, "the imported link running", func() bool {
		var ls []fedLink
		m.expect("GET", "/api/federation-links/"+m.v(), "", 200).json(t, &ls)
		return len(ls) == 1 && ls[0].Status == "running" && ls[0].Upstream == "east"
	})
	var defs struct {
		Parameters []struct {
			VHost, Component, Name string
			Value                  any
		}
	}
	m.expect("GET", "/api/definitions", "", 200).json(t, &defs)
	got := map[string]string{}
	for _, p := range defs.Parameters {
		if p.VHost == m.vhost {
			b, _ := json.Marshal(p.Value)
			got[p.Component+"/"+p.Name] = string(b)
		}
	}
	if got["federation-upstream-set/both"] != `[{"upstream":"east"},{"prefetch-count":5,"upstream":"west"}]` ||
		got["federation-upstream/east"] != fmt.Sprintf(`{"max-hops":2,"uri":%q}`, up.url) {
		t.Fatalf("exported parameters %v", got)
	}
	bad := fmt.Sprintf(`{"parameters":[{"vhost":%q,"component":"federation-upstream","name":"x","value":{"max-hops":1}}]}`, m.vhost)
	if r := m.call("POST", "/api/definitions", bad); r.status != 400 || !strings.Contains(r.body, `Key \"uri\" not found in x`) {
		t.Fatalf("import of a bad upstream: %d %s", r.status, r.body)
	}
}

// An upstream URI with no host is this broker, reached as the broker
// itself: whoever sets one may only name a vhost they may use, as for
// shovels (RabbitMQ 3.10.8 does not check).
func TestFederationUpstreamOnThisBrokerIsChecked(t *testing.T) {
	m := startWarrenMgmt(t)
	other := uniq(t, "vh-other")
	m.expect("PUT", "/api/vhosts/"+esc(other), "", 201)
	t.Cleanup(func() { m.call("DELETE", "/api/vhosts/"+esc(other), "") })
	m.addUser("fpm", "fpm", "policymaker", m.vhost)
	put := func(name, uri string) response {
		return m.callAs("fpm", "fpm", "PUT", "/api/parameters/federation-upstream/"+m.v()+"/"+name, `{"value":{"uri":"`+uri+`"}}`, nil)
	}
	if r := put("sneaky", "amqp:///"+esc(other)); r.status != 400 || !strings.Contains(r.body, "may not connect to vhost") {
		t.Fatalf("an upstream in a vhost the user may not use: %d %s", r.status, r.body)
	}
	for name, uri := range map[string]string{"own": "amqp:///" + m.v(), "default": "amqp://", "remote": "amqp://u:p@elsewhere/" + esc(other)} {
		if r := put(name, uri); r.status != 201 {
			t.Fatalf("%s (%s): %d %s", name, uri, r.status, r.body)
		}
	}
}
