package tests

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestLargeMessages sends bodies around the size from which Warren writes
// a body from where it lies instead of copying it (32 KiB), up to 16 MiB,
// with small messages between them on the same connection, at the
// default frame size and at a small one: every delivery, get and return
// carries its own body, whole and in order.
func TestLargeMessages(t *testing.T) {
	s := start(t)
	rng := rand.New(rand.NewSource(1))
	body := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	sizes := []int{32<<10 - 1, 32 << 10, 32<<10 + 1, 131072 - 8, 131072, 1<<20 + 3, 16<<20 + 1}
	for _, frameSize := range []int{0, 4096} {
		t.Run(fmt.Sprintf("frame_max=%d", frameSize), func(t *testing.T) {
			c, err := amqp.DialConfig(s.url, amqp.Config{FrameSize: frameSize})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ch, err := c.Channel()
			if err != nil {
				t.Fatal(err)
			}
			decl, err := ch.QueueDeclare("", false, false, true, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			q := decl.Name
			var sent [][]byte
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, n := range sizes {
				for _, b := range [][]byte{body(n), body(5)} {
					if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{Body: b}); err != nil {
						t.Fatal(err)
					}
					sent = append(sent, b)
				}
			}
			// The first message by basic.get, the rest by consuming.
			got, ok, err := ch.Get(q, true)
			if err != nil || !ok || !bytes.Equal(got.Body, sent[0]) {
				t.Fatalf("get: ok %v, %v, %d bytes, want %d", ok, err, len(got.Body), len(sent[0]))
			}
			deliveries, err := ch.Consume(q, "", true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range sent[1:] {
				select {
				case d := <-deliveries:
					if !bytes.Equal(d.Body, want) {
						t.Fatalf("delivery %d: %d bytes, not the %d sent", i+1, len(d.Body), len(want))
					}
				case <-ctx.Done():
					t.Fatalf("delivery %d of %d did not arrive", i+1, len(sent))
				}
			}
			// A large unroutable mandatory message comes back whole.
			returns := ch.NotifyReturn(make(chan amqp.Return, 1))
			big := body(2<<20 + 7)
			if err := ch.PublishWithContext(ctx, "", "no-such-queue-"+q, true, false, amqp.Publishing{Body: big}); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-returns:
				if !bytes.Equal(r.Body, big) {
					t.Fatalf("return: %d bytes, not the %d sent", len(r.Body), len(big))
				}
			case <-ctx.Done():
				t.Fatal("no basic.return")
			}
		})
	}
}
