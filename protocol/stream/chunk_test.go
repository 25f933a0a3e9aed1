package stream

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// TestChunkHeaderGolden checks a header written by hand from the layout
// in osiris_log.erl.
func TestChunkHeaderGolden(t *testing.T) {
	h := ChunkHeader{Type: ChunkUser, NumEntries: 2, NumRecords: 3, Timestamp: 1700000000000,
		Epoch: 1, ChunkID: 100, CRC: 0xdeadbeef, DataLength: 30, TrailerLength: 4, BloomSize: 16}
	want := mustHex(`50 00 0002 00000003
		0000018bcfe56800 0000000000000001 0000000000000064
		deadbeef 0000001e 00000004 10 000000`)
	got := h.Append(nil)
	if !bytes.Equal(got, want) {
		t.Fatalf("header\n got %x\nwant %x", got, want)
	}
	if len(got) != ChunkHeaderSize {
		t.Fatalf("header of %d bytes", len(got))
	}
	back, err := DecodeChunkHeader(want)
	if err != nil || back != h {
		t.Fatalf("decoded %+v, %v", back, err)
	}
}

func TestChunkRoundTrip(t *testing.T) {
	chunk := testChunk()
	h, data, err := ParseChunk(chunk)
	if err != nil {
		t.Fatal(err)
	}
	if h.NumEntries != 2 || h.NumRecords != 3 || h.ChunkID != 100 || int(h.DataLength) != len(data) || h.Version != ChunkFormatVersion {
		t.Fatalf("header %+v", h)
	}
	want := []Entry{
		{Body: []byte("hello")},
		{SubBatch: &SubBatch{Records: 2, UncompressedSize: 10}, Body: []byte("\x00\x00\x00\x01a\x00\x00\x00\x01b")},
	}
	var got []Entry
	for len(data) > 0 {
		e, n, err := ReadEntry(data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		data = data[n:]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries\n got %+v\nwant %+v", got, want)
	}
}

func TestEntryGolden(t *testing.T) {
	simple := AppendEntry(nil, Entry{Body: []byte("ab")})
	if want := mustHex("00000002 6162"); !bytes.Equal(simple, want) {
		t.Errorf("simple entry %x, want %x", simple, want)
	}
	sub := AppendEntry(nil, Entry{SubBatch: &SubBatch{Compression: CompressionZstd, Records: 1, UncompressedSize: 5}, Body: []byte("c")})
	if want := mustHex("c0 0001 00000005 00000001 63"); !bytes.Equal(sub, want) {
		t.Errorf("sub-batch entry %x, want %x", sub, want)
	}
}

func TestChunkErrors(t *testing.T) {
	good := testChunk()
	bad := func(mutate func(b []byte) []byte) []byte { return mutate(bytes.Clone(good)) }
	for _, tc := range []struct {
		name  string
		chunk []byte
		want  error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", good[:ChunkHeaderSize-1], ErrTruncated},
		{"bad magic", bad(func(b []byte) []byte { b[0] = 0x40; return b }), ErrBadValue},
		{"data cut short", good[:len(good)-1], ErrTruncated},
		{"bad crc", bad(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadValue},
	} {
		_, _, err := ParseChunk(tc.chunk)
		var de *DecodeError
		if !errors.Is(err, tc.want) || !errors.As(err, &de) || de.Key != 0 {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for n := range len(good) - ChunkHeaderSize {
		data := good[ChunkHeaderSize:][:n]
		for len(data) > 0 {
			_, m, err := ReadEntry(data)
			if err != nil {
				if !errors.Is(err, ErrTruncated) {
					t.Errorf("entries cut to %d bytes: %v", n, err)
				}
				break
			}
			data = data[m:]
		}
	}
}

// DeliverHead and ChunkParts encode the same frame as a Deliver with
// AppendChunk, whatever the mix of small and large bodies, and a large
// body is written from where it lies, not copied.
func TestDeliverHeadAndChunkPartsMatchDeliver(t *testing.T) {
	large := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	for _, c := range []struct {
		name   string
		bodies [][]byte
	}{
		{"small", [][]byte{[]byte("one"), {}, []byte("three")}},
		{"none", nil},
		{"one large", [][]byte{large('a', 4096)}},
		{"large first and last", [][]byte{large('a', 300), []byte("x"), large('b', 1000)}},
		{"large in the middle", [][]byte{[]byte("x"), large('a', 300), large('b', 300), []byte("y")}},
		{"at the inline bound", [][]byte{large('a', inlineBody), large('b', inlineBody+1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := ChunkHeader{Type: ChunkUser, Timestamp: 1234, ChunkID: 77}
			var data []byte
			for _, b := range c.bodies {
				data = AppendEntry(data, Entry{Body: b})
			}
			want := h
			want.NumEntries, want.NumRecords = uint16(len(c.bodies)), uint32(len(c.bodies))
			parts, size := ChunkParts(h, c.bodies)
			chunk := bytes.Join(parts, nil)
			if len(chunk) != size {
				t.Fatalf("size %d, the parts hold %d bytes", size, len(chunk))
			}
			for _, d := range []*Deliver{
				{SubscriptionID: 9, Chunk: AppendChunk(nil, want, data)},
				{Version: 2, SubscriptionID: 9, CommittedChunkID: 1 << 40, Chunk: AppendChunk(nil, want, data)},
			} {
				if got, exp := append(DeliverHead(*d, size), chunk...), AppendFrame(nil, d); !bytes.Equal(got, exp) {
					t.Fatalf("version %d: DeliverHead and ChunkParts\n got %x\nwant %x", d.Version, got, exp)
				}
			}
			for _, b := range c.bodies {
				if len(b) <= inlineBody {
					continue
				}
				if !slices.ContainsFunc(parts, func(p []byte) bool { return len(p) == len(b) && &p[0] == &b[0] }) {
					t.Fatalf("a body of %d bytes was copied", len(b))
				}
			}
		})
	}
}
