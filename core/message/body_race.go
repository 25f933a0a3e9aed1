//go:build race

package message

// checkBodies is set in race builds, which are test builds: a body given
// back to the pool is overwritten at once, and one given back twice
// panics, so a holder that reads after its release, or releases twice,
// fails a test for certain rather than when a new message happens to
// reuse the buffer in time.
const checkBodies = true
