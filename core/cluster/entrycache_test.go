package cluster

import (
	"math/rand"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The cache answers Entries and Term as the log underneath does, through
// appends, conflicting rewrites and forgetting what was applied.
func TestEntryCacheAnswersAsTheLog(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	plain := memLog{raft.NewMemoryStorage()}
	cached := &entryCache{LogStore: memLog{raft.NewMemoryStorage()}}
	last, term := uint64(0), uint64(1)
	entry := func(i uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term), Data: make([]byte, rng.Intn(100))}
	}
	for step := range 2000 {
		switch rng.Intn(4) {
		case 0, 1: // append after the last
			var ents []*raftpb.Entry
			for range 1 + rng.Intn(5) {
				last++
				ents = append(ents, entry(last))
			}
			if err := plain.Save(nil, ents, nil); err != nil {
				t.Fatal(err)
			}
			if err := cached.Save(nil, ents, nil); err != nil {
				t.Fatal(err)
			}
		case 2: // a new term rewrites a suffix
			if last < 3 {
				continue
			}
			term++
			from := last - uint64(rng.Intn(3))
			ents := []*raftpb.Entry{entry(from), entry(from + 1)}
			last = from + 1
			if err := plain.Save(nil, ents, nil); err != nil {
				t.Fatal(err)
			}
			if err := cached.Save(nil, ents, nil); err != nil {
				t.Fatal(err)
			}
		case 3:
			if last > 0 {
				cached.forget(uint64(rng.Int63n(int64(last))))
			}
		}
		if last == 0 {
			continue
		}
		lo := 1 + uint64(rng.Int63n(int64(last)))
		hi := lo + 1 + uint64(rng.Int63n(int64(last-lo+1)))
		max := uint64(rng.Intn(400))
		want, err1 := plain.Entries(lo, hi, max)
		got, err2 := cached.Entries(lo, hi, max)
		if err1 != nil || err2 != nil || len(got) != len(want) {
			t.Fatalf("step %d: Entries(%d, %d, %d): %d entries (%v), want %d (%v)", step, lo, hi, max, len(got), err2, len(want), err1)
		}
		for i := range got {
			if !proto.Equal(got[i], want[i]) {
				t.Fatalf("step %d: entry %d differs", step, got[i].GetIndex())
			}
		}
		wt, _ := plain.Term(lo)
		if gt, err := cached.Term(lo); err != nil || gt != wt {
			t.Fatalf("step %d: Term(%d) = %d %v, want %d", step, lo, gt, err, wt)
		}
	}
}

// What Entries handed out stays as it was through later forgetting,
// appends and rewrites: Raft keeps those slices in messages still to be
// sent (a leader once sent followers nil entries from a cleared slot).
func TestEntryCacheHandsOutStableSlices(t *testing.T) {
	c := &entryCache{LogStore: memLog{raft.NewMemoryStorage()}}
	entry := func(i, term uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(term)}
	}
	save := func(ents ...*raftpb.Entry) {
		t.Helper()
		if err := c.Save(nil, ents, nil); err != nil {
			t.Fatal(err)
		}
	}
	var handed [][]*raftpb.Entry
	var want [][]uint64
	hand := func(lo, hi uint64) {
		t.Helper()
		ents, err := c.Entries(lo, hi, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		handed = append(handed, ents)
		var terms []uint64
		for _, e := range ents {
			terms = append(terms, e.GetIndex()*100+e.GetTerm())
		}
		want = append(want, terms)
	}
	save(entry(1, 1), entry(2, 1), entry(3, 1), entry(4, 1))
	hand(1, 5)
	c.forget(2)
	hand(3, 5)
	save(entry(4, 2), entry(5, 2)) // rewrites 4
	c.forget(5)                    // everything
	save(entry(6, 2), entry(7, 2), entry(8, 2), entry(9, 2), entry(10, 2))
	for i, ents := range handed {
		for j, e := range ents {
			if e == nil || e.GetIndex()*100+e.GetTerm() != want[i][j] {
				t.Fatalf("slice %d, entry %d: %v, want index*100+term %d", i, j, e, want[i][j])
			}
		}
	}
}
