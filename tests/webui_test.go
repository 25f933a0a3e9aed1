package tests

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/topology"
)

// The web UI (core/admin/webui) in a real browser: Debian's chromium,
// headless, driven over the DevTools protocol by chromedp against an
// in-process Warren. Each step waits for an element the UI marks when it
// has its answer (data-state="loaded", a status line's data-kind), never
// for a fixed time.
//
// Without a chromium the test skips and says where it looked; .ci/run
// installs Debian's package when it can.

// xssName is a queue, exchange, vhost... name that would run script if the
// UI ever made HTML of it.
const xssName = `<img src=x onerror=alert(1)>`

// uiFixture is what TestWebUI's steps share: one browser tab, logged in
// once, against one broker, in order.
type uiFixture struct {
	br   *browser
	s    *server
	ch   *amqp.Channel
	base string // the admin listener's URL
}

func TestWebUI(t *testing.T) {
	br := startBrowser(t)
	s := startWarren(t, func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		// Samples every second give the overview's charts some history
		// within the test's few seconds.
		c.Admin.StatsInterval = config.Duration(time.Second)
	})
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	_, ch := channel(t, s)
	f := &uiFixture{br: br, s: s, ch: ch, base: "http://" + s.b.AdminAddr()}
	for _, q := range []string{"ui-orders", "ui-events", xssName} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		if err := ch.Publish("", "ui-events", false, false, amqp.Publishing{Body: []byte("event")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ch.Consume("ui-orders", "ui-consumer", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	if !t.Run("login", f.logIn) {
		return
	}
	t.Run("overview", f.overview)
	t.Run("every page renders", f.everyPageRenders)
	t.Run("vhost selector", f.vhostSelector)
	t.Run("queue page publish get purge", f.queuePagePublishGetPurge)
	t.Run("add a queue", f.addQueue)
	t.Run("dom refuses script", f.domRefusesScript)
	t.Run("exchange page bind and publish", f.exchangePageBindAndPublish)
	t.Run("users vhosts permissions", f.usersVhostsPermissions)
	t.Run("close a connection", f.closeConnection)
	t.Run("policy", f.policy)
	t.Run("cluster page", f.clusterPage)
	t.Run("refresh interval", f.refreshInterval)
	t.Run("plugin", f.plugin)
	t.Run("names are text", f.namesAreText)
	t.Run("definitions", f.definitions)
	t.Run("a management user", f.managementUser)
	t.Run("a user without permission on a queue", f.refusedUser)
	t.Run("overview screenshot", f.overviewScreenshot)

	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

func (f *uiFixture) logIn(t *testing.T) {
	f.br.do(t, "bad password",
		chromedp.Navigate(f.base+"/"),
		waitVisible(`#login`),
		sendKeys(`#login-user`, "guest"),
		sendKeys(`#login-password`, "wrong"),
		click(`#login-submit`),
		waitVisible(`#login-error[data-kind="error"]`),
	)
	if reason := f.br.text(t, `#login-error`); !strings.Contains(reason, "Login failed") {
		t.Errorf("bad password shows %q, want the API's Login failed", reason)
	}
	f.br.do(t, "good password",
		setValue(`#login-password`, ""),
		sendKeys(`#login-password`, "guest"),
		click(`#login-submit`),
		waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
	)
	if who := f.br.text(t, `#whoami`); who != "guest" {
		t.Errorf("logged in as %q, want guest", who)
	}
}

func (f *uiFixture) overview(t *testing.T) {
	f.br.do(t, "overview charts",
		waitVisible(`#chart-rates[data-drawn]`),
		waitVisible(`#chart-depth[data-drawn]`),
	)
	tiles := f.br.text(t, `#totals`)
	for _, want := range []string{"Queues", "Consumers", "Messages"} {
		if !strings.Contains(tiles, want) {
			t.Errorf("overview tiles %q lack %s", tiles, want)
		}
	}
}

func (f *uiFixture) everyPageRenders(t *testing.T) {
	for _, p := range []struct{ nav, ready string }{
		{"#nav-connections", `#connections[data-state="loaded"]`},
		{"#nav-channels", `#channels[data-state="loaded"]`},
		{"#nav-exchanges", `#exchanges[data-state="loaded"]`},
		{"#nav-queues", `#queues[data-state="loaded"]`},
		{"#nav-consumers", `#consumers[data-state="loaded"]`},
		{"#nav-users", `#users[data-state="loaded"]`},
		{"#subnav-vhosts", `#vhosts[data-state="loaded"]`},
		{"#subnav-permissions", `#permissions[data-state="loaded"]`},
		{"#subnav-limits", `#user-limits[data-state="loaded"]`},
		{"#subnav-policies", `#policies[data-state="loaded"]`},
		{"#subnav-cluster", `#feature-flags[data-state="loaded"]`},
		{"#nav-plugins", `#plugins[data-state="loaded"]`},
		{"#nav-definitions", `#page[data-page="definitions"][data-loaded="true"]`},
		{"#nav-overview", `#page[data-page="overview"][data-loaded="true"]`},
	} {
		f.br.do(t, p.nav, click(p.nav), waitVisible(p.ready))
		f.br.screenshot(t, "webui-"+strings.TrimPrefix(strings.TrimPrefix(p.nav, "#nav-"), "#subnav-")+".png")
	}
	f.br.do(t, "connections", click("#nav-connections"), waitVisible(`#connections[data-state="loaded"]`))
	if conns := f.br.text(t, `#connections tbody`); !strings.Contains(conns, "guest") {
		t.Errorf("connections table %q shows no guest connection", conns)
	}
	f.br.do(t, "consumers", click("#nav-consumers"), waitVisible(`#consumers[data-state="loaded"]`))
	if consumers := f.br.text(t, `#consumers tbody`); !strings.Contains(consumers, "ui-consumer") || !strings.Contains(consumers, "ui-orders") {
		t.Errorf("consumers table %q lacks ui-consumer on ui-orders", consumers)
	}
	// The detail pages: a connection's (from its list), a user's, a
	// vhost's.
	f.br.do(t, "a connection's page", click("#nav-connections"), waitVisible(`#connections[data-state="loaded"]`),
		click(`#connections tbody a`),
		waitVisible(`#page[data-page="connection"][data-loaded="true"]`))
	if d := f.br.text(t, `#connection-details`); !strings.Contains(d, "guest") || !strings.Contains(d, "AMQP") {
		t.Errorf("a connection's details %q lack its user and protocol", d)
	}
	f.br.do(t, "its channels", waitVisible(`#connection-channels-table`))
	f.br.screenshot(t, "webui-connection.png")
	f.br.do(t, "a channel's page", click(`#connection-channels-table a`),
		waitVisible(`#page[data-page="channel"][data-loaded="true"]`))
	if d := f.br.text(t, `#channel-consumers-table`); !strings.Contains(d, "ui-orders") || !strings.Contains(d, "ui-consumer") {
		t.Errorf("the channel's consumers %q lack ui-consumer on ui-orders", d)
	}
	if d := f.br.text(t, `#channel-details`); !strings.Contains(d, "guest") {
		t.Errorf("the channel's details %q lack its user", d)
	}
	f.br.screenshot(t, "webui-channel.png")
	// A node's page, from the overview's link.
	f.br.do(t, "a node's page", click("#nav-overview"), waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
		click(`#node a`), waitVisible(`#page[data-page="node"][data-loaded="true"]`))
	if d := f.br.text(t, `#node-memory-table`); !strings.Contains(d, "queue_messages") || !strings.Contains(d, "%") {
		t.Errorf("the node's memory %q lacks its categories", d)
	}
	for _, id := range []string{"#node-fds", "#node-sockets"} {
		if d := f.br.text(t, id); !strings.Contains(d, " of ") {
			t.Errorf("%s shows %q, want a figure of its limit", id, d)
		}
	}
	if d := f.br.text(t, `#node-store-table`); !strings.Contains(d, "Commits") {
		t.Errorf("the node's store figures %q", d)
	}
	f.br.screenshot(t, "webui-node.png")
	f.br.goTo(t, "user", "guest")
	f.br.do(t, "a user's page", waitVisible(`#page[data-page="user"][data-loaded="true"]`))
	if tags := f.br.text(t, `#user-tags`); tags != "administrator" {
		t.Errorf("guest's tags show %q", tags)
	}
	if ps := f.br.text(t, `#user-permissions-table`); !strings.Contains(ps, ".*") {
		t.Errorf("guest's permissions show %q", ps)
	}
	f.br.goTo(t, "vhost", "/")
	f.br.do(t, "a vhost's page", waitVisible(`#page[data-page="vhost"][data-loaded="true"]`))
	if ps := f.br.text(t, `#vhost-permissions-table`); !strings.Contains(ps, "guest") {
		t.Errorf("the vhost's permissions show %q", ps)
	}
	f.br.goTo(t, "connection", "no-such-connection")
	f.br.do(t, "a missing connection", waitVisible(`#page-error[data-kind="error"]`))
	if m := f.br.text(t, `#page-error`); !strings.Contains(m, "404") {
		t.Errorf("a missing connection's page says %q, want the API's 404", m)
	}
	f.br.goTo(t, "queue", "/", "no-such-queue")
	f.br.do(t, "a missing queue", waitVisible(`#page-error[data-kind="error"]`))
	if m := f.br.text(t, `#page-error`); !strings.Contains(m, "404") {
		t.Errorf("a missing queue's page says %q, want the API's 404", m)
	}
	f.br.goTo(t, "exchange", "/", "amq.topic")
	f.br.do(t, "exchange page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
	f.br.goTo(t, "exchange", "/", "")
	f.br.do(t, "default exchange page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
	if bs := f.br.text(t, `#exchange-source-table tbody`); !strings.Contains(bs, "ui-events") {
		t.Errorf("the default exchange's bindings %q lack ui-events", bs)
	}
}

// The vhost chosen at the top limits the lists, through
// /api/queues/{vhost}: a vhost name with a slash and a space must
// survive the trip.
func (f *uiFixture) vhostSelector(t *testing.T) {
	v, err := f.s.b.AddVHost("team a/b")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.DeclareQueue(topology.QueueDef{Name: "team-queue"}, false); err != nil {
		t.Fatal(err)
	}
	f.br.goTo(t, "queues")
	f.br.do(t, "choose the vhost",
		waitVisible(`#queues[data-state="loaded"]`),
		pollJS(`[...document.querySelectorAll("#vhost-select option")].some((o) => o.value === "team a/b")`),
		setValue(`#vhost-select`, "team a/b"),
		pollJS(`document.querySelector("#queues-info") && document.querySelector("#queues-info").textContent.includes("· 1 items")`),
	)
	if q := f.br.text(t, `#queues tbody`); !strings.Contains(q, "team-queue") || strings.Contains(q, "ui-events") {
		t.Errorf("queues of vhost team a/b: %q", q)
	}
	f.br.do(t, "the queue's page",
		click(`#queues tbody a`),
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
	)
	if d := f.br.text(t, `#queue-details`); !strings.Contains(d, "team a/b") {
		t.Errorf("team-queue's details %q lack its vhost", d)
	}
	f.br.do(t, "all vhosts again",
		setValue(`#vhost-select`, ""),
		pollJS(`!sessionStorage.getItem("warren.vhost")`),
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
	)
}

func (f *uiFixture) queuePagePublishGetPurge(t *testing.T) {
	const body = "hello from the browser"
	f.br.goTo(t, "queue", "/", "ui-events")
	f.br.do(t, "publish",
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		waitVisible(`#queue-chart-depth[data-drawn]`),
		setValue(`#queue-publish-payload`, body),
		click(`#queue-publish-submit`),
		waitVisible(`#queue-publish-msg[data-kind="ok"]`),
	)
	if n := queueDepth(t, f.ch, "ui-events"); n != 6 {
		t.Fatalf("after publishing from the UI ui-events holds %d, want 6", n)
	}
	// Six small messages and their bookkeeping (about 200 bytes each,
	// core/queue's entryMemory): a figure in bytes or KiB, once the page
	// has shown the queue again after the publish. Both figures are read
	// in one evaluation: the page refreshes the queue on a timer and is
	// empty while it reloads, so a second read could catch it between.
	shown := value(t, f.br, "the queue's memory and utilisation shown", chromedp.Poll[[]string](`(() => {
		const m = document.querySelector("#queue-memory").textContent, u = document.querySelector("#queue-utilisation").textContent;
		return /^[0-9.]+ (B|KiB)$/.test(m) && u !== "" ? [m, u] : false;
	})()`))
	if len(shown) != 2 {
		t.Fatalf("the page showed %q", shown)
	}
	if m := shown[0]; !regexp.MustCompile(`^[0-9.]+ (B|KiB)$`).MatchString(m) {
		t.Errorf("ui-events' memory shows %q, want what its messages take", m)
	}
	if u := shown[1]; u != "0%" {
		t.Errorf("ui-events, without consumers, shows a consumer utilisation of %q, want 0%% as RabbitMQ", u)
	}
	f.br.do(t, "get",
		setValue(`#queue-get-ackmode`, "ack_requeue_false"),
		setValue(`#queue-get-count`, "6"),
		click(`#queue-get-submit`),
		waitVisible(`#queue-get-msg[data-kind="ok"]`),
	)
	f.br.screenshot(t, "webui-queue.png")
	if payload := f.br.text(t, `#get-results .message:last-child pre.payload`); payload != body {
		t.Errorf("the sixth message got is %q, want %q", payload, body)
	}
	if n := queueDepth(t, f.ch, "ui-events"); n != 0 {
		t.Fatalf("after getting with ack ui-events holds %d, want 0", n)
	}
	for i := 0; i < 3; i++ {
		if err := f.ch.Publish("", "ui-events", false, false, amqp.Publishing{Body: []byte("again")}); err != nil {
			t.Fatal(err)
		}
	}
	f.br.do(t, "get with requeue",
		setValue(`#queue-get-ackmode`, "ack_requeue_true"),
		setValue(`#queue-get-count`, "1"),
		click(`#queue-get-submit`),
		pollJS(`document.querySelector("#queue-get-msg").textContent === "Got 1 message(s)."`),
	)
	if n := queueDepth(t, f.ch, "ui-events"); n != 3 {
		t.Fatalf("a get that requeues left %d in ui-events, want 3", n)
	}
	f.br.do(t, "purge",
		click(`#queue-purge`),
		click(`#queue-purge`),
		waitVisible(`#queue-actions-msg[data-kind="ok"]`),
	)
	if n := queueDepth(t, f.ch, "ui-events"); n != 0 {
		t.Fatalf("after purging from the UI ui-events holds %d, want 0", n)
	}

	if _, err := f.ch.QueueDeclare("ui-doomed", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	f.br.goTo(t, "queue", "/", "ui-doomed")
	f.br.do(t, "delete",
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		click(`#queue-delete`),
		click(`#queue-delete`),
		waitVisible(`#queues[data-state="loaded"]`),
	)
	if status, _ := adminGet(t, f.base+"/api/queues/%2F/ui-doomed", "guest", "guest"); status != http.StatusNotFound {
		t.Errorf("the queue deleted in the UI answers %d, want 404", status)
	}
}

func (f *uiFixture) addQueue(t *testing.T) {
	f.br.goTo(t, "queues")
	f.br.do(t, "bad arguments",
		waitVisible(`#queues[data-state="loaded"]`),
		sendKeys(`#add-queue-name`, "ui-added"),
		setValue(`#add-queue-arguments`, `{"x-max-length": `),
		click(`#add-queue-submit`),
		waitVisible(`#add-queue-msg[data-kind="error"]`),
	)
	if m := f.br.text(t, `#add-queue-msg`); !strings.Contains(m, "Arguments") {
		t.Errorf("bad JSON arguments show %q, want the field named", m)
	}
	f.br.do(t, "add",
		setValue(`#add-queue-arguments`, `{"x-max-length": 3}`),
		click(`#add-queue-submit`),
		waitVisible(`#add-queue-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#queues tbody").textContent.includes("ui-added")`),
	)
	var q struct {
		Durable   bool           `json:"durable"`
		Arguments map[string]any `json:"arguments"`
	}
	apiGet(t, f.base+"/api/queues/%2F/ui-added", &q)
	if !q.Durable || q.Arguments["x-max-length"] != float64(3) {
		t.Errorf("the queue added in the UI: %+v", q)
	}
}

// dom.js, through which every element is made, refuses what would turn
// data into script.
func (f *uiFixture) domRefusesScript(t *testing.T) {
	refused := value(t, f.br, "dom.h", chromedp.Evaluate[[]bool](`import("/ui/dom.js").then(({ h }) => [
		() => h("a", { onclick: "alert(1)" }),
		() => h("a", { href: "javascript:alert(1)" }),
		() => h("div", { innerHTML: "<img src=x>" }),
		() => h("div", { style: "background:url(x)" }),
	].map((f) => { try { f(); return false; } catch { return true; } }))`, chromedp.EvalAwaitPromise))
	if len(refused) != 4 {
		t.Fatalf("dom.h cases: %v", refused)
	}
	for i, r := range refused {
		if !r {
			t.Errorf("dom.h accepted case %d", i)
		}
	}
}

func (f *uiFixture) exchangePageBindAndPublish(t *testing.T) {
	f.br.goTo(t, "exchange", "/", "amq.direct")
	f.br.do(t, "bind",
		waitVisible(`#page[data-page="exchange"][data-loaded="true"]`),
		setValue(`#exchange-bind-kind`, "q"),
		sendKeys(`#exchange-bind-destination`, "ui-events"),
		sendKeys(`#exchange-bind-routing_key`, "ui.key"),
		click(`#exchange-bind-submit`),
		waitVisible(`#exchange-bind-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#exchange-source-table tbody").textContent.includes("ui.key")`),
	)
	f.br.do(t, "publish routed",
		setValue(`#exchange-publish-routing_key`, "ui.key"),
		setValue(`#exchange-publish-payload`, "via amq.direct"),
		click(`#exchange-publish-submit`),
		waitVisible(`#exchange-publish-msg[data-kind="ok"]`),
	)
	if n := queueDepth(t, f.ch, "ui-events"); n != 1 {
		t.Errorf("ui-events holds %d after a publish through amq.direct, want 1", n)
	}
	f.br.do(t, "publish unroutable",
		setValue(`#exchange-publish-routing_key`, "no.such.key"),
		click(`#exchange-publish-submit`),
		waitVisible(`#exchange-publish-msg[data-kind="error"]`),
	)
	if m := f.br.text(t, `#exchange-publish-msg`); !strings.Contains(m, "not routed") {
		t.Errorf("an unroutable publish shows %q", m)
	}
	f.br.do(t, "unbind",
		click(`#exchange-source-table tbody button.danger`),
		pollJS(`!document.querySelector("#exchange-source-table tbody").textContent.includes("ui.key")`),
	)
	if _, err := f.ch.QueuePurge("ui-events", false); err != nil {
		t.Fatal(err)
	}
}

func (f *uiFixture) usersVhostsPermissions(t *testing.T) {
	f.br.goTo(t, "vhosts")
	f.br.do(t, "add a vhost",
		waitVisible(`#vhosts[data-state="loaded"]`),
		sendKeys(`#add-vhost-name`, "ui-vhost"),
		click(`#add-vhost-submit`),
		waitVisible(`#add-vhost-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#vhosts tbody").textContent.includes("ui-vhost")`),
	)
	f.br.goTo(t, "users")
	f.br.do(t, "add a user",
		waitVisible(`#users[data-state="loaded"]`),
		sendKeys(`#add-user-name`, "ui-user"),
		sendKeys(`#add-user-password`, "s3cret"),
		sendKeys(`#add-user-tags`, "monitoring, management"),
		click(`#add-user-submit`),
		waitVisible(`#add-user-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#users tbody").textContent.includes("ui-user")`),
	)
	if status, _ := adminGet(t, f.base+"/api/whoami", "ui-user", "s3cret"); status != http.StatusOK {
		t.Errorf("the user made in the UI cannot log in to the API: %d", status)
	}
	f.br.goTo(t, "permissions")
	f.br.do(t, "set permissions",
		waitVisible(`#permissions[data-state="loaded"]`),
		setValue(`#set-permission-user`, "ui-user"),
		setValue(`#set-permission-vhost`, "ui-vhost"),
		setValue(`#set-permission-write`, "^ui-"),
		click(`#set-permission-submit`),
		waitVisible(`#set-permission-msg[data-kind="ok"]`),
	)
	var perm struct{ Configure, Write, Read string }
	apiGet(t, f.base+"/api/permissions/ui-vhost/ui-user", &perm)
	if perm.Configure != ".*" || perm.Write != "^ui-" || perm.Read != ".*" {
		t.Errorf("permissions set in the UI: %+v", perm)
	}
	f.br.do(t, "set a topic permission",
		waitVisible(`#topic-permissions[data-state="loaded"]`),
		setValue(`#set-topic-permission-user`, "ui-user"),
		setValue(`#set-topic-permission-vhost`, "ui-vhost"),
		setValue(`#set-topic-permission-write`, `^{username}\.`),
		click(`#set-topic-permission-submit`),
		waitVisible(`#set-topic-permission-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#topic-permissions tbody").textContent.includes("ui-user")`),
	)
	var topics []struct{ Exchange, Write, Read string }
	apiGet(t, f.base+"/api/topic-permissions/ui-vhost/ui-user", &topics)
	if len(topics) != 1 || topics[0].Exchange != "amq.topic" || topics[0].Write != `^{username}\.` || topics[0].Read != ".*" {
		t.Errorf("topic permission set in the UI: %+v", topics)
	}
	f.br.do(t, "delete the topic permission",
		click(`#delete-topic-permission-ui-user-ui-vhost-amq\.topic`),
		click(`#delete-topic-permission-ui-user-ui-vhost-amq\.topic`),
		waitVisible(`#topic-permissions-msg[data-kind="ok"]`),
		pollJS(`!document.querySelector("#topic-permissions tbody").textContent.includes("ui-user")`),
	)
	f.br.goTo(t, "limits")
	f.br.do(t, "set a vhost limit and a user limit",
		waitVisible(`#vhost-limits[data-state="loaded"]`),
		setValue(`#set-vhost-limit-owner`, "ui-vhost"),
		setValue(`#set-vhost-limit-name`, "max-queues"),
		setValue(`#set-vhost-limit-value`, "7"),
		click(`#set-vhost-limit-submit`),
		waitVisible(`#set-vhost-limit-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#vhost-limits tbody").textContent.includes("ui-vhost")`),
		waitVisible(`#user-limits[data-state="loaded"]`),
		setValue(`#set-user-limit-owner`, "ui-user"),
		setValue(`#set-user-limit-name`, "max-channels"),
		setValue(`#set-user-limit-value`, "3"),
		click(`#set-user-limit-submit`),
		waitVisible(`#set-user-limit-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#user-limits tbody").textContent.includes("ui-user")`),
	)
	var vl []struct{ Value map[string]int64 }
	apiGet(t, f.base+"/api/vhost-limits/ui-vhost", &vl)
	var ul []struct{ Value map[string]int64 }
	apiGet(t, f.base+"/api/user-limits/ui-user", &ul)
	if len(vl) != 1 || vl[0].Value["max-queues"] != 7 || len(ul) != 1 || ul[0].Value["max-channels"] != 3 {
		t.Errorf("limits set in the UI: vhost %+v, user %+v", vl, ul)
	}
	f.br.do(t, "delete the vhost limit",
		click(`#delete-vhost-limit-ui-vhost-max-queues`),
		click(`#delete-vhost-limit-ui-vhost-max-queues`),
		waitVisible(`#vhost-limits-msg[data-kind="ok"]`),
		pollJS(`!document.querySelector("#vhost-limits tbody").textContent.includes("ui-vhost")`),
	)
	f.br.goTo(t, "users")
	f.br.do(t, "delete the user",
		waitVisible(`#users[data-state="loaded"]`),
		click(`#delete-user-ui-user`),
		click(`#delete-user-ui-user`),
		waitVisible(`#users-msg[data-kind="ok"]`),
		pollJS(`!document.querySelector("#users tbody").textContent.includes("ui-user")`),
	)
	f.br.goTo(t, "vhosts")
	f.br.do(t, "delete the vhost",
		waitVisible(`#vhosts[data-state="loaded"]`),
		click(`#delete-vhost-ui-vhost`),
		click(`#delete-vhost-ui-vhost`),
		pollJS(`!document.querySelector("#vhosts tbody").textContent.includes("ui-vhost")`),
	)
}

func (f *uiFixture) closeConnection(t *testing.T) {
	victim, err := amqp.Dial(f.s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	closed := victim.NotifyClose(make(chan *amqp.Error, 1))
	f.br.goTo(t, "connections")
	f.br.do(t, "close",
		waitVisible(`#connections[data-state="loaded"]`),
		sendKeys(`#connections-filter`, victim.LocalAddr().String()),
		pollJS(`document.querySelector("#connections-info").textContent.includes("· 1 of 2")`),
		click(`#connections tbody button.danger`),
		click(`#connections tbody button.danger`),
		waitVisible(`#connections-msg[data-kind="ok"]`),
	)
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced || !strings.Contains(e.Reason, "management UI") {
			t.Errorf("the connection closed with %v, want 320 with the UI's reason", e)
		}
	case <-time.After(10 * time.Second):
		t.Error("the connection closed in the UI is still open")
	}
}

func (f *uiFixture) policy(t *testing.T) {
	f.br.goTo(t, "policies")
	f.br.do(t, "bad policy",
		waitVisible(`#policies[data-state="loaded"]`),
		sendKeys(`#add-policy-name`, "ui-limit"),
		sendKeys(`#add-policy-pattern`, "^ui-"),
		setValue(`#add-policy-apply_to`, "queues"),
		setValue(`#add-policy-definition`, `{"max-length": "lots"}`),
		click(`#add-policy-submit`),
		waitVisible(`#add-policy-msg[data-kind="error"]`),
	)
	if reason := f.br.text(t, `#add-policy-msg`); !strings.Contains(reason, "400") || !strings.Contains(reason, "max-length") {
		t.Errorf("a bad max-length shows %q, want the API's 400 naming the key", reason)
	}
	f.br.do(t, "good policy",
		setValue(`#add-policy-definition`, `{"max-length": 10}`),
		click(`#add-policy-submit`),
		waitVisible(`#add-policy-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#policies tbody").textContent.includes("ui-limit")`),
	)
	var p struct {
		Pattern    string         `json:"pattern"`
		ApplyTo    string         `json:"apply-to"`
		Definition map[string]any `json:"definition"`
	}
	apiGet(t, f.base+"/api/policies/%2F/ui-limit", &p)
	if p.Pattern != "^ui-" || p.ApplyTo != "queues" || p.Definition["max-length"] != float64(10) {
		t.Errorf("stored policy %+v", p)
	}
	// The administrator's operator policies, under the policies: limits
	// only, refused by name otherwise.
	f.br.do(t, "bad operator policy",
		waitVisible(`#operator-policies[data-state="loaded"]`),
		sendKeys(`#add-operator-policy-name`, "ui-cap"),
		sendKeys(`#add-operator-policy-pattern`, "^ui-"),
		setValue(`#add-operator-policy-apply_to`, "queues"),
		setValue(`#add-operator-policy-definition`, `{"dead-letter-exchange": "x"}`),
		click(`#add-operator-policy-submit`),
		waitVisible(`#add-operator-policy-msg[data-kind="error"]`),
	)
	if reason := f.br.text(t, `#add-operator-policy-msg`); !strings.Contains(reason, "400") || !strings.Contains(reason, "dead-letter-exchange") {
		t.Errorf("an operator policy with dead-letter-exchange shows %q, want the API's 400 naming the key", reason)
	}
	f.br.do(t, "good operator policy",
		setValue(`#add-operator-policy-definition`, `{"max-length": 5}`),
		click(`#add-operator-policy-submit`),
		waitVisible(`#add-operator-policy-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#operator-policies tbody").textContent.includes("ui-cap")`),
	)
	apiGet(t, f.base+"/api/operator-policies/%2F/ui-cap", &p)
	if p.Pattern != "^ui-" || p.ApplyTo != "queues" || p.Definition["max-length"] != float64(5) {
		t.Errorf("stored operator policy %+v", p)
	}
}

// The cluster page renames the cluster, sets and deletes a global
// parameter (any JSON value) and lists the feature flags.
func (f *uiFixture) clusterPage(t *testing.T) {
	f.br.goTo(t, "cluster")
	f.br.do(t, "rename the cluster",
		waitVisible(`#feature-flags[data-state="loaded"]`),
		sendKeys(`#set-cluster-name-name`, "ui-cluster"),
		click(`#set-cluster-name-submit`),
		waitVisible(`#set-cluster-name-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#cluster-name").textContent === "ui-cluster"`),
	)
	var cn struct{ Name string }
	apiGet(t, f.base+"/api/cluster-name", &cn)
	if cn.Name != "ui-cluster" {
		t.Errorf("the cluster renamed in the UI is %q", cn.Name)
	}
	f.br.do(t, "a bad global parameter",
		sendKeys(`#set-global-parameter-name`, "ui-setting"),
		setValue(`#set-global-parameter-value`, `{"retries": `),
		click(`#set-global-parameter-submit`),
		waitVisible(`#set-global-parameter-msg[data-kind="error"]`),
	)
	f.br.do(t, "a global parameter",
		setValue(`#set-global-parameter-value`, `[1, "two"]`),
		click(`#set-global-parameter-submit`),
		waitVisible(`#set-global-parameter-msg[data-kind="ok"]`),
		pollJS(`document.querySelector("#global-parameters tbody").textContent.includes("ui-setting")`),
	)
	var gp struct{ Value []any }
	apiGet(t, f.base+"/api/global-parameters/ui-setting", &gp)
	if len(gp.Value) != 2 || gp.Value[1] != "two" {
		t.Errorf("the global parameter set in the UI is %+v", gp)
	}
	if flags := f.br.text(t, `#feature-flags tbody`); !strings.Contains(flags, "quorum_queue") {
		t.Errorf("feature flags %q lack quorum_queue", flags)
	}
	f.br.do(t, "delete the global parameter",
		click(`#delete-global-parameter-ui-setting`),
		click(`#delete-global-parameter-ui-setting`),
		pollJS(`!document.querySelector("#global-parameters tbody").textContent.includes("ui-setting")`),
	)
	f.br.screenshot(t, "webui-cluster.png")
}

// The refresh interval chosen in the header is kept across pages.
func (f *uiFixture) refreshInterval(t *testing.T) {
	f.br.do(t, "every 30 seconds",
		click("#nav-queues"), waitVisible(`#queues[data-state="loaded"]`),
		setValue(`#refresh-select`, "30000"),
		click("#nav-exchanges"), waitVisible(`#exchanges[data-state="loaded"]`),
	)
	if v := value(t, f.br, "the refresh interval", chromedp.Evaluate[string](`document.querySelector("#refresh-select").value`)); v != "30000" {
		t.Errorf("the refresh interval after moving on is %q", v)
	}
	f.br.do(t, "back to 5 seconds", setValue(`#refresh-select`, "5000"))
}

func (f *uiFixture) plugin(t *testing.T) {
	f.br.goTo(t, "plugins")
	f.br.do(t, "enable consistent-hash",
		waitVisible(`#plugin-enable-consistent-hash`),
		click(`#plugin-enable-consistent-hash`),
		waitVisible(`#plugin-consistent-hash[data-enabled="true"]`),
		waitVisible(`#plugins-msg[data-kind="ok"]`),
	)
	f.br.screenshot(t, "webui-plugins-enabled.png")
	var ps []struct {
		Name    string `json:"name"`
		Enabled bool   `json:"enabled"`
	}
	apiGet(t, f.base+"/api/plugins", &ps)
	for _, p := range ps {
		if p.Name == "consistent-hash" && !p.Enabled {
			t.Errorf("the UI showed consistent-hash enabled, the API says %+v", p)
		}
	}
	// Its type is offered when adding an exchange.
	f.br.goTo(t, "exchanges")
	f.br.do(t, "add an x-consistent-hash exchange",
		waitVisible(`#exchanges[data-state="loaded"]`),
		pollJS(`[...document.querySelectorAll("#add-exchange-type option")].some((o) => o.value === "x-consistent-hash")`),
		sendKeys(`#add-exchange-name`, "ui-ring"),
		setValue(`#add-exchange-type`, "x-consistent-hash"),
		click(`#add-exchange-submit`),
		waitVisible(`#add-exchange-msg[data-kind="ok"]`),
	)
	var x struct{ Type string }
	apiGet(t, f.base+"/api/exchanges/%2F/ui-ring", &x)
	if x.Type != "x-consistent-hash" {
		t.Errorf("the exchange added in the UI has type %q", x.Type)
	}
	// Disabling it now is refused with the API's reason, unless forced.
	f.br.goTo(t, "plugins")
	f.br.do(t, "disable refused",
		waitVisible(`#plugin-disable-consistent-hash`),
		click(`#plugin-disable-consistent-hash`),
		waitVisible(`#plugins-msg[data-kind="error"]`),
	)
	if m := f.br.text(t, `#plugins-msg`); !strings.Contains(m, "400") {
		t.Errorf("disabling a plugin in use shows %q, want the API's refusal", m)
	}
	f.br.do(t, "forced disable",
		clickFound(`#plugins-force`),
		clickFound(`#plugin-disable-consistent-hash`),
		waitVisible(`#plugin-consistent-hash[data-enabled="false"]`),
		waitVisible(`#plugins-msg[data-kind="ok"]`),
	)
}

func (f *uiFixture) namesAreText(t *testing.T) {
	f.br.goTo(t, "queues")
	f.br.do(t, "queues filtered",
		waitVisible(`#queues[data-state="loaded"]`),
		sendKeys(`#queues-filter`, "onerror"),
		pollJS(`document.querySelector("#queues-info").textContent.includes("· 1 of")`),
	)
	linkText := f.br.text(t, `#queues tbody a`)
	f.br.do(t, "the queue's page", click(`#queues tbody a`), waitVisible(`#page[data-page="queue"][data-loaded="true"]`))
	heading := f.br.text(t, `#queue-name`)
	if linkText != xssName || heading != xssName {
		t.Errorf("the queue shows as %q in the list and %q on its page, want the text %q", linkText, heading, xssName)
	}
	// The same name as a vhost, an exchange, a routing key, a
	// payload, a header and a client property.
	if _, err := f.s.b.AddVHost(xssName); err != nil {
		t.Fatal(err)
	}
	if err := f.ch.ExchangeDeclare(xssName, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.ch.QueueBind(xssName, xssName, xssName, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.ch.Publish(xssName, xssName, false, false, amqp.Publishing{
		Headers: amqp.Table{xssName: xssName}, ContentType: xssName, Body: []byte(xssName),
	}); err != nil {
		t.Fatal(err)
	}
	hostile, err := amqp.DialConfig(f.s.url, amqp.Config{Properties: amqp.Table{"product": xssName}})
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()
	f.br.goTo(t, "queue", "/", xssName)
	f.br.do(t, "get the hostile message",
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		click(`#queue-get-submit`),
		waitVisible(`#get-results .message`),
	)
	if p := f.br.text(t, `#get-results pre.payload`); p != xssName {
		t.Errorf("the payload shows as %q", p)
	}
	for _, page := range []struct{ nav, ready string }{
		{"#nav-exchanges", `#exchanges[data-state="loaded"]`},
		{"#nav-connections", `#connections[data-state="loaded"]`},
		{"#nav-users", `#users[data-state="loaded"]`},
		{"#subnav-vhosts", `#vhosts[data-state="loaded"]`},
		{"#subnav-permissions", `#permissions[data-state="loaded"]`},
	} {
		f.br.do(t, page.nav, click(page.nav), waitVisible(page.ready))
		if !strings.Contains(f.br.text(t, `#page`), xssName) && page.nav != "#nav-users" && page.nav != "#subnav-permissions" {
			t.Errorf("%s does not show the name as text", page.nav)
		}
	}
	f.br.goTo(t, "exchange", "/", xssName)
	f.br.do(t, "the exchange's page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
	if x := f.br.text(t, `#exchange-name`); x != xssName {
		t.Errorf("the exchange shows as %q", x)
	}
	if imgs := value(t, f.br, "count images", chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src])").length`)); imgs != 0 {
		t.Errorf("the page has %d <img> or inline <script> elements: a name became markup", imgs)
	}
	f.br.mu.Lock()
	dialogs := f.br.dialogs
	f.br.mu.Unlock()
	if dialogs != 0 {
		t.Errorf("%d dialogs opened: a name ran as script", dialogs)
	}
}

func (f *uiFixture) definitions(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "defs.json")
	bad := filepath.Join(dir, "broken.json")
	defs := `{"vhosts":[{"name":"/"}],"queues":[{"name":"ui-imported","vhost":"/","durable":true,"auto_delete":false,"arguments":{}}]}`
	if err := os.WriteFile(good, []byte(defs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"queues": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	f.br.goTo(t, "definitions")
	f.br.do(t, "download",
		waitVisible(`#page[data-page="definitions"][data-loaded="true"]`),
		click(`#definitions-download`),
		waitVisible(`#definitions-download-msg[data-kind="ok"]`),
	)
	f.br.do(t, "upload a broken file",
		chromedp.SetUploadFiles(chromedp.CSS(`#definitions-file`), []string{bad}),
		click(`#definitions-upload`),
		waitVisible(`#definitions-upload-msg[data-kind="error"]`),
	)
	if msg := f.br.text(t, `#definitions-upload-msg`); !strings.Contains(msg, "not JSON") {
		t.Errorf("a broken file shows %q", msg)
	}
	f.br.do(t, "upload",
		chromedp.SetUploadFiles(chromedp.CSS(`#definitions-file`), []string{good}),
		click(`#definitions-upload`),
		waitVisible(`#definitions-upload-msg[data-kind="ok"]`),
	)
	queueDepth(t, f.ch, "ui-imported") // fails unless the import declared it
}

// A user with the management tag sees what the API lets it do: no
// admin pages, plugins or definitions, its vhost's queues.
func (f *uiFixture) managementUser(t *testing.T) {
	pw := "watch-pw"
	if err := f.s.b.PutUser("watcher", &pw, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.b.SetPermission("/", "watcher", ".*", ".*", ".*"); err != nil {
		t.Fatal(err)
	}
	defer login(t, f.br, f.base) // guest again for what follows
	f.br.do(t, "log in as watcher",
		click(`#logout`),
		waitVisible(`#login`),
		sendKeys(`#login-user`, "watcher"),
		sendKeys(`#login-password`, pw),
		click(`#login-submit`),
		waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
	)
	navs := value(t, f.br, "nav", chromedp.Evaluate[[]string](`[...document.querySelectorAll("nav.main a")].map((a) => a.id)`))
	for _, hidden := range []string{"nav-users", "nav-policies", "nav-plugins", "nav-definitions"} {
		if slices.Contains(navs, hidden) {
			t.Errorf("a management user's navigation %v has %s", navs, hidden)
		}
	}
	f.br.do(t, "queues", click(`#nav-queues`), waitVisible(`#queues[data-state="loaded"]`))
	if q := f.br.text(t, `#queues tbody`); !strings.Contains(q, "ui-orders") {
		t.Errorf("watcher's queues %q lack ui-orders", q)
	}
}

// refusedUser: the UI rides the management API, whose every route asks
// the permissions AMQP asks (permissions_table_test.go); here a
// management user who may touch only ui-orders tries the queue page's
// actions on ui-events, sees each refused and changes nothing.
func (f *uiFixture) refusedUser(t *testing.T) {
	pw := "peek-pw"
	if err := f.s.b.PutUser("peeker", &pw, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.b.SetPermission("/", "peeker", "^ui-orders$", "^ui-orders$", "^ui-orders$"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := f.ch.Publish("", "ui-events", false, false, amqp.Publishing{Body: []byte("kept")}); err != nil {
			t.Fatal(err)
		}
	}
	depth := queueDepth(t, f.ch, "ui-events")
	defer login(t, f.br, f.base) // guest again for what follows
	f.br.do(t, "log in as peeker",
		click(`#logout`),
		waitVisible(`#login`),
		sendKeys(`#login-user`, "peeker"),
		sendKeys(`#login-password`, pw),
		click(`#login-submit`),
		waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
	)
	f.br.goTo(t, "queue", "/", "ui-events")
	f.br.do(t, "get, refused",
		waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		setValue(`#queue-get-ackmode`, "ack_requeue_false"),
		setValue(`#queue-get-count`, "1"),
		click(`#queue-get-submit`),
		waitVisible(`#queue-get-msg[data-kind="error"]`),
	)
	if msg := f.br.text(t, `#queue-get-msg`); !strings.Contains(msg, "access to queue 'ui-events'") {
		t.Errorf("a refused get shows %q, want the refusal", msg)
	}
	f.br.do(t, "publish, refused",
		setValue(`#queue-publish-payload`, "not for peeker"),
		click(`#queue-publish-submit`),
		waitVisible(`#queue-publish-msg[data-kind="error"]`),
	)
	f.br.do(t, "purge, refused",
		click(`#queue-purge`),
		click(`#queue-purge`),
		waitVisible(`#queue-actions-msg[data-kind="error"]`),
	)
	if n := queueDepth(t, f.ch, "ui-events"); n != depth {
		t.Errorf("after peeker's refused actions ui-events holds %d, want %d", n, depth)
	}
}

// Last, so that the charts have the history the steps above made.
func (f *uiFixture) overviewScreenshot(t *testing.T) {
	f.br.do(t, "overview", click("#nav-overview"), waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
		setValue("#chart-range", "60"),
		pollJS(`Number(document.querySelector("#chart-rates").dataset.drawn) >= 2`))
	t.Logf("overview screenshot: %s", f.br.screenshot(t, "webui-overview.png"))
}

// The queues table pages on the server: with 10,000 queues the browser
// gets one page of rows, and paging, sorting and filtering ask the API
// again.
func TestWebUIManyQueues(t *testing.T) {
	br := startBrowser(t)
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	v, _ := s.b.VHost("/")
	const n = 10000
	for i := 0; i < n; i++ {
		if _, _, err := v.DeclareQueue(topology.QueueDef{Name: fmt.Sprintf("bulk-%05d", i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	login(t, br, "http://"+s.b.AdminAddr())
	br.goTo(t, "queues")
	br.do(t, "first page", waitVisible(`#queues[data-state="loaded"]`))
	rows := value(t, br, "rows", chromedp.Evaluate[int](`document.querySelectorAll("#queues tbody tr").length`))
	if info := br.text(t, `#queues-info`); rows != 20 || !strings.Contains(info, "Page 1 of 500") || !strings.Contains(info, "10000 items") {
		t.Errorf("first page: %d rows, %q; want 20 rows of 10000 on 500 pages", rows, info)
	}
	br.do(t, "next page",
		click(`#queues-next`),
		pollJS(`document.querySelector("#queues-info").textContent.startsWith("Page 2 ")`),
	)
	if first := br.text(t, `#queues tbody tr:first-child a`); first != "bulk-00020" {
		t.Errorf("page 2 starts with %q, want bulk-00020", first)
	}
	br.do(t, "sort by name, then reverse it",
		click(`#queues th[data-sort="name"]`),
		pollJS(`document.querySelector("#queues tbody tr:first-child a").textContent === "bulk-09999"`),
	)
	br.do(t, "filter",
		sendKeys(`#queues-filter`, "bulk-0777"),
		pollJS(`document.querySelector("#queues-info").textContent.includes("· 10 of 10000 items")`),
	)
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
