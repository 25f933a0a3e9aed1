package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/protocol"
)

// The examples in the package doc are right.
func TestKeyExamples(t *testing.T) {
	k, err := metaKey(KindQueue, "/", "a/b")
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x02, 0x05, 0x2f, 0x00, 0x01, 0x61, 0x2f, 0x62, 0x00, 0x01}; !bytes.Equal(k, want) {
		t.Errorf("queue key = % x, want % x", k, want)
	}
	want := []byte{0x04, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x2c}
	if k := entryKey(prefixEntry, 7, 0, 300); !bytes.Equal(k, want) {
		t.Errorf("entry key = % x, want % x", k, want)
	}
	want = []byte{0x07, 0, 0, 0, 0, 0, 0, 0, 3, 0x01, 0, 0, 0, 0, 0, 0, 0, 5}
	if k := raftEntryKey(3, 5); !bytes.Equal(k, want) {
		t.Errorf("raft entry key = % x, want % x", k, want)
	}
}

// Escaped names round-trip, keep byte order, and none is a prefix of
// another, so no two (vhost, name) pairs share a key.
func TestEscapedNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 0x02, 0xFE, 0xFF, '/', '.', 'a'}
	var names []string
	for range 2000 {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	names = append(names, strings.Repeat("x", 255), "")
	for _, a := range names {
		ea := appendEscaped(nil, a)
		got, rest, err := readEscaped(ea)
		if err != nil || got != a || len(rest) != 0 {
			t.Fatalf("round trip of %q: %q %q %v", a, got, rest, err)
		}
	}
	for i := 0; i < len(names); i++ {
		for j := 0; j < 50; j++ {
			a, b := names[i], names[r.IntN(len(names))]
			ea, eb := appendEscaped(nil, a), appendEscaped(nil, b)
			if c1, c2 := strings.Compare(a, b), bytes.Compare(ea, eb); c1 != c2 {
				t.Fatalf("order of %q, %q: names %d, keys %d", a, b, c1, c2)
			}
			if a != b && bytes.HasPrefix(eb, ea) {
				t.Fatalf("escaped %q is a prefix of escaped %q", a, b)
			}
		}
	}
	// The pairs that a plain separator would confuse.
	k1, _ := metaKey(KindQueue, "a", "b\x00c")
	k2, _ := metaKey(KindQueue, "a\x00b", "c")
	if bytes.Equal(k1, k2) {
		t.Fatal("vhost/name pairs collide")
	}
}

func TestHeldKeyOrder(t *testing.T) {
	dues := []int64{-5, 0, 1, 1000, 1 << 40}
	var prev []byte
	for _, d := range dues {
		for seq := uint64(0); seq < 3; seq++ {
			k := make([]byte, heldKeyLen)
			putHeldKey(k, d, seq)
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				t.Fatalf("held key (%d,%d) does not sort after the previous one", d, seq)
			}
			if gd, gs, ok := parseHeldKey(k); !ok || gd != d || gs != seq {
				t.Fatalf("parse (%d,%d): %d %d %v", d, seq, gd, gs, ok)
			}
			prev = k
		}
	}
}

func TestEntryCodec(t *testing.T) {
	cases := []Entry{
		{Persistent: true, Msg: &Message{Exchange: "ex", RoutingKey: "rk", Flags: 0x9000, Props: []byte{1, 2}, Body: []byte("hello")}},
		{Delivered: true, Deliveries: 300, ExpiresAt: 1 << 41, Msg: &Message{}},
		{Persistent: true, MsgID: 1 << 60, Msg: &Message{Body: make([]byte, 1000)}},
		{Persistent: true, MsgID: 5},
		{Msg: &Message{Exchange: strings.Repeat("e", 255), RoutingKey: strings.Repeat("k", 300), Body: []byte{0}}},
		{Deliveries: 2, ExpiresAt: 9, Spill: SpillRef{Seg: 1 << 31, Off: 1 << 40, Len: 70000}, Msg: &Message{Exchange: "ex", Props: []byte{3}}},
	}
	for i, e := range cases {
		b := make([]byte, entryLen(&e))
		putEntry(b, &e)
		var msg []byte
		if e.MsgID != 0 && e.Msg != nil {
			msg = make([]byte, messageLen(e.Msg))
			putMessage(msg, e.Msg)
		}
		got, err := decodeEntry(b, msg, nil)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got.Msg != nil && e.Msg != nil {
			// Compare nil and empty slices alike.
			if got.Msg.Exchange != e.Msg.Exchange || got.Msg.RoutingKey != e.Msg.RoutingKey ||
				got.Msg.Flags != e.Msg.Flags || !bytes.Equal(got.Msg.Props, e.Msg.Props) || !bytes.Equal(got.Msg.Body, e.Msg.Body) {
				t.Errorf("case %d: message %+v, want %+v", i, got.Msg, e.Msg)
			}
		} else if (got.Msg == nil) != (e.Msg == nil) {
			t.Errorf("case %d: Msg %v, want %v", i, got.Msg, e.Msg)
		}
		got.Msg, e.Msg = nil, nil
		if *got != e {
			t.Errorf("case %d: %+v, want %+v", i, *got, e)
		}
		wantLen := len(cases[i].Msg.bodyOr(nil))
		if e.Spill.Spilled() {
			wantLen = e.Spill.Len
		}
		if n, err := entryBodyLen(b); err != nil || (cases[i].Msg != nil && n != wantLen) {
			t.Errorf("case %d: body length %d, %v", i, n, err)
		}
		// A truncated value never panics; one cut inside the header or
		// the message's lengths is an error (the body is the rest of the
		// value, so a cut body is just shorter: Pebble's checksums, not
		// this encoding, guard against that).
		for n := 0; n < len(b); n++ {
			_, err := decodeEntry(b[:n], nil, nil)
			if n < len(b)-len(cases[i].Msg.bodyOr(nil)) && err == nil && e.MsgID == 0 {
				t.Errorf("case %d: truncated to %d bytes decodes", i, n)
			}
		}
	}
}

// A spilled entry's body is not stored, whatever Msg.Body holds, and a
// value claiming to be both spilled and shared is malformed.
func TestSpilledEntryCodec(t *testing.T) {
	e := Entry{Spill: SpillRef{Seg: 2, Off: 3, Len: 100000}, Msg: &Message{RoutingKey: "rk", Body: make([]byte, 100000)}}
	b := make([]byte, entryLen(&e))
	putEntry(b, &e)
	if len(b) > 20 {
		t.Fatalf("spilled entry is %d bytes: the body was stored", len(b))
	}
	got, err := decodeEntry(b, nil, nil)
	if err != nil || got.Spill != e.Spill || got.Msg.RoutingKey != "rk" || len(got.Msg.Body) != 0 {
		t.Fatalf("decoded %+v %+v, %v", got, got.Msg, err)
	}
	b[0] |= entryShared
	if _, err := decodeEntryHeader(b); err == nil {
		t.Fatal("spilled and shared decodes")
	}
	zero := []byte{entrySpilled, 0, 0, 0, 0}
	if _, err := decodeEntryHeader(zero); err == nil {
		t.Fatal("a spill reference of no bytes decodes")
	}
}

// A table with every AMQP type, which JSON would not keep exact.
func awkwardTable() protocol.Table {
	return protocol.Table{
		"bool": true, "int8": int8(-3), "uint8": uint8(200), "int16": int16(-300), "uint16": uint16(60000),
		"int32": int32(-70000), "uint32": uint32(4000000000), "int64": int64(-1 << 40), "float32": float32(1.5),
		"float64": 2.25, "decimal": protocol.Decimal{Scale: 2, Value: 12345}, "string": "s\x00/.",
		"bytes": []byte{0, 1, 2}, "array": []any{int32(1), "two"}, "time": time.Unix(1700000000, 0).UTC(),
		"table": protocol.Table{"nested": "yes"}, "void": nil,
	}
}

func TestMetaRoundTrip(t *testing.T) {
	s, _ := openMem(t, nil)
	defer s.Close()
	long := strings.Repeat("n", 255)
	type rec struct {
		kind        Kind
		vhost, name string
	}
	recs := []rec{
		{KindVHost, "/", ""},
		{KindVHost, "", "other/vhost.with dots"},
		{KindVHost, long, long},
		{KindUser, "", "guest"},
		{KindUser, "", "\x01\xfe\xff binary"},
		{KindPlugin, "", "consistent-hash"},
		{KindPermission, "/", "guest"},
		{KindExchange, "/", "amq.topic"},
		{KindExchange, "/", "a/b"},
		{KindExchange, "/", "a.b"},
		{KindExchange, "other/vhost.with dots", "a/b"},
		{KindQueue, "/", long},
		{KindQueue, "/", "a\x00b"},
		{KindQueue, "/a", "b"},
		{KindQueue, long, "q"},
		{KindPolicy, "/", "ttl"},
		{KindVHostParameter, "/", "shovel/a/b"},
		{KindVHostParameter, "/a", "shovel/s"},
	}
	for i, r := range recs {
		tab := awkwardTable()
		tab["i"] = int64(i)
		if err := s.PutMeta(r.kind, r.vhost, r.name, tab); err != nil {
			t.Fatalf("PutMeta(%v, %q, %q): %v", r.kind, r.vhost, r.name, err)
		}
	}
	check := func(kind Kind, vhost string, want []string) {
		t.Helper()
		got, err := s.Meta(kind, vhost)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range got {
			names = append(names, m.VHost+"|"+m.Name)
			want := awkwardTable()
			want["i"] = m.Rec["i"]
			if !reflect.DeepEqual(m.Rec, want) {
				t.Errorf("%v %q %q: record %#v, want %#v", kind, m.VHost, m.Name, m.Rec, want)
			}
		}
		if !slices.Equal(names, want) {
			t.Errorf("Meta(%v, %q) = %q, want %q", kind, vhost, names, want)
		}
	}
	check(KindVHost, "", []string{"/|/", long + "|" + long, "other/vhost.with dots|other/vhost.with dots"})
	check(KindUser, "", []string{"|\x01\xfe\xff binary", "|guest"})
	check(KindUser, "/", []string{"|\x01\xfe\xff binary", "|guest"}) // vhost ignored for global kinds
	check(KindPlugin, "", []string{"|consistent-hash"})
	check(KindExchange, "/", []string{"/|a.b", "/|a/b", "/|amq.topic"})
	check(KindExchange, "", []string{"/|a.b", "/|a/b", "/|amq.topic", "other/vhost.with dots|a/b"})
	check(KindQueue, "/", []string{"/|a\x00b", "/|" + long})
	check(KindQueue, "", []string{"/|a\x00b", "/|" + long, "/a|b", long + "|q"})
	check(KindPermission, "", []string{"/|guest"})
	check(KindPolicy, "/", []string{"/|ttl"})
	check(KindPolicy, "/a", nil)
	check(KindVHostParameter, "/", []string{"/|shovel/a/b"})
	check(KindVHostParameter, "", []string{"/|shovel/a/b", "/a|shovel/s"})

	// Replace and delete.
	if err := s.PutMeta(KindExchange, "/", "a/b", protocol.Table{"i": int64(99)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMeta(KindExchange, "/", "a.b"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Meta(KindExchange, "/")
	if len(got) != 2 || got[0].Name != "a/b" || got[0].Rec["i"] != int64(99) || got[1].Name != "amq.topic" {
		t.Errorf("after replace and delete: %+v", got)
	}

	// Metadata survives a reopen.
	fs := s.opts.FS
	s.Close()
	s, _ = openMem(t, fs)
	defer s.Close()
	got, _ = s.Meta(KindQueue, "")
	if len(got) != 4 {
		t.Errorf("after reopen: %d queues", len(got))
	}
}

func TestMetaKeyErrors(t *testing.T) {
	s, _ := openMem(t, nil)
	defer s.Close()
	if err := s.PutMeta(KindUser, "/", "guest", nil); err == nil {
		t.Error("a user with a vhost was accepted")
	}
	if err := s.PutMeta(KindVHost, "a", "b", nil); err == nil {
		t.Error("a vhost with two names was accepted")
	}
	if err := s.PutMeta(KindBinding, "/", "x", nil); err == nil {
		t.Error("PutMeta of a binding was accepted")
	}
	if err := s.PutMeta(Kind(99), "/", "x", nil); err == nil {
		t.Error("an unknown kind was accepted")
	}
	if _, err := s.Meta(Kind(0), ""); err == nil {
		t.Error("Meta of an unknown kind succeeded")
	}
	if err := s.PutMeta(KindQueue, "/", "q", protocol.Table{"bad": struct{}{}}); err == nil {
		t.Error("an unencodable record was accepted")
	}
}

func TestBindingOrder(t *testing.T) {
	s, _ := openMem(t, nil)
	defer s.Close()
	seqs := []uint64{256, 1, 1 << 40, 2, 255, 10}
	for _, seq := range seqs {
		if err := s.PutBinding("/", seq, protocol.Table{"seq": int64(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutBinding("/other", 5, protocol.Table{"seq": int64(5)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBinding("/", 255); err != nil {
		t.Fatal(err)
	}
	list := func(vhost string) []uint64 {
		recs, err := s.Meta(KindBinding, vhost)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, r := range recs {
			if r.Rec["seq"] != int64(r.Seq) {
				t.Errorf("binding %d holds %v", r.Seq, r.Rec)
			}
			out = append(out, r.Seq)
		}
		return out
	}
	if got, want := list("/"), []uint64{1, 2, 10, 256, 1 << 40}; !slices.Equal(got, want) {
		t.Errorf("bindings of / = %v, want %v", got, want)
	}
	if got, want := list(""), []uint64{1, 2, 10, 256, 1 << 40, 5}; !slices.Equal(got, want) {
		t.Errorf("all bindings = %v, want %v", got, want)
	}
}

func TestDeleteVHost(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	for _, v := range []string{"/", "/x"} {
		must(t, s.PutMeta(KindVHost, v, "", nil))
		must(t, s.PutMeta(KindExchange, v, "e", nil))
		must(t, s.PutMeta(KindQueue, v, "q", nil))
		must(t, s.PutMeta(KindPolicy, v, "p", nil))
		must(t, s.PutMeta(KindPermission, v, "guest", nil))
		must(t, s.PutMeta(KindVHostParameter, v, "shovel/s", nil))
		must(t, s.PutBinding(v, 1, nil))
	}
	txn := s.Begin()
	txn.PutMessage(100, &Message{Body: []byte("shared")}, 0)
	txn.PutEntry(1, 0, 1, &Entry{Persistent: true, MsgID: 100})
	txn.PutEntry(2, 0, 1, &Entry{Persistent: true, MsgID: 100})
	txn.PutEntry(1, 0, 2, &Entry{Persistent: true, Msg: &Message{Body: []byte("inline")}})
	commit(t, txn)

	must(t, s.DeleteVHost("/", []uint64{1}))
	var dump strings.Builder
	must(t, s.Dump(&dump))
	for _, l := range strings.Split(dump.String(), "\n") {
		if strings.Contains(l, `vhost="/" `) || strings.Contains(l, `name="/" `) || strings.Contains(l, "entry q=1 ") {
			t.Errorf("left after DeleteVHost: %s", l)
		}
	}
	for _, want := range []string{`meta vhost name="/x"`, `meta queue vhost="/x" name="q"`, `meta binding vhost="/x" seq=1`, `meta vhost parameter vhost="/x" name="shovel/s"`, "message 100", "entry q=2 "} {
		if !strings.Contains(dump.String(), want) {
			t.Errorf("DeleteVHost deleted %s:\n%s", want, dump.String())
		}
	}
	must(t, s.DeleteVHost("/x", []uint64{2}))
	dump.Reset()
	must(t, s.Dump(&dump))
	for _, l := range strings.Split(strings.TrimSpace(dump.String()), "\n") {
		if !strings.HasPrefix(l, "system ") {
			t.Errorf("left after deleting every vhost: %s", l)
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFormatVersionMismatch(t *testing.T) {
	s, fs := openMem(t, nil)
	must(t, s.db.Set(keyFormatVersion, binary.BigEndian.AppendUint32(nil, 9), pebble.Sync))
	s.Close()
	_, err := Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	if !errors.Is(err, ErrFormatVersion) {
		t.Fatalf("Open of a version 9 store: %v", err)
	}
	if want := "data directory data has format version 9; this Warren reads version 6"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	// The failed Open released the lock.
	s.Close()
	must(t, s.closeErr)
	fs2 := vfs.NewMem()
	db, err := pebble.Open("data", &pebble.Options{FS: fs2, Logger: pebbleLogger{zerolog.Nop()}})
	must(t, err)
	must(t, db.Set([]byte("foreign"), []byte("x"), pebble.Sync))
	db.Close()
	if _, err := Open("data", Options{FS: fs2, Logger: zerolog.Nop()}); !errors.Is(err, ErrFormatVersion) {
		t.Errorf("Open of a foreign Pebble store: %v", err)
	}
}

// TestFormatUpgrade: a store of each earlier version opens, its entries
// read as they were written (delivery state in the entry), and its version
// is raised, so that a Warren that reads only the earlier version refuses
// it from then on.
func TestFormatUpgrade(t *testing.T) {
	for version := range upgrades {
		t.Run(fmt.Sprint("from ", version), func(t *testing.T) {
			s, fs := openMem(t, nil)
			_, err := s.Recover(nil)
			must(t, err)
			txn := s.Begin()
			txn.PutEntry(1, 0, 1, &Entry{Persistent: true, Delivered: true, Deliveries: 2, Msg: &Message{Body: []byte("old")}})
			must(t, txn.CommitWait())
			must(t, s.db.Set(keyFormatVersion, binary.BigEndian.AppendUint32(nil, uint32(version)), pebble.Sync))
			s.Close()
			s, err = Open("data", Options{FS: fs, Logger: zerolog.Nop()})
			must(t, err)
			defer s.Close()
			v, closer, err := s.db.Get(keyFormatVersion)
			must(t, err)
			if got := binary.BigEndian.Uint32(v); got != FormatVersion {
				t.Errorf("format version %d after opening a version %d store, want %d", got, version, FormatVersion)
			}
			closer.Close()
			_, err = s.Recover(map[uint64]bool{1: true})
			must(t, err)
			n := 0
			must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
				n++
				if !e.Delivered || e.Deliveries != 2 || string(e.Msg.Body) != "old" {
					t.Errorf("entry %d after the upgrade: %+v", seq, e)
				}
				return true
			}))
			if n != 1 {
				t.Fatalf("%d entries after the upgrade", n)
			}
		})
	}
}

func TestOpenTwice(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Logger: zerolog.Nop(), Sync: SyncNever})
	must(t, err)
	_, err = Open(dir, Options{Logger: zerolog.Nop()})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v", err)
	}
	if want := fmt.Sprintf("data directory %s is in use by another Warren (lock held)", dir); err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	must(t, s.Close())
	s, err = Open(dir, Options{Logger: zerolog.Nop()})
	must(t, err)
	must(t, s.Close())
}

func TestOpenBadDir(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, dir := range []string{file, filepath.Join(file, "sub")} {
		_, err := Open(dir, Options{Logger: zerolog.Nop()})
		if !errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), "is not a directory") {
			t.Errorf("Open(%s): %v", dir, err)
		}
	}

	// An unreadable directory, on an injected filesystem (tests may run as
	// root, which reads anything).
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpList {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EACCES}
		}
		return nil
	}))
	_, err := Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	if !errors.Is(err, ErrAccess) || !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), "data directory data is not readable") {
		t.Errorf("unreadable: %v", err)
	}
	// One where the lock file cannot be created.
	fs = errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpLock {
			return &os.PathError{Op: "open", Path: op.Path, Err: syscall.EACCES}
		}
		return nil
	}))
	_, err = Open("data", Options{FS: fs, Logger: zerolog.Nop()})
	if !errors.Is(err, ErrAccess) || !strings.Contains(err.Error(), "data directory data is not writable") {
		t.Errorf("unwritable: %v", err)
	}

	if os.Geteuid() != 0 {
		dir := filepath.Join(tmp, "locked")
		must(t, os.Mkdir(dir, 0))
		defer os.Chmod(dir, 0o755)
		if _, err := Open(dir, Options{Logger: zerolog.Nop()}); !errors.Is(err, ErrAccess) {
			t.Errorf("Open of a mode 000 directory: %v", err)
		}
	}
}

func TestNewID(t *testing.T) {
	s, fs := openMem(t, nil)
	seen := map[uint64]bool{}
	var last uint64
	for i := 0; i < idBlock+idBlock/2; i++ { // crosses a block boundary
		id := s.NewID()
		if id == 0 || id <= last {
			t.Fatalf("id %d after %d", id, last)
		}
		last = id
	}
	s.Close()
	for round := 0; round < 3; round++ {
		s, _ = openMem(t, fs)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 1000; i++ {
					id := s.NewID()
					mu.Lock()
					if id <= last || seen[id] {
						t.Errorf("id %d reused (last of previous run %d)", id, last)
					}
					seen[id] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		for id := range seen {
			last = max(last, id)
		}
		s.Close()
	}
}

// Callbacks run in Commit order whatever the mix of durable and not.
func TestCallbackOrder(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	const n = 2000
	wg.Add(n)
	for i := 0; i < n; i++ {
		txn := s.Begin()
		txn.PutEntry(1, 0, uint64(i), &Entry{Persistent: true, Msg: &Message{Body: []byte("x")}})
		txn.Commit(i%3 == 0, func(err error) {
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if !slices.IsSorted(got) || len(got) != n {
		t.Errorf("callbacks out of order")
	}
	st := s.Stats()
	if st["txns"].(uint64) < n || st["commits"].(uint64) == 0 {
		t.Errorf("stats: %v", st)
	}
}

// TestLargeTxnsInOrder: Txns of handOverBytes and more, committed as
// batches of their own, land in Commit-call order among small ones: a
// small delete after a large put deletes it, callbacks run in order, and
// every body reads back whole.
func TestLargeTxnsInOrder(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	body := func(i int) []byte {
		n := 10
		if i%3 != 0 {
			n = handOverBytes + i
		}
		return bytes.Repeat([]byte{byte(i)}, n)
	}
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	const n = 60
	wg.Add(n)
	for i := 0; i < n; i++ {
		txn := s.Begin()
		txn.PutEntry(1, 0, uint64(i), &Entry{Persistent: true, Msg: &Message{Body: body(i)}})
		if i%5 == 4 {
			txn.DeleteEntry(1, 0, uint64(i-1), Deleted{}) // the put just before, large or small
		}
		txn.Commit(i%4 == 0, func(err error) {
			must(t, err)
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
			wg.Done()
		})
	}
	wg.Wait()
	if !slices.IsSorted(got) || len(got) != n {
		t.Fatalf("callbacks out of order: %v", got)
	}
	var seqs []uint64
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool {
		if !bytes.Equal(e.Msg.Body, body(int(seq))) {
			t.Errorf("entry %d: %d bytes, not the %d put", seq, len(e.Msg.Body), len(body(int(seq))))
		}
		seqs = append(seqs, seq)
		return true
	}))
	if len(seqs) != n-n/5 {
		t.Fatalf("%d entries left of %d put and %d deleted: %v", len(seqs), n, n/5, seqs)
	}
	for _, seq := range seqs {
		if seq%5 == 3 {
			t.Fatalf("entry %d was deleted after it was put, and is there", seq)
		}
	}
}

// A read waits for the writes committed before it, not for CommitInterval.
func TestReadYourWrites(t *testing.T) {
	s, err := Open("data", Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), CommitInterval: time.Hour})
	must(t, err)
	defer s.Close()
	_, err = s.Recover(nil)
	must(t, err)
	txn := s.Begin()
	txn.PutEntry(1, 0, 1, &Entry{Msg: &Message{Body: []byte("paged out")}})
	done := make(chan error, 1)
	txn.Commit(false, func(err error) { done <- err })
	n := 0
	must(t, s.ScanQueue(1, 0, 0, 0, func(seq uint64, e *Entry) bool { n++; return true }))
	if n != 1 {
		t.Fatalf("scan saw %d entries", n)
	}
	must(t, <-done)
}

// Close commits what is pending; a Commit after Close fails.
func TestClose(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("data", Options{FS: fs, Logger: zerolog.Nop(), CommitInterval: time.Hour})
	must(t, err)
	_, err = s.Recover(nil)
	must(t, err)
	for i := uint64(1); i <= 10; i++ {
		txn := s.Begin()
		txn.PutEntry(1, 0, i, &Entry{Persistent: true, Msg: &Message{Body: []byte("pending")}})
		txn.Commit(false, nil)
	}
	must(t, s.Close())
	must(t, s.Close())
	errc := make(chan error, 1)
	txn := s.Begin()
	txn.PutHeld(1, 1, nil)
	txn.Commit(true, func(err error) { errc <- err })
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after Close: %v", err)
	}
	if err := s.PutMeta(KindUser, "", "u", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("PutMeta after Close: %v", err)
	}
	// Reads fail cleanly rather than reach a closed Pebble.
	if err := s.ScanQueue(1, 0, 0, 0, func(uint64, *Entry) bool { return true }); !errors.Is(err, ErrClosed) {
		t.Errorf("ScanQueue after Close: %v", err)
	}
	if _, err := s.Meta(KindUser, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("Meta after Close: %v", err)
	}
	if _, err := s.QueueLevels(1); !errors.Is(err, ErrClosed) {
		t.Errorf("QueueLevels after Close: %v", err)
	}
	if err := s.Dump(io.Discard); !errors.Is(err, ErrClosed) {
		t.Errorf("Dump after Close: %v", err)
	}
	if st := s.Stats(); st["closed"] != true {
		t.Errorf("Stats after Close: %v", st)
	}
	if id := s.NewID(); id == 0 {
		t.Error("NewID after Close returned 0")
	}

	s, _ = openMem(t, fs)
	defer s.Close()
	st, err := s.Recover(map[uint64]bool{1: true})
	must(t, err)
	if st.Entries != 10 {
		t.Errorf("%d entries after Close and reopen, want 10", st.Entries)
	}
}

// Many goroutines publishing and acking shared and inline messages keep
// the counts right: at the end every message is gone.
func TestConcurrentTxns(t *testing.T) {
	s, fs := openRecovered(t, nil)
	const workers, per = 8, 300
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q1, q2 := uint64(2*w+1), uint64(2*w+2)
			for i := uint64(1); i <= per; i++ {
				id := s.NewID()
				txn := s.Begin()
				txn.PutMessage(id, &Message{Body: []byte("shared")}, 2)
				txn.PutEntry(q1, 0, i, &Entry{Persistent: true, MsgID: id})
				txn.PutEntry(q2, 1, i, &Entry{Persistent: true, Msg: &Message{Body: []byte("inline")}})
				txn.Commit(i%2 == 0, nil)
				txn = s.Begin()
				txn.PutEntry(q2, 0, i, &Entry{Persistent: true, MsgID: id})
				txn.Commit(false, nil)
				txn = s.Begin()
				txn.DeleteEntry(q1, 0, i, Deleted{MsgID: id})
				txn.DeleteEntry(q2, 1, i, Deleted{})
				txn.Commit(false, nil)
				if i%2 == 0 {
					txn = s.Begin()
					txn.DeleteEntry(q2, 0, i, Deleted{MsgID: id})
					must(t, txn.CommitWait())
				}
			}
			// The odd ones go with their queue.
			txn := s.Begin()
			txn.DeleteQueue(q2)
			must(t, txn.CommitWait())
		}()
	}
	wg.Wait()
	if n := s.c.refCount(); n != 0 {
		t.Errorf("%d shared messages still counted", n)
	}
	var dump strings.Builder
	must(t, s.Dump(&dump))
	if strings.Contains(dump.String(), "message ") || strings.Contains(dump.String(), "entry ") {
		t.Errorf("left behind:\n%s", dump.String())
	}
	s.Close()
	s, _ = openMem(t, fs)
	defer s.Close()
	st, err := s.Recover(nil)
	must(t, err)
	if st.Messages != 0 || st.Unreferenced != 0 || st.Entries != 0 {
		t.Errorf("after reopen: %+v", st)
	}
}

func TestRecoverLogs(t *testing.T) {
	old := recoverProgressAfter
	recoverProgressAfter = 0
	defer func() { recoverProgressAfter = old }()
	var buf syncBuffer
	s, err := Open("data", Options{FS: vfs.NewMem(), Logger: zerolog.New(&buf)})
	must(t, err)
	defer s.Close()
	_, err = s.Recover(nil)
	must(t, err)
	if !strings.Contains(buf.String(), `"message":"store recovered"`) {
		t.Errorf("no summary logged: %s", buf.String())
	}
	if _, err := s.Recover(nil); err == nil {
		t.Error("a second Recover succeeded")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The hot path allocates nothing per Txn once the pools are warm.
func TestCommitAllocs(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	e := &Entry{Persistent: true, Msg: &Message{Exchange: "ex", RoutingKey: "rk", Body: make([]byte, 100)}}
	seq := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		txn := s.Begin()
		txn.PutEntry(1, 0, seq, e)
		txn.Commit(false, nil)
	})
	if allocs > 0.1 {
		t.Errorf("%.2f allocations per Txn", allocs)
	}
}

func (m *Message) bodyOr(def []byte) []byte {
	if m == nil {
		return def
	}
	return m.Body
}

// A callback that blocks holds up the callbacks behind it, but neither
// commits nor metadata writes; callbacks may read the store.
func TestBlockedCallback(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	var mu sync.Mutex
	var order []string
	happened := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, what)
	}
	release := make(chan struct{})
	first := make(chan struct{})
	txn := s.Begin()
	txn.PutEntry(1, 0, 1, &Entry{Persistent: true, Msg: &Message{Body: []byte("a")}})
	txn.Commit(true, func(err error) {
		close(first)
		<-release
		happened("the first callback returned")
	})
	<-first
	// The callback goroutine is stuck; the committer is not.
	must(t, s.PutMeta(KindUser, "", "u", nil))
	n := 0
	must(t, s.ScanQueue(1, 0, 0, 0, func(uint64, *Entry) bool { n++; return true }))
	if n != 1 {
		t.Fatalf("scan saw %d entries", n)
	}
	got := make(chan int, 1)
	txn = s.Begin()
	txn.PutEntry(1, 0, 2, &Entry{Persistent: true, Msg: &Message{Body: []byte("b")}})
	txn.Commit(true, func(err error) {
		happened("the second callback ran")
		// A callback may read (and write) the store.
		n := 0
		must(t, s.ScanQueue(1, 0, 0, 0, func(uint64, *Entry) bool { n++; return true }))
		must(t, s.PutMeta(KindUser, "", "v", nil))
		got <- n
	})
	// A metadata write returns once synced, and the committer syncs in
	// order: the second commit is on disk, its callback due, and it must
	// wait behind the first.
	must(t, s.PutMeta(KindUser, "", "w", nil))
	happened("the second commit was synced")
	close(release)
	if n := <-got; n != 2 {
		t.Errorf("callback scan saw %d entries", n)
	}
	want := []string{"the second commit was synced", "the first callback returned", "the second callback ran"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, want) {
		t.Fatalf("in the order %q, want %q", order, want)
	}
}

// Commit waits while the committer is behind, so the pending batch stays
// bounded whatever the writers do.
func TestBackpressure(t *testing.T) {
	const maxBatch = 64 << 10
	s, err := Open("data", Options{FS: vfs.NewMem(), Logger: zerolog.Nop(), MaxBatchBytes: maxBatch})
	must(t, err)
	defer s.Close()
	_, err = s.Recover(nil)
	must(t, err)
	body := make([]byte, 4096)
	var wg sync.WaitGroup
	var peak int
	var mu sync.Mutex
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				txn := s.Begin()
				txn.PutEntry(uint64(g+1), 0, uint64(i), &Entry{Msg: &Message{Body: body}})
				txn.Commit(false, nil)
				s.c.mu.Lock()
				n := s.c.open.b.Len()
				s.c.mu.Unlock()
				mu.Lock()
				peak = max(peak, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if limit := 4*maxBatch + 4200; peak > limit {
		t.Errorf("pending batch reached %d bytes, limit %d", peak, limit)
	}
}

// A callback may take ids past the reserved block: the reservation of the
// next block does not wait for callbacks.
func TestNewIDInCallback(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	done := make(chan uint64, 1)
	txn := s.Begin()
	txn.PutHeld(1, 1, nil)
	txn.Commit(true, func(error) {
		var id uint64
		for range 2 * idBlock {
			id = s.NewID()
		}
		done <- id
	})
	select {
	case id := <-done:
		if id < 2*idBlock {
			t.Errorf("last id %d", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("NewID in a callback deadlocked")
	}
}

// ScanQueueInto reads bodies into the caller's buffers when it lends one,
// inline and shared alike, and allocates them itself otherwise.
func TestScanQueueIntoLendsBodies(t *testing.T) {
	s, _ := openRecovered(t, nil)
	defer s.Close()
	big := bytes.Repeat([]byte("b"), 100)
	txn := s.Begin()
	txn.PutEntry(1, 0, 1, &Entry{Persistent: true, Msg: &Message{Exchange: "x", RoutingKey: "k", Flags: 0x8000, Props: []byte{7}, Body: big}})
	txn.PutEntry(1, 0, 2, &Entry{Persistent: true, Msg: &Message{Body: []byte("small")}})
	txn.PutMessage(9, &Message{RoutingKey: "shared", Body: big}, 0)
	txn.PutEntry(1, 0, 3, &Entry{Persistent: true, MsgID: 9, Msg: &Message{Body: big}})
	commit(t, txn)
	var lent [][]byte
	lend := func(n int) ([]byte, bool) {
		if n < 50 {
			return nil, false
		}
		b := make([]byte, n)
		lent = append(lent, b)
		return b, true
	}
	var got []*Entry
	must(t, s.ScanQueueInto(1, 0, 0, 0, lend, func(seq uint64, e *Entry) bool {
		got = append(got, e)
		return true
	}))
	if len(got) != 3 || len(lent) != 2 {
		t.Fatalf("%d entries, %d bodies lent; want 3 and 2", len(got), len(lent))
	}
	for i, want := range []struct {
		lent bool
		rk   string
		body []byte
	}{{true, "k", big}, {false, "", []byte("small")}, {true, "shared", big}} {
		e := got[i]
		if e.Lent != want.lent || e.Msg.RoutingKey != want.rk || !bytes.Equal(e.Msg.Body, want.body) {
			t.Errorf("entry %d: lent %v rk %q body %q", i+1, e.Lent, e.Msg.RoutingKey, e.Msg.Body)
		}
	}
	if &got[0].Msg.Body[0] != &lent[0][0] || &got[2].Msg.Body[0] != &lent[1][0] {
		t.Error("a lent body is not in the buffer lent")
	}
	if m := got[0].Msg; m.Exchange != "x" || m.Flags != 0x8000 || !bytes.Equal(m.Props, []byte{7}) {
		t.Errorf("entry 1's message beside its lent body: %+v", m)
	}
}
