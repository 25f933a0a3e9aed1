package tests

import (
	"encoding/binary"
	"io"
	"runtime"
	"testing"
	"time"
)

// TestMessagePathAllocs guards what one message costs the broker's heap on
// its whole way: publish, route, enqueue, deliver, ack, on a transient
// queue with one consumer. The client is a raw connection that writes
// prepared frames and reads the delivery into one buffer, so it allocates
// nothing itself: what the run counts is the broker's.
//
// A small message may cost a few allocations; a large one about as many,
// and no body-sized buffer: its body is read into a pooled buffer
// (message.Bodies), the delivery is written from there, not copied, and
// the ack gives the buffer back for the next message.
func TestMessagePathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled values at random, so counts vary")
	}
	s := startWarren(t)
	for _, tc := range []struct {
		name      string
		size      int
		maxAllocs float64
		maxBytes  float64
	}{
		{"16 B", 16, smallMessageAllocs, 16 << 10},
		{"1 MiB", 1 << 20, largeMessageAllocs, 16 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, s)
			c.handshake(defaultHandshake())
			c.openChannel(1)
			queue := "allocs-" + tc.name[:len(tc.name)-2]
			c.method(1, 50, 10, queueDeclareArgs(queue))
			c.expect(50, 11)
			c.consume(1, queue, false)
			c.expect(60, 21)

			// The publish: method, header and body frames, prepared once.
			body := make([]byte, tc.size)
			publish := encodeFrame(frameMethod, 1, methodPayload(60, 40, publishArgs("", queue)), frameEnd)
			publish = append(publish, encodeFrame(frameHeader, 1, contentHeader(uint64(tc.size)), frameEnd)...)
			for rest := body; len(rest) > 0; {
				n := min(len(rest), 131072-8)
				publish = append(publish, encodeFrame(frameBody, 1, rest[:n], frameEnd)...)
				rest = rest[n:]
			}
			ack := encodeFrame(frameMethod, 1, methodPayload(60, 80, make([]byte, 9)), frameEnd)
			tagAt := 7 + 4 // the delivery tag, after the frame and method headers

			// One round by frames, to learn the delivery's length on the
			// wire; it is the same for every later one.
			c.write(publish)
			deliveryLen := 0
			for got := 0; ; {
				f := c.next()
				deliveryLen += 8 + len(f.payload)
				if f.typ == frameBody {
					got += len(f.payload)
				}
				if f.typ == frameBody && got == tc.size || f.typ == frameHeader && tc.size == 0 {
					break
				}
			}
			tag := uint64(1)
			binary.BigEndian.PutUint64(ack[tagAt:], tag)
			c.write(ack)

			delivery := make([]byte, deliveryLen)
			_ = c.nc.SetDeadline(time.Now().Add(2 * time.Minute))
			round := func() {
				if _, err := c.nc.Write(publish); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(c.r, delivery); err != nil {
					t.Fatal(err)
				}
				tag++
				binary.BigEndian.PutUint64(ack[tagAt:], tag)
				if _, err := c.nc.Write(ack); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 { // warm the pools and buffers
				round()
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			allocs := testing.AllocsPerRun(500, round)
			runtime.ReadMemStats(&after)
			bytes := float64(after.TotalAlloc-before.TotalAlloc) / 501
			t.Logf("%.1f allocations, %.0f bytes per message of %d bytes", allocs, bytes, tc.size)
			if allocs > tc.maxAllocs {
				t.Errorf("%.1f allocations per message, want at most %.0f", allocs, tc.maxAllocs)
			}
			if bytes > tc.maxBytes {
				t.Errorf("%.0f bytes allocated per message of %d bytes, want at most %.0f", bytes, tc.size, tc.maxBytes)
			}
		})
	}
}

// The guards' limits, from the counts measured when they were set (see
// BENCHMARKS.md); a change that adds an allocation to every message must
// say why here.
//
// Measured 2026-12-02: 4 for a 16-byte message, 5 for a 1 MiB one, whose
// bytes were its body's and 264 more (one fewer each since the channel's
// unacked list became a ring that keeps its array). Since bodies of 64 KiB
// and more are pooled, the 1 MiB message costs 4 allocations and 265
// bytes: the body's buffer is the pool's.
const (
	smallMessageAllocs = 4
	largeMessageAllocs = 4
)
