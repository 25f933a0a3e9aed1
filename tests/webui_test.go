package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/vhost"
)

// The web UI (core/admin/webui) in a real browser: Debian's chromium,
// headless, driven over the DevTools protocol by chromedp against an
// in-process Warren. Each step waits for an element the UI marks when it
// has its answer (data-state="loaded", a status line's data-kind), never
// for a fixed time.
//
// Without a chromium the test skips and says where it looked; .ci/run
// installs Debian's package when it can.

// findChrome returns the browser to drive: $CHROME_PATH, else the first of
// the usual names in PATH.
func findChrome() (string, string) {
	if p := os.Getenv("CHROME_PATH"); p != "" {
		return p, ""
	}
	names := []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, ""
		}
	}
	return "", "no browser for the web UI test: set CHROME_PATH or put one of " + strings.Join(names, ", ") +
		" in PATH (Debian: apt-get install chromium; .ci/run does this as root)"
}

// browser is one headless tab and what it has reported.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string // uncaught exceptions and errors the page logged
	// dialogs counts alert/confirm/prompt dialogs opened: the UI opens
	// none, so any one is injected script running.
	dialogs int
}

func startBrowser(t *testing.T) *browser {
	t.Helper()
	exe, why := findChrome()
	if exe == "" {
		t.Skip(why)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to start as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	var ctx context.Context
	var cancelTab context.CancelFunc
	ctx, cancelTab = chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		// This runs on the tab's reading goroutine: note, never call.
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.mu.Lock()
			b.dialogs++
			b.mu.Unlock()
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		case *runtime.EventExceptionThrown:
			b.note(fmt.Sprintf("exception: %s %s", ev.ExceptionDetails.Text, describeException(ev.ExceptionDetails)))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				b.note(fmt.Sprintf("console.error: %d args", len(ev.Args)))
			}
		case *cdplog.EventEntryAdded:
			// A failed request is logged by the network source; the UI
			// shows those itself (the bad-password step makes a 401).
			if ev.Entry.Level == cdplog.EntryLevelError && ev.Entry.Source != cdplog.EntrySourceNetwork {
				b.note(fmt.Sprintf("log %s: %s", ev.Entry.Source, ev.Entry.Text))
			}
		}
	}))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("chromium at %s does not start: %v", exe, err)
	}
	b.ctx = ctx
	return b
}

func describeException(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func (b *browser) note(s string) {
	b.mu.Lock()
	b.errs = append(b.errs, s)
	b.mu.Unlock()
}

// stepTimeout bounds one step: a UI that never shows what a step waits
// for fails the test instead of hanging it. It is generous because the
// broker's first /api/plugins compiles every shipped module to describe
// it: about 3 s, and 40 s under the race detector.
const stepTimeout = 2 * time.Minute

// do performs steps, failing the test with a screenshot and what the page
// logged.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(t, what, err)
	}
}

// value runs one action that returns a value.
func value[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(t, what, err)
	}
	return v
}

func (b *browser) text(t *testing.T, css string) string {
	t.Helper()
	return value(t, b, "text of "+css, chromedp.Text(chromedp.CSS(css)))
}

func (b *browser) fail(t *testing.T, what string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if shot, _ := chromedp.Run(ctx, chromedp.CaptureScreenshot()); len(shot) > 0 {
		p := shotPath(t, "failure-"+strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())+".png")
		_ = os.WriteFile(p, shot, 0o644)
		t.Logf("screenshot of the failure: %s", p)
	}
	t.Fatalf("%s: %v\npage errors: %v", what, err, b.pageErrors())
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// goTo sets the UI's route (the part after #), as a click on a link does,
// and waits until the page shown is the new one: hashchange comes after
// the script returns, and waiting for "a queue page" right away could find
// the queue page being left.
func (b *browser) goTo(t *testing.T, segments ...string) {
	t.Helper()
	js, _ := json.Marshal(segments)
	b.do(t, "route "+strings.Join(segments, "/"),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const hash = "#/" + %s.map(encodeURIComponent).join("/");
			if (location.hash === hash) return;
			const old = document.querySelector("#page");
			if (old) old.dataset.left = "true";
			location.hash = hash;
		})()`, js)),
		poll(`document.querySelector("#page:not([data-left])") !== null`),
	)
}

// Short names for the CSS steps the tests use.
func waitVisible(css string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(css))
}
func click(css string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(css)) }

// setValue sets a field's value as a script would, with a change event;
// chromedp.SetValue refuses an empty value.
func setValue(css, v string) chromedp.Action[chromedp.Void] {
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	set := chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
		const el = document.querySelector(%s);
		if (!el) return false;
		el.value = %s;
		el.dispatchEvent(new Event("change", {bubbles: true}));
		return el.value === %s;
	})()`, q(css), q(v), q(v)))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		ok, err := set(ctx, tg)
		if err == nil && !ok {
			err = fmt.Errorf("cannot set the value of %s", css)
		}
		return chromedp.Void{}, err
	}
}
func sendKeys(css, v string) chromedp.Action[chromedp.Void] {
	return chromedp.SendKeys(chromedp.CSS(css), v)
}
func poll(js string) chromedp.Action[chromedp.Void] { return chromedp.Poll[chromedp.Void](js) }

// screenshot saves the whole page as a PNG and returns its path.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	shot := value(t, b, "screenshot", chromedp.FullScreenshot(100))
	p := shotPath(t, name)
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shotPath is where screenshots go: $WARREN_WEBUI_SHOTS, else
// tests/testdata/out (ignored by git).
func shotPath(t *testing.T, name string) string {
	dir := os.Getenv("WARREN_WEBUI_SHOTS")
	if dir == "" {
		dir = filepath.Join("testdata", "out")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
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
	base := "http://" + s.b.AdminAddr()
	_, ch := channel(t, s)

	const xssName = `<img src=x onerror=alert(1)>`
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

	if !t.Run("login", func(t *testing.T) {
		br.do(t, "bad password",
			chromedp.Navigate(base+"/"),
			waitVisible(`#login`),
			sendKeys(`#login-user`, "guest"),
			sendKeys(`#login-password`, "wrong"),
			click(`#login-submit`),
			waitVisible(`#login-error[data-kind="error"]`),
		)
		if reason := br.text(t, `#login-error`); !strings.Contains(reason, "Login failed") {
			t.Errorf("bad password shows %q, want the API's Login failed", reason)
		}
		br.do(t, "good password",
			setValue(`#login-password`, ""),
			sendKeys(`#login-password`, "guest"),
			click(`#login-submit`),
			waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
		)
		if who := br.text(t, `#whoami`); who != "guest" {
			t.Errorf("logged in as %q, want guest", who)
		}
	}) {
		return
	}

	t.Run("overview", func(t *testing.T) {
		br.do(t, "overview charts",
			waitVisible(`#chart-rates[data-drawn]`),
			waitVisible(`#chart-depth[data-drawn]`),
		)
		tiles := br.text(t, `#totals`)
		for _, want := range []string{"Queues", "Consumers", "Messages"} {
			if !strings.Contains(tiles, want) {
				t.Errorf("overview tiles %q lack %s", tiles, want)
			}
		}
	})

	t.Run("every page renders", func(t *testing.T) {
		for _, p := range []struct{ nav, ready string }{
			{"#nav-connections", `#connections[data-state="loaded"]`},
			{"#nav-channels", `#channels[data-state="loaded"]`},
			{"#nav-exchanges", `#exchanges[data-state="loaded"]`},
			{"#nav-queues", `#queues[data-state="loaded"]`},
			{"#nav-consumers", `#consumers[data-state="loaded"]`},
			{"#nav-users", `#users[data-state="loaded"]`},
			{"#subnav-vhosts", `#vhosts[data-state="loaded"]`},
			{"#subnav-permissions", `#permissions[data-state="loaded"]`},
			{"#subnav-policies", `#policies[data-state="loaded"]`},
			{"#nav-plugins", `#plugins[data-state="loaded"]`},
			{"#nav-definitions", `#page[data-page="definitions"][data-loaded="true"]`},
			{"#nav-overview", `#page[data-page="overview"][data-loaded="true"]`},
		} {
			br.do(t, p.nav, click(p.nav), waitVisible(p.ready))
			br.screenshot(t, "webui-"+strings.TrimPrefix(strings.TrimPrefix(p.nav, "#nav-"), "#subnav-")+".png")
		}
		br.do(t, "connections", click("#nav-connections"), waitVisible(`#connections[data-state="loaded"]`))
		if conns := br.text(t, `#connections tbody`); !strings.Contains(conns, "guest") {
			t.Errorf("connections table %q shows no guest connection", conns)
		}
		br.do(t, "consumers", click("#nav-consumers"), waitVisible(`#consumers[data-state="loaded"]`))
		if consumers := br.text(t, `#consumers tbody`); !strings.Contains(consumers, "ui-consumer") || !strings.Contains(consumers, "ui-orders") {
			t.Errorf("consumers table %q lacks ui-consumer on ui-orders", consumers)
		}
		br.goTo(t, "queue", "/", "no-such-queue")
		br.do(t, "a missing queue", waitVisible(`#page-error[data-kind="error"]`))
		if m := br.text(t, `#page-error`); !strings.Contains(m, "404") {
			t.Errorf("a missing queue's page says %q, want the API's 404", m)
		}
		br.goTo(t, "exchange", "/", "amq.topic")
		br.do(t, "exchange page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
		br.goTo(t, "exchange", "/", "")
		br.do(t, "default exchange page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
		if bs := br.text(t, `#exchange-source-table tbody`); !strings.Contains(bs, "ui-events") {
			t.Errorf("the default exchange's bindings %q lack ui-events", bs)
		}
	})

	// The vhost chosen at the top limits the lists, through
	// /api/queues/{vhost}: a vhost name with a slash and a space must
	// survive the trip.
	t.Run("vhost selector", func(t *testing.T) {
		v, err := s.b.AddVHost("team a/b")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.DeclareQueue(vhost.QueueDef{Name: "team-queue"}, false); err != nil {
			t.Fatal(err)
		}
		br.goTo(t, "queues")
		br.do(t, "choose the vhost",
			waitVisible(`#queues[data-state="loaded"]`),
			poll(`[...document.querySelectorAll("#vhost-select option")].some((o) => o.value === "team a/b")`),
			setValue(`#vhost-select`, "team a/b"),
			poll(`document.querySelector("#queues-info") && document.querySelector("#queues-info").textContent.includes("· 1 items")`),
		)
		if q := br.text(t, `#queues tbody`); !strings.Contains(q, "team-queue") || strings.Contains(q, "ui-events") {
			t.Errorf("queues of vhost team a/b: %q", q)
		}
		br.do(t, "the queue's page",
			click(`#queues tbody a`),
			waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		)
		if d := br.text(t, `#queue-details`); !strings.Contains(d, "team a/b") {
			t.Errorf("team-queue's details %q lack its vhost", d)
		}
		br.do(t, "all vhosts again",
			setValue(`#vhost-select`, ""),
			poll(`!sessionStorage.getItem("warren.vhost")`),
			waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
		)
	})

	t.Run("queue page publish get purge", func(t *testing.T) {
		const body = "hello from the browser"
		br.goTo(t, "queue", "/", "ui-events")
		br.do(t, "publish",
			waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
			waitVisible(`#queue-chart-depth[data-drawn]`),
			setValue(`#queue-publish-payload`, body),
			click(`#queue-publish-submit`),
			waitVisible(`#queue-publish-msg[data-kind="ok"]`),
		)
		if n := queueDepth(t, ch, "ui-events"); n != 6 {
			t.Fatalf("after publishing from the UI ui-events holds %d, want 6", n)
		}
		br.do(t, "get",
			setValue(`#queue-get-ackmode`, "ack_requeue_false"),
			setValue(`#queue-get-count`, "6"),
			click(`#queue-get-submit`),
			waitVisible(`#queue-get-msg[data-kind="ok"]`),
		)
		br.screenshot(t, "webui-queue.png")
		if payload := br.text(t, `#get-results .message:last-child pre.payload`); payload != body {
			t.Errorf("the sixth message got is %q, want %q", payload, body)
		}
		if n := queueDepth(t, ch, "ui-events"); n != 0 {
			t.Fatalf("after getting with ack ui-events holds %d, want 0", n)
		}
		for i := 0; i < 3; i++ {
			if err := ch.Publish("", "ui-events", false, false, amqp.Publishing{Body: []byte("again")}); err != nil {
				t.Fatal(err)
			}
		}
		br.do(t, "get with requeue",
			setValue(`#queue-get-ackmode`, "ack_requeue_true"),
			setValue(`#queue-get-count`, "1"),
			click(`#queue-get-submit`),
			poll(`document.querySelector("#queue-get-msg").textContent === "Got 1 message(s)."`),
		)
		if n := queueDepth(t, ch, "ui-events"); n != 3 {
			t.Fatalf("a get that requeues left %d in ui-events, want 3", n)
		}
		br.do(t, "purge",
			click(`#queue-purge`),
			click(`#queue-purge`),
			waitVisible(`#queue-actions-msg[data-kind="ok"]`),
		)
		if n := queueDepth(t, ch, "ui-events"); n != 0 {
			t.Fatalf("after purging from the UI ui-events holds %d, want 0", n)
		}

		if _, err := ch.QueueDeclare("ui-doomed", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		br.goTo(t, "queue", "/", "ui-doomed")
		br.do(t, "delete",
			waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
			click(`#queue-delete`),
			click(`#queue-delete`),
			waitVisible(`#queues[data-state="loaded"]`),
		)
		if status, _ := adminGet(t, base+"/api/queues/%2F/ui-doomed", "guest", "guest"); status != http.StatusNotFound {
			t.Errorf("the queue deleted in the UI answers %d, want 404", status)
		}
	})

	t.Run("add a queue", func(t *testing.T) {
		br.goTo(t, "queues")
		br.do(t, "bad arguments",
			waitVisible(`#queues[data-state="loaded"]`),
			sendKeys(`#add-queue-name`, "ui-added"),
			setValue(`#add-queue-arguments`, `{"x-max-length": `),
			click(`#add-queue-submit`),
			waitVisible(`#add-queue-msg[data-kind="error"]`),
		)
		if m := br.text(t, `#add-queue-msg`); !strings.Contains(m, "Arguments") {
			t.Errorf("bad JSON arguments show %q, want the field named", m)
		}
		br.do(t, "add",
			setValue(`#add-queue-arguments`, `{"x-max-length": 3}`),
			click(`#add-queue-submit`),
			waitVisible(`#add-queue-msg[data-kind="ok"]`),
			poll(`document.querySelector("#queues tbody").textContent.includes("ui-added")`),
		)
		var q struct {
			Durable   bool           `json:"durable"`
			Arguments map[string]any `json:"arguments"`
		}
		apiGet(t, base+"/api/queues/%2F/ui-added", &q)
		if !q.Durable || q.Arguments["x-max-length"] != float64(3) {
			t.Errorf("the queue added in the UI: %+v", q)
		}
	})

	// dom.js, through which every element is made, refuses what would turn
	// data into script.
	t.Run("dom refuses script", func(t *testing.T) {
		refused := value(t, br, "dom.h", chromedp.Evaluate[[]bool](`import("/ui/dom.js").then(({ h }) => [
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
	})

	t.Run("exchange page bind and publish", func(t *testing.T) {
		br.goTo(t, "exchange", "/", "amq.direct")
		br.do(t, "bind",
			waitVisible(`#page[data-page="exchange"][data-loaded="true"]`),
			setValue(`#exchange-bind-kind`, "q"),
			sendKeys(`#exchange-bind-destination`, "ui-events"),
			sendKeys(`#exchange-bind-routing_key`, "ui.key"),
			click(`#exchange-bind-submit`),
			waitVisible(`#exchange-bind-msg[data-kind="ok"]`),
			poll(`document.querySelector("#exchange-source-table tbody").textContent.includes("ui.key")`),
		)
		br.do(t, "publish routed",
			setValue(`#exchange-publish-routing_key`, "ui.key"),
			setValue(`#exchange-publish-payload`, "via amq.direct"),
			click(`#exchange-publish-submit`),
			waitVisible(`#exchange-publish-msg[data-kind="ok"]`),
		)
		if n := queueDepth(t, ch, "ui-events"); n != 1 {
			t.Errorf("ui-events holds %d after a publish through amq.direct, want 1", n)
		}
		br.do(t, "publish unroutable",
			setValue(`#exchange-publish-routing_key`, "no.such.key"),
			click(`#exchange-publish-submit`),
			waitVisible(`#exchange-publish-msg[data-kind="error"]`),
		)
		if m := br.text(t, `#exchange-publish-msg`); !strings.Contains(m, "not routed") {
			t.Errorf("an unroutable publish shows %q", m)
		}
		br.do(t, "unbind",
			click(`#exchange-source-table tbody button.danger`),
			poll(`!document.querySelector("#exchange-source-table tbody").textContent.includes("ui.key")`),
		)
		if _, err := ch.QueuePurge("ui-events", false); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("users vhosts permissions", func(t *testing.T) {
		br.goTo(t, "vhosts")
		br.do(t, "add a vhost",
			waitVisible(`#vhosts[data-state="loaded"]`),
			sendKeys(`#add-vhost-name`, "ui-vhost"),
			click(`#add-vhost-submit`),
			waitVisible(`#add-vhost-msg[data-kind="ok"]`),
			poll(`document.querySelector("#vhosts tbody").textContent.includes("ui-vhost")`),
		)
		br.goTo(t, "users")
		br.do(t, "add a user",
			waitVisible(`#users[data-state="loaded"]`),
			sendKeys(`#add-user-name`, "ui-user"),
			sendKeys(`#add-user-password`, "s3cret"),
			sendKeys(`#add-user-tags`, "monitoring, management"),
			click(`#add-user-submit`),
			waitVisible(`#add-user-msg[data-kind="ok"]`),
			poll(`document.querySelector("#users tbody").textContent.includes("ui-user")`),
		)
		if status, _ := adminGet(t, base+"/api/whoami", "ui-user", "s3cret"); status != http.StatusOK {
			t.Errorf("the user made in the UI cannot log in to the API: %d", status)
		}
		br.goTo(t, "permissions")
		br.do(t, "set permissions",
			waitVisible(`#permissions[data-state="loaded"]`),
			setValue(`#set-permission-user`, "ui-user"),
			setValue(`#set-permission-vhost`, "ui-vhost"),
			setValue(`#set-permission-write`, "^ui-"),
			click(`#set-permission-submit`),
			waitVisible(`#set-permission-msg[data-kind="ok"]`),
		)
		var perm struct{ Configure, Write, Read string }
		apiGet(t, base+"/api/permissions/ui-vhost/ui-user", &perm)
		if perm.Configure != ".*" || perm.Write != "^ui-" || perm.Read != ".*" {
			t.Errorf("permissions set in the UI: %+v", perm)
		}
		br.goTo(t, "users")
		br.do(t, "delete the user",
			waitVisible(`#users[data-state="loaded"]`),
			click(`#delete-user-ui-user`),
			click(`#delete-user-ui-user`),
			waitVisible(`#users-msg[data-kind="ok"]`),
			poll(`!document.querySelector("#users tbody").textContent.includes("ui-user")`),
		)
		br.goTo(t, "vhosts")
		br.do(t, "delete the vhost",
			waitVisible(`#vhosts[data-state="loaded"]`),
			click(`#delete-vhost-ui-vhost`),
			click(`#delete-vhost-ui-vhost`),
			poll(`!document.querySelector("#vhosts tbody").textContent.includes("ui-vhost")`),
		)
	})

	t.Run("close a connection", func(t *testing.T) {
		victim, err := amqp.Dial(s.url)
		if err != nil {
			t.Fatal(err)
		}
		defer victim.Close()
		closed := victim.NotifyClose(make(chan *amqp.Error, 1))
		br.goTo(t, "connections")
		br.do(t, "close",
			waitVisible(`#connections[data-state="loaded"]`),
			sendKeys(`#connections-filter`, victim.LocalAddr().String()),
			poll(`document.querySelector("#connections-info").textContent.includes("· 1 of 2")`),
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
	})

	t.Run("policy", func(t *testing.T) {
		br.goTo(t, "policies")
		br.do(t, "bad policy",
			waitVisible(`#policies[data-state="loaded"]`),
			sendKeys(`#add-policy-name`, "ui-limit"),
			sendKeys(`#add-policy-pattern`, "^ui-"),
			setValue(`#add-policy-apply_to`, "queues"),
			setValue(`#add-policy-definition`, `{"max-length": "lots"}`),
			click(`#add-policy-submit`),
			waitVisible(`#add-policy-msg[data-kind="error"]`),
		)
		if reason := br.text(t, `#add-policy-msg`); !strings.Contains(reason, "400") || !strings.Contains(reason, "max-length") {
			t.Errorf("a bad max-length shows %q, want the API's 400 naming the key", reason)
		}
		br.do(t, "good policy",
			setValue(`#add-policy-definition`, `{"max-length": 10}`),
			click(`#add-policy-submit`),
			waitVisible(`#add-policy-msg[data-kind="ok"]`),
			poll(`document.querySelector("#policies tbody").textContent.includes("ui-limit")`),
		)
		var p struct {
			Pattern    string         `json:"pattern"`
			ApplyTo    string         `json:"apply-to"`
			Definition map[string]any `json:"definition"`
		}
		apiGet(t, base+"/api/policies/%2F/ui-limit", &p)
		if p.Pattern != "^ui-" || p.ApplyTo != "queues" || p.Definition["max-length"] != float64(10) {
			t.Errorf("stored policy %+v", p)
		}
	})

	t.Run("plugin", func(t *testing.T) {
		br.goTo(t, "plugins")
		br.do(t, "enable consistent-hash",
			waitVisible(`#plugin-enable-consistent-hash`),
			click(`#plugin-enable-consistent-hash`),
			waitVisible(`#plugin-consistent-hash[data-enabled="true"]`),
			waitVisible(`#plugins-msg[data-kind="ok"]`),
		)
		br.screenshot(t, "webui-plugins-enabled.png")
		var ps []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		}
		apiGet(t, base+"/api/plugins", &ps)
		for _, p := range ps {
			if p.Name == "consistent-hash" && !p.Enabled {
				t.Errorf("the UI showed consistent-hash enabled, the API says %+v", p)
			}
		}
		// Its type is offered when adding an exchange.
		br.goTo(t, "exchanges")
		br.do(t, "add an x-consistent-hash exchange",
			waitVisible(`#exchanges[data-state="loaded"]`),
			poll(`[...document.querySelectorAll("#add-exchange-type option")].some((o) => o.value === "x-consistent-hash")`),
			sendKeys(`#add-exchange-name`, "ui-ring"),
			setValue(`#add-exchange-type`, "x-consistent-hash"),
			click(`#add-exchange-submit`),
			waitVisible(`#add-exchange-msg[data-kind="ok"]`),
		)
		var x struct{ Type string }
		apiGet(t, base+"/api/exchanges/%2F/ui-ring", &x)
		if x.Type != "x-consistent-hash" {
			t.Errorf("the exchange added in the UI has type %q", x.Type)
		}
		// Disabling it now is refused with the API's reason, unless forced.
		br.goTo(t, "plugins")
		br.do(t, "disable refused",
			waitVisible(`#plugin-disable-consistent-hash`),
			click(`#plugin-disable-consistent-hash`),
			waitVisible(`#plugins-msg[data-kind="error"]`),
		)
		if m := br.text(t, `#plugins-msg`); !strings.Contains(m, "400") {
			t.Errorf("disabling a plugin in use shows %q, want the API's refusal", m)
		}
		br.do(t, "forced disable",
			click(`#plugins-force`),
			click(`#plugin-disable-consistent-hash`),
			waitVisible(`#plugin-consistent-hash[data-enabled="false"]`),
			waitVisible(`#plugins-msg[data-kind="ok"]`),
		)
	})

	t.Run("names are text", func(t *testing.T) {
		br.goTo(t, "queues")
		br.do(t, "queues filtered",
			waitVisible(`#queues[data-state="loaded"]`),
			sendKeys(`#queues-filter`, "onerror"),
			poll(`document.querySelector("#queues-info").textContent.includes("· 1 of")`),
		)
		linkText := br.text(t, `#queues tbody a`)
		br.do(t, "the queue's page", click(`#queues tbody a`), waitVisible(`#page[data-page="queue"][data-loaded="true"]`))
		heading := br.text(t, `#queue-name`)
		if linkText != xssName || heading != xssName {
			t.Errorf("the queue shows as %q in the list and %q on its page, want the text %q", linkText, heading, xssName)
		}
		// The same name as a vhost, an exchange, a routing key, a
		// payload, a header and a client property.
		if _, err := s.b.AddVHost(xssName); err != nil {
			t.Fatal(err)
		}
		if err := ch.ExchangeDeclare(xssName, "topic", false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.QueueBind(xssName, xssName, xssName, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := ch.Publish(xssName, xssName, false, false, amqp.Publishing{
			Headers: amqp.Table{xssName: xssName}, ContentType: xssName, Body: []byte(xssName),
		}); err != nil {
			t.Fatal(err)
		}
		hostile, err := amqp.DialConfig(s.url, amqp.Config{Properties: amqp.Table{"product": xssName}})
		if err != nil {
			t.Fatal(err)
		}
		defer hostile.Close()
		br.goTo(t, "queue", "/", xssName)
		br.do(t, "get the hostile message",
			waitVisible(`#page[data-page="queue"][data-loaded="true"]`),
			click(`#queue-get-submit`),
			waitVisible(`#get-results .message`),
		)
		if p := br.text(t, `#get-results pre.payload`); p != xssName {
			t.Errorf("the payload shows as %q", p)
		}
		for _, page := range []struct{ nav, ready string }{
			{"#nav-exchanges", `#exchanges[data-state="loaded"]`},
			{"#nav-connections", `#connections[data-state="loaded"]`},
			{"#nav-users", `#users[data-state="loaded"]`},
			{"#subnav-vhosts", `#vhosts[data-state="loaded"]`},
			{"#subnav-permissions", `#permissions[data-state="loaded"]`},
		} {
			br.do(t, page.nav, click(page.nav), waitVisible(page.ready))
			if !strings.Contains(br.text(t, `#page`), xssName) && page.nav != "#nav-users" && page.nav != "#subnav-permissions" {
				t.Errorf("%s does not show the name as text", page.nav)
			}
		}
		br.goTo(t, "exchange", "/", xssName)
		br.do(t, "the exchange's page", waitVisible(`#page[data-page="exchange"][data-loaded="true"]`))
		if x := br.text(t, `#exchange-name`); x != xssName {
			t.Errorf("the exchange shows as %q", x)
		}
		if imgs := value(t, br, "count images", chromedp.Evaluate[int](`document.querySelectorAll("img, script:not([src])").length`)); imgs != 0 {
			t.Errorf("the page has %d <img> or inline <script> elements: a name became markup", imgs)
		}
		br.mu.Lock()
		dialogs := br.dialogs
		br.mu.Unlock()
		if dialogs != 0 {
			t.Errorf("%d dialogs opened: a name ran as script", dialogs)
		}
	})

	t.Run("definitions", func(t *testing.T) {
		if status, _ := adminGet(t, base+"/api/definitions", "guest", "guest"); status == http.StatusNotFound {
			t.Skip("this build's API has no /api/definitions yet")
		}
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
		br.goTo(t, "definitions")
		br.do(t, "download",
			waitVisible(`#page[data-page="definitions"][data-loaded="true"]`),
			click(`#definitions-download`),
			waitVisible(`#definitions-download-msg[data-kind="ok"]`),
		)
		br.do(t, "upload a broken file",
			chromedp.SetUploadFiles(chromedp.CSS(`#definitions-file`), []string{bad}),
			click(`#definitions-upload`),
			waitVisible(`#definitions-upload-msg[data-kind="error"]`),
		)
		if msg := br.text(t, `#definitions-upload-msg`); !strings.Contains(msg, "not JSON") {
			t.Errorf("a broken file shows %q", msg)
		}
		br.do(t, "upload",
			chromedp.SetUploadFiles(chromedp.CSS(`#definitions-file`), []string{good}),
			click(`#definitions-upload`),
			waitVisible(`#definitions-upload-msg[data-kind="ok"]`),
		)
		queueDepth(t, ch, "ui-imported") // fails unless the import declared it
	})

	// A user with the management tag sees what the API lets it do: no
	// admin pages, plugins or definitions, its vhost's queues.
	t.Run("a management user", func(t *testing.T) {
		pw := "watch-pw"
		if err := s.b.PutUser("watcher", &pw, []string{"management"}); err != nil {
			t.Fatal(err)
		}
		if err := s.b.SetPermission("/", "watcher", ".*", ".*", ".*"); err != nil {
			t.Fatal(err)
		}
		defer login(t, br, base) // guest again for what follows
		br.do(t, "log in as watcher",
			click(`#logout`),
			waitVisible(`#login`),
			sendKeys(`#login-user`, "watcher"),
			sendKeys(`#login-password`, pw),
			click(`#login-submit`),
			waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
		)
		navs := value(t, br, "nav", chromedp.Evaluate[[]string](`[...document.querySelectorAll("nav.main a")].map((a) => a.id)`))
		for _, hidden := range []string{"nav-users", "nav-policies", "nav-plugins", "nav-definitions"} {
			if slices.Contains(navs, hidden) {
				t.Errorf("a management user's navigation %v has %s", navs, hidden)
			}
		}
		br.do(t, "queues", click(`#nav-queues`), waitVisible(`#queues[data-state="loaded"]`))
		if q := br.text(t, `#queues tbody`); !strings.Contains(q, "ui-orders") {
			t.Errorf("watcher's queues %q lack ui-orders", q)
		}
	})

	// Last, so that the charts have the history the steps above made.
	t.Run("overview screenshot", func(t *testing.T) {
		br.do(t, "overview", click("#nav-overview"), waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
			setValue("#chart-range", "60"),
			poll(`Number(document.querySelector("#chart-rates").dataset.drawn) >= 2`))
		t.Logf("overview screenshot: %s", br.screenshot(t, "webui-overview.png"))
	})

	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
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
		if _, _, err := v.DeclareQueue(vhost.QueueDef{Name: fmt.Sprintf("bulk-%05d", i)}, false); err != nil {
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
		poll(`document.querySelector("#queues-info").textContent.startsWith("Page 2 ")`),
	)
	if first := br.text(t, `#queues tbody tr:first-child a`); first != "bulk-00020" {
		t.Errorf("page 2 starts with %q, want bulk-00020", first)
	}
	br.do(t, "sort by name, then reverse it",
		click(`#queues th[data-sort="name"]`),
		poll(`document.querySelector("#queues tbody tr:first-child a").textContent === "bulk-09999"`),
	)
	br.do(t, "filter",
		sendKeys(`#queues-filter`, "bulk-0777"),
		poll(`document.querySelector("#queues-info").textContent.includes("· 10 of 10000 items")`),
	)
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}

// login logs the browser in as guest, from a fresh tab session.
func login(t *testing.T, br *browser, base string) {
	t.Helper()
	br.do(t, "log in",
		chromedp.Navigate(base+"/"),
		chromedp.Evaluate[chromedp.Void](`sessionStorage.clear(); location.hash = "#/login"`),
		waitVisible(`#login`),
		sendKeys(`#login-user`, "guest"),
		sendKeys(`#login-password`, "guest"),
		click(`#login-submit`),
		waitVisible(`#page[data-page="overview"][data-loaded="true"]`),
	)
}

func queueDepth(t *testing.T, ch *amqp.Channel, name string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(name, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

func apiGet(t *testing.T, url string, into any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}
