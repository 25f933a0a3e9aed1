package tests

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
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
