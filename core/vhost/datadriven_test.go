package vhost

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/internal/datadriven"
	"github.com/warrenmq/warren/protocol"
)

// TestDataDriven runs the topologies in testdata/*.dd against a vhost,
// with and without a store. The commands:
//
//	exchange NAME TYPE [ae=X] [autodelete] [internal]
//	queue NAME [ttl=MS] [maxlen=N] [overflow=O] [dlx=X] [dlk=KEY]
//	           [limit=N] [prio=N]
//	bind SRC QUEUE [key=K] [h.NAME=VALUE ...]   (h.* are binding arguments)
//	bind-x SRC DEST [key=K]                     (exchange to exchange)
//	unbind SRC QUEUE [key=K]
//	publish X [key=K] [body=B] [cc=K,K] [bcc=K,K] [h.NAME=VALUE ...]
//	        [expiration=MS] [priority=N]
//	                                            ("" names the default exchange)
//	ready                                       ready messages per queue
//	drain Q                                     take every message: body
//	                                            and its x-death
//	reject Q [requeue]                          take one and reject it
//	delete-exchange X / delete-queue Q
//	policy NAME PATTERN APPLY-TO KEY=VALUE...   / clear-policy NAME
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.dd")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		for _, durable := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/durable=%v", filepath.Base(f), durable), func(t *testing.T) {
				v := newTestVHost(t, durable)
				datadriven.Run(t, f, func(c *datadriven.Case) string {
					var out string
					within(t, c.Raw, func() { out = runCommand(t, v, c) })
					return out
				})
			})
		}
	}
}

func runCommand(t *testing.T, v *VHost, c *datadriven.Case) string {
	name := func(i int) string {
		if i >= len(c.Fields) || strings.Contains(c.Fields[i], "=") {
			t.Fatalf("line %d: %s needs %d names", c.Line, c.Cmd, i+1)
		}
		if c.Fields[i] == `""` {
			return "" // the default exchange
		}
		return c.Fields[i]
	}
	answer := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	switch c.Cmd {
	case "exchange":
		args := protocol.Table{}
		if c.Args.Has("ae") {
			args["alternate-exchange"] = c.Args["ae"]
		}
		_, err := v.DeclareExchange(exchange.Definition{Name: name(0), Type: name(1), Durable: true,
			AutoDelete: c.Args.Has("autodelete"), Internal: c.Args.Has("internal"), Args: args}, false)
		return answer(err)
	case "queue":
		args := protocol.Table{}
		for key, arg := range map[string]string{"ttl": "x-message-ttl", "maxlen": "x-max-length", "limit": "x-delivery-limit", "prio": "x-max-priority"} {
			if c.Args.Has(key) {
				args[arg] = int32(c.Args.I64(t, key, 0))
			}
		}
		for key, arg := range map[string]string{"overflow": "x-overflow", "dlx": "x-dead-letter-exchange", "dlk": "x-dead-letter-routing-key"} {
			if c.Args.Has(key) {
				args[arg] = strings.Trim(c.Args[key], `"`) // dlx="" is the default exchange
			}
		}
		_, _, err := v.DeclareQueue(QueueDef{Name: name(0), Durable: true, Args: args}, false)
		return answer(err)
	case "bind", "bind-x", "unbind":
		dest := exchange.Destination{Kind: exchange.ToQueue, Name: name(1)}
		if c.Cmd == "bind-x" {
			dest.Kind = exchange.ToExchange
		}
		if c.Cmd == "unbind" {
			return answer(v.Unbind(name(0), dest, c.Args["key"], headerArgs(c.Args), nil))
		}
		return answer(v.Bind(name(0), dest, c.Args["key"], headerArgs(c.Args), nil))
	case "publish":
		return publishCommand(t, v, c, name(0))
	case "ready":
		var lines []string
		for _, q := range v.Queues() {
			if q.Ready > 0 {
				lines = append(lines, fmt.Sprintf("%s: %d", q.Name, q.Ready))
			}
		}
		sort.Strings(lines)
		if len(lines) == 0 {
			return "all empty"
		}
		return strings.Join(lines, "\n")
	case "drain":
		q, err := v.Queue(name(0), nil)
		if err != nil {
			return err.Error()
		}
		var lines []string
		for {
			d, _, ok := q.Get(true)
			if !ok {
				break
			}
			lines = append(lines, describeMessage(d.Entry.Msg))
		}
		if len(lines) == 0 {
			return "empty"
		}
		return strings.Join(lines, "\n")
	case "reject":
		q, err := v.Queue(name(0), nil)
		if err != nil {
			return err.Error()
		}
		d, _, ok := q.Get(false)
		if !ok {
			return "empty"
		}
		if c.Args.Has("requeue") {
			q.Requeue([]queue.Entry{d.Entry})
		} else {
			q.Reject([]queue.Entry{d.Entry})
		}
		return describeMessage(d.Entry.Msg)
	case "delete-exchange":
		return answer(v.DeleteExchange(name(0), false))
	case "delete-queue":
		n, err := v.DeleteQueue(name(0), nil, false, false)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("deleted with %d ready", n)
	case "policy":
		def := protocol.Table{}
		for _, f := range c.Fields[3:] {
			k, val, _ := strings.Cut(f, "=")
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				def[k] = float64(n) // as JSON brings it
			} else {
				def[k] = val
			}
		}
		p, err := policy.New(name(0), name(1), policy.ApplyTo(name(2)), 0, def)
		if err != nil {
			return err.Error()
		}
		return answer(v.SetPolicy(p))
	case "clear-policy":
		return answer(v.DeletePolicy(name(0)))
	}
	t.Fatalf("line %d: unknown command %q", c.Line, c.Cmd)
	return ""
}

// headerArgs collects h.NAME=VALUE arguments into a table.
func headerArgs(a datadriven.Args) protocol.Table {
	var t protocol.Table
	for k, v := range a {
		if name, ok := strings.CutPrefix(k, "h."); ok {
			if t == nil {
				t = protocol.Table{}
			}
			t[name] = v
		}
	}
	return t
}

func publishCommand(t *testing.T, v *VHost, c *datadriven.Case, exchangeName string) string {
	x, err := v.Exchange(exchangeName)
	if err != nil {
		return err.Error()
	}
	p := protocol.Properties{Headers: headerArgs(c.Args)}
	split := func(s string) []any {
		var out []any
		for _, k := range strings.Split(s, ",") {
			out = append(out, k)
		}
		return out
	}
	if c.Args.Has("cc") || c.Args.Has("bcc") {
		if p.Headers == nil {
			p.Headers = protocol.Table{}
		}
		if c.Args.Has("cc") {
			p.Headers["CC"] = split(c.Args["cc"])
		}
		if c.Args.Has("bcc") {
			p.Headers["BCC"] = split(c.Args["bcc"])
		}
	}
	if p.Headers != nil {
		p.Flags |= protocol.FlagHeaders
	}
	if c.Args.Has("expiration") {
		p.Expiration, p.Flags = c.Args["expiration"], p.Flags|protocol.FlagExpiration
	}
	if c.Args.Has("priority") {
		p.Priority, p.Flags = uint8(c.Args.U64(t, "priority", 0)), p.Flags|protocol.FlagPriority
	}
	p.DeliveryMode, p.Flags = 2, p.Flags|protocol.FlagDeliveryMode
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New(exchangeName, c.Args["key"], p.Flags, props, []byte(c.Args.Str("body", "m")))
	if err != nil {
		return err.Error()
	}
	var r Router
	out, err := v.Publish(x, m, &r)
	switch {
	case err != nil:
		return err.Error()
	case out.Held:
		return "held"
	case out.Rejected:
		return fmt.Sprintf("routed to %d, rejected", out.Queues)
	case out.Queues == 0:
		return "unroutable"
	}
	return fmt.Sprintf("routed to %d", out.Queues)
}

// describeMessage prints a message's body, the headers a queue sees, and
// its x-death history as reason@queue(count) from newest to oldest.
func describeMessage(m *message.Message) string {
	s := string(m.Body)
	h := m.Headers()
	var names []string
	for k := range h {
		if k != "x-death" && !strings.HasPrefix(k, "x-first-death") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		s += fmt.Sprintf(" %s=%v", k, h[k])
	}
	deaths, _ := h["x-death"].([]any)
	for i, d := range deaths {
		if i == 0 {
			s += " died:"
		}
		e := d.(protocol.Table)
		s += fmt.Sprintf(" %s@%s(%v)", e["reason"], e["queue"], e["count"])
	}
	if len(deaths) > 0 {
		s += fmt.Sprintf(" key=%s", m.RoutingKey)
	}
	return s
}
