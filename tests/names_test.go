package tests

import (
	"fmt"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Names nothing should store (core/names): at most 255 bytes of UTF-8
// without control or bidirectional formatting characters, refused by
// every way in. Where RabbitMQ 3.10.8 refuses too the answer is its own
// (501 for a short string that is not UTF-8, 414 for a request line past
// its HTTP server's bound); where it stores the name, Warren refuses
// more, and against the reference these tests check that RabbitMQ does
// store it, so the difference stays written down.

// nameRow is one name and what is wrong with it: says is part of
// Warren's refusal, stripped what RabbitMQ makes of the name over AMQP
// ("" when it keeps the name as sent).
type nameRow struct {
	suffix   string
	says     string
	stripped string
}

var lyingNames = []nameRow{
	{"n\x00ul", `holds a control character (U+0000 at byte`, ""},
	{"rlo\u202egnp.exe", `holds a bidirectional formatting character (U+202E at byte`, ""},
	{"lri\u2066x", `holds a bidirectional formatting character (U+2066 at byte`, ""},
	{"t\tab", `holds a control character (U+0009 at byte`, ""},
	{"c1\u0085", `holds a control character (U+0085 at byte`, ""},
	{"l\nf", `holds a control character (U+000A at byte`, "lf"},
	{"c\rr", `holds a control character (U+000D at byte`, "cr"},
}

func TestNamesThatLieOverAMQP(t *testing.T) {
	s := start(t)
	base := uniq(t, "")
	for _, kind := range []string{"queue", "exchange"} {
		for _, r := range lyingNames {
			name := base + "." + r.suffix
			kept := name
			if r.stripped != "" {
				kept = base + "." + r.stripped
			}
			if kind == "queue" {
				s.ownQueue(kept)
			} else {
				s.ownExchange(kept)
			}
			_, ch := channel(t, s)
			err := declareNamed(ch, kind, name)
			if reference() != "" {
				// RabbitMQ keeps the name, or drops its CR and LF.
				if err != nil {
					t.Errorf("%s %q: RabbitMQ refused it: %v", kind, name, err)
				}
				continue
			}
			if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.PreconditionFailed ||
				!strings.HasPrefix(e.Reason, "PRECONDITION_FAILED - in vhost '/', "+kind+" name ") || !strings.Contains(e.Reason, r.says) {
				t.Errorf("%s %q: %v, want 406 saying %s", kind, name, err, r.says)
			}
			_, ch = channel(t, s)
			if err := declarePassive(ch, kind, kept); amqpCode(err) != amqp.NotFound {
				t.Errorf("%s %q was declared: %v", kind, kept, err)
			}
		}
		// A short string that is not UTF-8 closes the connection, in
		// RabbitMQ's words, before anything reads it.
		for _, bad := range []string{"bad\xff\xfe", "overlong\xc0\xaf"} {
			c, ch := channel(t, s)
			err := declareNamed(ch, kind, base+"."+bad)
			if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.FrameError || e.Reason != "FRAME_ERROR - Malformed UTF-8 in shortstr" {
				t.Errorf("%s %q: %v, want 501 Malformed UTF-8 in shortstr", kind, bad, err)
			}
			waitFor(t, "the connection to close", c.IsClosed)
		}
		// 255 bytes of letters and marks from anywhere is a name.
		long := base + "." + strings.Repeat("é", (255-len(base)-1)/2)
		if kind == "queue" {
			s.ownQueue(long)
		} else {
			s.ownExchange(long)
		}
		_, ch := channel(t, s)
		if err := declareNamed(ch, kind, long); err != nil {
			t.Errorf("%s of %d bytes: %v", kind, len(long), err)
		}
	}
}

func declareNamed(ch *amqp.Channel, kind, name string) error {
	if kind == "queue" {
		_, err := ch.QueueDeclare(name, false, true, false, false, nil)
		return err
	}
	return ch.ExchangeDeclare(name, "fanout", false, true, false, false, nil)
}

func declarePassive(ch *amqp.Channel, kind, name string) error {
	if kind == "queue" {
		_, err := ch.QueueDeclarePassive(name, false, true, false, false, nil)
		return err
	}
	return ch.ExchangeDeclarePassive(name, "fanout", false, true, false, false, nil)
}

// TestMgmtNamesThatLie makes vhosts, users, queues and exchanges through
// the management API, and a vhost, a user and a queue through a
// definitions import.
func TestMgmtNamesThatLie(t *testing.T) {
	m := startMgmt(t)
	base := uniq(t, "")
	rows := append([]nameRow{}, lyingNames...)
	rows = append(rows,
		nameRow{"bad\xff", "is not valid UTF-8 (byte", ""},
		nameRow{strings.Repeat("x", 256), "is longer than 255 bytes", ""},
	)
	paths := map[string]func(name string) string{
		"vhost":    func(n string) string { return "/api/vhosts/" + esc(n) },
		"user":     func(n string) string { return "/api/users/" + esc(n) },
		"queue":    func(n string) string { return "/api/queues/" + m.v() + "/" + esc(n) },
		"exchange": func(n string) string { return "/api/exchanges/" + m.v() + "/" + esc(n) },
	}
	bodies := map[string]string{"vhost": "", "user": `{"password": "pw", "tags": "administrator"}`, "queue": `{"durable": false}`, "exchange": `{"type": "fanout"}`}
	for _, kind := range []string{"vhost", "user", "queue", "exchange"} {
		for _, r := range rows {
			name := base + "." + r.suffix
			path := paths[kind](name)
			res := m.call("PUT", path, bodies[kind])
			if kind == "queue" && len(name) > 255 {
				// The one name RabbitMQ's API refuses, in these words.
				m.expectError(res, 400, "bad_request", fmt.Sprintf("queue should be less than 255 bytes, actually was %d\n", len(name)))
				continue
			}
			if !m.isWarren() {
				// RabbitMQ stores it, whatever it holds.
				if res.status != 201 {
					t.Errorf("PUT %s %q: RabbitMQ answered %d %s", kind, name, res.status, res.body)
				}
				m.call("DELETE", path, "")
				continue
			}
			var e struct{ Error, Reason string }
			if res.status == 400 {
				res.json(t, &e)
			}
			if e.Error != "bad_request" || !strings.Contains(e.Reason, kind+" name ") || !strings.Contains(e.Reason, r.says) {
				t.Errorf("PUT %s %q: %d %s, want 400 saying %s", kind, name, res.status, res.body, r.says)
			}
			if got := m.call("GET", path, ""); got.status != 404 {
				t.Errorf("%s %q was stored: GET says %d", kind, name, got.status)
			}
		}
		// A request line past the HTTP server's bound: 414 from both, with
		// nothing in the body.
		res := m.call("PUT", paths[kind](strings.Repeat("a", 70_000)), bodies[kind])
		if res.status != 414 || res.body != "" {
			t.Errorf("PUT %s of 70000 bytes: %d %q, want 414 and no body", kind, res.status, res.body)
		}
	}

	// A definitions import checks the names it would create, and applies
	// nothing of a document with a bad one. (JSON cannot carry a byte
	// that is not UTF-8: a decoder reads it as U+FFFD.)
	for _, r := range []nameRow{lyingNames[0], lyingNames[1], lyingNames[5]} {
		name := base + ".defs." + r.suffix
		for kind, doc := range map[string]string{
			"vhost": fmt.Sprintf(`{"vhosts": [{"name": %q}, {"name": %q}]}`, name, base+".defs.fine"),
			"user":  fmt.Sprintf(`{"users": [{"name": %q, "password_hash": "", "tags": ""}]}`, name),
			"queue": fmt.Sprintf(`{"queues": [{"name": %q, "vhost": %q, "durable": true, "auto_delete": false, "arguments": {}}]}`, name, m.vhost),
		} {
			res := m.call("POST", "/api/definitions", jsonEscapeBadBytes(doc))
			if !m.isWarren() {
				m.call("DELETE", "/api/vhosts/"+esc(name), "")
				m.call("DELETE", "/api/vhosts/"+esc(base+".defs.fine"), "")
				m.call("DELETE", "/api/users/"+esc(name), "")
				m.call("DELETE", paths["queue"](name), "")
				continue
			}
			if res.status != 400 || !strings.Contains(res.body, kind+" name ") || !strings.Contains(res.body, jsonText(r.says)) {
				t.Errorf("import of a %s %q: %d %s, want 400 saying %s", kind, name, res.status, res.body, r.says)
			}
			m.expectNotFound("GET", "/api/vhosts/"+esc(base+".defs.fine"))
		}
	}
}

// jsonEscapeBadBytes writes the NUL Go's %q escapes as \x00 (not JSON)
// as JSON escapes it.
func jsonEscapeBadBytes(doc string) string {
	return strings.ReplaceAll(doc, `\x00`, `\u0000`)
}
