package losscheck

import (
	"testing"
	"time"
)

// The checker's own self-check: each rule, broken on purpose in a record
// made by hand, is reported, and a record that breaks none is clean.
func TestCheckerSeesEachRuleBroken(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type event func(c *Checker)
	pub := func(body, publisher string, epoch, seq int, node string, sent, answered float64, ok bool) event {
		return func(c *Checker) {
			c.publishes[body] = &publish{publisher: publisher, epoch: epoch, seq: seq, node: node, sent: at(sent),
				answered: at(answered), confirmed: ok, nacked: !ok}
		}
	}
	deliver := func(body, consumer, node string, redelivered bool, when float64) event {
		return func(c *Checker) {
			c.arrivals++
			c.deliveries[body] = append(c.deliveries[body], delivery{consumer, node, redelivered, at(when), c.arrivals})
		}
	}
	ackAt := func(body, consumer, node string, when float64) event {
		return func(c *Checker) {
			c.acks[body] = append(c.acks[body], ack{consumer: consumer, node: node, sent: at(when)})
		}
	}
	fault := func(node, kind string, from, to float64) event {
		return func(c *Checker) { c.faults = append(c.faults, Fault{node, kind, at(from), at(to)}) }
	}
	for _, tc := range []struct {
		name   string
		events []event
		kind   string // "" nothing wrong
	}{
		{"clean", []event{
			pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true), deliver("p-1-1", "c", "n2", false, 0.2), ackAt("p-1-1", "c", "n2", 0.2),
			pub("p-1-2", "p", 1, 2, "n1", 0.1, 0.2, true), deliver("p-1-2", "c", "n2", false, 0.3),
			// redelivered before its ack settled: allowed
			deliver("p-1-2", "c2", "n3", true, 0.5),
			// nacked while its node was cut off: allowed
			fault("n3", "partition", 10, 20), pub("p-2-1", "p", 2, 1, "n3", 11, 15, false),
			// an ack through a node then cut off may be undone
			ackAt("p-1-2", "c2", "n3", 9), deliver("p-1-2", "c", "n2", true, 25),
		}, ""},
		{"lost", []event{pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true)}, "lost"},
		{"delivered as new twice", []event{
			pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true), deliver("p-1-1", "c", "n2", false, 0.2), deliver("p-1-1", "c2", "n3", false, 0.3),
		}, "delivered as new again"},
		{"acked, then redelivered", []event{
			pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true), deliver("p-1-1", "c", "n2", false, 0.2), ackAt("p-1-1", "c", "n2", 0.2),
			deliver("p-1-1", "c2", "n3", true, 5),
		}, "acked, then redelivered"},
		{"delivered late by a node that was paused", []event{
			pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true), fault("n1", "pause", 0.2, 10),
			deliver("p-1-1", "c", "n2", true, 1), ackAt("p-1-1", "c", "n2", 1), deliver("p-1-1", "c1", "n1", false, 10.1),
		}, ""},
		{"out of order", []event{
			pub("p-1-1", "p", 1, 1, "n1", 0, 0.1, true), pub("p-1-2", "p", 1, 2, "n1", 0, 0.1, true),
			deliver("p-1-2", "c", "n2", false, 0.2), deliver("p-1-1", "c", "n2", false, 0.3),
		}, "out of order"},
		{"nacked, delivered", []event{
			fault("n1", "kill", 0, 1), pub("p-1-1", "p", 1, 1, "n1", 0, 0.5, false), deliver("p-1-1", "c", "n2", false, 2),
		}, "nacked, delivered"},
		{"nacked, delivered before the nack", []event{
			fault("n1", "partition", 0, 20), pub("p-1-1", "p", 1, 1, "n1", 0, 10, false), deliver("p-1-1", "c", "n2", false, 2),
		}, "nacked, delivered before"},
		{"nack with a majority", []event{pub("p-1-1", "p", 1, 1, "n1", 0, 3, false)}, "nack with a majority"},
		{"minority confirm", []event{
			fault("n3", "partition", 10, 20), pub("p-1-1", "p", 1, 1, "n3", 11, 12, true), deliver("p-1-1", "c", "n2", false, 21),
		}, "minority confirm"},
		{"never published", []event{func(c *Checker) { c.delivered("c", "n2", "x-1-1", false) }}, "never published"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New()
			for _, e := range tc.events {
				e(c)
			}
			r := c.Report()
			for kind, n := range r.Count {
				if n > 0 && kind != tc.kind {
					t.Errorf("reported %d %q: %s", n, kind, r)
				}
			}
			if tc.kind != "" && r.Count[tc.kind] == 0 {
				t.Errorf("broke %q on purpose, and the report says nothing of it: %s", tc.kind, r)
			}
		})
	}
}

// Drained, kept as events come, agrees with the report's count of lost
// messages at every step: confirmed before or after a delivery, nacked,
// delivered twice.
func TestDrainedAgreesWithTheReport(t *testing.T) {
	c := New()
	agree := func(step string) {
		t.Helper()
		if got, want := c.Drained(), c.Report().Count["lost"] == 0; got != want {
			t.Fatalf("after %s: Drained %v, the report says %v", step, got, want)
		}
	}
	c.sent("a", "p", 1, 1, "n1")
	c.sent("b", "p", 1, 2, "n1")
	c.sent("c", "p", 1, 3, "n1")
	c.sent("d", "p", 1, 4, "n1")
	agree("sending")
	c.answered("d", true, true) // returned unroutable, then confirmed
	agree("d returned")
	if r := c.Report(); r.Returned != 1 || r.Confirmed != 0 {
		t.Fatalf("a returned message counts as returned, not confirmed: %s", r)
	}
	c.answered("a", true, false)
	agree("a confirmed")
	c.delivered("c1", "n1", "b", false) // delivered before its confirm
	c.answered("b", true, false)
	agree("b confirmed after its delivery")
	c.answered("c", false, false)
	agree("c nacked")
	c.delivered("c1", "n1", "a", false)
	agree("a delivered")
	c.delivered("c2", "n2", "a", true)
	agree("a delivered again")
	if !c.Drained() {
		t.Fatal("every confirmed message was delivered, and Drained says not")
	}
}
