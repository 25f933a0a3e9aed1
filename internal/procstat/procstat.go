// Package procstat reads a process's CPU time, resident memory, I/O and
// context switches from Linux's /proc: for the load tools that report a
// broker's cost beside their own figures, and for the broker's own
// /api/nodes.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU is the process's user plus system CPU time (/proc/PID/stat fields 14
// and 15, in clock ticks of 1/100 s).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad cpu fields", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// RSS is the process's resident memory in bytes (/proc/PID/status VmRSS).
func RSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// IO is a process's I/O as /proc/PID/io counts it.
type IO struct {
	ReadCalls, WriteCalls uint64 // syscr, syscw: read and write system calls
	ReadBytes, WriteBytes uint64 // read_bytes, write_bytes: what reached the storage layer
}

// ProcessIO reads /proc/PID/io.
func ProcessIO(pid int) (IO, error) {
	fields, err := keyed(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return IO{}, err
	}
	return IO{ReadCalls: fields["syscr"], WriteCalls: fields["syscw"], ReadBytes: fields["read_bytes"],
		WriteBytes: fields["write_bytes"]}, nil
}

// ContextSwitches is the process's voluntary and involuntary context
// switches (/proc/PID/status).
func ContextSwitches(pid int) (uint64, error) {
	fields, err := keyed(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return fields["voluntary_ctxt_switches"] + fields["nonvoluntary_ctxt_switches"], nil
}

// keyed reads a /proc file of "key: number" lines; lines whose value is
// not a number are left out.
func keyed(path string) (map[string]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		if f := strings.Fields(v); len(f) > 0 {
			if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				out[strings.TrimSpace(k)] = n
			}
		}
	}
	return out, nil
}
