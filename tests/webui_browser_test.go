package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The harness of the web UI's tests (webui_test.go): a headless chromium
// tab driven by chromedp, steps that fail with a screenshot and what the
// page logged, and short names for the steps the tests use.

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
		skipFor(t, "chromium", "%s", why)
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
		skipFor(t, "chromium", "chromium at %s does not start: %v", exe, err)
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
		pollJS(`document.querySelector("#page:not([data-left])") !== null`),
	)
}

// Short names for the CSS steps the tests use.
func waitVisible(css string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(css))
}
func click(css string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(css)) }

// clickFound clicks css in the page's own script, found and clicked in
// one step, once it is there: for an element a refresh may replace
// between chromedp's query and its click ("Could not find node with
// given id").
func clickFound(css string) chromedp.Action[chromedp.Void] {
	b, _ := json.Marshal(css)
	return pollJS(fmt.Sprintf(`(() => { const el = document.querySelector(%s); if (!el) return false; el.click(); return true; })()`, b))
}

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
func pollJS(js string) chromedp.Action[chromedp.Void] { return chromedp.Poll[chromedp.Void](js) }

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
