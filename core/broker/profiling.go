package broker

import "runtime"

// With admin.profiling on, the admin API serves the runtime's profiles
// (core/admin's pprof.go). The CPU, heap and goroutine profiles need
// nothing beforehand, but the mutex and block profiles hold only what
// the runtime sampled since sampling was turned on, and sampling costs
// something on the paths it watches: a contended lock's unlock, and
// every channel, select or sync wait, which then reads the clock and,
// when sampled, records a stack. So it is on only while a broker with
// profiling on runs, at rates that keep that cost small:
const (
	// mutexProfileFraction samples one contention event in this many.
	mutexProfileFraction = 100
	// blockProfileRate, in nanoseconds: a wait this long or longer is
	// always recorded, a shorter one in proportion to its length.
	blockProfileRate = 100_000
)

// The rates are the process's, not the broker's: cmd/warren runs one
// broker, and tests that run several with profiling on at once share
// them (the first to stop turns sampling off).

// startProfiling turns sampling on when admin.profiling is.
func (b *Broker) startProfiling() {
	if !b.cfg.Admin.Profiling {
		return
	}
	runtime.SetMutexProfileFraction(mutexProfileFraction)
	runtime.SetBlockProfileRate(blockProfileRate)
}

// stopProfiling turns off what startProfiling turned on.
func (b *Broker) stopProfiling() {
	if !b.cfg.Admin.Profiling {
		return
	}
	runtime.SetMutexProfileFraction(0)
	runtime.SetBlockProfileRate(0)
}
