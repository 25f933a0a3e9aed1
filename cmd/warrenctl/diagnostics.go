package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The health checks of rabbitmq-diagnostics, with its words: each prints
// what it asks, then either its success line (exit 0) or, on standard
// error, "Error:" and what failed (exit 69, EX_UNAVAILABLE, as
// rabbitmq-diagnostics exits); --formatter json prints {"result":"ok"}
// or the failure as an object.

// exitUnavailable is the exit code of a failed check.
const exitUnavailable = 69

// checkFailed is a check that ran and failed: main prints its lines
// after "Error:" and exits with exitUnavailable.
type checkFailed struct {
	lines []string
	json  map[string]any
}

func (e *checkFailed) Error() string { return strings.Join(e.lines, "\n") }

// check runs a check: banner is what it asks (left out with -q), ok its
// success line.
func check(o *opts, out io.Writer, banner string, run func() (ok string, failed *checkFailed, err error)) error {
	if !o.quiet && !o.silent && o.formatter != "json" {
		fmt.Fprintln(out, banner)
	}
	okLine, failed, err := run()
	switch {
	case err != nil:
		return err
	case failed != nil && o.formatter == "json":
		b, _ := json.Marshal(failed.json)
		fmt.Fprintln(out, string(b))
		return &checkFailed{json: failed.json}
	case failed != nil:
		return failed
	case o.formatter == "json":
		fmt.Fprintln(out, `{"result":"ok"}`)
	default:
		fmt.Fprintln(out, okLine)
	}
	return nil
}

// nodeCheck is check for a check of this node: its banner names it
// (banner's %s), and run is given it.
func nodeCheck(c *client, o *opts, out io.Writer, banner string, run func(n node) (string, *checkFailed, error)) error {
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	return check(o, out, fmt.Sprintf(banner, n.Name), func() (string, *checkFailed, error) { return run(n) })
}

func checkRunning(c *client, o *opts, out io.Writer, _ []string) error {
	return nodeCheck(c, o, out, "Checking if RabbitMQ is running on node %s ...", func(n node) (string, *checkFailed, error) {
		return fmt.Sprintf("RabbitMQ on node %s is fully booted and running", n.Name), nil, nil
	})
}

func checkLocalAlarms(c *client, o *opts, out io.Writer, _ []string) error {
	return nodeCheck(c, o, out, "Asking node %s to report any local resource alarms ...", func(n node) (string, *checkFailed, error) {
		if lines := alarmLines(n); len(lines) > 0 {
			return "", &checkFailed{lines: lines, json: map[string]any{"result": "error", "local": lines,
				"message": fmt.Sprintf("Node %s reported local alarms", n.Name)}}, nil
		}
		return fmt.Sprintf("Node %s reported no local alarms", n.Name), nil, nil
	})
}

// checkAlarms asks every node of the cluster.
func checkAlarms(c *client, o *opts, out io.Writer, _ []string) error {
	var nodes []node
	if err := c.get("/api/nodes", &nodes); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return errors.New("the broker listed no node")
	}
	self := nodes[0].Name
	return check(o, out, fmt.Sprintf("Asking node %s to report any local resource alarms ...", self), func() (string, *checkFailed, error) {
		var lines []string
		for _, n := range nodes {
			lines = append(lines, alarmLines(n)...)
		}
		if len(lines) > 0 {
			return "", &checkFailed{lines: lines, json: map[string]any{"result": "error", "alarms": lines,
				"message": fmt.Sprintf("Node %s reported alarms", self)}}, nil
		}
		return fmt.Sprintf("Node %s reported no alarms, local or clusterwide", self), nil, nil
	})
}

func alarmLines(n node) []string {
	var lines []string
	if n.MemAlarm {
		lines = append(lines, "Memory alarm on node "+n.Name)
	}
	if n.DiskFreeAlarm {
		lines = append(lines, "Free disk space alarm on node "+n.Name)
	}
	return lines
}

// listener is one of /api/overview's listeners.
type listener struct {
	Protocol string `json:"protocol"`
	IP       string `json:"ip_address"`
	Port     int    `json:"port"`
}

func nodeListeners(c *client) ([]listener, error) {
	var ov struct {
		Listeners []listener `json:"listeners"`
	}
	return ov.Listeners, c.get("/api/overview", &ov)
}

// purposes are rabbitmq-diagnostics listeners' words for each protocol.
var purposes = map[string]string{
	"amqp": "AMQP 0-9-1 and AMQP 1.0", "amqp/ssl": "AMQP 0-9-1 and AMQP 1.0 over TLS",
	"http": "HTTP API", "https": "HTTP API over TLS", "clustering": "inter-node and CLI tool communication",
}

func listListeners(c *client, o *opts, out io.Writer, _ []string) error {
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	ls, err := nodeListeners(c)
	if err != nil {
		return err
	}
	if o.formatter == "json" {
		b, _ := json.Marshal(ls)
		_, err := fmt.Fprintln(out, string(b))
		return err
	}
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Asking node %s to report its protocol listeners ...\n", n.Name)
	}
	for _, l := range ls {
		ip := l.IP
		if strings.Contains(ip, ":") {
			ip = "[" + ip + "]"
		}
		fmt.Fprintf(out, "Interface: %s, port: %d, protocol: %s, purpose: %s\n", ip, l.Port, l.Protocol, purposes[l.Protocol])
	}
	return nil
}

// checkPortConnectivity connects to every listener: at its address, or
// at the admin API's host when it listens on every interface.
func checkPortConnectivity(c *client, o *opts, out io.Writer, _ []string) error {
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	ls, err := nodeListeners(c)
	if err != nil {
		return err
	}
	u, err := url.Parse(c.base)
	if err != nil {
		return err
	}
	return check(o, out, fmt.Sprintf("Testing TCP connections to all active listeners on node %s ...", n.Name), func() (string, *checkFailed, error) {
		if len(ls) == 0 {
			return "", &checkFailed{lines: []string{"Node " + n.Name + " reports no listener"},
				json: map[string]any{"result": "error", "message": "Node " + n.Name + " reports no listener"}}, nil
		}
		var ports, failed []string
		for _, l := range ls {
			host := l.IP
			if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
				host = u.Hostname()
			}
			addr := net.JoinHostPort(host, strconv.Itoa(l.Port))
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				failed = append(failed, fmt.Sprintf("Connection to port %d (%s) failed: %v", l.Port, l.Protocol, err))
				continue
			}
			conn.Close()
			ports = append(ports, strconv.Itoa(l.Port))
		}
		if len(failed) > 0 {
			return "", &checkFailed{lines: failed, json: map[string]any{"result": "error", "failures": failed,
				"message": fmt.Sprintf("Connection to %d of %d listeners on node %s failed", len(failed), len(ls), n.Name)}}, nil
		}
		return fmt.Sprintf("Successfully connected to ports %s on node %s.", strings.Join(ports, ", "), n.Name), nil, nil
	})
}

// healthCheck runs one of /api/health/checks: 200 is ok, 503 the check's
// failure with its reason.
func healthCheck(c *client, path string) (failed *checkFailed, err error) {
	var ok map[string]any
	err = c.get(path, &ok)
	if err == nil {
		return nil, nil
	}
	if !strings.Contains(err.Error(), "503") {
		return nil, err
	}
	return &checkFailed{lines: []string{err.Error()}, json: map[string]any{"result": "error", "message": err.Error()}}, nil
}

func checkVirtualHosts(c *client, o *opts, out io.Writer, _ []string) error {
	return nodeCheck(c, o, out, "Checking if all vhosts are running on node %s ...", func(n node) (string, *checkFailed, error) {
		failed, err := healthCheck(c, "/api/health/checks/virtual-hosts")
		return fmt.Sprintf("Node %s reported all vhosts as running", n.Name), failed, err
	})
}

// checkCertificateExpiration asks whether a certificate the node serves
// expires within four weeks, rabbitmq-diagnostics' default.
func checkCertificateExpiration(c *client, o *opts, out io.Writer, _ []string) error {
	return nodeCheck(c, o, out, "Checking certificate expiration on node %s ...", func(n node) (string, *checkFailed, error) {
		failed, err := healthCheck(c, "/api/health/checks/certificate-expiration/4/weeks")
		return "No certificates are expiring within 4 weeks.", failed, err
	})
}

// quorumStatus is rabbitmq-queues quorum_status: a quorum queue's (or a
// stream's) members as this node sees its group: each one's state, its
// log position where the leader knows it, the term. Warren keeps no
// snapshot index nor machine version per member to show.
func quorumStatus(c *client, o *opts, out io.Writer, args []string) error {
	var q struct {
		Type    string   `json:"type"`
		Node    string   `json:"node"`
		Leader  string   `json:"leader"`
		Members []string `json:"members"`
		Online  []string `json:"online"`
		Raft    *struct {
			Role   string            `json:"role"`
			Term   uint64            `json:"term"`
			Commit uint64            `json:"commit_index"`
			Match  map[string]uint64 `json:"match"`
		} `json:"raft"`
	}
	if err := c.get("/api/queues/"+vhostPath(o)+"/"+url.PathEscape(args[0]), &q); err != nil {
		return err
	}
	if q.Members == nil {
		return fmt.Errorf("queue '%s' is a %s queue, not a quorum queue or a stream", args[0], q.Type)
	}
	var rows [][]any
	for _, m := range q.Members {
		state := "follower"
		switch {
		case !slices.Contains(q.Online, m):
			state = "noproc"
		case m == q.Leader:
			state = "leader"
		}
		var index, commit, term any = "", "", ""
		if q.Raft != nil {
			term = q.Raft.Term
			if at, ok := q.Raft.Match[m]; ok {
				index = at
			}
			if m == q.Node && q.Raft.Role != "" {
				commit = q.Raft.Commit
			}
		}
		rows = append(rows, []any{m, state, index, commit, term})
	}
	return output(out, o, fmt.Sprintf("Status of quorum queue %s ...", args[0]),
		[]string{"Node Name", "Raft State", "Log Index", "Commit Index", "Term"}, rows)
}

// checkQuorumCritical is rabbitmq-queues check_if_node_is_quorum_critical:
// whether stopping this node would leave the cluster without a majority.
func checkQuorumCritical(c *client, o *opts, out io.Writer, _ []string) error {
	return nodeCheck(c, o, out, "Checking if node %s is critical for quorum of any quorum queues ...", func(n node) (string, *checkFailed, error) {
		var ok struct{ Reason string }
		err := c.get("/api/health/checks/node-is-quorum-critical", &ok)
		switch {
		case err != nil && strings.Contains(err.Error(), "503"):
			return "", &checkFailed{lines: []string{err.Error()}, json: map[string]any{"result": "error", "message": err.Error()}}, nil
		case err != nil:
			return "", nil, err
		case ok.Reason == "single node cluster":
			return fmt.Sprintf("Node %s seems to be the only one in a single node cluster, the check does not apply", n.Name), nil, nil
		}
		return fmt.Sprintf("Node %s reported no quorum queues with a minimum quorum", n.Name), nil, nil
	})
}

// memoryUnits are memory_breakdown's units, as rabbitmq-diagnostics takes
// them, in bytes.
var memoryUnits = map[string]float64{
	"byte": 1, "bytes": 1, "kb": 1e3, "kib": 1 << 10, "mb": 1e6, "mib": 1 << 20,
	"gb": 1e9, "gib": 1 << 30, "tb": 1e12, "tib": 1 << 40,
}

// memoryBreakdown prints where the node's memory goes, largest first,
// each category in --unit with its share of the resident set, as
// rabbitmq-diagnostics memory_breakdown does; --formatter json prints the
// breakdown in bytes as /api/nodes/{node}/memory has it.
func memoryBreakdown(c *client, o *opts, out io.Writer, _ []string) error {
	n, err := thisNode(c)
	if err != nil {
		return err
	}
	var ans struct {
		Memory json.RawMessage `json:"memory"`
	}
	if err := c.get("/api/nodes/"+url.PathEscape(n.Name)+"/memory", &ans); err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(ans.Memory, &m); err != nil {
		return fmt.Errorf("node %s did not report its memory (%s)", n.Name, ans.Memory)
	}
	if o.formatter == "json" {
		_, err := fmt.Fprintln(out, string(ans.Memory))
		return err
	}
	type category struct {
		name  string
		bytes float64
	}
	var cats []category
	var sum float64
	for k, v := range m {
		if b, ok := v.(float64); ok {
			cats = append(cats, category{k, b})
			sum += b
		}
	}
	total := sum
	if t, ok := m["total"].(map[string]any); ok {
		if rss, ok := t["rss"].(float64); ok && rss > 0 {
			total = rss
		}
	}
	slices.SortFunc(cats, func(a, b category) int {
		return cmp.Or(cmp.Compare(b.bytes, a.bytes), strings.Compare(a.name, b.name))
	})
	unit := o.unit
	if unit == "" {
		unit = "gb"
	}
	if !o.quiet && !o.silent {
		fmt.Fprintf(out, "Reporting memory breakdown on node %s...\n", n.Name)
	}
	for _, cat := range cats {
		share := 0.0
		if total > 0 {
			share = 100 * cat.bytes / total
		}
		v := strconv.FormatFloat(cat.bytes/memoryUnits[unit], 'f', 4, 64)
		if memoryUnits[unit] == 1 {
			v = strconv.FormatFloat(cat.bytes, 'f', 0, 64)
		}
		fmt.Fprintf(out, "%s: %s %s (%.2f%%)\n", cat.name, v, unit, share)
	}
	return nil
}
