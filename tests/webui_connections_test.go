package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// holdEnv makes the test binary, run as a child by a test, a holder of
// connections instead (TestMain): "URL N" opens N AMQP connections to
// URL, prints "ready" and holds them until its standard input closes. In
// a process of its own, the connections' client ends do not count against
// the broker's descriptors.
const holdEnv = "WARREN_TEST_HOLD_CONNECTIONS"

// holdConnections is the child's work; its exit code is the process's.
func holdConnections(spec string) int {
	url, count, _ := strings.Cut(spec, " ")
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Println("error: bad count", count)
		return 2
	}
	var (
		mu       sync.Mutex
		conns    []*amqp.Connection
		firstErr error
		wg       sync.WaitGroup
	)
	dialing := make(chan struct{}, 32)
	for i := range n {
		dialing <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-dialing; wg.Done() }()
			c, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": fmt.Sprintf("held-%05d", i)}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if c != nil {
				conns = append(conns, c)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Println("error:", firstErr)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// holdConnectionsFor opens n connections to the broker from a child
// process, held until the test ends.
func holdConnectionsFor(t *testing.T, url string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", holdEnv, url, n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	select {
	case line := <-said:
		if line != "ready" {
			t.Fatalf("the connection holder said %q", line)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the connection holder did not open its connections within 3 minutes")
	}
}

// The connections page with 10,000 connections stays paged: the browser
// renders one page of 20 rows, the server pages and sorts, and the page
// after it comes from the server too.
func TestWebUIManyConnections(t *testing.T) {
	br := startBrowser(t)
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "127.0.0.1:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	// The broker's ends need a descriptor each, beside the browser's and
	// the store's (Go raises the soft limit to the hard one at start).
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n+2000 {
		t.Fatalf("%d connections need %d open files; this process may have %d (%v): raise its hard limit", n, n+2000, lim.Cur, err)
	}
	holdConnectionsFor(t, s.url, n)
	poll.Until(t, time.Minute, "10,000 connections open", func() bool { return len(s.b.Server().Connections()) == n })

	// The last name, which a reversed sort puts first; and what a page
	// costs the server, for BENCHMARKS.md (not asserted).
	start := time.Now()
	req, _ := http.NewRequest("GET", "http://"+s.b.AdminAddr()+"/api/connections?page=1&page_size=1&sort=name&sort_reverse=true", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var last struct{ Items []struct{ Name string } }
	err = json.NewDecoder(resp.Body).Decode(&last)
	resp.Body.Close()
	if err != nil || len(last.Items) != 1 {
		t.Fatalf("the last connection by name: %v %+v", err, last)
	}
	t.Logf("GET /api/connections, one page sorted by name, with %d connections: %v", n, time.Since(start))

	login(t, br, "http://"+s.b.AdminAddr())
	br.goTo(t, "connections")
	br.do(t, "first page", waitVisible(`#connections[data-state="loaded"]`))
	rows := value(t, br, "rows", chromedp.Evaluate[int](`document.querySelectorAll("#connections tbody tr").length`))
	if info := br.text(t, `#connections-info`); rows != 20 || !strings.Contains(info, "Page 1 of 500") || !strings.Contains(info, "10000 items") {
		t.Errorf("first page: %d rows, %q; want 20 rows of 10000 on 500 pages", rows, info)
	}
	first := br.text(t, `#connections tbody tr:first-child a`)
	br.do(t, "next page",
		click(`#connections-next`),
		pollJS(`document.querySelector("#connections-info").textContent.startsWith("Page 2 ")`),
	)
	if second := br.text(t, `#connections tbody tr:first-child a`); second == first || second == "" {
		t.Errorf("page 2 starts with %q, page 1 with %q", second, first)
	}
	br.do(t, "sorted by name, reversed",
		click(`#connections th[data-sort="name"]`),
		pollJS(`document.querySelector("#connections tbody tr:first-child a").textContent === `+strconv.Quote(last.Items[0].Name)),
	)
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
