package mqtt

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

// fuzzVersions maps the fuzzer's version byte to a session version, 0
// (before CONNECT) included.
var fuzzVersions = [...]Version{0, V31, V311, V5}

// FuzzDecode checks that any bytes, in any version, decode to a packet or
// to one of the package's errors, never a panic, and that a packet that
// decodes encodes to bytes that decode to an equal packet and encode to
// themselves.
func FuzzDecode(f *testing.F) {
	for _, g := range goldenPackets {
		f.Add(byte(g.v)-2, mustHex(g.hex))
	}
	for i, v := range fuzzVersions[1:] {
		for _, p := range allPackets(v) {
			f.Add(byte(i+1), p.Append(nil, v))
		}
	}
	for _, r := range refusals {
		f.Add(byte(max(int(r.v)-2, 0)), packetHex(r.hex))
	}
	f.Fuzz(func(t *testing.T, ver byte, data []byte) {
		v := fuzzVersions[int(ver)%len(fuzzVersions)]
		p, err := Decode(v, data)
		if err != nil {
			if _, ok := CodeOf(err); !ok {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		if c, ok := p.(*Connect); ok {
			v = c.Version
		}
		enc := p.Append(nil, v)
		p2, err := Decode(v, enc)
		if err != nil {
			t.Fatalf("%v re-encoded as %x does not decode: %v", p.Type(), enc, err)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip\n got %#v\nwant %#v", p2, p)
		}
		if enc2 := p2.Append(nil, v); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzPacketReader checks that any byte stream yields packets or a clean
// error, the same whether it arrives at once or a byte at a time, and
// that the buffer stays bounded by the limit.
func FuzzPacketReader(f *testing.F) {
	var s []byte
	for _, g := range goldenPackets {
		s = append(s, mustHex(g.hex)...)
	}
	f.Add(s)
	f.Add(mustHex("30 ff ff ff 7f"))
	f.Add(mustHex("c0 80 80 80 80 00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := readAll(t, bytes.NewReader(data))
		split := readAll(t, iotest.OneByteReader(bytes.NewReader(data)))
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("whole read %d packets, split %d", len(whole), len(split))
		}
	})
}

// readAll reads packets until an error, checking the error and the
// buffer bound, and returns copies of the packets.
func readAll(t *testing.T, rd io.Reader) [][]byte {
	const limit = 1024
	r := NewPacketReader(rd, limit)
	var packets [][]byte
	for {
		p, err := r.ReadPacket()
		if r.in.Size() > max(2*limit, initialBufferSize) {
			t.Fatalf("buffer grew to %d", r.in.Size())
		}
		if err != nil {
			var te *PacketTooLargeError
			var de *DecodeError
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &te) && !errors.As(err, &de) {
				t.Fatalf("error %T: %v", err, err)
			}
			return packets
		}
		packets = append(packets, bytes.Clone(p))
		Decode(V5, p)
	}
}
