package tests

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// rabbitNode is a private RabbitMQ 3.10.8 node (Debian's rabbitmq-server)
// that a test starts beside Warren, as the other broker of a shovel: its
// own node name, ports and directories (owned by the rabbitmq user, which
// it runs as), killed with kill -9 and started again on the same
// directories when the test says.
type rabbitNode struct {
	t        *testing.T
	name     string // node name, name@localhost
	dir      string
	amqpPort int
	admin    string // http://host:port of its management API, with rabbitmq_management
	mqtt     string // host:port of its MQTT listener, with rabbitmq_mqtt
	plugins  []string
	log      *os.File
}

const rabbitServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"

// startRabbitMQ starts a private RabbitMQ node with the plugins named
// enabled. It needs Debian's rabbitmq-server and root (to run the node as
// the rabbitmq user); WARREN_REQUIRE=rabbitmq turns the skip without them
// into a failure.
func startRabbitMQ(t *testing.T, plugins ...string) *rabbitNode {
	t.Helper()
	r := newRabbitNode(t, plugins)
	r.start()
	return r
}

// startRabbitMQs starts n private RabbitMQ nodes at once, each as
// startRabbitMQ starts one, and waits until all take connections: their
// boots overlap.
func startRabbitMQs(t *testing.T, n int, plugins ...string) []*rabbitNode {
	t.Helper()
	rs := make([]*rabbitNode, n)
	for i := range rs {
		rs[i] = newRabbitNode(t, plugins)
		rs[i].launch()
	}
	for _, r := range rs {
		r.awaitUp()
	}
	return rs
}

// newRabbitNode makes a node's directories and configuration, and kills
// it when the test ends; start runs it.
func newRabbitNode(t *testing.T, plugins []string) *rabbitNode {
	t.Helper()
	skipReference(t)
	if _, err := os.Stat(rabbitServer); err != nil {
		skipFor(t, "rabbitmq", "RabbitMQ (Debian's rabbitmq-server) is not installed")
	}
	rmq, err := user.Lookup("rabbitmq")
	if err != nil || os.Geteuid() != 0 {
		skipFor(t, "rabbitmq", "a private RabbitMQ node needs root and the rabbitmq user")
	}
	dir, err := os.MkdirTemp("", "warren-rabbitmq-")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(rmq.Uid)
	gid, _ := strconv.Atoi(rmq.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(strings.Split(freeAddr(t), ":")[1])
	r := &rabbitNode{t: t, name: fmt.Sprintf("wt%d", rand.Uint32()), dir: dir, amqpPort: port, plugins: plugins}
	conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%d\nloopback_users = none\ndisk_free_limit.absolute = 1MB\n", port)
	if slices.Contains(plugins, "rabbitmq_management") {
		addr := freeAddr(t)
		host, mport, _ := net.SplitHostPort(addr)
		conf += fmt.Sprintf("management.tcp.ip = %s\nmanagement.tcp.port = %s\n", host, mport)
		r.admin = "http://" + addr
	}
	if slices.Contains(plugins, "rabbitmq_mqtt") {
		r.mqtt = freeAddr(t)
		conf += fmt.Sprintf("mqtt.listeners.tcp.1 = %s\n", r.mqtt)
	}
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(p, uid, gid)
	}
	write("rabbitmq.conf", conf)
	write("enabled_plugins", "["+strings.Join(plugins, ",")+"].\n")
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "out.log")); err == nil {
				t.Logf("RabbitMQ's output:\n%s", b)
			}
		}
		os.RemoveAll(dir)
	})
	return r
}

// start starts the node on its directories and waits until it takes
// AMQP connections.
func (r *rabbitNode) start() {
	r.t.Helper()
	r.launch()
	r.awaitUp()
}

// launch starts the node's process.
func (r *rabbitNode) launch() {
	r.t.Helper()
	distPort := strings.Split(freeAddr(r.t), ":")[1]
	env := []string{
		"RABBITMQ_NODENAME=" + r.name + "@localhost", "RABBITMQ_MNESIA_BASE=" + r.dir + "/mnesia",
		"RABBITMQ_LOG_BASE=" + r.dir + "/log", "RABBITMQ_ENABLED_PLUGINS_FILE=" + r.dir + "/enabled_plugins",
		"RABBITMQ_CONFIG_FILE=" + r.dir + "/rabbitmq", "RABBITMQ_FEATURE_FLAGS_FILE=" + r.dir + "/feature_flags",
		"RABBITMQ_DIST_PORT=" + distPort, "RABBITMQ_PID_FILE=" + r.dir + "/pid",
	}
	out, err := os.OpenFile(filepath.Join(r.dir, "out.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command("su", "rabbitmq", "-s", "/bin/sh", "-c", "exec "+rabbitServer)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); out.Close() }()
}

// awaitUp waits until the launched node takes AMQP connections (and, with
// rabbitmq_management, answers on its API).
func (r *rabbitNode) awaitUp() {
	r.t.Helper()
	poll.Until(r.t, 90*time.Second, "RabbitMQ node "+r.name+" taking connections", func() bool {
		c, err := amqp.Dial(r.url())
		if err != nil {
			return false
		}
		c.Close()
		if r.admin != "" {
			resp, err := http.Get(r.admin + "/api/overview")
			if err != nil {
				return false
			}
			resp.Body.Close()
		}
		return true
	})
}

// url is the node's AMQP URL, as guest.
func (r *rabbitNode) url() string {
	return "amqp://guest:guest@" + net.JoinHostPort("127.0.0.1", strconv.Itoa(r.amqpPort)) + "/"
}

// kill ends the node with kill -9 (the beam process, by the pid file
// RabbitMQ writes) and waits until its port is free.
func (r *rabbitNode) kill() {
	if b, err := os.ReadFile(filepath.Join(r.dir, "pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	poll.Until(r.t, 30*time.Second, "RabbitMQ node "+r.name+" gone", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.amqpPort)), time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	_ = os.Remove(filepath.Join(r.dir, "pid"))
}
