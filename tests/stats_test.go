package tests

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/stats"
)

// Every message event is counted once in the objects it concerns: the
// publishing channel (and its connection and vhost), the exchange, the
// queue, the consuming channel. Rates follow once two samples exist.
func TestMessageStatistics(t *testing.T) {
	s := startWarren(t, func(c *config.Config) { c.Admin.StatsInterval = config.Duration(20 * time.Millisecond) })
	_, pub := confirmChannel(t, s)
	_, sub := channel(t, s)
	q := declareQueue(t, s, sub, "stats", nil)
	x := declareExchange(t, s, sub, "stats", "fanout", nil)
	bind(t, sub, q, "", x, nil)
	nowhere := declareExchange(t, s, sub, "stats-nowhere", "fanout", nil)

	for range 5 {
		publishConfirmed(t, pub, x, "", body("m"))
	}
	confirmPublish(t, pub, nowhere, "", true, body("returned"))
	publishConfirmed(t, pub, nowhere, "", body("dropped"))

	d := consume(t, sub, q, false)
	for range 3 {
		m := receive(t, d)
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	m := receive(t, d)
	if err := m.Nack(false, true); err != nil { // requeued: redelivered next
		t.Fatal(err)
	}
	for range 2 {
		m := receive(t, d)
		if err := m.Ack(false); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := sub.Get(q, true); err != nil || ok {
		t.Fatalf("get on an empty queue: ok %v, err %v", ok, err)
	}

	v, _ := s.b.VHost("/")
	eventually(t, "the last ack counted", func() bool { return v.Counters.Values()[stats.Ack] == 5 })
	check := func(what string, got stats.Values, want map[stats.Kind]uint64) {
		t.Helper()
		for k := stats.Kind(0); k < stats.NumKinds; k++ {
			if got[k] != want[k] {
				t.Errorf("%s: %s = %d, want %d", what, k, got[k], want[k])
			}
		}
	}
	check("vhost", v.Counters.Values(), map[stats.Kind]uint64{
		stats.Publish: 7, stats.Routed: 5, stats.Confirm: 7, stats.ReturnUnroutable: 1, stats.DropUnroutable: 1,
		stats.Deliver: 6, stats.Redeliver: 1, stats.Ack: 5, stats.Reject: 1, stats.GetEmpty: 1,
	})
	found := 0
	for _, qi := range v.Queues() {
		if qi.Name == q {
			found++
			check("queue", qi.Counters, map[stats.Kind]uint64{
				stats.Publish: 5, stats.Deliver: 6, stats.Redeliver: 1, stats.Ack: 5, stats.GetEmpty: 1,
			})
		}
	}
	for _, xi := range v.Exchanges() {
		switch xi.Name {
		case x:
			found++
			check("exchange", xi.Counters, map[stats.Kind]uint64{stats.PublishIn: 5, stats.PublishOut: 5})
		case nowhere:
			found++
			check("unroutable exchange", xi.Counters, map[stats.Kind]uint64{stats.PublishIn: 2})
		}
	}
	if found != 3 {
		t.Fatalf("found %d of the queue and two exchanges", found)
	}
	var publisher, consumer stats.Values
	for _, ci := range s.b.Server().Channels() {
		publisher.Add(ci.Stats)
		if ci.Stats[stats.Deliver] > 0 {
			consumer = ci.Stats
			if !ci.Conn.Blocked && len(ci.Consumers) != 1 {
				t.Errorf("consuming channel lists %d consumers", len(ci.Consumers))
			}
		}
	}
	if publisher[stats.Publish] != 7 || consumer[stats.Deliver] != 6 || consumer[stats.Ack] != 5 {
		t.Errorf("channels: publish %d, deliver %d, ack %d", publisher[stats.Publish], consumer[stats.Deliver], consumer[stats.Ack])
	}

	for _, ci := range s.b.Server().Connections() {
		if ci.RecvOct == 0 || ci.RecvCnt == 0 || ci.SendOct == 0 || ci.SendCnt == 0 {
			t.Errorf("connection %s: traffic recv %d B in %d reads, sent %d B in %d writes", ci.Name, ci.RecvOct, ci.RecvCnt, ci.SendOct, ci.SendCnt)
		}
	}

	// A closed channel's counts stay in its connection's and vhost's.
	conn := dial(t, s)
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Publish(x, "", false, false, amqp.Publishing{Body: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the closed channel's publish in its connection", func() bool {
		for _, ci := range s.b.Server().Connections() {
			if ci.Stats[stats.Publish] == 1 && ci.Channels == 0 {
				return true
			}
		}
		return false
	})

	// The history starts before the first publish, so some pair of
	// neighbouring samples has a publish rate; once publishing stopped the
	// latest rate is zero.
	eventually(t, "the publishes counted, the rate back to zero", func() bool {
		values, rates, totals := s.b.Totals()
		return values[stats.Publish] == 8 && rates[stats.Publish] == 0 && totals.Messages == 1
	})
	points := s.b.History(time.Hour)
	sawRate := false
	for i := 1; i < len(points); i++ {
		if r := points[i].RatesSince(points[i-1]); r[stats.Publish] > 0 {
			sawRate = true
		}
	}
	if !sawRate {
		t.Errorf("no publish rate in %d samples", len(points))
	}
}
