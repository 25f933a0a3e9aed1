package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestContentHeaderRoundTrip(t *testing.T) {
	p := fullProperties()
	raw, _ := p.Append(nil)
	payload := AppendContentHeader(nil, ClassBasic, 1<<40, p.Flags, raw)
	h, err := ParseContentHeader(payload)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClassID != ClassBasic || h.Weight != 0 || h.BodySize != 1<<40 || h.Flags != p.Flags || !bytes.Equal(h.Raw, raw) {
		t.Fatalf("header = %+v", h)
	}
	if cap(h.Raw) != len(h.Raw) {
		t.Error("Raw is not capped at its length")
	}
}

func TestContentHeaderBytes(t *testing.T) {
	got := AppendContentHeader(nil, ClassBasic, 5, FlagDeliveryMode, []byte{2})
	want := mustHex(`003c 0000 0000000000000005 1000 02`)
	if !bytes.Equal(got, want) {
		t.Fatalf("\n got %x\nwant %x", got, want)
	}
}

func TestContentHeaderErrors(t *testing.T) {
	var se *BadSyntaxError
	if _, err := ParseContentHeader(mustHex(`003c 0000 0000000000000005 00`)); !errors.As(err, &se) {
		t.Errorf("short header: %v", err)
	}
	if _, err := ParseContentHeader(mustHex(`003c 0000 0000000000000005 8001 00`)); !errors.As(err, &se) {
		t.Errorf("continuation bit: %v", err)
	}
}

// TestAppendContentFrames splits bodies at frame_max and reads them back.
func TestAppendContentFrames(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 10000)
	raw := []byte{2}
	for _, c := range []struct {
		frameMax   uint32
		bodyLen    int
		bodyFrames int
	}{
		{4096, 0, 0},
		{4096, 1, 1},
		{4096, 4088, 1},
		{4096, 4089, 2},
		{4096, 10000, 3},
		{0, 10000, 1},
		{100, 10000, 3}, // raised to frame-min-size
	} {
		b := AppendContentFrames([]byte("prefix"), 9, ClassBasic, FlagDeliveryMode, raw, body[:c.bodyLen], c.frameMax)
		if string(b[:6]) != "prefix" {
			t.Fatal("prefix lost")
		}
		r := NewFrameReader(bytes.NewReader(b[6:]))
		r.SetMaxFrameSize(c.frameMax)
		f, err := r.ReadFrame()
		if err != nil || f.Type != FrameHeader || f.Channel != 9 {
			t.Fatalf("header frame: %+v, %v", f, err)
		}
		h, err := ParseContentHeader(f.Payload)
		if err != nil || h.BodySize != uint64(c.bodyLen) || h.Flags != FlagDeliveryMode || !bytes.Equal(h.Raw, raw) {
			t.Fatalf("content header: %+v, %v", h, err)
		}
		var got []byte
		frames := 0
		for {
			f, err := r.ReadFrame()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("frameMax %d body %d: %v", c.frameMax, c.bodyLen, err)
			}
			if f.Type != FrameBody || f.Channel != 9 {
				t.Fatalf("body frame: %+v", f)
			}
			got = append(got, f.Payload...)
			frames++
		}
		if frames != c.bodyFrames || !bytes.Equal(got, body[:c.bodyLen]) {
			t.Errorf("frameMax %d body %d: %d body frames, %d bytes; want %d frames",
				c.frameMax, c.bodyLen, frames, len(got), c.bodyFrames)
		}
	}
}

func TestBeginEndFrame(t *testing.T) {
	b, start := BeginFrame([]byte{0xaa}, FrameBody, 0x0102)
	b = append(b, "hi"...)
	b = EndFrame(b, start)
	if want := mustHex(`aa 03 0102 00000002 6869 ce`); !bytes.Equal(b, want) {
		t.Fatalf("\n got %x\nwant %x", b, want)
	}
}
