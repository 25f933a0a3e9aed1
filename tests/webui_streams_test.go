package tests

import (
	"strings"
	"testing"
)

// The web UI's Streams page lists a stream connection with its publisher
// and consumer, as RabbitMQ's stream management plugin's page does.
func TestWebUIStreams(t *testing.T) {
	br := startBrowser(t)
	m := startWarrenMgmt(t)
	name := streamTraffic(t, m.s)
	login(t, br, m.base)
	br.goTo(t, "streams")
	br.do(t, "the stream listings loaded",
		waitVisible(`#stream-connections[data-state="loaded"]`),
		waitVisible(`#stream-publishers[data-state="loaded"]`),
		waitVisible(`#stream-consumers[data-state="loaded"]`),
	)
	if conns := br.text(t, `#stream-connections tbody`); !strings.Contains(conns, "guest") || !strings.Contains(conns, " -> ") {
		t.Errorf("stream connections: %q", conns)
	}
	if pubs := br.text(t, `#stream-publishers tbody`); !strings.Contains(pubs, name) || !strings.Contains(pubs, "admin-ref") {
		t.Errorf("stream publishers: %q", pubs)
	}
	if cons := br.text(t, `#stream-consumers tbody`); !strings.Contains(cons, name) || !strings.Contains(cons, "up") {
		t.Errorf("stream consumers: %q", cons)
	}
	if errs := br.pageErrors(); len(errs) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(errs, "\n"))
	}
}
