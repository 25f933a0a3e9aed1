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
