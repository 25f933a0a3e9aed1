package conn

import (
	"bytes"
	"io"
	"testing"
	"unsafe"

	"github.com/warrenmq/warren/protocol"
)

// TestOutboundReferencesLargeBodies: on a vectored connection a body of
// vectorMin or more is written from where it lies, between the buffer's
// parts, and counts toward the congestion mark; the bytes written are the
// frames a copying connection writes.
func TestOutboundReferencesLargeBodies(t *testing.T) {
	small, large := bytes.Repeat([]byte{'s'}, 10), bytes.Repeat([]byte{'L'}, 3*vectorMin+5)
	frames := func(o *outbound) []byte {
		b := o.begin()
		b = o.appendContent(b, 1, 0, nil, small, 4096)
		b = o.appendContent(b, 2, 0, nil, large, 4096)
		b = protocol.AppendHeartbeatFrame(b)
		o.end(b)
		if o.vectored && o.pending() < len(large) {
			t.Errorf("pending %d bytes, less than the referenced body's %d", o.pending(), len(large))
		}
		buf, segs, _ := o.take(nil, nil)
		if !o.vectored {
			return buf
		}
		referenced := 0
		for _, s := range segs {
			if len(s) == 0 {
				continue
			}
			if p := uintptr(unsafe.Pointer(&s[0])); p >= uintptr(unsafe.Pointer(&large[0])) &&
				p <= uintptr(unsafe.Pointer(&large[len(large)-1])) {
				referenced += len(s)
			}
		}
		if referenced != len(large) {
			t.Errorf("%d of the large body's %d bytes referenced", referenced, len(large))
		}
		var out bytes.Buffer
		if _, err := segs.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	copied, vectored := frames(newOutbound(false)), frames(newOutbound(true))
	if !bytes.Equal(copied, vectored) {
		t.Fatalf("a vectored connection writes %d bytes, a copying one %d, and they differ", len(vectored), len(copied))
	}
	// And they are well-formed frames: two content headers, the bodies,
	// a heartbeat.
	r := protocol.NewFrameReader(bytes.NewReader(vectored))
	var body []byte
	n := 0
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		if f.Type == protocol.FrameBody && f.Channel == 2 {
			body = append(body, f.Payload...)
		}
	}
	if !bytes.Equal(body, large) || n != 2+1+25+1 {
		t.Fatalf("%d frames, channel 2's body %d bytes", n, len(body))
	}
}
