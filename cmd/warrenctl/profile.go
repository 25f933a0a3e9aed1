package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/mattn/go-isatty"
)

const profileForm = "profile cpu [DURATION] | profile heap|allocs|mutex|block|goroutine|threadcreate (to stdout: > FILE)"

func init() {
	commands["profile"] = command{form: profileForm, min: 1, max: 2, run: profile}
}

// profileKinds are the profiles the broker's /api/warren/pprof/ serves.
var profileKinds = []string{"cpu", "heap", "allocs", "mutex", "block", "goroutine", "threadcreate"}

// profile writes one of the broker's runtime profiles to out as the
// broker sends it, gzipped protobuf for go tool pprof:
//
//	warrenctl profile cpu 30s > cpu.pb.gz
//	go tool pprof -http :8080 cpu.pb.gz
//
// Only cpu takes a duration (30s by default, as go tool pprof's); the
// broker bounds it and says so. The broker needs admin.profiling on, and
// the user the administrator tag.
func profile(c *client, _ *opts, out io.Writer, args []string) error {
	kind := args[0]
	if !slices.Contains(profileKinds, kind) {
		return fmt.Errorf("profile: %q is not one of cpu, heap, allocs, mutex, block, goroutine, threadcreate", kind)
	}
	path := "/api/warren/pprof/" + kind
	var length time.Duration
	switch {
	case kind == "cpu":
		length = 30 * time.Second
		if len(args) == 2 {
			var err error
			if length, err = profileLength(args[1]); err != nil {
				return err
			}
		}
		path += "?seconds=" + strconv.Itoa(int(length/time.Second))
	case len(args) == 2:
		return fmt.Errorf("profile: %s takes no duration: it is what the broker holds now (take two and compare them with go tool pprof -diff_base)", kind)
	}
	if f, ok := out.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return fmt.Errorf("profile: a profile is binary, not for a terminal: redirect it, as in warrenctl profile %s > %s.pb.gz", kind, kind)
	}
	data, err := c.send("GET", path, nil, nil, length)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

// profileLength reads a CPU profile's duration: "30s", "2m", or a number
// of seconds. The API takes whole seconds.
func profileLength(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.Atoi(s); nerr == nil && n <= math.MaxInt32 { // a Duration holds that many seconds
		d, err = time.Duration(n)*time.Second, nil
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("profile: %q is not a duration: use seconds, as 30s or 30, or minutes, as 2m", s)
	case d < time.Second || d%time.Second != 0:
		return 0, fmt.Errorf("profile: %q: a CPU profile lasts whole seconds, 1s or more", s)
	}
	return d, nil
}
