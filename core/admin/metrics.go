package admin

import (
	"fmt"
	"net/http"
	"strconv"
)

// metrics writes Prometheus text exposition by hand: a handful of gauges
// do not need a client library.
func (a *api) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	gauge := func(name, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	gauge("warren_connections", "Open client connections.")
	fmt.Fprintf(w, "warren_connections %d\n", len(a.b.Server().Connections()))
	gauge("warren_queue_messages_ready", "Messages ready for delivery, per queue.")
	type qrow struct {
		vhost, name         string
		ready, unacked, con int
	}
	var rows []qrow
	for _, n := range a.b.VHosts() {
		v, _ := a.b.VHost(n)
		for _, q := range v.Queues() {
			rows = append(rows, qrow{n, q.Name, q.Ready, q.Unacked, q.Consumers})
		}
	}
	for _, q := range rows {
		fmt.Fprintf(w, "warren_queue_messages_ready{vhost=%s,queue=%s} %d\n", strconv.Quote(q.vhost), strconv.Quote(q.name), q.ready)
	}
	gauge("warren_queue_messages_unacked", "Messages delivered and not yet acknowledged, per queue.")
	for _, q := range rows {
		fmt.Fprintf(w, "warren_queue_messages_unacked{vhost=%s,queue=%s} %d\n", strconv.Quote(q.vhost), strconv.Quote(q.name), q.unacked)
	}
	gauge("warren_queue_consumers", "Consumers, per queue.")
	for _, q := range rows {
		fmt.Fprintf(w, "warren_queue_consumers{vhost=%s,queue=%s} %d\n", strconv.Quote(q.vhost), strconv.Quote(q.name), q.con)
	}
	raised, _, _ := a.b.Alarm().State()
	gauge("warren_resource_alarm", "1 while publishers are blocked by a memory or disk alarm.")
	fmt.Fprintf(w, "warren_resource_alarm %d\n", map[bool]int{false: 0, true: 1}[raised])
}
