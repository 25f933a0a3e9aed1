//go:build race

package broker

// raceEnabled: the race detector keeps shadow memory for every byte the
// program touched, resident for good, so the resident set says little here.
const raceEnabled = true
