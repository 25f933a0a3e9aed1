package plugins

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// pool holds a plugin's instances: at most size of them, created on demand
// in the background and never on a publisher's goroutine.
//
// The free list is a buffered channel of capacity size, so taking and
// returning an instance are one channel operation each and a publisher that
// finds none free waits without spinning. When get finds the list empty and
// the pool is below size, it starts one instantiation in the background and
// waits for whichever instance comes first, a returned one or the new one:
// under one publisher the pool stays at one instance, under contention it
// grows to size. (sync.Pool would not do: it drops its contents at every
// garbage collection, and an instance costs milliseconds to rebuild.)
//
// A discarded instance (it trapped, timed out, broke the ABI) is replaced
// at once in the background, so the pool keeps its warmth.
type pool struct {
	p    *Plugin
	size int
	free chan *instance
	done chan struct{} // closed by close

	mu      sync.Mutex
	all     map[*instance]struct{} // live instances, checked out or not
	growing int
	closed  atomic.Bool
	growers sync.WaitGroup
}

var errClosed = errors.New("plugin disabled")

func newPool(p *Plugin, size int) *pool {
	return &pool{
		p:    p,
		size: size,
		free: make(chan *instance, size),
		done: make(chan struct{}),
		all:  make(map[*instance]struct{}),
	}
}

// get takes an instance and brings it up to the plugin's current epoch.
func (pl *pool) get() (*instance, error) {
	for {
		var in *instance
		select {
		case in = <-pl.free:
		default:
			if pl.closed.Load() {
				return nil, errClosed
			}
			pl.grow()
			select {
			case in = <-pl.free:
			case <-pl.done:
				return nil, errClosed
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

// put returns an instance after a call that left it sound.
func (pl *pool) put(in *instance) {
	in.calls++
	pl.free <- in
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
		pl.free <- in
		if pl.closed.Load() {
			pl.drain()
		}
	}()
}

// seed puts the instance made at load time into the pool.
func (pl *pool) seed(in *instance) {
	pl.add(in)
	pl.free <- in
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

// wait waits, after close, for the instantiations under way and for the
// instances out on calls to come back and be closed; false when calls are
// still out at the deadline.
func (pl *pool) wait(deadline time.Time) bool {
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
		select {
		case in := <-pl.free:
			pl.mu.Lock()
			delete(pl.all, in)
			pl.mu.Unlock()
			in.close()
		default:
			return
		}
	}
}

// idle runs warren_idle on free instances used since their last idle call.
// It takes each from the free list, so it never races a publisher.
func (pl *pool) idle() {
	for n := len(pl.free); n > 0; n-- {
		var in *instance
		select {
		case in = <-pl.free:
		default:
			return
		}
		if in.calls > 0 && in.fns[fnIdle] != nil {
			in.calls = 0
			if _, err := in.run(fnIdle, nil); err != nil {
				pl.discard(in, err)
				continue
			}
			in.bufCap = 0 // the guest may shrink its buffer when idle
		}
		pl.free <- in
	}
	if pl.closed.Load() {
		pl.drain()
	}
}
