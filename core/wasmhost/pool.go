package wasmhost

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
)

// pool holds a plugin's instances: at most size of them, created on demand
// in the background and never on a publisher's goroutine.
//
// Free instances sit in an array of slots, one cache line each; taking one
// is a compare-and-swap on a slot chosen at random (the runtime's per-thread
// generator), giving one back a compare-and-swap on the slot it came from.
// A channel served first and did not scale: every route locked the same
// channel twice, and two publishers on two cores routed no faster than one.
// With slots, publishers on different cores touch different cache lines.
//
// A publisher that finds no free instance registers as a waiter and sleeps
// on a wake channel; put wakes one after storing (Go's atomics are
// sequentially consistent, so either the waiter's scan sees the stored
// instance or put sees the waiter). If the pool is below size, the waiter
// also starts one instantiation in the background: under one publisher the
// pool stays at one instance, under contention it grows to size. (sync.Pool
// would not do: it drops its contents at every garbage collection, and an
// instance costs milliseconds to rebuild.)
//
// A discarded instance (it trapped, timed out, broke the ABI) is replaced
// at once in the background, so the pool keeps its warmth.
type pool struct {
	p       *Plugin
	size    int
	slots   []slot
	waiters atomic.Int32
	wake    chan struct{}
	done    chan struct{} // closed by close

	mu      lockorder.Mutex[lockorder.PluginPool]
	all     map[*instance]struct{} // live instances, checked out or not
	growing int
	closed  atomic.Bool
	growers sync.WaitGroup
}

// slot holds a free instance or nil, alone on its cache line.
type slot struct {
	in atomic.Pointer[instance]
	_  [56]byte
}

var errClosed = errors.New("plugin disabled")

func newPool(p *Plugin, size int) *pool {
	return &pool{
		p:     p,
		size:  size,
		slots: make([]slot, size),
		wake:  make(chan struct{}, size),
		done:  make(chan struct{}),
		all:   make(map[*instance]struct{}),
	}
}

// tryGet takes a free instance, or returns nil. The scan starts at slot
// hint%size.
func (pl *pool) tryGet(hint uint32) *instance {
	n := uint32(len(pl.slots))
	i := hint % n
	for range n {
		s := &pl.slots[i]
		if in := s.in.Load(); in != nil && s.in.CompareAndSwap(in, nil) {
			in.home = i
			return in
		}
		if i++; i == n {
			i = 0
		}
	}
	return nil
}

// store puts an instance in a free slot, its home first. There is always
// one: the pool never holds more instances than slots.
func (pl *pool) store(in *instance) {
	n := uint32(len(pl.slots))
	i := in.home
	for {
		in.home = i // before the swap: after it, another goroutine may hold in
		if pl.slots[i].in.CompareAndSwap(nil, in) {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	if pl.waiters.Load() > 0 {
		select {
		case pl.wake <- struct{}{}:
		default:
		}
	}
}

// get takes an instance and brings it up to the plugin's current epoch.
func (pl *pool) get() (*instance, error) { return pl.getNear(rand.Uint32()) }

// getNear is get starting the scan at slot hint%size. A publisher that
// always passes the same hint keeps finding the instance it used last,
// whose memory is still in its core's caches: handing instances around at
// random made two publishers route no faster than one.
func (pl *pool) getNear(hint uint32) (*instance, error) {
	for {
		in := pl.tryGet(hint)
		if in == nil {
			var err error
			if in, err = pl.wait(hint); err != nil {
				return nil, err
			}
		}
		if in.epoch.Load() == pl.p.epoch.Load() {
			return in, nil
		}
		if err := pl.p.catchUp(in); err != nil {
			pl.discard(in, err)
			if pl.closed.Load() {
				return nil, errClosed
			}
			continue
		}
		return in, nil
	}
}

// wait is get's slow path: no instance is free.
func (pl *pool) wait(hint uint32) (*instance, error) {
	pl.waiters.Add(1)
	defer pl.waiters.Add(-1)
	for {
		if pl.closed.Load() {
			return nil, errClosed
		}
		if in := pl.tryGet(hint); in != nil {
			return in, nil
		}
		pl.grow()
		select {
		case <-pl.wake:
		case <-pl.done:
			return nil, errClosed
		}
	}
}

// free counts the free instances.
func (pl *pool) free() int {
	n := 0
	for i := range pl.slots {
		if pl.slots[i].in.Load() != nil {
			n++
		}
	}
	return n
}

// put returns an instance after a call that left it sound.
func (pl *pool) put(in *instance) {
	in.calls++
	pl.store(in)
	if pl.closed.Load() {
		pl.drain()
	}
}

// discard closes an instance that failed, counts the failure and starts a
// replacement.
func (pl *pool) discard(in *instance, why error) {
	pl.mu.Lock()
	delete(pl.all, in)
	pl.mu.Unlock()
	in.close()
	pl.p.recordFailure(why)
	if !pl.closed.Load() {
		pl.grow()
	}
}

// add registers an instance being built, at the epoch of its snapshot, so
// the log keeps every op it has yet to apply.
func (pl *pool) add(in *instance) {
	pl.mu.Lock()
	pl.all[in] = struct{}{}
	pl.mu.Unlock()
}

// minEpoch is the oldest epoch of a live instance (the log can drop ops at
// or below it); ok is false when there is no instance.
func (pl *pool) minEpoch() (e uint64, ok bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for in := range pl.all {
		if x := in.epoch.Load(); !ok || x < e {
			e, ok = x, true
		}
	}
	return e, ok
}

// count is the number of live instances.
func (pl *pool) count() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.all)
}

// grow starts one instantiation in the background if the pool has room.
func (pl *pool) grow() {
	pl.mu.Lock()
	if pl.closed.Load() || len(pl.all)+pl.growing >= pl.size {
		pl.mu.Unlock()
		return
	}
	pl.growing++
	pl.growers.Add(1)
	pl.mu.Unlock()
	go func() {
		defer pl.growers.Done()
		in, err := pl.p.freshInstance()
		pl.mu.Lock()
		pl.growing--
		pl.mu.Unlock()
		if err != nil {
			pl.p.recordFailure(err)
			// Keep trying while someone may be waiting, at a pace that
			// lets the failure limit disable a plugin that cannot start.
			if !pl.closed.Load() && pl.count() == 0 {
				time.AfterFunc(100*time.Millisecond, pl.grow)
			}
			return
		}
		pl.store(in)
		if pl.closed.Load() {
			pl.drain()
		}
	}()
}

// seed puts the instance made at load time into the pool.
func (pl *pool) seed(in *instance) {
	pl.add(in)
	pl.store(in)
}

// close stops the pool: waiters get errClosed, free instances are closed
// now and checked-out ones when they come back.
func (pl *pool) close() {
	if pl.closed.Swap(true) {
		return
	}
	close(pl.done)
	pl.drain()
}

// waitClosed waits, after close, for the instantiations under way and for the
// instances out on calls to come back and be closed; false when calls are
// still out at the deadline.
func (pl *pool) waitClosed(deadline time.Time) bool {
	pl.growers.Wait()
	for pl.count() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
		pl.drain()
	}
	return true
}

func (pl *pool) drain() {
	for {
		in := pl.tryGet(0)
		if in == nil {
			return
		}
		pl.mu.Lock()
		delete(pl.all, in)
		pl.mu.Unlock()
		in.close()
	}
}

// idle runs warren_idle on free instances used since their last idle call.
// It takes each from its slot, so it never races a publisher.
func (pl *pool) idle() {
	for i := range pl.slots {
		s := &pl.slots[i]
		in := s.in.Load()
		if in == nil || in.fns[fnIdle] == nil || !s.in.CompareAndSwap(in, nil) {
			continue
		}
		in.home = uint32(i)
		if in.calls == 0 { // read only once held: a holder writes it
			pl.store(in)
			continue
		}
		in.calls = 0
		if _, err := in.run(fnIdle, nil); err != nil {
			pl.discard(in, err)
			continue
		}
		// The guest may have shrunk its buffer: the next input asks for
		// it again.
		in.bufPtr, in.bufCap = 0, 0
		pl.store(in)
	}
	if pl.closed.Load() {
		pl.drain()
	}
}
