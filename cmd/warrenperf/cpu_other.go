//go:build !unix

package main

import (
	"errors"
	"time"
)

// ownCPU is not measured here: the client's CPU is left out of the summary.
func ownCPU() (time.Duration, error) {
	return 0, errors.New("no getrusage")
}
