package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/config"
)

// profile writes the broker's bytes untouched: a gzip stream, which
// core/admin's tests read as a profile.
func TestProfile(t *testing.T) {
	_, url := newBroker(t, func(c *config.Config) { c.Admin.Profiling = true })
	for _, args := range [][]string{{"heap"}, {"goroutine"}, {"mutex"}, {"block"}, {"allocs"}, {"threadcreate"}, {"cpu", "1s"}} {
		out, err := ctl(t, url, append([]string{"profile"}, args...)...)
		if err != nil {
			t.Fatalf("profile %s: %v", args, err)
		}
		zr, err := gzip.NewReader(strings.NewReader(out))
		if err != nil {
			t.Fatalf("profile %s: not gzip: %v (%.40q)", args, err, out)
		}
		if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
			t.Fatalf("profile %s: %d bytes, %v", args, len(raw), err)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `"nope" is not one of cpu, heap`},
		{[]string{"heap", "5s"}, "heap takes no duration"},
		{[]string{"cpu", "soon"}, `"soon" is not a duration`},
		{[]string{"cpu", "1.5s"}, "whole seconds"},
		{[]string{"cpu", "0"}, "whole seconds, 1s or more"},
		{[]string{"cpu", "500ms"}, "whole seconds, 1s or more"},
		{[]string{"cpu", "10m"}, "from 1 to 300"}, // the broker's bound, in its words
		{[]string{"cpu", "1s", "2s"}, "usage: warrenctl profile"},
	} {
		var out bytes.Buffer
		err := run(append([]string{"--url", url, "profile"}, tc.args...), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("profile %s: %v, want an error with %q", tc.args, err, tc.want)
		}
		if out.Len() > 0 {
			t.Errorf("profile %s wrote %d bytes with its error", tc.args, out.Len())
		}
	}

	// A broker with profiling off says what to turn on.
	_, off := newBroker(t)
	if _, err := ctl(t, off, "profile", "heap"); err == nil || !strings.Contains(err.Error(), "profiling = true") {
		t.Errorf("profile heap with profiling off: %v", err)
	}
}
