package admin

import (
	"net/http"
	"runtime/pprof"
	"strconv"
	"time"

	netpprof "net/http/pprof"

	"github.com/warrenmq/warren/core/broker"
)

// The Go runtime's profiles, for an operator chasing CPU, memory, lock
// contention or a stuck goroutine; what net/http/pprof serves at
// /debug/pprof/, written by the standard library and read by go tool
// pprof:
//
//	GET /api/warren/pprof/cpu?seconds=N   CPU for N seconds, 1 to 300 (30 by default)
//	GET /api/warren/pprof/heap            live memory at the last GC (?gc=1 runs one first)
//	GET /api/warren/pprof/allocs          all memory allocated since start
//	GET /api/warren/pprof/mutex           contended locks
//	GET /api/warren/pprof/block           waits on channels, selects and locks
//	GET /api/warren/pprof/goroutine       every goroutine's stack (?debug=2 as text)
//	GET /api/warren/pprof/threadcreate    where OS threads were started
//
// The answers are pprof's gzipped protocol buffers (text with ?debug=1
// or 2, except cpu), not JSON; a refusal is JSON, as elsewhere. They
// need admin.profiling: without it every one is a 404 whose reason names
// the setting, so that an administrator knows what to turn on, and users
// who may not profile learn nothing from it (their 401 comes first).
// Only administrators may profile: a profile costs the broker (a CPU
// profile samples for its whole length, a goroutine profile stops the
// world) and lays bare its code paths.
//
// Only cpu takes seconds: the runtime has one CPU profiler, so a second
// CPU profile while one runs is a 409, and the answer is due its seconds
// later than the listener's usual deadline (broker.AnswerDueLater). The
// others are snapshots; net/http/pprof's deltas over ?seconds=N would be
// held to that deadline, so they are refused with a 400 saying to
// compare two snapshots instead. There is no index page: net/http/pprof's
// is HTML with links for /debug/pprof/ and to profiles not served here.
func (a *api) routePprof(mux *router) {
	a.handle(mux, "GET /api/warren/pprof/cpu", administrator, a.cpuProfile)
	for _, name := range snapshotProfiles {
		a.handle(mux, "GET /api/warren/pprof/"+name, administrator, a.snapshotProfile(name))
	}
}

// snapshotProfiles are runtime/pprof's named profiles.
var snapshotProfiles = []string{"heap", "allocs", "mutex", "block", "goroutine", "threadcreate"}

// A CPU profile's length: net/http/pprof's default, and a bound that
// keeps one request from holding the profiler for long.
const (
	defaultCPUProfile = 30 * time.Second
	maxCPUProfile     = 300 * time.Second
)

var errProfilingOff = notFound("profiling is off: set profiling = true in broker.toml's [admin] section and restart the broker")

func (a *api) snapshotProfile(name string) handlerFunc {
	serve := netpprof.Handler(name)
	return func(c *call) (any, error) {
		if !a.profiling {
			return nil, errProfilingOff
		}
		if c.r.URL.Query().Has("seconds") {
			return nil, badRequest("seconds: only the cpu profile takes a duration; for the change in a %s profile, take two and compare them (go tool pprof -diff_base)", name)
		}
		return serve, nil
	}
}

func (a *api) cpuProfile(c *call) (any, error) {
	if !a.profiling {
		return nil, errProfilingOff
	}
	length := defaultCPUProfile
	if c.r.URL.Query().Has("seconds") {
		s := c.query("seconds")
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxCPUProfile {
			return nil, badRequest("seconds: %q is not a whole number of seconds from 1 to %d", s, int(maxCPUProfile/time.Second))
		}
		length = time.Duration(n) * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { takeCPUProfile(w, r, length) }), nil
}

// takeCPUProfile streams a CPU profile of the given length to w, as
// net/http/pprof's Profile does, but with the answer's deadline moved
// past the profile's end and a busy profiler said to be busy.
func takeCPUProfile(w http.ResponseWriter, r *http.Request, length time.Duration) {
	ctx, cancel, err := broker.AnswerDueLater(w, r, length)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal_error", "cannot give a CPU profile's answer the time it takes: "+err.Error())
		return
	}
	defer cancel()
	// Set before the profiler may start writing to w.
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="cpu.pb.gz"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := pprof.StartCPUProfile(w); err != nil {
		// Nothing written: the profiler refuses before it starts.
		w.Header().Del("Content-Disposition")
		writeError(w, http.StatusConflict, "conflict", "a CPU profile is already being taken, and the runtime takes one at a time: try again when it is done")
		return
	}
	t := time.NewTimer(length)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done(): // the client went away, or the broker is stopping
	}
	pprof.StopCPUProfile()
}
