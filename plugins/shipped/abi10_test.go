package shipped_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

// TestABI10ModulesStillWork loads the shipped plugins as they were built
// for routing ABI 1.0 (testdata/abi10, gzipped, from before 1.1)
// into this broker's host: a minor version only adds, so each still
// loads, says it speaks 1.0, and routes.
func TestABI10ModulesStillWork(t *testing.T) {
	dir := filepath.Join("testdata", "abi10")
	modules := map[string][]byte{}
	for _, name := range []string{"consistent-hash", "delayed-message", "jms"} {
		f, err := os.Open(filepath.Join(dir, name+".wasm.gz"))
		if err != nil {
			t.Fatal(err)
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, z); err != nil {
			t.Fatal(err)
		}
		f.Close()
		modules[name] = b.Bytes()
	}
	ps := loadModules(t, modules)
	for name, p := range ps {
		if abi := p.Info().ABI; abi != "1.0" {
			t.Errorf("%s speaks %s, want the 1.0 build", name, abi)
		}
	}
	var seq uint64

	ch, err := declare(t, typeOf(t, ps["consistent-hash"], "x-consistent-hash"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(ch, &seq, "only", "1", nil); err != nil {
		t.Fatal(err)
	}
	if qs, _ := publish(t, ch, "any key", protocol.Properties{}); len(qs) != 1 || qs[0] != "only" {
		t.Errorf("consistent-hash 1.0 routed to %v", qs)
	}

	dm, err := declare(t, typeOf(t, ps["delayed-message"], "x-delayed-message"), protocol.Table{"x-delayed-type": "direct"})
	if err != nil {
		t.Fatal(err)
	}
	if _, res := publish(t, dm, "k", headers(protocol.Table{"x-delay": int32(250)})); res.Via != "direct" || res.Hold != 250*time.Millisecond || res.SetHeaders != nil {
		t.Errorf("delayed-message 1.0: via %q after %v, headers %v", res.Via, res.Hold, res.SetHeaders)
	}

	topic, err := declare(t, typeOf(t, ps["jms"], "x-jms-topic"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bind(topic, &seq, "heavy", "stock.#", protocol.Table{"x-selector": "weight > 10"}); err != nil {
		t.Fatal(err)
	}
	if err := bind(topic, &seq, "bad", "#", protocol.Table{"x-selector": "weight >"}); err == nil || !strings.Contains(err.Error(), "selector") {
		t.Errorf("jms 1.0 accepted a selector that does not parse: %v", err)
	}
	if qs, _ := publish(t, topic, "stock.ibm", headers(protocol.Table{"weight": int32(20)})); len(qs) != 1 || qs[0] != "heavy" {
		t.Errorf("jms 1.0 routed to %v", qs)
	}
}
