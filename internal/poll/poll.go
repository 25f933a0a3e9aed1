// Package poll is the tests' one way to wait for a condition: every wait
// has a deadline and says what it waited for, so a test that waits for
// something that never comes fails with a reason instead of hanging
// (nats-server's checkFor). It waits for conditions only; a test of an
// order records the events and checks their order instead.
package poll

import (
	"testing"
	"time"
)

// Every is how often a condition is asked again.
const Every = 5 * time.Millisecond

// Until asks cond every Every until it holds, and fails t if it still
// does not after within, naming what it waited for.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("waited %v for %s; it did not come", within, what)
	}
}

// Within asks cond every Every until it holds, for up to within, and
// says whether it came: for a test that, when it does not, has more to
// report than Until's line.
func Within(within time.Duration, cond func() bool) bool {
	return WithinEvery(within, Every, cond)
}

// WithinEvery is Within asking every every instead: for a condition that
// must not be asked often (asking touches what it watches), or that
// compares what it sees with what it saw the time before.
func WithinEvery(within, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// Receive waits up to within for a value from ch, and fails t, naming
// what it waited for, if none comes.
func Receive[T any](t testing.TB, within time.Duration, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("waited %v for %s; it did not come", within, what)
		panic("unreachable")
	}
}
