package storage

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// spillFiles lists the spill folder (none when it does not exist).
func spillFiles(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List(fs.PathJoin("data", spillDirName))
	if err != nil {
		return nil
	}
	return names
}

func TestSpillSegments(t *testing.T) {
	s, fs := openMem(t, nil)
	defer s.Close()
	sp := s.NewSpill()
	sp.segSize = 100
	body := func(b byte) []byte { return bytes.Repeat([]byte{b}, 40) }
	write := func(b byte) SpillRef {
		t.Helper()
		r, err := writeSpill(sp, body(b))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(when string, files int, diskBytes, bodies int64) {
		t.Helper()
		if n := len(spillFiles(t, fs)); n != files {
			t.Fatalf("%s: %d spill files, want %d", when, n, files)
		}
		if st := s.Stats(); st["spill_bytes"] != diskBytes || st["spilled_bodies"] != bodies {
			t.Fatalf("%s: stats %v bytes, %v bodies; want %d, %d", when, st["spill_bytes"], st["spilled_bodies"], diskBytes, bodies)
		}
	}
	refs := []SpillRef{write(1), write(2), write(3)}
	if want := []SpillRef{{0, 0, 40}, {0, 40, 40}, {1, 0, 40}}; !equalRefs(refs, want) {
		t.Fatalf("refs %v, want %v (a third body does not fit the first 100-byte segment)", refs, want)
	}
	for i, r := range refs {
		got := make([]byte, r.Len)
		if err := sp.Read(r, got); err != nil || !bytes.Equal(got, body(byte(i+1))) {
			t.Fatalf("read %v: %v, %v", r, got[:4], err)
		}
	}
	check("three bodies", 2, 120, 3)
	before := s.db.Metrics().DiskSpaceUsage()
	if f, _ := s.Figures(); f.DiskBytes < before+120 {
		t.Fatalf("disk bytes %d leave out the spill files' 120 (Pebble's own: %d)", f.DiskBytes, before)
	}

	// The first segment, empty while the second has a body, is kept as
	// the spare; its bodies are gone.
	sp.Release(refs[0])
	check("one body released", 2, 120, 2)
	sp.Release(refs[1])
	sp.Release(refs[1]) // a second release of a released body is ignored
	check("the first segment empty", 2, 120, 1)
	if err := sp.Read(refs[0], make([]byte, 40)); !errors.Is(err, ErrSpillGone) {
		t.Fatalf("read of a released segment: %v", err)
	}

	// The second segment fills; the next one is the spare, written over
	// under a new number.
	r4, r5 := write(4), write(5)
	if want := []SpillRef{{1, 40, 40}, {2, 0, 40}}; !equalRefs([]SpillRef{r4, r5}, want) {
		t.Fatalf("refs %v %v, want %v", r4, r5, want)
	}
	check("the spare in use", 2, 160, 3)
	got := make([]byte, 40)
	if err := sp.Read(r5, got); err != nil || !bytes.Equal(got, body(5)) {
		t.Fatalf("read from the spare: %v, %v", got[:4], err)
	}

	// The last release deletes every file.
	for _, r := range []SpillRef{refs[2], r4, r5} {
		sp.Release(r)
	}
	check("every body released", 0, 0, 0)

	// Writing starts afresh; Reset drops everything.
	if r := write(6); r.Seg != 3 {
		t.Fatalf("write after the last release: %v", r)
	}
	write(7)
	write(8)
	sp.Reset()
	check("Reset", 0, 0, 0)
	if _, err := writeSpill(sp, nil); err == nil {
		t.Fatal("an empty body spills")
	}
}

func equalRefs(a, b []SpillRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A store opened again starts with no spill files: their bodies belonged
// to transient entries, which Recover deletes.
func TestOpenClearsSpills(t *testing.T) {
	s, fs := openMem(t, nil)
	sp := s.NewSpill()
	if _, err := writeSpill(sp, []byte("body")); err != nil {
		t.Fatal(err)
	}
	if n := len(spillFiles(t, fs)); n != 1 {
		t.Fatalf("%d spill files, want 1", n)
	}
	s.Close()
	s, _ = openMem(t, fs)
	defer s.Close()
	if n := len(spillFiles(t, fs)); n != 0 {
		t.Fatalf("%d spill files after a reopen, want 0", n)
	}
	sp = s.NewSpill()
	if _, err := writeSpill(sp, []byte("again")); err != nil {
		t.Fatalf("write after a reopen: %v", err)
	}
}

// TestSpillReadBeforeWrite: a body Reserve placed is read from memory
// when the read comes before its write, which then does nothing; a read
// after the write reads the file; the holds on the bodies end either way.
func TestSpillReadBeforeWrite(t *testing.T) {
	s, fs := openRecovered(t, nil)
	defer s.Close()
	sp := s.NewSpill()
	h := &countingHolder{}
	a, b := bytes.Repeat([]byte("a"), 1000), bytes.Repeat([]byte("b"), 1000)
	ra, wa, err := sp.Reserve(a, h)
	must(t, err)
	rb, wb, err := sp.Reserve(b, h)
	must(t, err)
	if h.holds.Load() != 2 {
		t.Fatalf("%d holds on two pending bodies", h.holds.Load())
	}
	got := make([]byte, 1000)
	must(t, sp.Read(ra, got)) // before its write: from memory
	if !bytes.Equal(got, a) || h.holds.Load() != 1 {
		t.Fatalf("read before the write: %q..., %d holds", got[:4], h.holds.Load())
	}
	wa.Write() // cancelled: writes nothing
	wb.Write()
	if h.holds.Load() != 0 {
		t.Fatalf("%d holds after the writes", h.holds.Load())
	}
	must(t, sp.Read(rb, got))
	if !bytes.Equal(got, b) {
		t.Fatalf("read after the write: %q...", got[:4])
	}
	// The first body's place in the file was never written.
	f, err := fs.Open(sp.segs[ra.Seg].name)
	must(t, err)
	defer f.Close()
	onDisk := make([]byte, 1000)
	if _, err := f.ReadAt(onDisk, ra.Off); err != nil || bytes.Equal(onDisk, a) {
		t.Fatalf("the cancelled write reached the file (%v)", err)
	}
	sp.Reset()
}

// writeSpill appends body to sp and returns where it is: Reserve, then
// the write at once. On an error nothing is kept.
func writeSpill(sp *Spill, body []byte) (SpillRef, error) {
	ref, w, err := sp.Reserve(body, nil)
	if err != nil {
		return SpillRef{}, err
	}
	w.Write()
	if err := w.err; err != nil {
		sp.Release(ref)
		return SpillRef{}, fmt.Errorf("storage: spill %s: %w", w.name, err)
	}
	return ref, nil
}
