package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// The cluster tests start Warren processes on loopback, each with its own
// data directory, AMQP, admin and cluster ports, as an operator would run
// them on three machines.

const clusterSecret = "a secret for the tests"

// clusterNode is one Warren process of a test cluster.
type clusterNode struct {
	*process
	name, listen string
	config       string
	bin          string // the warren binary it runs; "" the usual build
}

// freeAddr is a loopback address nothing listens on (yet), with a port
// below the kernel's ephemeral range: a node killed and started again
// binds the same address, and a port from that range may meanwhile have
// become the local end of some connection out of 127.0.0.1 (which made
// a restart fail with "address already in use").
func freeAddr(t *testing.T) string {
	t.Helper()
	low := 32768 // Linux's default start of the range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const from = 10000
	if low <= from+1000 {
		t.Fatalf("the ephemeral port range starts at %d; freeAddr needs ports below it", low)
	}
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", from+rand.IntN(low-from))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatalf("no free port between %d and %d in 100 tries", from, low)
	return ""
}

func startClusterNode(t *testing.T, name string, seeds []string) *clusterNode {
	t.Helper()
	return startClusterBinary(t, "", name, seeds)
}

// startClusterBinary is startClusterNode running bin ("": the usual build).
func startClusterBinary(t *testing.T, bin, name string, seeds []string) *clusterNode {
	t.Helper()
	n := &clusterNode{name: name, listen: freeAddr(t), bin: bin}
	quoted := make([]string, len(seeds))
	for i, s := range seeds {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	n.config = fmt.Sprintf("[cluster]\nnode_name = %q\nlisten = %q\nseeds = [%s]\nsecret = %q\nchange_timeout = \"3s\"\n",
		name, n.listen, strings.Join(quoted, ", "), clusterSecret)
	n.process = n.startProcess(t, t.TempDir())
	return n
}

func (n *clusterNode) startProcess(t *testing.T, dataDir string) *process {
	if n.bin == "" {
		return startProcessWith(t, dataDir, n.config)
	}
	return startBinary(t, n.bin, dataDir, n.config)
}

// restart starts the node again on its data directory, after a stop.
func (n *clusterNode) restart(t *testing.T) {
	t.Helper()
	n.process = n.startProcess(t, n.dataDir)
}

// clusterView is GET /api/warren/cluster, as much as the tests read.
type clusterView struct {
	Role  string `json:"raft_role"`
	Nodes []struct {
		Name    string `json:"name"`
		Running bool   `json:"running"`
	} `json:"nodes"`
}

func (n *clusterNode) view(t *testing.T) clusterView {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+n.admin+"/api/warren/cluster", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v clusterView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// running lists the nodes n reports running.
func (n *clusterNode) running(t *testing.T) []string {
	var out []string
	for _, m := range n.view(t).Nodes {
		if m.Running {
			out = append(out, m.Name)
		}
	}
	return out
}

// waitUntil waits up to 20 s for cond: a cluster's changes take a few
// rounds of its nodes' messages.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 20*time.Second, what, cond)
}

// canLogIn reports whether user can open a connection to vhost on n.
func (n *clusterNode) canLogIn(user, password, vhost string) bool {
	c, err := amqp.Dial(fmt.Sprintf("amqp://%s:%s@%s/%s", user, password, n.addr, vhost))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// hasUser reports whether n lists the user, through its admin API.
func (n *clusterNode) hasUser(t *testing.T, name string) bool {
	t.Helper()
	code, body := adminGet(t, "http://"+n.admin+"/api/users/"+name, "guest", "guest")
	if code != 200 && code != 404 {
		t.Fatalf("GET /api/users/%s on %s: %d %s", name, n.name, code, body)
	}
	return code == 200
}

// TestClusterOfThreeProcesses: users, vhosts and permissions made through
// one node's admin API let a client in through another; a node killed
// with kill -9 is reported down, and once restarted has what changed
// while it was down.
func TestClusterOfThreeProcesses(t *testing.T) {
	n1 := startClusterNode(t, "n1", nil)
	n2 := startClusterNode(t, "n2", []string{n1.listen})
	n3 := startClusterNode(t, "n3", []string{n1.listen, n2.listen})
	all := []*clusterNode{n1, n2, n3}
	for _, n := range all {
		waitUntil(t, n.name+" sees three running nodes", func() bool { return len(n.running(t)) == 3 })
	}

	// /api/nodes lists every node, this one first with its figures.
	code, body := adminGet(t, "http://"+n2.admin+"/api/nodes", "guest", "guest")
	var nodes []struct {
		Name    string `json:"name"`
		Running bool   `json:"running"`
		Uptime  int64  `json:"uptime"`
	}
	if err := json.Unmarshal([]byte(body), &nodes); code != 200 || err != nil || len(nodes) != 3 || nodes[0].Name != "n2" {
		t.Fatalf("/api/nodes on n2: %d %s", code, body)
	}
	// The other nodes' figures come from them.
	for _, n := range nodes {
		if !n.Running || n.Uptime == 0 {
			t.Fatalf("/api/nodes on n2 shows %s without its figures: %s", n.Name, body)
		}
	}

	// Prometheus sees the cluster; no node is quorum-critical yet.
	if code, body := adminGet(t, "http://"+n1.admin+"/metrics", "guest", "guest"); code != 200 ||
		!strings.Contains(body, "warren_cluster_members 3") || !strings.Contains(body, `warren_cluster_member_up{node="n3"} 1`) ||
		!strings.Contains(body, "warren_raft_applied_index") {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	waitUntil(t, "n1 measures its round trip to n2", func() bool {
		_, body := adminGet(t, "http://"+n1.admin+"/metrics", "guest", "guest")
		return strings.Contains(body, `warren_cluster_peer_rtt_seconds{node="n2"}`)
	})
	if code, body := adminGet(t, "http://"+n1.admin+"/api/health/checks/node-is-quorum-critical", "guest", "guest"); code != 200 {
		t.Fatalf("quorum-critical with three nodes running: %d %s", code, body)
	}

	// The overview counts every node's clients: one connection with two
	// channels on n2, one with a consumer on n3, seen from n1.
	c2, err := amqp.Dial(n2.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for range 2 {
		if _, err := c2.Channel(); err != nil {
			t.Fatal(err)
		}
	}
	c3, err := amqp.Dial(n3.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	ch3, err := c3.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch3.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch3.Consume(q.Name, "", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var ov struct {
		Totals struct{ Connections, Channels, Consumers int } `json:"object_totals"`
	}
	waitUntil(t, "n1's overview counts the clients of n2 and n3", func() bool {
		code, body := adminGet(t, "http://"+n1.admin+"/api/overview", "guest", "guest")
		return code == 200 && json.Unmarshal([]byte(body), &ov) == nil &&
			ov.Totals.Connections == 2 && ov.Totals.Channels == 3 && ov.Totals.Consumers == 1
	})

	admin := func(n *clusterNode, method, path, body string) {
		t.Helper()
		if err := httpJSON(method, "http://"+n.admin+path, body); err != nil {
			t.Fatal(err)
		}
	}
	admin(n1, "PUT", "/api/users/alice", `{"password": "alice-pw", "tags": ""}`)
	admin(n2, "PUT", "/api/vhosts/shop", "")
	admin(n1, "PUT", "/api/permissions/shop/alice", `{"configure": ".*", "write": ".*", "read": ".*"}`)
	for _, n := range all {
		waitUntil(t, "alice logs in to shop on "+n.name, func() bool { return n.canLogIn("alice", "alice-pw", "shop") })
	}

	n3.stop(syscall.SIGKILL)
	waitUntil(t, "n1 reports n3 down", func() bool { return !strings.Contains(strings.Join(n1.running(t), ","), "n3") })
	// With n3 down, stopping n1 would leave one node of three.
	if code, body := adminGet(t, "http://"+n1.admin+"/api/health/checks/node-is-quorum-critical", "guest", "guest"); code != 503 ||
		!strings.Contains(body, "fewer than the 2") {
		t.Fatalf("quorum-critical with n3 down: %d %s", code, body)
	}
	// Two of three still make changes.
	admin(n2, "PUT", "/api/users/bob", `{"password": "bob-pw", "tags": ""}`)
	admin(n1, "PUT", "/api/permissions/shop/bob", `{"configure": "", "write": ".*", "read": ".*"}`)
	admin(n1, "DELETE", "/api/users/alice", "")

	n3.restart(t)
	waitUntil(t, "bob logs in to shop on the restarted n3", func() bool { return n3.canLogIn("bob", "bob-pw", "shop") })
	// (bob's permission came before alice's delete: n3 may be between
	// the two.)
	waitUntil(t, "alice, deleted while n3 was down, shut out there", func() bool { return !n3.canLogIn("alice", "alice-pw", "shop") })
	waitUntil(t, "n1 reports n3 running again", func() bool { return len(n1.running(t)) == 3 })
}

// TestClusterRefusesChangesWithoutMajority: with two of three nodes down,
// the last one answers 503 to a change and makes none.
func TestClusterRefusesChangesWithoutMajority(t *testing.T) {
	n1 := startClusterNode(t, "n1", nil)
	n2 := startClusterNode(t, "n2", []string{n1.listen})
	n3 := startClusterNode(t, "n3", []string{n1.listen})
	waitUntil(t, "three running nodes", func() bool { return len(n1.running(t)) == 3 })
	n2.stop(syscall.SIGKILL)
	n3.stop(syscall.SIGKILL)
	err := httpJSON("PUT", "http://"+n1.admin+"/api/users/carol", `{"password": "pw", "tags": ""}`)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "majority") {
		t.Fatalf("a change without a majority: %v, want 503 naming the majority", err)
	}
	if n1.hasUser(t, "carol") {
		t.Fatal("the change was made without a majority")
	}
}

// linkProxy stands between the other nodes and one node: it forwards
// every connection to the node, except from the source IPs it is told to
// cut off, whose connections it closes and refuses. Each test node dials
// from its own loopback IP (the transport dials from its listen IP), so
// cutting an IP at every other node's proxy, and every other IP at its
// own, partitions a node both ways.
type linkProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	blocked map[string]bool
	conns   map[net.Conn]string // accepted connections and their source IP
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, blocked: map[string]bool{}, conns: map[net.Conn]string{}}
	t.Cleanup(func() { ln.Close(); p.cut("", true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) forward(c net.Conn) {
	ip, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	p.mu.Lock()
	if p.blocked[ip] {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[c] = ip
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// cut refuses (or lets in again) connections from ip, closing those open;
// ip "" closes every connection.
func (p *linkProxy) cut(ip string, cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked[ip] = cut
	for c, from := range p.conns {
		if cut && (ip == "" || from == ip) {
			c.Close()
		}
	}
}

// TestClusterPartition cuts one node off from the two others with TCP
// proxies: it refuses changes (503) while they go on, and after healing it
// has what they did.
func TestClusterPartition(t *testing.T) {
	nodes := proxiedCluster(t, 3)
	n1, n3 := nodes[0], nodes[2]

	partition := func(cut bool) {
		for _, other := range nodes[:2] {
			other.proxy.cut(n3.ip, cut)
			n3.proxy.cut(other.ip, cut)
		}
	}
	partition(true)
	waitUntil(t, "n1 reports n3 down", func() bool { return len(n1.running(t)) == 2 })
	err := httpJSON("PUT", "http://"+n3.admin+"/api/users/minority", `{"password": "pw", "tags": ""}`)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a change on the minority side: %v, want 503", err)
	}
	if err := httpJSON("PUT", "http://"+n1.admin+"/api/users/majority", `{"password": "pw", "tags": ""}`); err != nil {
		t.Fatalf("a change on the majority side: %v", err)
	}
	partition(false)
	waitUntil(t, "the healed n3 has the majority's change", func() bool { return n3.hasUser(t, "majority") })
	for _, n := range nodes {
		if n.hasUser(t, "minority") {
			t.Fatalf("the minority's refused change is on %s", n.name)
		}
	}
}

// TestClusterKillDuringBurst: clients make 1,000 changes through two
// nodes while the third is killed with kill -9; every change that was
// answered 2xx is on both survivors and on the killed node once it is
// back, and the nodes agree on the rest.
func TestClusterKillDuringBurst(t *testing.T) {
	n1 := startClusterNode(t, "n1", nil)
	n2 := startClusterNode(t, "n2", []string{n1.listen})
	n3 := startClusterNode(t, "n3", []string{n1.listen})
	waitUntil(t, "three running nodes", func() bool { return len(n1.running(t)) == 3 })

	const total = 1000
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	third := make(chan struct{}) // a third of the changes are made
	var once sync.Once
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				via := []*clusterNode{n1, n2}[i%2]
				name := fmt.Sprintf("burst-%04d", i)
				if httpJSON("PUT", "http://"+via.admin+"/api/users/"+name, `{"password": "pw", "tags": ""}`) == nil {
					mu.Lock()
					acked[name] = true
					mu.Unlock()
				}
				if i >= total/3 {
					once.Do(func() { close(third) })
				}
			}
		}()
	}
	<-third
	n3.stop(syscall.SIGKILL)
	wg.Wait()
	if len(acked) < total/2 {
		t.Fatalf("only %d of %d changes were answered 2xx with two of three nodes up", len(acked), total)
	}
	n3.restart(t)
	users := func(n *clusterNode) map[string]bool {
		code, body := adminGet(t, "http://"+n.admin+"/api/users", "guest", "guest")
		var list []struct {
			Name string `json:"name"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("GET /api/users on %s: %d", n.name, code)
		}
		out := map[string]bool{}
		for _, u := range list {
			out[u.Name] = true
		}
		return out
	}
	waitUntil(t, "the three nodes agree", func() bool {
		a, b, c := users(n1), users(n2), users(n3)
		return maps.Equal(a, b) && maps.Equal(b, c)
	})
	final := users(n1)
	for name := range acked {
		if !final[name] {
			t.Errorf("%s was answered 2xx and is missing", name)
		}
	}
	t.Logf("%d of %d changes answered 2xx; %d users in the end", len(acked), total, len(final))
}
