//go:build race

package tests

// raceEnabled: under the race detector allocation counts are not the
// program's own.
const raceEnabled = true
