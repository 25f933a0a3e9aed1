package tests

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
)

// hostAddress returns an IPv4 address of this host that is not loopback:
// a client that dials it from here has it as its own address too, so the
// server sees a non-loopback peer.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("listing interface addresses: %v", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Skip("this host has no non-loopback IPv4 address")
	return ""
}

// adminGet makes a GET with basic credentials and returns status and body.
func adminGet(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Bound to all interfaces, the admin API still lets guest in only from
// loopback, as the AMQP listener does and as RabbitMQ's management API
// answers (checked against RabbitMQ 3.10.8 on this host's address).
func TestAdminLoopbackUserFromAnotherAddress(t *testing.T) {
	host := hostAddress(t)
	s := startWarren(t, func(c *config.Config) { c.Admin.Listen = "0.0.0.0:0" })
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(s.b.AdminAddr())
	remote := "http://" + net.JoinHostPort(host, port) + "/api/overview"
	local := "http://" + net.JoinHostPort("127.0.0.1", port) + "/api/overview"

	status, body := adminGet(t, remote, "guest", "guest")
	if want := `{"error":"not_authorised","reason":"User can only log in via localhost"}`; status != http.StatusUnauthorized || body != want {
		t.Fatalf("guest from %s: %d %s, want 401 %s", host, status, body, want)
	}
	if status, body := adminGet(t, local, "guest", "guest"); status != http.StatusOK {
		t.Fatalf("guest from loopback: %d %s", status, body)
	}
	pw := "pw"
	if err := s.b.PutUser("ops", &pw, []string{"administrator"}); err != nil {
		t.Fatal(err)
	}
	if status, body := adminGet(t, remote, "ops", "pw"); status != http.StatusOK {
		t.Fatalf("ops from %s: %d %s", host, status, body)
	}
}

// openFiles counts a process's open file descriptors.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// Idle HTTP clients on the admin port used to keep their connections, and
// a file descriptor each, forever: enough of them and the AMQP listener
// failed every accept with "too many open files". The broker runs here
// with a descriptor limit a little above what it needs, and more idle
// admin clients than that limit connect, each after one unauthenticated
// request, as a scanner or a stuck monitor would.
func TestAdminIdleConnectionsDoNotStarveAMQP(t *testing.T) {
	if reference() != "" {
		t.Skip("runs the warren binary")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to count open files")
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit to lower the broker's open-file limit")
	}
	maxAdmin := config.Default().Admin.MaxConnections
	idle := 3 * maxAdmin
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < idle+16 {
			t.Skipf("the accept queue (somaxconn %d) cannot hold %d waiting clients", n, idle)
		}
	}
	p := startProcess(t, t.TempDir())
	pid := p.cmd.Process.Pid
	base := openFiles(t, pid)
	// Room for every admin connection the broker may hold and a few AMQP
	// ones, but not for the idle clients.
	limit := base + maxAdmin + 32
	if out, err := exec.Command(prlimit, "--pid", strconv.Itoa(pid), fmt.Sprintf("--nofile=%d:%d", limit, limit)).CombinedOutput(); err != nil {
		t.Skipf("prlimit: %v %s", err, out)
	}

	clients := make([]net.Conn, 0, idle)
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	for range idle {
		c, err := net.Dial("tcp", p.admin)
		if err != nil {
			t.Fatalf("admin client %d: %v", len(clients), err)
		}
		clients = append(clients, c)
		if _, err := io.WriteString(c, "GET /api/overview HTTP/1.1\r\nHost: warren\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}

	// The AMQP listener still accepts, and the broker works.
	c, err := amqp.DialConfig(p.url(), amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("AMQP dial with %d idle admin clients: %v", idle, err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t, pid); n > base+maxAdmin+8 {
		t.Fatalf("%d open files with %d idle admin clients: more than %d (start) + %d (admin.max_connections) + a few", n, idle, base, maxAdmin)
	}

	// Once the idle clients go, the admin API answers again.
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	if err := httpJSON("GET", "http://"+p.admin+"/api/overview", ""); err != nil {
		t.Fatalf("admin API after the idle clients left: %v", err)
	}
}
