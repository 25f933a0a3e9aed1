//go:build !race

package message

// checkBodies: see body_race.go.
const checkBodies = false
