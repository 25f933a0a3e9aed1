package broker

import (
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The memory alarm counts memory the process holds, not heap spans the
// garbage collector has freed and the runtime has yet to return to the OS
// (it does so over minutes). Once a queue's messages are dead, the next
// sample above the watermark collects them and clears the alarm.
func TestMemoryAlarmClearsOnceMessagesAreFreed(t *testing.T) {
	b := &Broker{log: zerolog.Nop()}
	runtime.GC()
	g := testGauge()
	defer g.close()
	base := g.read(0).used
	b.memLimit.Store(base + 100<<20)
	w := &resourceWatch{gauge: g}

	// A queue's worth of message bodies, above the watermark.
	var bodies [][]byte
	for i := 0; i < 200; i++ {
		bodies = append(bodies, written(1<<20))
	}
	b.sampleMemory(w)
	if !w.memOver {
		t.Fatalf("%d MiB held over a watermark %d MiB above the start: no alarm", len(bodies), 100)
	}

	// The queue is purged: the bodies are garbage.
	runtime.KeepAlive(bodies)
	bodies = nil
	w.lastGC = time.Time{} // the watcher's collection budget allows one now
	b.sampleMemory(w)
	if w.memOver {
		used := w.gauge.read(0).used
		t.Fatalf("after the purge memory reads %d MiB against a watermark of %d MiB: the alarm stays",
			used>>20, w.memLimit>>20)
	}
}

// Freed but unreleased heap does not count even without a forced
// collection: a collection the runtime ran on its own is enough.
func TestMemoryGaugeExcludesFreeHeap(t *testing.T) {
	g := testGauge()
	defer g.close()
	runtime.GC()
	before := g.read(0).used
	bodies := make([][]byte, 0, 100)
	for i := 0; i < 100; i++ {
		bodies = append(bodies, written(1<<20))
	}
	if held := g.read(0).used; held < before+90<<20 {
		t.Fatalf("100 MiB held: the gauge went from %d to %d MiB", before>>20, held>>20)
	}
	runtime.KeepAlive(bodies)
	bodies = nil
	runtime.GC()
	if after := g.read(0).used; after > before+20<<20 {
		t.Fatalf("100 MiB freed and collected: the gauge reads %d MiB, %d MiB before they were allocated", after>>20, before>>20)
	}
}

// testGauge is the alarm's gauge, on the Go runtime's figures alone under
// the race detector (see raceEnabled).
func testGauge() *memoryGauge {
	g := newMemoryGauge()
	if raceEnabled {
		g.close()
		g.statm = nil
	}
	return g
}

// written returns n bytes that have been written to, so that they are
// resident, as a message body is.
func written(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// The watcher clears only an alarm it raised.
func TestWatcherLeavesAnotherAlarmAlone(t *testing.T) {
	b := &Broker{log: zerolog.Nop()}
	w := &resourceWatch{gauge: newMemoryGauge()}
	b.alarm.Set(true, "operator")
	b.updateAlarm(w)
	if raised, reason, _ := b.alarm.State(); !raised || reason != "operator" {
		t.Fatalf("the watcher changed an alarm it did not raise: %v %q", raised, reason)
	}
	b.alarm.Set(false, "")

	w.diskReason = "disk: short"
	b.updateAlarm(w)
	w.storeErr = "storage: writes held"
	b.updateAlarm(w)
	if raised, reason, _ := b.alarm.State(); !raised || reason != "disk: short; storage: writes held" {
		t.Fatalf("alarm %v %q, want both reasons", raised, reason)
	}
	w.diskReason, w.storeErr = "", ""
	b.updateAlarm(w)
	if raised, _, _ := b.alarm.State(); raised {
		t.Fatal("the watcher did not clear its alarm")
	}
}
