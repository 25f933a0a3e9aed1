package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The warren binary, built once per test run.
var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

func warrenBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() { binaryPath, binaryErr = buildWarren("") })
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// buildWarren builds the warren binary with the build tags given.
func buildWarren(tags string) (string, error) {
	dir, err := os.MkdirTemp(scratchDir, "bin")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "warren")
	out, err := exec.Command("go", "build", "-tags", tags, "-o", path, "github.com/warrenmq/warren/cmd/warren").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build -tags %q: %v\n%s", tags, err, out)
	}
	return path, nil
}

// process is a warren binary running in a child process.
type process struct {
	t       testing.TB
	cmd     *exec.Cmd
	addr    string // AMQP listener
	admin   string // admin listener
	stream  string // stream protocol listener
	logMu   sync.Mutex
	log     strings.Builder
	exited  chan struct{}
	dataDir string
}

// startProcess runs warren with a data directory (reused across restarts
// when the same one is passed) and waits until it accepts connections.
func startProcess(t testing.TB, dataDir string, extraArgs ...string) *process {
	t.Helper()
	return startProcessWith(t, dataDir, "", extraArgs...)
}

// startProcessWith is startProcess with more broker.toml settings (whole
// tables, e.g. "[storage]\nqueue_memory_messages = 10\n").
func startProcessWith(t testing.TB, dataDir, extraConfig string, extraArgs ...string) *process {
	t.Helper()
	return startBinary(t, warrenBinary(t), dataDir, extraConfig, extraArgs...)
}

// startBinary is startProcessWith for another build of warren.
func startBinary(t testing.TB, bin, dataDir, extraConfig string, extraArgs ...string) *process {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "broker.toml")
	text := "[admin]\nlisten = \"127.0.0.1:0\"\n[stream]\nlisten = \"127.0.0.1:0\"\n[mqtt]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\nlevel = \"debug\"\n" + extraConfig
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-config", cfg, "-listen", "127.0.0.1:0", "-data", dataDir}, extraArgs...)
	p := &process{t: t, cmd: exec.Command(bin, args...), exited: make(chan struct{}), dataDir: dataDir}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		// The log is read to its end before Wait, which closes the pipe.
		p.readLog(stderr, ready)
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("warren log:\n%s", p.logText())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("warren exited during start:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("warren did not start:\n%s", p.logText())
	}
	return p
}

func (p *process) readLog(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		p.logMu.Lock()
		p.log.WriteString(line + "\n")
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			if addr, ok := rec["addr"].(string); ok {
				switch rec["listener"] {
				case "amqp":
					p.addr = addr
				case "admin":
					p.admin = addr
				case "stream":
					p.stream = addr
				}
			}
			if rec["message"] == "Warren started" && !signalled {
				signalled = true
				close(ready)
			}
		}
		p.logMu.Unlock()
	}
}

func (p *process) logText() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.log.String()
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) url() string { return "amqp://guest:guest@" + p.addr + "/" }

// signal sends sig and waits for the process to exit.
func (p *process) stop(sig syscall.Signal) {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("warren did not exit after %v", sig)
	}
}

func TestSIGTERMClosesConnectionsWith320(t *testing.T) {
	if reference() != "" {
		t.Skip("runs the warren binary")
	}
	p := startProcess(t, t.TempDir())
	c, err := amqp.Dial(p.url())
	if err != nil {
		t.Fatal(err)
	}
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	p.stop(syscall.SIGTERM)
	select {
	case e := <-closed:
		if e == nil || e.Code != amqp.ConnectionForced {
			t.Fatalf("got %v, want 320 CONNECTION_FORCED", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no connection.close from the broker")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !strings.Contains(p.logText(), "broker stopped") {
		t.Fatal("no clean shutdown in the log")
	}
}

func TestBadConfigFileIsAClearError(t *testing.T) {
	if reference() != "" {
		t.Skip("runs the warren binary")
	}
	cfg := filepath.Join(t.TempDir(), "broker.toml")
	_ = os.WriteFile(cfg, []byte("[amqp]\nlisten = \"127.0.0.1:0\"\nlisen = \"x\"\n"), 0o644)
	out, err := exec.Command(warrenBinary(t), "-config", cfg).CombinedOutput()
	if err == nil {
		t.Fatal("warren started with an unknown setting")
	}
	if !strings.Contains(string(out), "broker.toml:3") || !strings.Contains(string(out), "amqp.lisen") {
		t.Fatalf("error does not name the key and line:\n%s", out)
	}
}

// runBinary runs warren to its end (for start-up errors) and returns its output.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(warrenBinary(t), args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
		return string(out), err
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return string(out), fmt.Errorf("warren kept running")
	}
}

// httpJSON makes an admin API request as guest; body "" sends none, any
// other body goes as application/json, which the API requires.
func httpJSON(method, url, body string) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth("guest", "guest")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, b)
	}
	return nil
}

// SIGHUP leaves the broker serving (it reloads the plugins' settings,
// TestPluginSettingsChangeWhileRunning), and says so in the log; left to
// Go's default it killed Warren with exit 129.
func TestSIGHUPKeepsServing(t *testing.T) {
	if reference() != "" {
		t.Skip("runs the warren binary")
	}
	p := startProcess(t, t.TempDir())
	c, err := amqp.Dial(p.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the SIGHUP log line", func() bool {
		return strings.Contains(p.logText(), `SIGHUP: plugin settings reloaded`)
	})
	ch, err := c.Channel()
	if err != nil {
		t.Fatalf("channel after SIGHUP: %v", err)
	}
	if _, err := ch.QueueDeclare("", false, true, true, false, nil); err != nil {
		t.Fatalf("declare after SIGHUP: %v", err)
	}
	p.stop(syscall.SIGTERM)
	expectClose(t, closed, amqp.ConnectionForced)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// SIGTERM stops the broker while a publisher is held by a resource alarm
// that will not clear: the alarm does not hold shutdown up, and the
// publisher hears 320.
func TestSIGTERMWithPublisherHeldByAlarm(t *testing.T) {
	if reference() != "" {
		t.Skip("runs the warren binary")
	}
	p := startProcessWith(t, t.TempDir(), "[resources]\nmemory_high_watermark = 0.000000001\n")
	c, err := amqp.Dial(p.url())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	blocked := c.NotifyBlocked(make(chan amqp.Blocking, 1))
	closed := c.NotifyClose(make(chan *amqp.Error, 1))
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the memory alarm", func() bool {
		return strings.Contains(p.logText(), "resource alarm raised")
	})
	if err := ch.Publish("", "nowhere", false, false, amqp.Publishing{Body: []byte("held")}); err != nil {
		t.Fatal(err)
	}
	expectBlocking(t, blocked, true)
	p.stop(syscall.SIGTERM)
	expectClose(t, closed, amqp.ConnectionForced)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// -listen may be given more than once (RabbitMQ listens on IPv4 and IPv6),
// and -admin moves the admin API, so Warren starts beside a RabbitMQ on
// other ports without a configuration file.
func TestListenFlagsRepeatAndAdminFlag(t *testing.T) {
	skipReference(t)
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
	p := startProcess(t, t.TempDir(), "-listen", "[::1]:0", "-admin", "127.0.0.1:0")
	defer p.stop(syscall.SIGTERM)
	var amqpAddrs []string
	for _, line := range strings.Split(p.logText(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["listener"] == "amqp" {
			amqpAddrs = append(amqpAddrs, rec["addr"].(string))
		}
	}
	if len(amqpAddrs) != 2 {
		t.Fatalf("AMQP listeners %v, want an IPv4 and an IPv6 one", amqpAddrs)
	}
	for _, addr := range amqpAddrs {
		c, err := amqp.Dial("amqp://guest:guest@" + addr + "/")
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		c.Close()
	}
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin API at -admin's address: %d", resp.StatusCode)
	}
}
