package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// maxReaderBuffer is the most a FrameReader may allocate at the default
// frame_max, whatever the input.
const maxReaderBuffer = 2 * DefaultFrameMax

type readResult struct {
	frames []Frame
	err    error
}

// readStream reads frames until an error, copying payloads, and checks the
// error and the buffer bound.
func readStream(t *testing.T, rd io.Reader) readResult {
	r := NewFrameReader(rd)
	var res readResult
	for {
		f, err := r.ReadFrame()
		if len(r.buf) > maxReaderBuffer {
			t.Fatalf("reader buffer grew to %d bytes", len(r.buf))
		}
		if err != nil {
			var fe *BadFrameError
			if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &fe) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			res.err = err
			return res
		}
		f.Payload = bytes.Clone(f.Payload)
		res.frames = append(res.frames, f)
	}
}

// FuzzFrameReader checks that any byte stream yields frames or a clean
// error, the same whether it arrives at once or one byte at a time, and
// that decoding what it yields cannot panic.
func FuzzFrameReader(f *testing.F) {
	f.Add(AppendHeartbeatFrame(nil))
	f.Add(AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "ex", RoutingKey: "rk"}))
	f.Add(AppendContentFrames(nil, 1, ClassBasic, FlagDeliveryMode, []byte{2}, []byte("body"), 4096))
	f.Add([]byte("AMQP\x00\x00\x09\x01"))
	f.Add([]byte{1, 0, 0, 0, 1, 255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		whole := readStream(t, bytes.NewReader(data))
		split := readStream(t, &oneByteReader{b: data})
		if len(whole.frames) != len(split.frames) || (whole.err == nil) != (split.err == nil) {
			t.Fatalf("whole read %d frames (%v), split read %d (%v)", len(whole.frames), whole.err, len(split.frames), split.err)
		}
		if whole.err != nil && whole.err.Error() != split.err.Error() {
			t.Fatalf("errors differ: %v / %v", whole.err, split.err)
		}
		var dec MethodDecoder
		for i, fr := range whole.frames {
			s := split.frames[i]
			if fr.Type != s.Type || fr.Channel != s.Channel || !bytes.Equal(fr.Payload, s.Payload) {
				t.Fatalf("frame %d differs", i)
			}
			switch fr.Type {
			case FrameMethod:
				if m, err := dec.Decode(fr.Payload); err == nil {
					m.Append(nil)
				}
			case FrameHeader:
				if h, err := ParseContentHeader(fr.Payload); err == nil {
					if v, err := ScanProperties(h.Flags, h.Raw); err == nil {
						v.Headers()
					}
				}
			}
		}
	})
}

// FuzzDecodeTable checks that a table that decodes encodes again, and that
// the encoding decodes to the same table and encodes to the same bytes.
func FuzzDecodeTable(f *testing.F) {
	all, _ := AppendTable(nil, allTypesTable())
	f.Add(all)
	f.Add([]byte{0, 0, 0, 0})
	f.Add(nestedTables(64))
	f.Add(mustHex(`0000000a 01 61 42 01 01 61 42 02 00 56`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, n, err := DecodeTable(data)
		checkRawTable(t, data, tab, err)
		if err != nil {
			var se *BadSyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error type %T: %v", err, err)
			}
			return
		}
		if n < 4 || n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		enc, err := AppendTable(nil, tab)
		if err != nil {
			t.Fatalf("decoded table does not encode: %v", err)
		}
		tab2, n2, err := DecodeTable(enc)
		if err != nil || n2 != len(enc) {
			t.Fatalf("re-decode: %d of %d bytes, %v", n2, len(enc), err)
		}
		if !equalValue(tab, tab2) {
			t.Fatalf("tables differ\n%#v\n%#v", tab, tab2)
		}
		enc2, _ := AppendTable(nil, tab2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ\n%x\n%x", enc, enc2)
		}
	})
}

// FuzzDecodeMethod checks that a method payload that decodes encodes again
// to bytes that decode and encode to themselves.
func FuzzDecodeMethod(f *testing.F) {
	for _, m := range []Method{
		&BasicPublish{Exchange: "ex", RoutingKey: "rk", Mandatory: true},
		&ConnectionStartOk{ClientProperties: allTypesTable(), Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"},
		&QueueDeclare{Queue: "q", Durable: true, Arguments: Table{"x-max-length": int32(10)}},
		&BasicNack{DeliveryTag: 7, Multiple: true, Requeue: true},
		&ConnectionOpen{VirtualHost: "/"},
		&ChannelCloseOk{},
	} {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var dec MethodDecoder
		m, err := dec.Decode(data)
		if err != nil {
			var se *BadSyntaxError
			var ue *UnknownMethodError
			if !errors.As(err, &se) && !errors.As(err, &ue) {
				t.Fatalf("error type %T: %v", err, err)
			}
			return
		}
		enc := m.Append(nil)
		var dec2 MethodDecoder
		m2, err := dec2.Decode(enc)
		if err != nil {
			t.Fatalf("re-decode %s: %v", m.Name(), err)
		}
		if enc2 := m2.Append(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encodings differ\n%x\n%x", m.Name(), enc, enc2)
		}
	})
}

// FuzzProperties checks that ScanProperties and DecodeProperties agree,
// and that decoded properties encode and decode to themselves.
func FuzzProperties(f *testing.F) {
	full := fullProperties()
	raw, _ := full.Append(nil)
	f.Add(full.Flags, raw)
	f.Add(uint16(FlagContentType|FlagMessageID), []byte{0, 0})
	f.Add(uint16(FlagDeliveryMode|FlagExpiration), []byte("\x02\x0560000"))
	f.Add(uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, flags uint16, raw []byte) {
		v, scanErr := ScanProperties(flags, raw)
		p, err := DecodeProperties(flags, raw)
		if scanErr != nil {
			if err == nil {
				t.Fatalf("scan failed (%v), decode succeeded", scanErr)
			}
			return
		}
		if err != nil {
			// Only the headers table is left for DecodeProperties to reject.
			if _, herr := v.Headers(); herr == nil {
				t.Fatalf("decode failed (%v) on a list that scans, with good headers", err)
			}
			return
		}
		checkView(t, &v, &p)
		enc, err := p.Append(nil)
		if err != nil {
			t.Fatalf("decoded properties do not encode: %v", err)
		}
		p2, err := DecodeProperties(flags, enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if enc2, _ := p2.Append(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ\n%x\n%x", enc, enc2)
		}
	})
}
