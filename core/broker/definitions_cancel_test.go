package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// An import whose client is gone stops while it waits for another
// import or is being checked, and applies nothing; one being applied is
// not stopped (never half applied for want of a reader).
func TestImportStopsWhenItsClientIsGone(t *testing.T) {
	b := testBroker(t, t.TempDir())
	before, _ := json.Marshal(b.ExportDefinitions())
	doc := bindingsDoc(2000, 10)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.ImportDefinitions(ctx, doc, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("import with its context done: %v", err)
	}

	// Waiting for another import: it gives up when its context ends.
	b.defsMu <- struct{}{} // another import holds the slot
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.ImportDefinitions(ctx, doc, "") }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("import waiting for another: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an import whose client had gone waited on for the other import")
	}
	<-b.defsMu
	if after, _ := json.Marshal(b.ExportDefinitions()); string(after) != string(before) {
		t.Fatal("an abandoned import changed the broker")
	}

	// With its context still live, the same document is applied.
	if err := b.ImportDefinitions(context.Background(), doc, ""); err != nil {
		t.Fatal(err)
	}
	v, _ := b.VHost("/")
	if n := len(v.Bindings()); n < 2000 {
		t.Fatalf("%d bindings after the import", n)
	}
}

// Every admin request's context ends when its answer could no longer be
// sent.
func TestAdminRequestsEndWhenTheirAnswerIsDue(t *testing.T) {
	var deadline time.Time
	var ok bool
	h := untilAnswerDue(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		deadline, ok = r.Context().Deadline()
	}))
	sent := time.Now()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/overview", nil))
	if !ok || deadline.After(sent.Add(adminWriteTimeout).Add(time.Minute)) || deadline.Before(sent) {
		t.Fatalf("deadline %v (set %v), want about %v from now", deadline, ok, adminWriteTimeout)
	}
}
