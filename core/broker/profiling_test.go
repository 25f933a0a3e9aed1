package broker

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/config"
)

// Mutex and block sampling is on while a broker with admin.profiling
// runs, and only then.
func TestProfilingSamplesWhileOn(t *testing.T) {
	mutexRate := func() int { return runtime.SetMutexProfileFraction(-1) } // a negative rate reads it
	if r := mutexRate(); r != 0 {
		t.Fatalf("mutex profile fraction %d before any broker", r)
	}
	off := testBroker(t, t.TempDir())
	if err := off.Start(); err != nil {
		t.Fatal(err)
	}
	if r := mutexRate(); r != 0 {
		t.Fatalf("mutex profile fraction %d with profiling off", r)
	}
	on := testBroker(t, t.TempDir(), func(c *config.Config) { c.Admin.Profiling = true })
	if err := on.Start(); err != nil {
		t.Fatal(err)
	}
	if r := mutexRate(); r != mutexProfileFraction {
		t.Fatalf("mutex profile fraction %d with profiling on, want %d", r, mutexProfileFraction)
	}
	if err := on.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := mutexRate(); r != 0 {
		t.Fatalf("mutex profile fraction %d after the broker stopped", r)
	}
}

// An answer given more time is still sent after the listener's write
// timeout has passed, and its context outlives the request's usual one.
// The server's write timeout is a nanosecond: over before any handler
// writes, so an answer not given more time never arrives.
func TestAnswerDueLater(t *testing.T) {
	type result struct {
		usual, later time.Time
		err          error
	}
	results := make(chan result, 1)
	srv := httptest.NewUnstartedServer(untilAnswerDue(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/later" {
			var res result
			res.usual, _ = r.Context().Deadline()
			ctx, cancel, err := AnswerDueLater(w, r, time.Hour)
			res.err = err
			if err == nil {
				defer cancel()
				res.later, _ = ctx.Deadline()
			}
			results <- res
		}
		_, _ = io.WriteString(w, "the answer")
	})))
	srv.Config.WriteTimeout = time.Nanosecond
	srv.Start()
	t.Cleanup(srv.Close)

	if resp, err := srv.Client().Get(srv.URL + "/usual"); err == nil {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("an answer past the write timeout arrived: %d %q (the test proves nothing)", resp.StatusCode, body)
		}
	}

	resp, err := srv.Client().Get(srv.URL + "/later")
	if err != nil {
		t.Fatalf("an answer given more time: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "the answer" {
		t.Fatalf("an answer given more time: %q, %v", body, err)
	}
	res := <-results
	if res.err != nil || res.usual.IsZero() || res.later.Sub(res.usual) < 59*time.Minute {
		t.Fatalf("request's deadline %v, the later context's %v (%v): want an hour later", res.usual, res.later, res.err)
	}
}
