package chash

import (
	"fmt"
	"math"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

// checkTable fails unless every slot the exchange's table knows holds the
// winner computed directly, and the winners are those of an exchange
// built from the surviving bindings alone (what a replay gets). Then it
// has every other slot computed, so the next change meets a table with
// both known and unknown slots.
func checkTable(t *testing.T, f *fixture, step string) {
	t.Helper()
	x := f.x
	if len(x.active) >= tableFrom && x.slots == nil {
		t.Fatalf("%s: %d active bindings and no table", step, len(x.active))
	}
	if x.slots == nil {
		return
	}
	for s, w := range x.slots {
		if w == unknown {
			continue
		}
		if d := x.winner(uint32(s)); int(w) != d {
			t.Fatalf("%s: slot %d: table says binding %d, computed %d", step, s, w, d)
		}
	}
	replay := &Exchange{src: x.src, dests: map[string]int{}}
	for _, m := range x.members {
		kind, dest := sdk.DestKind(m.dest[0]-'0'), m.dest[1:]
		if err := replay.AddBinding(&sdk.Binding{ID: m.id, Kind: kind, Destination: dest, Key: fmt.Sprint(m.weight)}); err != nil {
			t.Fatal(err)
		}
	}
	for s := range x.slots {
		if a, b := x.active[x.winner(uint32(s))].id, replay.active[replay.winner(uint32(s))].id; a != b {
			t.Fatalf("%s: slot %d: binding %d live, %d replayed", step, s, a, b)
		}
	}
	for s := uint32(0); s < numSlots; s += 2 {
		x.slotWinner(s)
	}
}

// TestTableFollowsChanges: through additions, removals, duplicates taking
// over and the table coming and going, the table is always the one the
// surviving bindings define.
func TestTableFollowsChanges(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		t.Run(fmt.Sprint("weighted=", weighted), func(t *testing.T) {
			f := newFixture(t, nil)
			weight := func(i int) string {
				if weighted {
					return fmt.Sprint(i%5 + 1)
				}
				return "2"
			}
			var ids []sdk.BindingID
			for i := range 20 {
				ids = append(ids, f.bind(fmt.Sprint("q", i), weight(i)))
			}
			checkTable(t, f, "20 added")
			dup := f.bind("q3", weight(7)) // inactive while the first is there
			checkTable(t, f, "duplicate added")
			f.unbind(ids[3]) // the duplicate takes over
			checkTable(t, f, "first of two removed")
			f.unbind(ids[5], ids[11])
			checkTable(t, f, "two removed")
			f.bind("late", "9")
			checkTable(t, f, "a heavy one added")
			for _, i := range []int{0, 1, 2, 4, 6, 7, 8, 9} {
				f.unbind(ids[i])
			}
			if f.x.slots == nil {
				t.Fatalf("table dropped at %d active bindings", len(f.x.active))
			}
			checkTable(t, f, "down to 10")
			f.unbind(ids[10], ids[12], ids[13], ids[14])
			if f.x.slots != nil {
				t.Fatalf("table kept at %d active bindings", len(f.x.active))
			}
			f.unbind(dup)
			for i := range 12 {
				f.bind(fmt.Sprint("r", i), weight(i))
			}
			checkTable(t, f, "grown again")
		})
	}
}

// TestTableStability: with the table in use, adding a binding takes slots
// only for itself and removing one moves only its own.
func TestTableStability(t *testing.T) {
	f := newFixture(t, nil)
	ids := map[string]sdk.BindingID{}
	for i := range 100 {
		q := fmt.Sprint("q", i)
		ids[q] = f.bind(q, fmt.Sprint(i%4+1))
	}
	owners := func() []sdk.BindingID {
		o := make([]sdk.BindingID, numSlots)
		for s := range f.x.slots {
			o[s] = f.x.active[f.x.slotWinner(uint32(s))].id
		}
		return o
	}
	before := owners()
	f.unbind(ids["q42"])
	after := owners()
	for s := range before {
		if before[s] != after[s] && before[s] != ids["q42"] {
			t.Fatalf("slot %d moved from %d to %d though its binding stayed", s, before[s], after[s])
		}
	}
	added := f.bind("new", "3")
	again := owners()
	for s := range after {
		if again[s] != after[s] && again[s] != added {
			t.Fatalf("slot %d moved from %d to %d when another binding was added", s, after[s], again[s])
		}
	}
}

// TestSlotShares: each binding's number of slots is within 5 standard
// deviations of its weight's share of 65,536 (the README's tolerance is
// 2 for most bindings).
func TestSlotShares(t *testing.T) {
	cases := []struct {
		n      int
		weight func(i int) uint32
	}{
		{1000, func(int) uint32 { return 1 }},
		{100, func(i int) uint32 { return uint32(i%4 + 1) }},
		{20, func(i int) uint32 { return uint32(1 + i*i) }},
	}
	for _, c := range cases {
		f := newFixture(t, nil)
		total := 0.0
		for i := range c.n {
			f.bind(fmt.Sprint("q", i), fmt.Sprint(c.weight(i)))
			total += float64(c.weight(i))
		}
		count := make([]int, len(f.x.active))
		for s := range f.x.slots {
			count[f.x.slotWinner(uint32(s))]++
		}
		worst := 0.0
		for i, got := range count {
			p := float64(c.weight(i)) / total
			sd := math.Sqrt(numSlots * p * (1 - p))
			dev := math.Abs(float64(got)-numSlots*p) / sd
			worst = max(worst, dev)
			if dev > 5 {
				t.Errorf("%d bindings: binding %d has %d slots, expected %.1f ± %.1f", c.n, i, got, numSlots*p, sd)
			}
		}
		t.Logf("%d bindings: worst deviation %.2f standard deviations", c.n, worst)
	}
}

// TestRabbitMQRing: the buckets are the active bindings' weights end to
// end, in the order added, whatever was removed before.
func TestRabbitMQRing(t *testing.T) {
	f := newFixture(t, map[string]any{"hash-algorithm": "rabbitmq"})
	a := f.bind("a", "3")
	f.bind("b", "1")
	f.bind("a", "7") // a duplicate: no buckets
	f.bind("c", "2")
	if got := fmt.Sprint(f.x.ends, f.x.total); got != "[3 4 6] 6" {
		t.Errorf("buckets end at %s, want [3 4 6] 6", got)
	}
	f.unbind(a) // the duplicate, weight 7, takes over, after b, before c
	if got := fmt.Sprint(f.x.ends, f.x.total); got != "[1 8 10] 10" {
		t.Errorf("buckets end at %s, want [1 8 10] 10", got)
	}
	if f.x.slots != nil {
		t.Error("the rabbitmq placement built a slot table")
	}
}

func BenchmarkBindingChange(b *testing.B) {
	for _, n := range []int{4, 1000} {
		for _, weighted := range []bool{false, true} {
			b.Run(fmt.Sprintf("bindings=%d/weighted=%v", n, weighted), func(b *testing.B) {
				x := benchExchange(b, "", n, weighted)
				fillSlots(x) // the worst case: every slot known
				w := "1"
				if weighted {
					w = "3"
				}
				nb := &sdk.Binding{ID: sdk.BindingID(n), Destination: "extra", Key: w}
				for b.Loop() {
					_ = x.AddBinding(nb)
					_ = x.RemoveBindings([]sdk.BindingID{nb.ID})
				}
			})
		}
	}
}

// fillSlots computes every slot's winner, as routes reaching them all
// would.
func fillSlots(x *Exchange) {
	if x.slots == nil {
		return
	}
	for s := range x.slots {
		x.slotWinner(uint32(s))
	}
}

// BenchmarkFillSlots is the work the lazy table defers from a replay to
// the first routes: every slot's winner among 1,000 bindings.
func BenchmarkFillSlots(b *testing.B) {
	for _, weighted := range []bool{false, true} {
		b.Run(fmt.Sprintf("bindings=1000/weighted=%v", weighted), func(b *testing.B) {
			x := benchExchange(b, "", 1000, weighted)
			for b.Loop() {
				x.startTable()
				fillSlots(x)
			}
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	for _, weighted := range []bool{false, true} {
		b.Run(fmt.Sprintf("bindings=1000/weighted=%v", weighted), func(b *testing.B) {
			for b.Loop() {
				benchExchange(b, "", 1000, weighted)
			}
		})
	}
}
