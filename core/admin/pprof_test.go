package admin

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/warrenmq/warren/core/config"
)

func profilingOn(c *config.Config) { c.Admin.Profiling = true }

// profileRoutes are the paths of every pprof route.
func profileRoutes() []string {
	return append([]string{"/api/warren/pprof/cpu?seconds=1"}, profilePaths(snapshotProfiles)...)
}

func profilePaths(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, "/api/warren/pprof/"+n)
	}
	return out
}

// profileStrings checks that body is a gzipped profile.proto message
// (the format go tool pprof reads): gzip, then protobuf fields to the
// end, with sample types (field 1). It returns the string table (field
// 6), where the sample types' names are.
func profileStrings(t *testing.T, body []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not gzip: %v (%d bytes: %.40q)", err, len(body), body)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	var strs []string
	sampleTypes := 0
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			t.Fatalf("not protobuf: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, raw[n:])
		if m < 0 {
			t.Fatalf("field %d: %v", num, protowire.ParseError(m))
		}
		switch {
		case num == 1 && typ == protowire.BytesType:
			sampleTypes++
		case num == 6 && typ == protowire.BytesType:
			s, _ := protowire.ConsumeBytes(raw[n:])
			strs = append(strs, string(s))
		}
		raw = raw[n+m:]
	}
	if sampleTypes == 0 {
		t.Fatalf("a profile without sample types; strings %q", strs)
	}
	return strs
}

// Off, the default: every route is a 404 that names the setting, and the
// runtime samples nothing for the mutex and block profiles.
func TestProfilingOffByDefault(t *testing.T) {
	h := Handler(newBroker(t))
	for _, path := range profileRoutes() {
		w := asGuest(path).serve(h)
		var e struct{ Error, Reason string }
		jsonBody(t, w, &e)
		if w.Code != http.StatusNotFound || !strings.Contains(e.Reason, "profiling = true") || !strings.Contains(e.Reason, "[admin]") {
			t.Errorf("%s with profiling off: %d %+v, want a 404 naming admin's profiling", path, w.Code, e)
		}
	}
}

// Only administrators profile; the others get the API's usual 401s,
// before anything says whether profiling is on.
func TestProfilesNeedAdministrator(t *testing.T) {
	for _, on := range []bool{true, false} {
		b := newBroker(t, func(c *config.Config) { c.Admin.Profiling = on })
		for _, tag := range []string{"management", "monitoring", "policymaker"} {
			pw := "pw"
			if err := b.PutUser(tag, &pw, []string{tag}); err != nil {
				t.Fatal(err)
			}
		}
		h := Handler(b)
		for _, path := range profileRoutes() {
			if w := (request{method: "GET", path: path}).serve(h); w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s without credentials: %d, want 401 asking for them", path, w.Code)
			}
			for _, tag := range []string{"management", "monitoring", "policymaker"} {
				w := (request{method: "GET", path: path, user: tag, password: "pw"}).serve(h)
				var e struct{ Error, Reason string }
				jsonBody(t, w, &e)
				if w.Code != http.StatusUnauthorized || e.Reason != "Not administrator user" {
					t.Errorf("%s as %s (profiling %v): %d %+v, want 401 Not administrator user", path, tag, on, w.Code, e)
				}
			}
		}
	}
}

// The snapshot profiles are pprof's, with their sample types; goroutine's
// ?debug=2 is every stack as text; a duration is refused.
func TestSnapshotProfiles(t *testing.T) {
	h := Handler(newBroker(t, profilingOn))
	wantType := map[string]string{
		"heap": "inuse_space", "allocs": "alloc_space", "mutex": "contentions", "block": "contentions",
		"goroutine": "goroutine", "threadcreate": "threadcreate",
	}
	for _, name := range snapshotProfiles {
		path := "/api/warren/pprof/" + name
		w := asGuest(path).serve(h)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/octet-stream" {
			t.Errorf("%s: %d %q %.200q", path, w.Code, w.Header().Get("Content-Type"), w.Body)
			continue
		}
		if strs := profileStrings(t, w.Body.Bytes()); !slices.Contains(strs, wantType[name]) {
			t.Errorf("%s: no sample type %q in %q", path, wantType[name], strs)
		}

		w = asGuest(path + "?seconds=5").serve(h)
		var e struct{ Error, Reason string }
		jsonBody(t, w, &e)
		if w.Code != http.StatusBadRequest || !strings.Contains(e.Reason, "only the cpu profile") {
			t.Errorf("%s?seconds=5: %d %+v, want a 400", path, w.Code, e)
		}
	}
	w := asGuest("/api/warren/pprof/goroutine?debug=2").serve(h)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "goroutine ") || !strings.Contains(w.Body.String(), "TestSnapshotProfiles") {
		t.Errorf("goroutine?debug=2: %d %.300q", w.Code, w.Body)
	}
}

// A CPU profile's length is whole seconds from 1 to 300; anything else
// is a 400 that says so, before the profiler starts.
func TestCPUProfileSeconds(t *testing.T) {
	h := Handler(newBroker(t, profilingOn))
	for _, s := range []string{"0", "-1", "301", "1.5", "30s", "abc", "", "99999999999999999999"} {
		path := "/api/warren/pprof/cpu?seconds=" + s
		w := asGuest(path).serve(h)
		var e struct{ Error, Reason string }
		jsonBody(t, w, &e)
		if w.Code != http.StatusBadRequest || e.Error != "bad_request" || !strings.Contains(e.Reason, "from 1 to 300") {
			t.Errorf("%s: %d %+v, want a 400 saying from 1 to 300", path, w.Code, e)
		}
	}
}

// A real one-second CPU profile, over a real connection (its deadline is
// moved through http.ResponseController, which a recorder lacks); and
// one asked for while the runtime's profiler is busy is a 409 at once.
func TestCPUProfile(t *testing.T) {
	srv := httptest.NewServer(Handler(newBroker(t, profilingOn)))
	t.Cleanup(srv.Close)
	get := func() (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/api/warren/pprof/cpu?seconds=1", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	// Another CPU profile holds the profiler, as a request's would.
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Fatalf("the test needs the CPU profiler (is go test's -cpuprofile on?): %v", err)
	}
	resp, body := get()
	pprof.StopCPUProfile()
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), "one at a time") {
		t.Fatalf("with the profiler busy: %d %q %s, want a 409 saying why", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	resp, body = get()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("%d %q %.200q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if strs := profileStrings(t, body); !slices.Contains(strs, "cpu") || !slices.Contains(strs, "nanoseconds") {
		t.Fatalf("a CPU profile without its sample type: %q", strs)
	}
}
