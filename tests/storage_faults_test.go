package tests

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/warrenmq/warren/internal/poll"
)

// TestDamagedWALIsNeverSilent damages the middle of the newest write-ahead
// log after a kill -9: by default Warren refuses to start and says where
// and what; with wal_damage = "truncate" it starts without the records
// after the damage and logs that at error level.
func TestDamagedWALIsNeverSilent(t *testing.T) {
	skipReference(t)
	dir := t.TempDir()
	p := startProcess(t, dir)
	_, ch := dialProcess(t, p)
	if _, err := ch.QueueDeclare("wal-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	publishPersistent(t, ch, "", "wal-q", strings.Repeat("x", 1000), 2000)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	var logs []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	sort.Strings(logs)
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	newest := filepath.Join(dir, logs[len(logs)-1])
	st, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(newest, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	out, err := runBinary(t, "-listen", "127.0.0.1:0", "-data", dir)
	if err == nil || !strings.Contains(out, "damaged at offset") || !strings.Contains(out, logs[len(logs)-1]) ||
		!strings.Contains(out, "storage.wal_damage") {
		t.Fatalf("start on a damaged WAL: %v\n%s", err, out)
	}

	p = startProcessWith(t, dir, "[storage]\nwal_damage = \"truncate\"\n")
	if log := p.logText(); !strings.Contains(log, `"level":"error"`) || !strings.Contains(log, "records_dropped") {
		t.Fatalf("truncating a damaged WAL logged no error:\n%s", log)
	}
	_, ch = dialProcess(t, p)
	q, err := ch.QueueDeclarePassive("wal-q", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages >= 2000 {
		t.Fatalf("wal-q holds %d messages: nothing was dropped after the damage", q.Messages)
	}
	t.Logf("%d of 2000 messages kept, those before the damage", q.Messages)
}

// mountTmpfs mounts a tmpfs of the given size on a fresh directory and
// unmounts it when the test ends; it skips the test where mounting is not
// permitted (it needs root, as in CI).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		skipFor(t, "tmpfs", "cannot mount a %s tmpfs to fill (needs root): %v %s", size, err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// launchProcess starts warren like startProcessWith but returns at once;
// ready is closed when it has started.
func launchProcess(t *testing.T, dataDir, extraConfig string) (p *process, ready chan struct{}) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "broker.toml")
	text := "[admin]\nlisten = \"127.0.0.1:0\"\n[stream]\nlisten = \"127.0.0.1:0\"\n[mqtt]\nlisten = \"127.0.0.1:0\"\n[log]\nformat = \"json\"\nlevel = \"debug\"\n" + extraConfig
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p = &process{t: t, exited: make(chan struct{}), dataDir: dataDir,
		cmd: exec.Command(warrenBinary(t), "-config", cfg, "-listen", "127.0.0.1:0", "-data", dataDir)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready = make(chan struct{})
	go func() {
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
	return p, ready
}

// waitingForSpace waits until a broker started on a full disk says it
// waits for space, and fails the test if it started or exited first.
func waitingForSpace(t *testing.T, p *process, ready chan struct{}) {
	t.Helper()
	poll.Until(t, 30*time.Second, "the broker to say it waits for disk space", func() bool {
		select {
		case <-ready:
			t.Fatal("started on a full disk")
		case <-p.exited:
			t.Fatalf("exited on a full disk:\n%s", p.logText())
		default:
		}
		return strings.Contains(p.logText(), "not enough disk space to start: waiting for space")
	})
	select {
	case <-ready:
		t.Fatal("started on a full disk")
	default:
	}
}

// cpuTime is the CPU time a process has used so far.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// TestFullDisk fills a 300 MB tmpfs: the disk alarm blocks the publisher
// while there is still room, no write fails, a consumer drains every
// confirmed message; then Warren restarts on the disk filled to the last
// byte, logs one error and waits without spinning, and starts once space
// is freed, with the messages left in the queue.
func TestFullDisk(t *testing.T) {
	skipReference(t)
	mnt := mountTmpfs(t, "300m")
	data := filepath.Join(mnt, "data")
	p := startProcessWith(t, data, "[resources]\ndisk_free_limit = \"50MB\"\n")
	// Incompressible 64 KiB bodies, published with confirms until the
	// broker blocks the connection, which is then cut: the messages not
	// yet confirmed go with it.
	confirmed := fillUntilBlocked(t, p, mnt, "full-q", nil, 64<<10)
	// The alarm fires at the limit plus the store's reserve; a compaction
	// writing its output before deleting its input may dip into the limit,
	// which is what the limit is for, but not far.
	if free := freeBytes(t, mnt); free < 25e6 {
		t.Errorf("the alarm let the disk fall to %d MB free, half the 50 MB limit", free/1e6)
	}
	noFailedWrites(t, p, "writes held")

	// A consumer drains all but the last 100 confirmed messages, acking.
	_, ch := dialProcess(t, p)
	keep := 100
	got := drainAcking(t, ch, "full-q", len(confirmed)-keep)
	q, err := ch.QueueDeclarePassive("full-q", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q.Messages < keep {
		t.Fatalf("after draining, %d messages left, want at least %d", q.Messages, keep)
	}
	t.Logf("drained %d; %d left; %d MB free", len(got), q.Messages, freeBytes(t, mnt)/1e6)
	// Draining gave the space back (compactions drop the acked messages):
	// the alarm clears.
	eventually(t, "the disk alarm to clear after draining", func() bool {
		return strings.Contains(p.logText(), "resource alarm cleared")
	})
	for _, bad := range []string{"no space left", "commit failed", "panic"} {
		if strings.Contains(p.logText(), bad) {
			t.Fatalf("a write failed while draining (%q in the log)", bad)
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited

	// Fill the disk to the last byte and start again.
	fillDisk(t, mnt)
	p, ready := launchProcess(t, data, "")
	// It says it waits for space, and has not started: waitingForSpace.
	waitingForSpace(t, p, ready)
	// Then it must neither spin nor flood the log while it waits: its
	// CPU over a few of its rechecks is a rate, measured over a span.
	cpu0 := cpuTime(t, p.cmd.Process.Pid)
	select {
	case <-ready:
		t.Fatal("started on a full disk")
	case <-p.exited:
		t.Fatalf("exited on a full disk:\n%s", p.logText())
	case <-time.After(3 * time.Second):
	}
	if used := cpuTime(t, p.cmd.Process.Pid) - cpu0; used > time.Second {
		t.Errorf("waiting on a full disk used %v of CPU in 3s", used)
	}
	errorLines := strings.Count(p.logText(), `"level":"error"`)
	if errorLines != 1 || !strings.Contains(p.logText(), "not enough disk space") {
		t.Errorf("waiting on a full disk logged %d error lines, want one saying so:\n%s", errorLines, p.logText())
	}
	// Free space: it starts, with the messages left in the queue.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("exited:\n%s", p.logText())
	case <-time.After(30 * time.Second):
		t.Fatalf("did not start once space was freed:\n%s", p.logText())
	}
	_, ch = dialProcess(t, p)
	left := getAll(t, ch, "full-q")
	for _, m := range left {
		var i int
		fmt.Sscanf(string(m.Body[:8]), "%d", &i)
		got[i] = true
	}
	for i := range confirmed {
		if !got[i] {
			t.Errorf("confirmed message %d lost", i)
		}
	}
	t.Logf("after the restart %d messages left; every confirmed message accounted for", len(left))
}

// TestFullDiskQuorumQueueAndStream is the report's scenario for the
// queues whose messages live in a Raft log: a quorum queue (and a stream)
// filled with 8 KiB persistent messages on a 300 MB tmpfs until the disk
// alarm blocks the publisher, a kill -9, a restart, and a drain of every
// confirmed message, which must not fill the disk nor stop the group;
// then the disk filled to the last byte, a kill -9, a start that waits,
// the tmpfs enlarged, and the store opens with what it held.
func TestFullDiskQuorumQueueAndStream(t *testing.T) {
	skipReference(t)
	for _, c := range []struct {
		name string
		args amqp.Table
	}{{"quorum", quorumArgs}, {"stream", streamArgs}} {
		t.Run(c.name, func(t *testing.T) {
			mnt := mountTmpfs(t, "300m")
			data := filepath.Join(mnt, "data")
			const limit = "[resources]\ndisk_free_limit = \"50MB\"\n"
			p := startProcessWith(t, data, limit)
			confirmed := fillUntilBlocked(t, p, mnt, "full-"+c.name, c.args, 8<<10)
			p.stop(syscall.SIGKILL)

			p = startProcessWith(t, data, limit)
			_, ch := dialProcess(t, p)
			var bodies []string
			if c.name == "stream" {
				bodies = streamBodies(t, ch, "full-"+c.name)
			} else {
				bodies = drainBodies(t, ch, "full-"+c.name)
			}
			got := map[int]bool{}
			for _, b := range bodies {
				var i int
				fmt.Sscanf(b[:8], "%d", &i)
				got[i] = true
			}
			for i := range confirmed {
				if !got[i] {
					t.Errorf("confirmed message %d lost", i)
				}
			}
			free := freeBytes(t, mnt)
			t.Logf("after the restart, drained %d of %d confirmed; %d MB free", len(got), len(confirmed), free/1e6)
			for _, bad := range []string{"no space left", "cannot persist", "panic", "its log keeps growing"} {
				if strings.Contains(p.logText(), bad) {
					t.Fatalf("the drain failed or wrote without bound (%q in the log)", bad)
				}
			}
			if free < 25e6 {
				t.Errorf("the drain let the disk fall to %d MB free, half the 50 MB limit", free/1e6)
			}
			p.stop(syscall.SIGKILL)

			// The disk filled to the last byte: the start waits; once the
			// tmpfs is enlarged, the store opens.
			fillDisk(t, mnt)
			p, ready := launchProcess(t, data, limit)
			waitingForSpace(t, p, ready)
			if out, err := exec.Command("mount", "-o", "remount,size=400m", mnt).CombinedOutput(); err != nil {
				t.Fatalf("enlarging the tmpfs: %v %s", err, out)
			}
			select {
			case <-ready:
			case <-p.exited:
				t.Fatalf("exited:\n%s", p.logText())
			case <-time.After(30 * time.Second):
				t.Fatalf("did not start once the disk was enlarged:\n%s", p.logText())
			}
			_, ch = dialProcess(t, p)
			if _, err := ch.QueueDeclarePassive("full-"+c.name, true, false, false, false, c.args); err != nil {
				t.Fatalf("the queue after the store opened: %v", err)
			}
		})
	}
}

// fillUntilBlocked publishes incompressible numbered messages of size
// bytes with confirms to a queue declared with args, until the broker
// blocks the connection; it cuts the connection then and returns which
// were confirmed.
func fillUntilBlocked(t *testing.T, p *process, mnt, queue string, args amqp.Table, size int) map[int]bool {
	t.Helper()
	var sock net.Conn
	c, err := amqp.DialConfig(p.url(), amqp.Config{Dial: func(network, addr string) (net.Conn, error) {
		conn, err := net.Dial(network, addr)
		sock = conn
		return conn, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	blocked := c.NotifyBlocked(make(chan amqp.Blocking, 4))
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewSource(1))
	published := make(chan int, 1)
	confirmCtx, dropConfirms := context.WithCancel(context.Background())
	var mu sync.Mutex
	confirmed := map[int]bool{}
	var confirms sync.WaitGroup
	go func() {
		i := 0
		defer func() { published <- i }()
		for ; ; i++ {
			b := make([]byte, size)
			rnd.Read(b)
			copy(b, fmt.Sprintf("%08d", i))
			dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", queue, false, false,
				amqp.Publishing{DeliveryMode: amqp.Persistent, Body: b})
			if err != nil {
				return
			}
			confirms.Add(1)
			go func(i int) {
				defer confirms.Done()
				if ok, err := dc.WaitContext(confirmCtx); err == nil && ok {
					mu.Lock()
					confirmed[i] = true
					mu.Unlock()
				}
			}(i)
		}
	}()
	select {
	case b := <-blocked:
		if !b.Active {
			t.Fatalf("unblocked before being blocked: %+v", b)
		}
		t.Logf("blocked (%s) with %d MB free", b.Reason, freeBytes(t, mnt)/1e6)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no connection.blocked; %d MB free", freeBytes(t, mnt)/1e6)
	}
	sock.Close()
	n := <-published
	dropConfirms()
	confirms.Wait()
	t.Logf("%d published, %d confirmed; %d MB free", n, len(confirmed), freeBytes(t, mnt)/1e6)
	return confirmed
}

// fillDisk fills the filesystem at mnt to the last byte.
func fillDisk(t *testing.T, mnt string) {
	t.Helper()
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	chunk := make([]byte, 1<<20)
	for _, size := range []int{1 << 20, 64 << 10, 4 << 10, 1} {
		for {
			if _, err := filler.Write(chunk[:size]); err != nil {
				break
			}
		}
	}
	t.Logf("filled: %d bytes free", freeBytes(t, mnt))
}

// TestFullDiskLargeBodies is TestFullDisk's first part with 1 MiB bodies,
// which the store writes to its body log rather than to Pebble: the alarm
// still fires before a write can fail, draining gives the segments' space
// back, and after a kill -9 every confirmed message not acked is there.
func TestFullDiskLargeBodies(t *testing.T) {
	skipReference(t)
	mnt := mountTmpfs(t, "300m")
	data := filepath.Join(mnt, "data")
	const limit = "[resources]\ndisk_free_limit = \"50MB\"\n"
	p := startProcessWith(t, data, limit)
	confirmed := fillUntilBlocked(t, p, mnt, "full-large", nil, 1<<20)
	if free := freeBytes(t, mnt); free < 25e6 {
		t.Errorf("the alarm let the disk fall to %d MB free, half the 50 MB limit", free/1e6)
	}
	noFailedWrites(t, p, "writes held", "body log refused")
	_, ch := dialProcess(t, p)
	got := drainAcking(t, ch, "full-large", len(confirmed)-20)
	// The emptied segments go once their deletes are synced: the alarm
	// clears.
	eventually(t, "the disk alarm to clear after draining", func() bool {
		return strings.Contains(p.logText(), "resource alarm cleared")
	})
	t.Logf("drained %d of %d; %d MB free", len(got), len(confirmed), freeBytes(t, mnt)/1e6)
	p.stop(syscall.SIGKILL)

	p = startProcessWith(t, data, limit)
	_, ch = dialProcess(t, p)
	for _, m := range getAll(t, ch, "full-large") {
		var i int
		fmt.Sscanf(string(m.Body[:8]), "%d", &i)
		got[i] = true
	}
	for i := range confirmed {
		if !got[i] {
			t.Errorf("confirmed message %d lost", i)
		}
	}
}

// noFailedWrites fails the test if the broker's log says a write failed
// (or any of more, such as a write held for space).
func noFailedWrites(t *testing.T, p *process, more ...string) {
	t.Helper()
	for _, bad := range append([]string{"no space left", "commit failed", "panic"}, more...) {
		if strings.Contains(p.logText(), bad) {
			t.Fatalf("a write failed or waited before the alarm (%q in the log)", bad)
		}
	}
}

// drainAcking gets and acks n messages of queue q, whose bodies start with
// their number in 8 digits (fillUntilBlocked's), and returns the numbers.
func drainAcking(t *testing.T, ch *amqp.Channel, q string, n int) map[int]bool {
	t.Helper()
	got := map[int]bool{}
	for len(got) < n {
		m, ok, err := ch.Get(q, false)
		if err != nil || !ok {
			t.Fatalf("get after %d: ok=%v err=%v", len(got), ok, err)
		}
		var i int
		fmt.Sscanf(string(m.Body[:8]), "%d", &i)
		got[i] = true
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	return got
}
