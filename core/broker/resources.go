package broker

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"
)

// The resource alarm blocks publishers (connection.blocked) while memory
// is above memory_high_watermark of the machine's, or the data directory's
// disk is short of space, or the store cannot write; it clears when all are
// fine again.
//
// Memory is what the process holds that the operating system cannot have
// back: its resident set less the heap spans the Go collector has freed but
// the runtime has not yet returned (see memoryGauge). The old alarm counted
// those free spans, which the runtime returns over minutes, so it held
// publishers for about four minutes after a purge. Memory is sampled every
// memorySampleEvery, which is cheap (a pread of /proc/self/statm and
// runtime/metrics), so a fast publisher overshoots the watermark by a few
// milliseconds of traffic, not a second's. Far below the watermark it is
// sampled less often (see sampleWait): the headroom divided by the fastest
// the process could grow, so the alarm is never late and an idle broker
// does not spend a core's percent on watching itself.
//
// Two more things keep the figure honest near the watermark:
//   - While the alarm is clear, the Go soft memory limit (debug.SetMemoryLimit)
//     is the watermark less the resident memory Go does not manage (Pebble's
//     C-allocated cache and memtables, compiled plugins), so the garbage
//     collector works harder as the heap nears it instead of letting garbage
//     push the process over. While the alarm is raised the limit is lifted:
//     live data above it would otherwise make the collector run back to back
//     (up to half the CPU) and slow the consumers that drain the queues. An
//     operator's GOMEMLIMIT is left alone.
//   - Above the watermark the watcher runs a collection before deciding, at
//     most every 250 ms and at most a tenth of the time (a collection costs
//     time proportional to the live heap): dead messages of a purged or
//     drained queue are garbage until the next collection, and publishers are
//     blocked, so without one the next collection could be minutes away.
//
// The disk alarm fires when free space falls below disk_free_limit plus
// what the store may still claim without new messages (storage's
// DiskReserve: unflushed WAL data, a new WAL's preallocation, a margin), so
// it fires before a write can fail; the disk is sampled every
// diskSampleEvery near that point and less often far from it, as memory
// is. The store's own trouble (writes held for space, or a failed commit)
// raises the alarm too, with its reason.
const (
	memorySampleEvery = 10 * time.Millisecond
	diskSampleEvery   = 20 * time.Millisecond
	// The longest waits between samples, far from the limits.
	memoryIdleSampleEvery = 250 * time.Millisecond
	diskIdleSampleEvery   = time.Second
	// fastestGrowth and fastestDiskFill are rates the process's memory and
	// the disk cannot outrun (beyond a loopback socket's and a fast SSD's):
	// a headroom of H is safe to leave unsampled for H/rate.
	fastestGrowth   = 4 << 30 // bytes per second
	fastestDiskFill = 2 << 30 // bytes per second
	// memoryClearBelow is the fraction of the watermark memory must fall
	// under to clear a memory alarm, and diskClearAfter how long the disk
	// must have had room, so that the alarm does not flap (a flush or a
	// deleted WAL frees space in steps).
	memoryClearBelow = 0.95
	diskClearAfter   = time.Second
	// forcedGCMinGap and forcedGCMaxShare bound the collections the watcher
	// forces while memory is above the watermark.
	forcedGCMinGap   = 250 * time.Millisecond
	forcedGCMaxShare = 10 // at most 1/10 of the time
)

// memoryGauge measures the process's memory as the alarm counts it: its
// resident set (/proc/self/statm, like RabbitMQ's "rss" strategy: Go heap,
// Pebble's C-allocated cache and memtables, compiled plugins), less the
// heap spans the collector has freed and the runtime has not yet returned
// to the OS. Where statm cannot be read, it counts the Go runtime's memory
// less free and released spans, plus Pebble's off-heap memory.
type memoryGauge struct {
	samples []metrics.Sample
	statm   *os.File // nil: unavailable
	buf     [128]byte
	page    uint64
}

const (
	sampleTotal = iota
	sampleHeapFree
	sampleHeapReleased
)

func newMemoryGauge() *memoryGauge {
	g := &memoryGauge{samples: []metrics.Sample{
		sampleTotal:        {Name: "/memory/classes/total:bytes"},
		sampleHeapFree:     {Name: "/memory/classes/heap/free:bytes"},
		sampleHeapReleased: {Name: "/memory/classes/heap/released:bytes"},
	}, page: uint64(os.Getpagesize())}
	if f, err := os.Open("/proc/self/statm"); err == nil {
		g.statm = f
	}
	return g
}

func (g *memoryGauge) close() {
	if g.statm != nil {
		g.statm.Close()
	}
}

// memoryReading is one sample.
type memoryReading struct {
	used uint64 // what the alarm compares with the watermark
	// outsideGo is the memory counted in used that the Go runtime does not
	// manage (C allocations, mapped code): the Go soft limit leaves room
	// for it.
	outsideGo uint64
}

// read takes a sample; offHeap (Pebble's memory outside the Go heap, as
// last sampled) stands in for what is outside Go when statm is missing.
func (g *memoryGauge) read(offHeap uint64) memoryReading {
	metrics.Read(g.samples)
	v := func(i int) uint64 {
		if g.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return g.samples[i].Value.Uint64()
	}
	free := v(sampleHeapFree)
	goResident := v(sampleTotal) - v(sampleHeapReleased)
	rss, ok := g.resident()
	if !ok {
		return memoryReading{used: goResident - free + offHeap, outsideGo: offHeap}
	}
	r := memoryReading{}
	if rss > free {
		r.used = rss - free
	}
	if rss > goResident {
		r.outsideGo = rss - goResident
	}
	return r
}

// residentOnce reads the resident set size and closes the gauge.
func (g *memoryGauge) residentOnce() (uint64, bool) {
	defer g.close()
	return g.resident()
}

// resident reads the resident set size from statm ("size resident ...",
// in pages).
func (g *memoryGauge) resident() (uint64, bool) {
	if g.statm == nil {
		return 0, false
	}
	n, err := g.statm.ReadAt(g.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	fields := g.buf[:n]
	i := 0
	for i < len(fields) && fields[i] != ' ' { // skip size
		i++
	}
	var pages uint64
	digits := 0
	for i++; i < len(fields) && fields[i] >= '0' && fields[i] <= '9'; i++ {
		pages = pages*10 + uint64(fields[i]-'0')
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	return pages * g.page, true
}

// resourceWatch is the state of watchResources between samples.
type resourceWatch struct {
	memLimit   uint64 // the watermark in bytes; 0: no memory alarm
	gauge      *memoryGauge
	offHeap    uint64
	memOver    bool // memory is the (or a) reason of the raised alarm
	lastGC     time.Time
	gcCost     time.Duration
	setGoLimit bool   // whether the watcher manages the Go memory limit
	goLimit    int64  // the Go memory limit it set last
	memRoom    uint64 // watermark less memory used at the last sample (0: at or over)
	memUsed    uint64 // at the last sample
	diskReason string
	diskFree   uint64    // at the last sample (0: unknown)
	diskRoom   uint64    // free space above the disk limit at the last sample
	diskOKFrom time.Time // since when the disk has had room, while diskReason is kept
	storeErr   string
	reason     string // the alarm's reason as the watcher last set it ("": not raised by it)
}

// watchResources samples memory and the disk (with the store's health) at
// the intervals sampleWait gives, and raises or clears the alarm.
func (b *Broker) watchResources() {
	defer b.wg.Done()
	w := &resourceWatch{gauge: newMemoryGauge()}
	defer w.gauge.close()
	if os.Getenv("GOMEMLIMIT") == "" {
		w.setGoLimit = true
		previous := debug.SetMemoryLimit(-1)
		defer debug.SetMemoryLimit(previous)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var nextMemory, nextDisk time.Time
	for {
		var answer chan struct{}
		var now time.Time
		select {
		case <-b.stop:
			return
		case now = <-t.C:
		case answer = <-b.resample:
			// A limit changed: both are sampled now.
			now, nextMemory, nextDisk = time.Now(), time.Time{}, time.Time{}
		}
		if !now.Before(nextDisk) {
			b.sampleDisk(w, now)
			room := w.diskRoom
			if w.diskReason != "" || w.storeErr != "" {
				room = 0 // raised: look often, to clear it soon
			}
			nextDisk = now.Add(sampleWait(room, fastestDiskFill, diskSampleEvery, diskIdleSampleEvery))
		}
		if !now.Before(nextMemory) {
			b.sampleMemory(w)
			nextMemory = now.Add(sampleWait(w.memRoom, fastestGrowth, memorySampleEvery, memoryIdleSampleEvery))
		}
		b.updateAlarm(w)
		b.publishResources(w)
		t.Reset(time.Until(earliest(nextMemory, nextDisk)))
		if answer != nil {
			close(answer)
		}
	}
}

// sampleDisk reads the disk's free space and the store's health.
func (b *Broker) sampleDisk(w *resourceWatch, now time.Time) {
	w.offHeap = b.store.OffHeapMemory()
	var reason string
	reason, w.diskRoom, w.diskFree = b.diskState()
	if reason != "" {
		w.diskReason, w.diskOKFrom = reason, time.Time{}
	} else if w.diskOKFrom.IsZero() {
		w.diskOKFrom = now
	} else if now.Sub(w.diskOKFrom) >= diskClearAfter {
		w.diskReason = ""
	}
	w.storeErr = ""
	if err := b.store.Health(); err != nil {
		w.storeErr = err.Error()
	}
}

// inForce returns once the watcher has sampled with the limits as they are
// now, and raised or cleared the alarm as they imply, so that a publish
// right after rabbitmqctl set_vm_memory_high_watermark returns is held
// (amqp091-go's memory alarm test publishes at once). It returns at once
// when the watcher does not run (before Start, after Shutdown), whose
// first sample, if any, takes the limits.
func (b *Broker) inForce() {
	if !b.watching.Load() {
		return
	}
	answer := make(chan struct{})
	select {
	case b.resample <- answer:
	case <-b.stop:
		return
	}
	select {
	case <-answer:
	case <-b.stop:
	}
}

// sampleWait is how long a limit with room bytes to go may be left
// unsampled, growing at most rate bytes a second: between fastest and
// slowest.
func sampleWait(room uint64, rate uint64, fastest, slowest time.Duration) time.Duration {
	wait := time.Duration(float64(room) / float64(rate) * float64(time.Second))
	return min(max(wait, fastest), slowest)
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sampleMemory decides whether memory is over the watermark, forcing a
// collection first when that could change the answer and the budget allows.
func (b *Broker) sampleMemory(w *resourceWatch) {
	w.memLimit = b.memLimit.Load()
	if w.memLimit == 0 {
		w.memRoom = math.MaxUint64 // no alarm: no hurry
		w.memOver = false
		w.memUsed = w.gauge.read(w.offHeap).used
		if w.setGoLimit && w.goLimit != 0 {
			debug.SetMemoryLimit(math.MaxInt64)
			w.goLimit = 0
		}
		return
	}
	m := w.gauge.read(w.offHeap)
	over := w.isOver(m.used)
	if over && time.Since(w.lastGC) >= max(forcedGCMinGap, forcedGCMaxShare*w.gcCost) {
		// The free body buffers go first: the collection below takes
		// them back.
		if b.srv != nil {
			b.srv.Bodies.Drop()
		}
		start := time.Now()
		runtime.GC()
		w.lastGC, w.gcCost = time.Now(), time.Since(start)
		m = w.gauge.read(w.offHeap)
		over = w.isOver(m.used)
	}
	used := m.used
	w.memUsed = used
	w.memRoom = 0
	if used < w.memLimit && !over {
		w.memRoom = w.memLimit - used
	}
	if over != w.memOver {
		w.memOver = over
		ev := b.log.Info()
		if over {
			ev = b.log.Warn()
		}
		ev.Uint64("used", used).Uint64("watermark", w.memLimit).Bool("over", over).Msg("memory watermark crossed")
	}
	if w.setGoLimit {
		// Clear: the collector keeps the heap under the watermark. Raised:
		// no limit, so live data above it does not make it run nonstop.
		limit := int64(math.MaxInt64)
		if !over && w.memLimit > m.outsideGo {
			limit = int64(w.memLimit - m.outsideGo)
		}
		if d := limit - w.goLimit; d > int64(w.memLimit/100) || d < -int64(w.memLimit/100) {
			debug.SetMemoryLimit(limit)
			w.goLimit = limit
		}
	}
}

// isOver says whether used is over the watermark, with the hysteresis
// that keeps a raised memory alarm from flapping.
func (w *resourceWatch) isOver(used uint64) bool {
	if w.memOver {
		return float64(used) >= memoryClearBelow*float64(w.memLimit)
	}
	return used > w.memLimit
}

// diskState says why the disk is short of space ("" when it is not), how
// much room is left above the point where it would be, and the space free
// (0 when unknown).
func (b *Broker) diskState() (reason string, room, free uint64) {
	free, ok := diskFree(b.cfg.Storage.DataDir)
	if !ok {
		return "", math.MaxUint64, 0
	}
	limit := b.diskLimit.Load()
	if limit == 0 {
		return "", math.MaxUint64, free
	}
	reserve := b.store.DiskReserve()
	if free >= limit+reserve {
		return "", free - (limit + reserve), free
	}
	return fmt.Sprintf("disk: %d bytes free, limit %d plus %d the store may still need", free, limit, reserve), 0, free
}

// updateAlarm raises, updates or clears the alarm from w's reasons. It
// clears only an alarm it raised (tests and operators may raise one too).
func (b *Broker) updateAlarm(w *resourceWatch) {
	var reasons []string
	if w.memOver {
		reasons = append(reasons, fmt.Sprintf("memory: above the watermark of %d bytes", w.memLimit))
	}
	if w.diskReason != "" {
		reasons = append(reasons, w.diskReason)
	}
	if w.storeErr != "" {
		reasons = append(reasons, w.storeErr)
	}
	reason := strings.Join(reasons, "; ")
	raised, current, _ := b.alarm.State()
	switch {
	case reason != "" && (!raised || current != reason):
		if !raised {
			b.log.Warn().Strs("reasons", reasons).Msg("resource alarm raised: publishers blocked")
		} else if w.storeErr != "" && !strings.Contains(current, w.storeErr) {
			b.log.Warn().Strs("reasons", reasons).Msg("resource alarm: storage cannot write")
		}
		b.alarm.Set(true, reason)
	case reason == "" && w.reason != "":
		if raised {
			b.log.Info().Msg("resource alarm cleared")
		}
		b.alarm.Set(false, "")
	}
	w.reason = reason
}

// systemMemory reads MemTotal from /proc/meminfo; 0 when unknown.
func systemMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb uint64
		if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}

// diskFree reports the bytes available to the broker on dir's filesystem.
func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}

// ResourceState is the resource watcher's latest reading, for the admin
// API, warrenctl status and /metrics.
type ResourceState struct {
	MemoryUsed  uint64 // the figure the memory alarm compares: resident less freed heap
	MemoryLimit uint64 // the watermark in bytes; 0: no memory alarm
	MemoryAlarm bool
	DiskFree    uint64 // in the data directory's file system; 0: unknown
	DiskLimit   uint64 // disk_free_limit in bytes; 0: no disk alarm
	DiskAlarm   bool
	StoreError  string // why the store cannot write, when it cannot
}

// Resources returns the watcher's latest reading (zero before the first).
func (b *Broker) Resources() ResourceState {
	if r := b.resources.Load(); r != nil {
		return *r
	}
	return ResourceState{MemoryLimit: b.memLimit.Load(), DiskLimit: b.diskLimit.Load()}
}

func (b *Broker) publishResources(w *resourceWatch) {
	b.resources.Store(&ResourceState{
		MemoryUsed: w.memUsed, MemoryLimit: w.memLimit, MemoryAlarm: w.memOver,
		DiskFree: w.diskFree, DiskLimit: b.diskLimit.Load(), DiskAlarm: w.diskReason != "",
		StoreError: w.storeErr,
	})
}

// SystemMemory is the machine's memory in bytes (MemTotal); 0 when
// unknown.
func SystemMemory() uint64 { return systemMemory() }

// setPagingLimit sets the bound on the bodies all queues keep in memory:
// resources.memory_paging_ratio of the memory watermark, or of what a
// watermark of 0.4 would be when the alarm is off.
func (b *Broker) setPagingLimit() {
	watermark := b.memLimit.Load()
	if watermark == 0 {
		watermark = memoryLimitFor(defaultPagingWatermark)
	}
	b.paging.SetLimit(int64(b.cfg.Resources.MemoryPagingRatio * float64(watermark)))
}

// defaultPagingWatermark is the watermark paging takes its fraction of when
// the memory alarm is off: the default memory_high_watermark.
const defaultPagingWatermark = 0.4

// memoryLimitFor turns a watermark (a fraction of the machine's memory)
// into bytes; 0 when either is unknown or zero.
func memoryLimitFor(watermark float64) uint64 {
	if total := systemMemory(); total > 0 && watermark > 0 {
		return uint64(float64(total) * watermark)
	}
	return 0
}

// SetMemoryWatermark changes the memory alarm's watermark until the broker
// stops, as rabbitmqctl set_vm_memory_high_watermark: a fraction of the
// machine's memory, or, with absolute set, bytes. 0 disables the alarm.
// It returns once the alarm is raised or cleared as the new watermark
// implies.
func (b *Broker) SetMemoryWatermark(value float64, absolute bool) error {
	switch {
	case value < 0 || math.IsNaN(value) || math.IsInf(value, 0):
		return fmt.Errorf("memory watermark %v: must be a non-negative number", value)
	case absolute:
		b.memLimit.Store(uint64(value))
	case value > 1:
		return fmt.Errorf("memory watermark %v: a fraction must be at most 1 (use an absolute value in bytes)", value)
	default:
		b.memLimit.Store(memoryLimitFor(value))
	}
	b.log.Info().Uint64("bytes", b.memLimit.Load()).Msg("memory watermark set")
	b.setPagingLimit()
	b.inForce()
	return nil
}

// SetDiskFreeLimit changes the disk alarm's limit until the broker stops,
// as rabbitmqctl set_disk_free_limit. 0 disables the alarm. It returns
// once the alarm is raised if the disk is short of the new limit; one it
// lifts clears after the disk has had room for diskClearAfter, as always.
func (b *Broker) SetDiskFreeLimit(bytes uint64) {
	b.diskLimit.Store(bytes)
	b.log.Info().Uint64("bytes", bytes).Msg("disk free limit set")
	b.inForce()
}

// QueuedMemory is what the queues report keeping of their messages in
// memory, all together, and the bound past which they page new messages
// out (0: none).
func (b *Broker) QueuedMemory() (used, limit int64) {
	return b.paging.Used(), b.paging.Limit()
}
