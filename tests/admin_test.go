package tests

import (
	"io"
	"net"
	"net/http"
	"testing"

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
