//go:build unix

package main

import (
	"syscall"
	"time"
)

// ownCPU is this process's user plus system CPU time. getrusage measures
// it to the microsecond, where /proc counts 10 ms ticks: a short run would
// read as no CPU at all.
func ownCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
