package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rs/zerolog"
)

// openKeeping opens a store on fs and recovers it keeping streams sids.
func openKeeping(t *testing.T, fs vfs.FS, sids ...uint64) *Store {
	t.Helper()
	s, _ := openMem(t, fs)
	keep := map[uint64]bool{}
	for _, sid := range sids {
		keep[sid] = true
	}
	if _, err := s.Recover(keep); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	return s
}

// scanAll lists a stream's messages from offset from as "offset@ts:body".
func scanAll(t *testing.T, s *Store, sid, from uint64) []string {
	t.Helper()
	var got []string
	must(t, s.ScanStream(sid, from, 1<<30, func(o uint64, ts int64, m *Message) bool {
		got = append(got, fmt.Sprintf("%d@%d:%s", o, ts, m.Body))
		return true
	}))
	return got
}

func wantRange(t *testing.T, got []string, from, to uint64) {
	t.Helper()
	var want []string
	for o := from; o < to; o++ {
		want = append(want, fmt.Sprintf("%d@%d:m%d", o, 1000+o, o))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		brief := func(l []string) string {
			if len(l) == 0 {
				return "none"
			}
			return fmt.Sprintf("%d from %s to %s", len(l), l[0], l[len(l)-1])
		}
		t.Fatalf("messages: got %s, want %s", brief(got), brief(want))
	}
}

// Chunks are written to the stream's files, one file per segment, and
// only their index is in Pebble; a read from any offset crosses chunks
// and files; a large write is split into chunks of at most
// maxChunkMessages.
func TestStreamChunksInFiles(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 7
	tx := s.Begin()
	tx.PutStreamChunk(sid, true, streamRecords(0, 10), nil)
	commit(t, tx)
	tx = s.Begin()
	tx.PutStreamChunk(sid, false, streamRecords(10, 20), nil)
	tx.PutStreamChunk(sid, true, streamRecords(20, 20+maxChunkMessages+5), nil) // a new segment, two chunks
	commit(t, tx)
	end := uint64(20 + maxChunkMessages + 5)

	wantRange(t, scanAll(t, s, sid, 0), 0, end)
	wantRange(t, scanAll(t, s, sid, 15), 15, end)
	wantRange(t, scanAll(t, s, sid, 20+maxChunkMessages), 20+maxChunkMessages, end)
	if got := s.streams.files(sid); len(got) != 2 || !strings.HasSuffix(got[0], streamFileName(0)) || !strings.HasSuffix(got[1], streamFileName(20)) {
		t.Fatalf("stream files %v, want one from 0 and one from 20", got)
	}
	var chunks []string
	must(t, s.iterate(streamKey(sid, streamChunk, 0), prefixEnd(streamKey(sid, streamChunk, 0)[:10]), func(k, v []byte) (bool, error) {
		c, err := parseChunkIndex(k, v)
		chunks = append(chunks, fmt.Sprintf("%d+%d@%d", c.first, c.count, c.file))
		return true, err
	}))
	if want := fmt.Sprintf("[0+10@0 10+10@0 20+%d@20 %d+5@20]", maxChunkMessages, 20+maxChunkMessages); fmt.Sprint(chunks) != want {
		t.Fatalf("chunks %v, want %s", chunks, want)
	}
	if ts, ok, err := s.StreamTimestamp(sid, 15); err != nil || !ok || ts != 1015 {
		t.Fatalf("timestamp of 15: %d %v %v", ts, ok, err)
	}
	if first, ok, err := s.StreamChunkStart(sid, 15); err != nil || !ok || first != 10 {
		t.Fatalf("chunk of 15 starts at %d %v %v, want 10", first, ok, err)
	}
	must(t, s.Close())

	// Reopened: the same messages; a new chunk goes after the old ones.
	s = openKeeping(t, fs, sid)
	defer s.Close()
	tx = s.Begin()
	tx.PutStreamChunk(sid, false, streamRecords(end, end+3), nil)
	commit(t, tx)
	wantRange(t, scanAll(t, s, sid, 0), 0, end+3)
}

// Retention: the files wholly below the cut go once the deletion is
// synced, the one holding the cut stays, and a deleted stream's folder
// goes with it.
func TestStreamFilesDeleted(t *testing.T) {
	s, fs := openRecovered(t, nil)
	defer s.Close()
	const sid = 9
	for _, seg := range [][2]uint64{{0, 10}, {10, 20}, {20, 30}} {
		tx := s.Begin()
		tx.PutStreamChunk(sid, true, streamRecords(seg[0], seg[0]+5), nil)
		tx.PutStreamChunk(sid, false, streamRecords(seg[0]+5, seg[1]), nil)
		commit(t, tx)
	}
	files := s.streams.files(sid)
	if len(files) != 3 {
		t.Fatalf("files %v, want 3", files)
	}
	tx := s.Begin()
	tx.DeleteStreamBefore(sid, 20)
	commit(t, tx)
	wantRange(t, scanAll(t, s, sid, 0), 20, 30)
	for i, name := range files {
		_, err := fs.Stat(name)
		if gone := i < 2; gone != (err != nil) {
			t.Errorf("file %s: stat %v after dropping offsets below 20", name, err)
		}
	}
	tx = s.Begin()
	tx.DeleteStream(sid)
	commit(t, tx)
	if _, err := fs.Stat(fs.PathJoin("data", streamDirName, streamDirFor(sid))); err == nil {
		t.Errorf("a deleted stream's folder stayed")
	}
	if n := s.streams.bytes.Load(); n != 0 {
		t.Errorf("stream file bytes %d after every stream was deleted", n)
	}
}

// A machine crash after a durable commit keeps every chunk it indexed,
// formed ones too, form included: the files are synced before the WAL.
// Self-check: with the files left unsynced, the same crash leaves an
// index pointing at data that is gone, and the read says so by file name.
func TestStreamChunksSurviveMachineCrash(t *testing.T) {
	for _, c := range []struct {
		skip   bool
		formed bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("skipStreamSync=%v,formed=%v", c.skip, c.formed), func(t *testing.T) {
			skip := c.skip
			var form StreamForm
			if c.formed {
				form = testForm
			}
			s, fs := openCrashable(t, Options{skipStreamSync: skip})
			const sid = 3
			tx := s.Begin()
			tx.PutStreamChunk(sid, true, streamRecords(0, 50), form)
			tx.PutStreamSegment(sid, Segment{First: 0, Last: 49, Count: 50})
			commit(t, tx)
			image := machineCrash(fs)
			s2, err := Open("data", Options{FS: image, Logger: zerolog.Nop()})
			must(t, err)
			defer s2.Close()
			_, err = s2.Recover(map[uint64]bool{sid: true})
			must(t, err)
			var got []string
			err = s2.ScanStream(sid, 0, 100, func(o uint64, ts int64, m *Message) bool {
				got = append(got, fmt.Sprintf("%d@%d:%s", o, ts, m.Body))
				return true
			})
			if !skip {
				must(t, err)
				wantRange(t, got, 0, 50)
				if want, _ := testForm(nil, streamRecords(0, 50), make([]int, 50)); c.formed && !bytes.Equal(formedForm(t, s2, sid, 0), want) {
					t.Fatal("the formed chunk's form did not survive the crash")
				}
				return
			}
			if !errors.Is(err, ErrChunkDamaged) || !strings.Contains(err.Error(), streamFileName(0)) {
				t.Fatalf("the self-check's read: %v, %d messages; want the damage reported by name", err, len(got))
			}
		})
	}
}

// Open deletes what no index record points into: a file whose chunks'
// Txn never committed (written, then the process died), and the folder of
// a stream with no chunk left.
func TestStreamOrphanFilesDeleted(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 5
	tx := s.Begin()
	tx.PutStreamChunk(sid, true, streamRecords(0, 10), nil)
	commit(t, tx)
	must(t, s.Close())
	orphan := fs.PathJoin("data", streamDirName, streamDirFor(sid), streamFileName(10))
	lone := fs.PathJoin("data", streamDirName, streamDirFor(99))
	must(t, fs.MkdirAll(lone, 0o755))
	for _, name := range []string{orphan, fs.PathJoin(lone, streamFileName(0))} {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		must(t, err)
		_, err = f.Write((&streamLogs{}).encodeChunk(streamRecords(10, 12)))
		must(t, err)
		must(t, f.Close())
	}
	s = openKeeping(t, fs, sid, 99)
	defer s.Close()
	if _, err := fs.Stat(orphan); err == nil {
		t.Errorf("a file no chunk refers to stayed")
	}
	if _, err := fs.Stat(lone); err == nil {
		t.Errorf("the folder of a stream with no chunk stayed")
	}
	wantRange(t, scanAll(t, s, sid, 0), 0, 10)
	tx = s.Begin()
	tx.PutStreamChunk(sid, true, streamRecords(10, 12), nil)
	commit(t, tx)
	wantRange(t, scanAll(t, s, sid, 0), 0, 12)
}

// A damaged chunk is reported with its file and offsets, never read as
// messages.
func TestStreamChunkDamage(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 4
	tx := s.Begin()
	tx.PutStreamChunk(sid, true, streamRecords(0, 10), nil)
	commit(t, tx)
	must(t, s.Close())
	name := fs.PathJoin("data", streamDirName, streamDirFor(sid), streamFileName(0))
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.WriteAt([]byte{'X'}, chunkHeaderLen+20)
	must(t, err)
	must(t, f.Close())
	s = openKeeping(t, fs, sid)
	defer s.Close()
	n := 0
	err = s.ScanStream(sid, 0, 100, func(uint64, int64, *Message) bool { n++; return true })
	if !errors.Is(err, ErrChunkDamaged) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "checksum") || n != 0 {
		t.Fatalf("reading a damaged chunk: %v (%d messages)", err, n)
	}
}

// A format 4 store's stream messages (a key each) are rewritten into
// chunks at Open: the same offsets, timestamps and bodies, a file per
// segment, and no message key left.
func TestStreamFormat4Rewritten(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 12
	b := s.db.NewBatch()
	for o := uint64(0); o < 30; o++ {
		m := &Message{RoutingKey: "k", Body: []byte(fmt.Sprint("m", o))}
		v := binary.BigEndian.AppendUint64(nil, uint64(1000+o))
		v = AppendMessage(v, m)
		must(t, b.Set(streamKey(sid, streamMessage, o), v, nil))
	}
	for _, seg := range []Segment{{First: 0, Last: 19, Count: 20}, {First: 20, Last: 29, Count: 10}} {
		v := make([]byte, segmentRecordLen)
		binary.BigEndian.PutUint64(v[8:], seg.Last)
		binary.BigEndian.PutUint64(v[24:], uint64(seg.Count))
		must(t, b.Set(streamKey(sid, streamSegment, seg.First), v, nil))
	}
	must(t, b.Set(keyFormatVersion, binary.BigEndian.AppendUint32(nil, 4), nil))
	must(t, b.Commit(pebble.Sync))
	must(t, s.Close())

	var logged bytes.Buffer
	s, err := Open("data", Options{FS: fs, Logger: zerolog.New(&logged)})
	must(t, err)
	defer s.Close()
	_, err = s.Recover(map[uint64]bool{sid: true})
	must(t, err)
	wantRange(t, scanAll(t, s, sid, 0), 0, 30)
	if got := s.streams.files(sid); len(got) != 2 {
		t.Errorf("files %v after the rewrite, want one per segment", got)
	}
	left := 0
	must(t, s.iterate(streamKey(sid, streamMessage, 0), streamKey(sid, streamMessage+1, 0), func(_, _ []byte) (bool, error) { left++; return true, nil }))
	if left != 0 {
		t.Errorf("%d format 4 message keys left", left)
	}
	if !strings.Contains(logged.String(), "rewritten") {
		t.Errorf("the upgrade was not logged: %s", logged.String())
	}
}

// Many Txns of a chunk each (a replica applying Raft entries), committed
// into one batch, are written together and read back as written.
func TestStreamChunksOfManyTxns(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 6
	for o := uint64(0); o < 300; o++ {
		tx := s.Begin()
		tx.PutStreamChunk(sid, o == 0, streamRecords(o, o+1), nil)
		tx.Commit(false, nil)
	}
	commit(t, s.Begin())
	wantRange(t, scanAll(t, s, sid, 0), 0, 300)
	wantRange(t, scanAll(t, s, sid, 123), 123, 300)
	must(t, s.Close())
	s = openKeeping(t, fs, sid)
	defer s.Close()
	wantRange(t, scanAll(t, s, sid, 0), 0, 300)
}

// testForm is a StreamForm for tests: "F", then each body after its
// length (one byte); it declines a chunk holding a body "no".
func testForm(dst []byte, recs []StreamRecord, bodies []int) ([]byte, bool) {
	start := len(dst)
	dst = append(dst, 'F')
	for i, r := range recs {
		if string(r.Msg.Body) == "no" {
			return dst, false
		}
		dst = append(dst, byte(len(r.Msg.Body)))
		bodies[i] = len(dst) - start
		dst = append(dst, r.Msg.Body...)
	}
	return dst, true
}

// formedForm reads the form of the formed chunk holding from, nil when
// that chunk is not formed.
func formedForm(t *testing.T, s *Store, sid, from uint64) []byte {
	t.Helper()
	fc, ok, err := s.StreamFormed(sid, from)
	must(t, err)
	if !ok {
		return nil
	}
	defer fc.Release()
	form := make([]byte, fc.Len)
	must(t, fc.ReadAt(form))
	return form
}

// Formed chunks: a write is stored in chunks of at most
// FormedMessages, each in its form, which StreamChunk returns beside
// the messages; the messages read back whole (properties, exchange,
// routing key, flags, timestamps) from any offset, after a reopen too.
// Records that do not share their routing key, or that the form declines,
// are stored as any chunk. A damaged formed chunk is refused by name.
func TestStreamFormedChunks(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const sid = 9
	recs := streamRecords(0, 600)
	for i := range recs {
		recs[i].Msg.Flags, recs[i].Msg.Exchange = 1, "x"
		if i%3 == 0 {
			recs[i].Msg.Props = []byte(fmt.Sprint("p", i))
		}
	}
	tx := s.Begin()
	tx.PutStreamChunk(sid, true, recs, testForm)
	commit(t, tx)
	check := func(s *Store) {
		t.Helper()
		wantRange(t, scanAll(t, s, sid, 0), 0, 600)
		for _, at := range []struct{ from, first, n uint64 }{{0, 0, 256}, {300, 256, 256}, {599, 512, 88}} {
			got, err := s.StreamChunk(sid, at.from)
			must(t, err)
			form := formedForm(t, s, sid, at.from)
			if uint64(len(got)) != at.n || got[0].Offset != at.first {
				t.Fatalf("the chunk of %d: %d messages from %d, want %d from %d", at.from, len(got), got[0].Offset, at.n, at.first)
			}
			want, _ := testForm(nil, recs[at.first:at.first+at.n], make([]int, at.n))
			if !bytes.Equal(form, want) {
				t.Fatalf("the chunk of %d: form %q..., want %q...", at.from, form[:8], want[:8])
			}
			for _, r := range got {
				m, w := r.Msg, recs[r.Offset].Msg
				if m.Exchange != "x" || m.RoutingKey != "k" || m.Flags != 1 || !bytes.Equal(m.Props, w.Props) || r.Timestamp != recs[r.Offset].Timestamp {
					t.Fatalf("message %d read back as %+v, ts %d", r.Offset, m, r.Timestamp)
				}
			}
		}
	}
	check(s)
	must(t, s.Close())
	s = openKeeping(t, fs, sid)
	check(s)

	// A formed chunk found by its index alone, held in its file.
	fc, ok, err := s.StreamFormed(sid, 300)
	must(t, err)
	if !ok || fc.First != 256 || fc.Count != 256 {
		t.Fatalf("the formed chunk of 300: %v %+v", ok, fc)
	}
	got := make([]byte, fc.Len)
	must(t, fc.ReadAt(got))
	fc.Release()
	fc.Release() // a second does nothing
	if want, _ := testForm(nil, recs[256:512], make([]int, 256)); !bytes.Equal(got, want) {
		t.Fatalf("the formed chunk of 300 read from its file: %.8q..., want %.8q...", got, want)
	}
	if _, ok, err := s.StreamFormed(sid, 600); ok || err != nil {
		t.Fatalf("past the end: %v %v", ok, err)
	}

	// Not uniform, or declined: stored as any chunk, with no form.
	mixed := streamRecords(600, 610)
	mixed[5].Msg.RoutingKey = "other"
	declined := streamRecords(610, 620)
	declined[2].Msg.Body = []byte("no")
	tx = s.Begin()
	tx.PutStreamChunk(sid, false, mixed, testForm)
	tx.PutStreamChunk(sid, false, declined, testForm)
	commit(t, tx)
	for _, from := range []uint64{600, 610} {
		got, err := s.StreamChunk(sid, from)
		must(t, err)
		if form := formedForm(t, s, sid, from); len(got) != 10 || form != nil {
			t.Fatalf("the chunk of %d: %d messages, form %q; want 10 and none", from, len(got), form)
		}
	}

	// A writer asking for larger formed chunks gets them, up to what
	// maxChunkBytes allows.
	larger := streamRecords(620, 1220)
	for i := range larger {
		larger[i].Msg.Flags, larger[i].Msg.Exchange = 1, "x"
	}
	tx = s.Begin()
	tx.PutStreamChunkOf(sid, false, larger, testForm, 512)
	commit(t, tx)
	for _, at := range []struct{ from, first, n uint64 }{{620, 620, 512}, {1200, 1132, 88}} {
		fc, ok, err := s.StreamFormed(sid, at.from)
		must(t, err)
		if !ok || fc.First != at.first || uint64(fc.Count) != at.n {
			t.Fatalf("PutStreamChunkOf 512, the formed chunk of %d: %v %+v, want %d from %d", at.from, ok, fc, at.n, at.first)
		}
		fc.Release()
	}

	// A byte of a formed chunk's form damaged: refused, naming the file.
	must(t, s.Close())
	name := fs.PathJoin("data", streamDirName, streamDirFor(sid), streamFileName(0))
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	must(t, err)
	_, err = f.WriteAt([]byte{'!'}, chunkHeaderLen+10)
	must(t, err)
	must(t, f.Close())
	s = openKeeping(t, fs, sid)
	defer s.Close()
	_, err = s.StreamChunk(sid, 0)
	if !errors.Is(err, ErrChunkDamaged) || !strings.Contains(err.Error(), streamFileName(0)) {
		t.Fatalf("a damaged formed chunk read: %v", err)
	}
}
