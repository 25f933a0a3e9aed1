package chash

import (
	"math"

	"github.com/warrenmq/warren/sdk"
)

// The default placement's slots (see the package documentation): a value
// hashes to one of numSlots slots, and each slot belongs to the active
// binding that wins weighted rendezvous hashing for it.
const (
	slotBits = 16
	numSlots = 1 << slotBits

	// From tableFrom active bindings the winners live in a table; below
	// tableUntil the table is dropped. The gap keeps an exchange whose
	// bindings hover around one count from rebuilding it at every change.
	tableFrom  = 16
	tableUntil = 8
)

// slotOf is the slot of a value's hash: its top bits.
func slotOf(h uint64) uint32 { return uint32(h >> (64 - slotBits)) }

// slotKey is the hash of a slot's number that bindings' seeds mix with.
func slotKey(s uint32) uint64 { return mix(uint64(s) ^ 0x9e3779b97f4a7c15) }

// draw is binding c's draw for the slot of that key: 53 uniform bits.
func draw(key uint64, c *candidate) uint64 { return mix(key^c.seed) >> 11 }

// unit is a draw as u in (0, 1), centred in its interval.
func unit(d uint64) float64 { return (float64(d) + 0.5) * (1.0 / (1 << 53)) }

// score is -ln(u)/W, the exponential variable weighted rendezvous
// minimizes.
func score(d uint64, c *candidate) float64 { return -math.Log(unit(d)) * c.invWeight }

// margin makes the bounds in beats safe from rounding: a few ulps
// separate the computed scores from the exact ones, far less than this.
const margin = 1 + 1e-9

// beats reports whether active[i] wins the slot of that key against
// active[j]: the lesser score, then the greater draw, then the lesser
// seed. Between equal weights the scores are not computed: the draws
// order the two the same way, as the score falls as u grows, and exactly.
// Between different weights the logarithms are mostly avoided:
// 1-u <= -ln(u) <= (1-u)/u, and the bounds, all but equal near u = 1
// where winners are, settle most comparisons.
func (x *Exchange) beats(i, j int, key uint64) bool {
	a, b := &x.active[i], &x.active[j]
	return beatsDrawn(a, b, draw(key, a), draw(key, b))
}

// beatsDrawn is beats for bindings a and b with their draws.
func beatsDrawn(a, b *candidate, da, db uint64) bool {
	if a.weight != b.weight {
		ua, ub := unit(da), unit(db)
		if (1-ua)*a.invWeight > (1-ub)/ub*b.invWeight*margin {
			return false // a's least possible score exceeds b's greatest
		}
		if (1-ub)*b.invWeight > (1-ua)/ua*a.invWeight*margin {
			return true
		}
		if sa, sb := score(da, a), score(db, b); sa != sb {
			return sa < sb
		}
	}
	if da != db {
		return da > db
	}
	return a.seed < b.seed
}

// winner computes the index of the active binding that owns slot s.
func (x *Exchange) winner(s uint32) int {
	key := slotKey(s)
	best, bd := 0, draw(key, &x.active[0])
	for i := 1; i < len(x.active); i++ {
		c := &x.active[i]
		if d := draw(key, c); beatsDrawn(c, &x.active[best], d, bd) {
			best, bd = i, d
		}
	}
	return best
}

// unknown marks a slot whose winner the table does not hold yet: the
// table is filled lazily, by the routes that reach each slot, so a replay
// of n bindings costs O(n) rather than 65,536 comparisons per binding (a
// thousand bindings took 3.6 s in WebAssembly, per instance, filled
// eagerly). Which slots are known depends on what was routed, but every
// known entry is the slot's winner, so routing does not.
const unknown = math.MaxUint32

// startTable makes the table with every slot unknown.
func (x *Exchange) startTable() {
	if x.slots == nil {
		x.slots = make([]uint32, numSlots)
	}
	for s := range x.slots {
		x.slots[s] = unknown
	}
	x.known = 0
}

// slotWinner is slot s's winner, from the table, computed and kept there
// the first time.
func (x *Exchange) slotWinner(s uint32) uint32 {
	w := x.slots[s]
	if w == unknown {
		w = uint32(x.winner(s))
		x.slots[s] = w
		x.known++
	}
	return w
}

// addToTable gives active[j], just activated, the known slots it wins;
// the unknown ones will count it when they are computed.
func (x *Exchange) addToTable(j int) {
	if x.known == 0 {
		return // a replay, or no route since: nothing to keep right
	}
	for s, w := range x.slots {
		if w != unknown && x.beats(j, int(w), slotKey(uint32(s))) {
			x.slots[s] = uint32(j)
		}
	}
}

// removeFromTable updates the table after bindings left active; old gives
// each binding's index in active before. The slots of bindings still
// active keep their winner (it beat every binding still there) under its
// new index; the others become unknown. A binding that became
// active (a second binding to a destination whose first was removed) then
// competes for every slot, as an added one does.
func (x *Exchange) removeFromTable(old map[sdk.BindingID]int) {
	remap := make([]int32, len(old))
	for i := range remap {
		remap[i] = -1
	}
	var joined []int
	for i, c := range x.active {
		if o, ok := old[c.id]; ok {
			remap[o] = int32(i)
		} else {
			joined = append(joined, i)
		}
	}
	for s, w := range x.slots {
		switch {
		case w == unknown:
		case remap[w] >= 0:
			x.slots[s] = uint32(remap[w])
		default:
			x.slots[s] = unknown // its winner left: computed when next reached
			x.known--
		}
	}
	for _, j := range joined {
		x.addToTable(j)
	}
}
