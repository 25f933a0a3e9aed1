package cluster

import "testing"

// A snapshot keeps the last keepEntries entries behind it, or fewer when
// those would pass keepBytes: keptFrom names the first one kept.
func TestAppliedTailKeepsBytes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries int // applied from index 1
		size    int
		want    uint64
	}{
		{"small entries: all keepEntries kept", 200, 100, 0},
		{"none yet", 0, 0, 0},
		{"1 MiB entries: four", 100, 1 << 20, 97},
		{"100 KiB entries: forty", 100, 100 << 10, 61},
		{"one entry past keepBytes: none", 10, 5 << 20, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tail appliedTail
			for i := 1; i <= tc.entries; i++ {
				tail.note(uint64(i), tc.size)
			}
			if tail.held != min(tc.entries, keepEntries) {
				t.Fatalf("it holds %d entries", tail.held)
			}
			if got := tail.keptFrom(); got != tc.want {
				t.Fatalf("kept from %d, want %d", got, tc.want)
			}
		})
	}
}
