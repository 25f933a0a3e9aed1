package mqtt

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// stream encodes every packet of v one after the other.
func stream(v Version) ([]byte, [][]byte) {
	var s []byte
	var each [][]byte
	for _, p := range allPackets(v) {
		b := p.Append(nil, v)
		each = append(each, b)
		s = append(s, b...)
	}
	return s, each
}

func TestPacketReader(t *testing.T) {
	for _, v := range versions {
		s, each := stream(v)
		for _, rd := range []io.Reader{bytes.NewReader(s), iotest.OneByteReader(bytes.NewReader(s)), iotest.HalfReader(bytes.NewReader(s))} {
			r := NewPacketReader(rd, DefaultMaxPacketSize)
			for _, want := range each {
				got, err := r.ReadPacket()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("packet %x, want %x", got, want)
				}
				decodeOK(t, v, got)
			}
			if _, err := r.ReadPacket(); err != io.EOF {
				t.Fatalf("after the last packet: %v, want EOF", err)
			}
		}
	}
}

// TestPacketReaderLargePacket reads a packet much larger than the first
// buffer, between small ones.
func TestPacketReaderLargePacket(t *testing.T) {
	big := &Publish{Topic: "t", Payload: bytes.Repeat([]byte("x"), 100_000)}
	s := (&Pingreq{}).Append(nil, V311)
	s = big.Append(s, V311)
	s = (&Pingreq{}).Append(s, V311)
	r := NewPacketReader(bytes.NewReader(s), DefaultMaxPacketSize)
	for i := range 3 {
		p, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		decodeOK(t, V311, p)
	}
	if r.in.Size() > 2*110_000 {
		t.Fatalf("buffer grew to %d", r.in.Size())
	}
}

// TestPacketReaderTooLarge checks that a packet over the limit is refused
// from its fixed header, before its body is read, and that one at the
// limit is accepted.
func TestPacketReaderTooLarge(t *testing.T) {
	// A PUBLISH announcing 268,435,455 bytes, with none of them sent.
	r := NewPacketReader(bytes.NewReader(mustHex("30 ff ff ff 7f")), InitialMaxPacketSize)
	_, err := r.ReadPacket()
	var te *PacketTooLargeError
	if !errors.As(err, &te) || te.Size != MaxPacketSize || te.Max != InitialMaxPacketSize || te.Type != TypePublish || te.Code() != ReasonPacketTooLarge {
		t.Fatalf("%T %v", err, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "268435460") || !strings.Contains(msg, "65536") {
		t.Fatalf("%q does not name the size and the limit", msg)
	}
	if r.in.Size() != initialBufferSize {
		t.Fatalf("buffer grew to %d for a refused packet", r.in.Size())
	}
	// The limit counts the whole packet: 2 bytes of header and 98 of
	// body make 100.
	at := append(mustHex("30 62 0001 74"), make([]byte, 95)...)
	for limit, ok := range map[int]bool{100: true, 99: false} {
		r = NewPacketReader(bytes.NewReader(at), limit)
		p, err := r.ReadPacket()
		if ok != (err == nil) || (ok && len(p) != 100) {
			t.Errorf("limit %d: %d bytes, %v", limit, len(p), err)
		}
	}
}

func TestPacketReaderSetMax(t *testing.T) {
	r := NewPacketReader(bytes.NewReader(nil), 0)
	if r.MaxPacketSize() != DefaultMaxPacketSize {
		t.Fatalf("max %d for 0", r.MaxPacketSize())
	}
	r.SetMaxPacketSize(1 << 30)
	if r.MaxPacketSize() != MaxPacketSize {
		t.Fatalf("max %d for 1 GiB", r.MaxPacketSize())
	}
	r.SetMaxPacketSize(100)
	if r.MaxPacketSize() != 100 {
		t.Fatalf("max %d", r.MaxPacketSize())
	}
}

// TestPacketReaderBadRemainingLength checks that a remaining length that
// does not parse is refused from the header alone.
func TestPacketReaderBadRemainingLength(t *testing.T) {
	for _, s := range []string{"30 80 80 80 80 01", "c0 80 00", "30 ff 80 00 00"} {
		r := NewPacketReader(bytes.NewReader(mustHex(s)), DefaultMaxPacketSize)
		_, err := r.ReadPacket()
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrVarInt) || de.Code() != ReasonMalformedPacket {
			t.Errorf("%s: %T %v", s, err, err)
		}
	}
}

func TestPacketReaderEOF(t *testing.T) {
	p := (&Publish{QoS: QoS1, PacketID: 1, Topic: "t", Payload: []byte("x")}).Append(nil, V311)
	for n := 1; n < len(p); n++ {
		r := NewPacketReader(bytes.NewReader(p[:n]), DefaultMaxPacketSize)
		if _, err := r.ReadPacket(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	r := NewPacketReader(bytes.NewReader(nil), DefaultMaxPacketSize)
	if _, err := r.ReadPacket(); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
	r = NewPacketReader(iotest.ErrReader(io.ErrClosedPipe), DefaultMaxPacketSize)
	if _, err := r.ReadPacket(); err != io.ErrClosedPipe {
		t.Fatalf("failing reader: %v", err)
	}
}

// TestPacketReaderPacketBuffered: a packet counts as buffered only whole,
// its fixed header included.
func TestPacketReaderPacketBuffered(t *testing.T) {
	one := (&Puback{PacketID: 1}).Append(nil, V311)
	two := append(append([]byte{}, one...), one...)
	r := NewPacketReader(bytes.NewReader(two), DefaultMaxPacketSize)
	if r.PacketBuffered() {
		t.Fatal("nothing read yet, and a packet buffered")
	}
	if _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	if !r.PacketBuffered() || r.Buffered() != len(one) {
		t.Fatalf("the second packet came with the first: buffered %v, %d bytes", r.PacketBuffered(), r.Buffered())
	}
	if _, err := r.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	if r.PacketBuffered() {
		t.Fatal("both packets read, and a packet buffered")
	}
	for _, cut := range []int{len(one) + 1, len(one) + 3} {
		r = NewPacketReader(io.MultiReader(bytes.NewReader(two[:cut]), bytes.NewReader(two[cut:])), DefaultMaxPacketSize)
		if _, err := r.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		if r.Buffered() == 0 || r.PacketBuffered() {
			t.Fatalf("cut at %d: %d bytes buffered, a packet buffered %v", cut, r.Buffered(), r.PacketBuffered())
		}
	}
}

// TestDecodeAllocatesLittle checks that decoding a PUBLISH costs the
// packet struct and the topic string, and no copy of the payload.
func TestDecodeAllocatesLittle(t *testing.T) {
	b := (&Publish{QoS: QoS1, PacketID: 1, Topic: "a/b", Payload: make([]byte, 4096)}).Append(nil, V5)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Decode(V5, b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("%v allocations per PUBLISH decoded", allocs)
	}
	p := decodeOK(t, V5, b).(*Publish)
	if &p.Payload[0] != &b[len(b)-4096] {
		t.Error("payload copied, not aliased")
	}
	enc := make([]byte, 0, 8192)
	allocs = testing.AllocsPerRun(100, func() { enc = p.Append(enc[:0], V5) })
	if allocs > 0 {
		t.Errorf("%v allocations per PUBLISH encoded into a buffer with room", allocs)
	}
}
