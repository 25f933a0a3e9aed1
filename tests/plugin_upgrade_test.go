package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/internal/poll"
)

// buildDirectVersion builds the direct test plugin (x-direct) with the
// version string given, into dir/direct.wasm.
func buildDirectVersion(t *testing.T, dir, version string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags=-X main.version="+version,
		"-o", filepath.Join(dir, "direct.wasm"), "./core/wasmhost/testdata/direct")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building direct %s: %v\n%s", version, err, out)
	}
}

// TestPluginUpgradeUnderConfirmedLoad: a new build of an enabled plugin
// is put in the plugin directory and enabled again (warrenctl plugins
// enable) while publishers publish with confirms through its exchange.
// The new version takes over; every publish is confirmed, none fails, and
// the queue holds every message.
func TestPluginUpgradeUnderConfirmedLoad(t *testing.T) {
	if reference() != "" {
		t.Skip("Warren's plugins")
	}
	dir := t.TempDir()
	buildDirectVersion(t, dir, "1.0.0")
	s := startWarren(t, func(c *config.Config) { c.Plugins.Dir = dir })
	if err := s.b.EnablePlugin("direct"); err != nil {
		t.Fatal(err)
	}
	api := httptestServer(t, admin.Handler(s.b))
	_, ch := confirmChannel(t, s)
	x := uniq(t, "upgraded")
	if err := ch.ExchangeDeclare(x, "x-direct", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	q := declareQueue(t, s, ch, "", nil)
	bind(t, ch, q, "k", x, nil)

	const publishers = 3
	var wg sync.WaitGroup
	var mu sync.Mutex
	confirmed, failed := 0, []string{}
	stop := make(chan struct{})
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, pc := confirmChannel(t, s)
			for {
				select {
				case <-stop:
					return
				default:
				}
				dc, err := pc.PublishWithDeferredConfirmWithContext(context.Background(), x, "k", false, false, amqp.Publishing{Body: []byte("m")})
				ok := err == nil
				if ok {
					ok, err = dc.WaitContext(context.Background())
				}
				mu.Lock()
				if ok {
					confirmed++
				} else {
					failed = append(failed, fmt.Sprint(err))
				}
				mu.Unlock()
				if !ok {
					return
				}
			}
		}()
	}
	// waitConfirmed waits up to 30 s for n confirms, or for a failure;
	// what follows judges what came.
	waitConfirmed := func(n int) {
		poll.Within(30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return confirmed >= n || len(failed) > 0
		})
	}
	waitConfirmed(300)
	before := listPlugins(t, api)["direct"]
	buildDirectVersion(t, dir, "2.0.0")
	if err := s.b.EnablePlugin("direct"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	at := confirmed
	mu.Unlock()
	waitConfirmed(at + 300)
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d publishes failed across the upgrade, the first: %s", len(failed), failed[0])
	}
	after := listPlugins(t, api)["direct"]
	if before.Version != "1.0.0" || after.Version != "2.0.0" {
		t.Fatalf("version %s before, %s after", before.Version, after.Version)
	}
	if got := count(t, ch, q); got != confirmed {
		t.Fatalf("%d messages confirmed, %d in the queue", confirmed, got)
	}
	// Enabling again with the same module changes nothing.
	if err := s.b.EnablePlugin("direct"); err != nil {
		t.Fatal(err)
	}
	if v := listPlugins(t, api)["direct"].Version; v != "2.0.0" {
		t.Fatalf("re-enable of the same module: version %s", v)
	}
	// A module that fails to load leaves the running one, and says why.
	if err := os.WriteFile(filepath.Join(dir, "direct.wasm"), []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := s.b.EnablePlugin("direct")
	if err == nil || !strings.Contains(err.Error(), "version 2.0.0 keeps running") {
		t.Fatalf("enable of a broken module: %v", err)
	}
	publishConfirmed(t, ch, x, "k", amqp.Publishing{Body: []byte("still")})
}
