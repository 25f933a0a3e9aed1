package storage

import (
	"fmt"
	"slices"
	"testing"
)

// Held messages are kept per exchange and kind, in due order; a scan
// resumes right after a given message; spans are counted from keys alone;
// an exchange's messages go in one range deletion, a vhost's with it.
func TestHeldSpans(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	a := HeldSpan{VHost: "/", Exchange: "a"}
	aT := HeldSpan{VHost: "/", Exchange: "a", Transient: true}
	b := HeldSpan{VHost: "/", Exchange: "a\x00b"} // escaping keeps it apart from "a"
	other := HeldSpan{VHost: "v2", Exchange: "a"}
	txn := s.Begin()
	for i, due := range []int64{30, 10, 20, -5} {
		txn.PutHeldAt(a, due, uint64(i+1), []byte(fmt.Sprint("a", due)))
	}
	txn.PutHeldAt(aT, 15, 9, []byte("t"))
	txn.PutHeldAt(b, 1, 10, []byte("b"))
	txn.PutHeldAt(other, 1, 11, []byte("o"))
	commit(t, txn)

	scan := func(sp HeldSpan, from *HeldAfter, limit int) []string {
		var out []string
		if err := s.ScanHeldAt(sp, from, limit, func(due int64, seq uint64, rec []byte) bool {
			out = append(out, fmt.Sprintf("%d/%d=%s", due, seq, rec))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := scan(a, nil, 0), []string{"-5/4=a-5", "10/2=a10", "20/3=a20", "30/1=a30"}; !slices.Equal(got, want) {
		t.Fatalf("scan: %v, want %v", got, want)
	}
	if got, want := scan(a, &HeldAfter{Due: 10, Seq: 2}, 1), []string{"20/3=a20"}; !slices.Equal(got, want) {
		t.Fatalf("scan after 10/2: %v, want %v", got, want)
	}
	spans := func() []string {
		var out []string
		if err := s.HeldSpans(func(sp HeldSpan, n int64) {
			out = append(out, fmt.Sprintf("%s|%q|%v|%d", sp.VHost, sp.Exchange, sp.Transient, n))
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{`/|"a"|false|4`, `/|"a"|true|1`, `/|"a\x00b"|false|1`, `v2|"a"|false|1`}
	if got := spans(); !slices.Equal(got, want) {
		t.Fatalf("spans: %v, want %v", got, want)
	}

	txn = s.Begin()
	txn.DeleteHeldAt(a, 10, 2)
	txn.DeleteHeldOf("/", "a\x00b")
	commit(t, txn)
	if got, want := spans(), []string{`/|"a"|false|3`, `/|"a"|true|1`, `v2|"a"|false|1`}; !slices.Equal(got, want) {
		t.Fatalf("spans after deletes: %v, want %v", got, want)
	}
	txn = s.Begin()
	txn.DeleteHeldOf("/", "a")
	txn.PutHeldAt(a, 40, 12, []byte("new")) // after the range deletion: kept
	commit(t, txn)
	if got, want := spans(), []string{`/|"a"|false|1`, `v2|"a"|false|1`}; !slices.Equal(got, want) {
		t.Fatalf("spans after the exchange's deletion: %v, want %v", got, want)
	}
	if err := s.DeleteVHost("v2", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := spans(), []string{`/|"a"|false|1`}; !slices.Equal(got, want) {
		t.Fatalf("spans after the vhost's deletion: %v, want %v", got, want)
	}
}
