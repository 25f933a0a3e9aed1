package tests

import (
	"encoding/json"
	amqp "github.com/rabbitmq/amqp091-go"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The web UI's Federation page lists the links as /api/federation-links
// has them, adds an upstream with its form (a federation-upstream
// parameter with RabbitMQ's keys), lists it without its password and
// deletes it; a monitoring user sees the links and not the upstreams, as
// the API lets it.
func TestWebUIFederation(t *testing.T) {
	br := startBrowser(t)
	m := startWarrenMgmt(t)
	t.Cleanup(func() { m.call("DELETE", "/api/parameters/federation-upstream/"+m.v()+"/ui-upstream", "") })
	// A running link, to another broker's fed.ui.
	other := startWarren(t)
	_, och := channel(t, other)
	_, ch := m.channel()
	for _, c := range []*amqp.Channel{och, ch} {
		if err := c.ExchangeDeclare("fed.ui", "fanout", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	m.expect("PUT", "/api/parameters/federation-upstream/"+m.v()+"/ui-real", `{"value":{"uri":"`+other.url+`"}}`, 201)
	m.expect("PUT", "/api/policies/"+m.v()+"/ui-fed", `{"pattern":"^fed\\.ui$","apply-to":"exchanges","definition":{"federation-upstream":"ui-real"}}`, 201)
	waitFor(t, "the link running", func() bool {
		var ls []struct{ Status string }
		m.call("GET", "/api/federation-links/"+m.v(), "").json(t, &ls)
		return len(ls) == 1 && ls[0].Status == "running"
	})
	login(t, br, m.base)
	br.goTo(t, "federation")
	br.do(t, "the federation page",
		waitVisible(`#federation-links[data-state="loaded"]`),
		waitVisible(`#federation-upstreams[data-state="loaded"]`),
	)

	// The links: whatever the broker runs (none, with no upstream and
	// no policy), each with its vhost, upstream and a restart button.
	var links []struct {
		ID, VHost, Upstream, Node string
	}
	m.call("GET", "/api/federation-links", "").json(t, &links)
	head := br.text(t, `#federation-links thead`)
	for _, want := range []string{"Type", "Virtual host", "Exchange / queue", "Upstream", "URI", "State", "Error", "Node"} {
		if !strings.Contains(head, want) {
			t.Errorf("the links' header %q lacks %q", head, want)
		}
	}
	rows := br.text(t, `#federation-links tbody`)
	if len(links) == 0 {
		t.Fatalf("no links listed, with one running; the table shows %q", rows)
	}
	if !strings.Contains(rows, "ui-real") || !strings.Contains(rows, "running") {
		t.Errorf("the links' table %q lacks the running link from ui-real", rows)
	}
	for _, l := range links {
		if !strings.Contains(rows, l.VHost) || !strings.Contains(rows, l.Upstream) || !strings.Contains(rows, l.Node) {
			t.Errorf("the links' table %q lacks the link %+v", rows, l)
		}
	}
	buttons := value(t, br, "restart buttons", chromedp.Evaluate[int](`document.querySelectorAll("#federation-links button[id^='restart-federation-']").length`))
	if buttons != len(links) {
		t.Errorf("%d restart buttons for %d links", buttons, len(links))
	}

	const uri = "amqp://ui-fed-user:ui-fed-secret@127.0.0.1:5672/elsewhere"
	br.do(t, "add an upstream",
		sendKeys(`#add-upstream-name`, "ui-upstream"),
		setValue(`#add-upstream-vhost`, m.vhost),
		setValue(`#add-upstream-uri`, uri),
		sendKeys(`#add-upstream-exchange`, "ui-up-x"),
		setValue(`#add-upstream-expires`, "60000"),
		setValue(`#add-upstream-max_hops`, "2"),
		setValue(`#add-upstream-ack_mode`, "on-publish"),
		click(`#add-upstream-trust_user_id`),
		click(`#add-upstream-submit`),
		waitVisible(`#add-upstream-msg:is([data-kind="ok"], [data-kind="error"])`),
	)
	if msg := br.text(t, `#add-upstream-msg`); !strings.Contains(msg, "Upstream ui-upstream added.") {
		t.Fatalf("adding the upstream: %q", msg)
	}
	br.do(t, "the upstream listed",
		pollJS(`document.querySelector("#federation-upstreams tbody").textContent.includes("ui-upstream")`))
	row := br.text(t, `#federation-upstreams tbody`)
	for _, want := range []string{"ui-upstream", m.vhost, "amqp://ui-fed-user:********@127.0.0.1:5672/elsewhere", "ui-up-x", "60000", "on-publish"} {
		if !strings.Contains(row, want) {
			t.Errorf("the upstream's row %q lacks %q", row, want)
		}
	}
	if strings.Contains(row, "ui-fed-secret") {
		t.Errorf("the upstream's row %q shows the URI's password", row)
	}
	var p struct{ Value map[string]any }
	m.call("GET", "/api/parameters/federation-upstream/"+m.v()+"/ui-upstream", "").json(t, &p)
	want := map[string]any{"uri": uri, "exchange": "ui-up-x", "expires": 60000.0, "max-hops": 2.0, "prefetch-count": 1000.0,
		"reconnect-delay": 5.0, "ack-mode": "on-publish", "trust-user-id": true}
	if !reflect.DeepEqual(p.Value, want) {
		got, _ := json.Marshal(p.Value)
		t.Errorf("the upstream's value %s, want %v", got, want)
	}

	br.do(t, "delete the upstream",
		clickFound(`#delete-upstream-ui-upstream`),
		clickFound(`#delete-upstream-ui-upstream`),
		waitVisible(`#federation-msg[data-kind="ok"]`),
		pollJS(`!document.querySelector("#federation-upstreams tbody").textContent.includes("ui-upstream")`),
	)
	m.expectNotFound("GET", "/api/parameters/federation-upstream/"+m.v()+"/ui-upstream")

	// A monitoring user: the links, no upstreams (the API asks
	// policymaker for them) and no restart.
	m.addUser("ui-fed-monitor", "ui-fed-pw", "monitoring", m.vhost)
	defer login(t, br, m.base)
	br.do(t, "log in as a monitoring user",
		click(`#logout`),
		waitVisible(`#login`),
		sendKeys(`#login-user`, "ui-fed-monitor"),
		sendKeys(`#login-password`, "ui-fed-pw"),
		click(`#login-submit`),
		waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
		click(`#nav-federation`),
		waitVisible(`#federation-links[data-state="loaded"]`),
	)
	absent := value(t, br, "the policymaker's parts", chromedp.Evaluate[bool](
		`!document.querySelector("#federation-upstreams, #add-upstream, #federation-links button")`))
	if !absent {
		t.Errorf("a monitoring user's federation page shows the upstreams, their form or a restart")
	}
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
