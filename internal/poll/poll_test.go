package poll

import (
	"testing"
	"time"
)

// Within says whether the condition came; Until goes on when it does.
func TestWithin(t *testing.T) {
	if Within(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds came")
	}
	n := 0
	if !Within(10*time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("a condition that holds on the third ask did not come")
	}
	Until(t, 10*time.Second, "a condition that holds", func() bool { return true })
	n = 0
	if !WithinEvery(10*time.Second, time.Millisecond, func() bool { n++; return n == 3 }) {
		t.Fatal("WithinEvery: a condition that holds on the third ask did not come")
	}
}
