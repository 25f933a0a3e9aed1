package vhost_test

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// TestDataDriven runs the topologies in testdata/*.dd against a vhost,
// with and without a store (github.com/cockroachdb/datadriven; -rewrite
// rewrites their expected output). The commands:
//
//	exchange NAME TYPE [ae=X] [autodelete] [internal]
//	queue NAME [ttl=MS] [maxlen=N] [overflow=O] [dlx=X] [dlk=KEY]
//	           [limit=N] [prio=N]
//	bind SRC QUEUE [key=K] [h.NAME=VALUE ...]   (h.* are binding arguments)
//	bind-x SRC DEST [key=K]                     (exchange to exchange)
//	unbind SRC QUEUE [key=K]
//	publish X [key=K] [body=B] [cc=(K, K)] [bcc=(K, K)] [h.NAME=VALUE ...]
//	        [expiration=MS] [priority=N]
//	                                            ("" names the default exchange)
//	ready                                       ready messages per queue
//	drain Q                                     take every message: body
//	                                            and its x-death
//	reject Q [requeue]                          take one and reject it
//	delete-exchange X / delete-queue Q
//	policy NAME PATTERN APPLY-TO KEY=VALUE...   / clear-policy NAME
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		for _, durable := range []bool{false, true} {
			t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
				v := newTestVHost(t, durable)
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					var out string
					within(t, d.Pos+": "+d.FullCmd(), func() { out = runCommand(t, v, d) })
					return out
				})
			})
		}
	})
}

func runCommand(t *testing.T, v *vhost.VHost, d *datadriven.TestData) string {
	// name returns the command's i-th argument, a bare word.
	name := func(i int) string {
		if i >= len(d.CmdArgs) || d.CmdArgs[i].Vals != nil {
			d.Fatalf(t, "%s needs %d names", d.Cmd, i+1)
		}
		if d.CmdArgs[i].Key == `""` {
			return "" // the default exchange
		}
		return d.CmdArgs[i].Key
	}
	answer := func(err error) string {
		if err != nil {
			return err.Error()
		}
		return "ok"
	}
	switch d.Cmd {
	case "exchange":
		args := protocol.Table{}
		var ae string
		if d.MaybeScanArgs(t, "ae", &ae) {
			args["alternate-exchange"] = ae
		}
		_, err := v.DeclareExchange(exchange.Definition{Name: name(0), Type: name(1), Durable: true,
			AutoDelete: d.HasArg("autodelete"), Internal: d.HasArg("internal"), Args: args}, false)
		return answer(err)
	case "queue":
		args := protocol.Table{}
		for key, arg := range map[string]string{"ttl": "x-message-ttl", "maxlen": "x-max-length", "limit": "x-delivery-limit", "prio": "x-max-priority"} {
			var n int64
			if d.MaybeScanArgs(t, key, &n) {
				args[arg] = int32(n)
			}
		}
		for key, arg := range map[string]string{"overflow": "x-overflow", "dlx": "x-dead-letter-exchange", "dlk": "x-dead-letter-routing-key"} {
			var s string
			if d.MaybeScanArgs(t, key, &s) {
				args[arg] = strings.Trim(s, `"`) // dlx="" is the default exchange
			}
		}
		_, _, err := v.DeclareQueue(topology.QueueDef{Name: name(0), Durable: true, Args: args}, false)
		return answer(err)
	case "bind", "bind-x", "unbind":
		dest := exchange.Destination{Kind: exchange.ToQueue, Name: name(1)}
		if d.Cmd == "bind-x" {
			dest.Kind = exchange.ToExchange
		}
		if d.Cmd == "unbind" {
			return answer(v.Unbind(name(0), dest, argOr(t, d, "key", ""), headerArgs(t, d), nil))
		}
		return answer(v.Bind(name(0), dest, argOr(t, d, "key", ""), headerArgs(t, d), nil))
	case "publish":
		return publishCommand(t, v, d, name(0))
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
		dq, err := v.Queue(name(0), nil)
		if err != nil {
			return err.Error()
		}
		q, _ := classicqueue.Of(dq)
		var lines []string
		for {
			got, _, ok := q.Get(true)
			if !ok {
				break
			}
			lines = append(lines, describeMessage(got.Entry.Msg))
		}
		if len(lines) == 0 {
			return "empty"
		}
		return strings.Join(lines, "\n")
	case "reject":
		dq, err := v.Queue(name(0), nil)
		if err != nil {
			return err.Error()
		}
		q, _ := classicqueue.Of(dq)
		got, _, ok := q.Get(false)
		if !ok {
			return "empty"
		}
		if d.HasArg("requeue") {
			q.Requeue([]queue.Entry{got.Entry})
		} else {
			q.Reject([]queue.Entry{got.Entry})
		}
		return describeMessage(got.Entry.Msg)
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
		for _, a := range d.CmdArgs[min(3, len(d.CmdArgs)):] {
			val := a.SingleVal(t)
			if n, err := strconv.ParseInt(val, 10, 64); err == nil {
				def[a.Key] = float64(n) // as JSON brings it
			} else {
				def[a.Key] = val
			}
		}
		p, err := policy.New(name(0), name(1), policy.ApplyTo(name(2)), 0, def)
		if err != nil {
			return err.Error()
		}
		return answer(v.SetPolicy(p))
	case "clear-policy":
		return answer(v.DeletePolicy(name(0), false))
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// headerArgs collects d's h.NAME=VALUE arguments into a table.
func headerArgs(t *testing.T, d *datadriven.TestData) protocol.Table {
	var h protocol.Table
	for _, a := range d.CmdArgs {
		if name, ok := strings.CutPrefix(a.Key, "h."); ok {
			if h == nil {
				h = protocol.Table{}
			}
			h[name] = a.SingleVal(t)
		}
	}
	return h
}

// argOr returns the value of d's argument key scanned into a T, or def
// when d has no such argument.
func argOr[T any](t testing.TB, d *datadriven.TestData, key string, def T) T {
	t.Helper()
	d.MaybeScanArgs(t, key, &def)
	return def
}

func publishCommand(t *testing.T, v *vhost.VHost, d *datadriven.TestData, exchangeName string) string {
	x, err := v.Exchange(exchangeName)
	if err != nil {
		return err.Error()
	}
	p := protocol.Properties{Headers: headerArgs(t, d)}
	// keys puts the routing keys of arg, cc=(a, b), in header as an array.
	keys := func(arg, header string) {
		var ks []string
		if !d.MaybeScanArgs(t, arg, &ks) {
			return
		}
		if p.Headers == nil {
			p.Headers = protocol.Table{}
		}
		out := make([]any, len(ks))
		for i, k := range ks {
			out[i] = k
		}
		p.Headers[header] = out
	}
	keys("cc", "CC")
	keys("bcc", "BCC")
	if p.Headers != nil {
		p.Flags |= protocol.FlagHeaders
	}
	if d.MaybeScanArgs(t, "expiration", &p.Expiration) {
		p.Flags |= protocol.FlagExpiration
	}
	var prio uint64
	if d.MaybeScanArgs(t, "priority", &prio) {
		p.Priority, p.Flags = uint8(prio), p.Flags|protocol.FlagPriority
	}
	p.DeliveryMode, p.Flags = 2, p.Flags|protocol.FlagDeliveryMode
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New(exchangeName, argOr(t, d, "key", ""), p.Flags, props, []byte(argOr(t, d, "body", "m")))
	if err != nil {
		return err.Error()
	}
	var r vhost.RouteBuffers
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
