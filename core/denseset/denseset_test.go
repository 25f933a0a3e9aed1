package denseset

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstMap runs random adds and removes on a Set and on a map, over
// value ranges that keep sets small, around the index's threshold, and
// large, and checks after every step that they hold the same members and
// that the set's index points at each one.
func TestAgainstMap(t *testing.T) {
	for _, span := range []int{4, indexFrom, 3 * indexFrom, 2000} {
		for seed := uint64(1); seed <= 5; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(span)))
			var s Set[int]
			model := map[int]bool{}
			for step := range 20000 {
				v := rng.IntN(span)
				// Lean towards adds, then towards removes, so sets grow
				// past the index and shrink back below it.
				add := rng.IntN(100) < 70
				if step%4000 >= 2000 {
					add = !add
				}
				if add {
					if got, want := s.Add(v), !model[v]; got != want {
						t.Fatalf("span %d seed %d step %d: Add(%d) = %v, want %v", span, seed, step, v, got, want)
					}
					model[v] = true
				} else {
					if got, want := s.Remove(v), model[v]; got != want {
						t.Fatalf("span %d seed %d step %d: Remove(%d) = %v, want %v", span, seed, step, v, got, want)
					}
					delete(model, v)
				}
				if span <= 3*indexFrom || step%97 == 0 {
					check(t, &s, model)
				}
			}
			check(t, &s, model)
		}
	}
}

func check(t *testing.T, s *Set[int], model map[int]bool) {
	t.Helper()
	if s.Len() != len(model) {
		t.Fatalf("Len %d, want %d", s.Len(), len(model))
	}
	seen := map[int]bool{}
	for i, v := range s.Items() {
		if !model[v] || seen[v] {
			t.Fatalf("Items holds %d wrongly (member %v, seen twice %v)", v, model[v], seen[v])
		}
		seen[v] = true
		if s.index != nil && s.index[v] != i {
			t.Fatalf("index says %d is at %d, it is at %d", v, s.index[v], i)
		}
	}
	if s.index != nil && len(s.index) != len(s.items) {
		t.Fatalf("index has %d entries for %d members", len(s.index), len(s.items))
	}
	if len(s.items) > indexFrom && s.index == nil {
		t.Fatalf("%d members and no index", len(s.items))
	}
}

// TestShrinks checks that a set that lost most of its members gives back
// its slice and its index.
func TestShrinks(t *testing.T) {
	var s Set[int]
	for i := range 100000 {
		s.Add(i)
	}
	for i := 5; i < 100000; i++ {
		s.Remove(i)
	}
	if cap(s.items) > 4*indexFrom {
		t.Errorf("5 members keep a slice of %d", cap(s.items))
	}
	if s.index != nil {
		t.Errorf("5 members keep an index of %d", len(s.index))
	}
	for i := range 5 {
		if !s.Has(i) {
			t.Errorf("%d is gone", i)
		}
	}
}

// TestRemovingReleases checks that a removed pointer no longer lies in
// the slice's spare capacity, where it would keep its target alive.
func TestRemovingReleases(t *testing.T) {
	var s Set[*int]
	a, b := new(int), new(int)
	s.Add(a)
	s.Add(b)
	s.Remove(a)
	if spare := s.items[:cap(s.items)][1]; spare != nil {
		t.Errorf("the slice still holds a removed member")
	}
}

// TestLargeSetsAreNotCopied checks that removing from a large set never
// copies it: a copy of a large set makes one removal cost milliseconds.
func TestLargeSetsAreNotCopied(t *testing.T) {
	var s Set[int]
	for i := range 100000 {
		s.Add(i)
	}
	grown := cap(s.items)
	for i := 100000 - 1; i >= copyMax+1; i-- {
		s.Remove(i)
		if cap(s.items) != grown {
			t.Fatalf("removing down to %d members copied the set (capacity %d, was %d)", len(s.items), cap(s.items), grown)
		}
	}
	s.Remove(copyMax)
	if cap(s.items) >= grown {
		t.Errorf("%d members of %d capacity were not given back", len(s.items), cap(s.items))
	}
}
