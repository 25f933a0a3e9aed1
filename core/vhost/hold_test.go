package vhost_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/poll"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// holdType is a test exchange type that holds every message for its
// x-delay header (ms), then routes it with the type named by the
// exchange's argument "via", as the delayed-message plugin does.
type holdType struct{}

func (holdType) Name() string                              { return "x-test-hold" }
func (holdType) ValidateDeclare(exchange.Definition) error { return nil }
func (holdType) Create(def exchange.Definition) (exchange.Router, error) {
	via, _ := def.Args["via"].(string)
	return &holdRouter{via: via}, nil
}

type holdRouter struct{ via string }

func (*holdRouter) ValidateBinding(*exchange.Binding) error  { return nil }
func (*holdRouter) AddBinding(*exchange.Binding) error       { return nil }
func (*holdRouter) RemoveBindings([]*exchange.Binding) error { return nil }
func (*holdRouter) PolicyChanged(protocol.Table) error       { return nil }
func (*holdRouter) Delete()                                  {}
func (*holdRouter) Info() map[string]any                     { return nil }
func (h *holdRouter) Route(m *message.Message, r *exchange.Result) error {
	d, _ := queue.Integer(m.Headers()["x-delay"])
	r.Via, r.Hold = h.via, time.Duration(d)*time.Millisecond
	return nil
}

// pickyType routes as direct but refuses bindings with the key "bad", and
// fails every message with the routing key "fail".
type pickyType struct{}

func (pickyType) Name() string                              { return "x-test-picky" }
func (pickyType) ValidateDeclare(exchange.Definition) error { return nil }
func (pickyType) Create(def exchange.Definition) (exchange.Router, error) {
	r, err := exchange.Direct{}.Create(def)
	return &pickyRouter{Router: r}, err
}

type pickyRouter struct{ exchange.Router }

func (p *pickyRouter) AddBinding(b *exchange.Binding) error {
	if b.Key == "bad" {
		return errors.New("bad binding")
	}
	return p.Router.AddBinding(b)
}

func (p *pickyRouter) Route(m *message.Message, r *exchange.Result) error {
	if m.RoutingKey == "fail" {
		return errors.New("cannot route")
	}
	return p.Router.Route(m, r)
}

func newHoldVHost(t *testing.T, durable bool) *vhost.VHost {
	t.Helper()
	c := vhost.Config{Types: exchange.NewRegistry()}
	for _, typ := range []exchange.Type{holdType{}, pickyType{}} {
		if err := c.Types.Register(typ); err != nil {
			t.Fatal(err)
		}
	}
	if durable {
		c.Store = memStore(t)
	}
	return newVHost(t, c)
}

// heldMsg is a message held for delay ms.
func heldMsg(t testing.TB, key, body string, delay int, persistent bool) *message.Message {
	t.Helper()
	p := protocol.Properties{Flags: protocol.FlagHeaders, Headers: protocol.Table{"x-delay": int32(delay)}}
	if persistent {
		p.Flags |= protocol.FlagDeliveryMode
		p.DeliveryMode = 2
	}
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New("later", key, p.Flags, props, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// timedConsumer records when each message arrives.
type timedConsumer struct {
	mu   sync.Mutex
	got  map[string]time.Time
	dups []string
}

func (c *timedConsumer) Deliver(d queue.Delivery) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	b := string(d.Entry.Msg.Body)
	if _, dup := c.got[b]; dup {
		c.dups = append(c.dups, b)
	}
	c.got[b] = now
	return true
}
func (c *timedConsumer) Cancelled()      {}
func (c *timedConsumer) NoAck() bool     { return true }
func (c *timedConsumer) Exclusive() bool { return false }

func (c *timedConsumer) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// waitFor waits for cond up to stallLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, stallLimit, what, cond)
}

// With a small window, held messages published in random order of delay
// are read from the store as the window advances: the window stays
// bounded, every message comes exactly once, and none before its due time.
func TestHoldWindow(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("persistent=%v", durable), func(t *testing.T) {
			v := newHoldVHost(t, true)
			v.SetHoldWindowForTest(20, 4, 20*time.Millisecond)
			x := mustExchange(t, v, "later", "x-test-hold", protocol.Table{"via": "direct"})
			q := mustQueue(t, v, "q", nil)
			mustBind(t, v, "later", "q", "k")
			c := &timedConsumer{got: map[string]time.Time{}}
			if err := q.Consume(c, nil); err != nil {
				t.Fatal(err)
			}
			const n = 300
			delays := rand.Perm(n)
			notBefore := map[string]time.Time{}
			maxMem := 0
			for i, d := range delays {
				body := fmt.Sprint(i)
				m := heldMsg(t, "k", body, 20+d, durable)
				notBefore[body] = time.Now().Add(time.Duration(20+d) * time.Millisecond)
				var r vhost.RouteBuffers
				out, err := v.Publish(x, m, &r)
				if err != nil || !out.Held {
					t.Fatalf("publish: %v %+v", err, out)
				}
				maxMem = max(maxMem, v.Held().InMemory())
			}
			if maxMem > 30+4 {
				t.Errorf("up to %d held messages in memory, want at most 1.5 times the window's 20 and a batch", maxMem)
			}
			if got := v.Held().Counts()["later"]; got > n || got < 1 {
				t.Errorf("held count %d", got)
			}
			waitFor(t, "every held message", func() bool { return c.count() == n })
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.dups) > 0 {
				t.Fatalf("delivered twice: %v", c.dups)
			}
			for body, at := range c.got {
				if at.Before(notBefore[body]) {
					t.Errorf("message %s delivered %v before its due time", body, notBefore[body].Sub(at))
				}
			}
			if v.Held().Len() != 0 || len(v.Held().Counts()) != 0 {
				t.Errorf("still held: %d %v", v.Held().Len(), v.Held().Counts())
			}
			spans := 0
			_ = v.Host().Store().(*storage.Store).HeldSpans(func(storage.HeldSpan, int64) { spans++ })
			if spans != 0 {
				t.Errorf("the delay store still holds %d spans", spans)
			}
		})
	}
}

// Deleting an exchange drops what it holds, in memory and in the store,
// and the counts say so; an exchange declared again under the same name
// does not get them.
func TestDeleteExchangeDropsHeld(t *testing.T) {
	v := newHoldVHost(t, true)
	x := mustExchange(t, v, "later", "x-test-hold", protocol.Table{"via": "direct"})
	mustQueue(t, v, "q", nil)
	mustBind(t, v, "later", "q", "k")
	for i := range 5 {
		var r vhost.RouteBuffers
		if _, err := v.Publish(x, heldMsg(t, "k", fmt.Sprint(i), 100, i%2 == 0), &r); err != nil {
			t.Fatal(err)
		}
	}
	if got := v.Held().Counts()["later"]; got != 5 {
		t.Fatalf("held %d, want 5", got)
	}
	if err := v.DeleteExchange("later", false); err != nil {
		t.Fatal(err)
	}
	if v.Held().Len() != 0 || v.Held().InMemory() != 0 || len(v.Held().Counts()) != 0 {
		t.Fatalf("after the delete: %d held, %d in memory, %v", v.Held().Len(), v.Held().InMemory(), v.Held().Counts())
	}
	if got := v.Held().Dropped()[hold.DropExchangeDeleted]; got != 5 {
		t.Errorf("dropped with the exchange: %d, want 5", got)
	}
	spans := 0
	_ = v.Host().Store().(*storage.Store).HeldSpans(func(storage.HeldSpan, int64) { spans++ })
	if spans != 0 {
		t.Errorf("the delay store still holds %d spans", spans)
	}
	x = mustExchange(t, v, "later", "x-test-hold", protocol.Table{"via": "direct"})
	mustBind(t, v, "later", "q", "k")
	// A fence: the new exchange holds a message of its own, due after
	// every old one was. The hold releases in due order, so an old one
	// still held anywhere would reach q before it.
	var r vhost.RouteBuffers
	if _, err := v.Publish(x, heldMsg(t, "k", "fence", 100, false), &r); err != nil {
		t.Fatal(err)
	}
	q := classic(t, v, "q")
	waitFor(t, "the fence released", func() bool { return v.Held().Len() == 0 && ready(t, q) > 0 })
	if got := bodies(t, q); !slices.Equal(got, []string{"fence"}) {
		t.Errorf("the new exchange delivered %q, want only its own fence: the old one's held messages came too", got)
	}
}

// A binding the via type refuses does not keep due messages from the
// others; a message whose routing fails when due is counted.
func TestRefusedViaBinding(t *testing.T) {
	for _, durable := range []bool{false, true} {
		v := newHoldVHost(t, durable)
		x := mustExchange(t, v, "later", "x-test-hold", protocol.Table{"via": "x-test-picky"})
		good := mustQueue(t, v, "good", nil)
		mustQueue(t, v, "bad", nil)
		mustBind(t, v, "later", "good", "good")
		mustBind(t, v, "later", "bad", "bad")
		for _, key := range []string{"good", "fail", "nobody"} {
			var r vhost.RouteBuffers
			if _, err := v.Publish(x, heldMsg(t, key, key, 1, true), &r); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "the due message", func() bool { return ready(t, good) == 1 })
		waitFor(t, "the failed one", func() bool { return v.Held().Dropped()[hold.DropRouteFailed] == 1 })
		waitFor(t, "the unroutable one", func() bool { return v.Held().Dropped()[hold.DropUnroutable] == 1 })
	}
}

// Purging drops an exchange's held messages; listing reads them in due
// order, paged.
func TestPurgeAndListHeld(t *testing.T) {
	for _, durable := range []bool{false, true} {
		v := newHoldVHost(t, durable)
		x := mustExchange(t, v, "later", "x-test-hold", protocol.Table{"via": "direct"})
		for i, d := range []int{5000, 3000, 4000} {
			var r vhost.RouteBuffers
			if _, err := v.Publish(x, heldMsg(t, "k", fmt.Sprint(i), d, i != 1), &r); err != nil {
				t.Fatal(err)
			}
		}
		list, total, err := v.HeldMessages("later", 1, 5)
		if err != nil || total != 3 || len(list) != 2 {
			t.Fatalf("list: %v, total %d, %d items", err, total, len(list))
		}
		if b := []string{string(list[0].Message.Body), string(list[1].Message.Body)}; !slices.Equal(b, []string{"2", "0"}) {
			t.Errorf("page 2 of 1: %v, want [2 0]", b)
		}
		if durable && (!list[0].Durable || list[0].Via != "direct") {
			t.Errorf("item %+v", list[0])
		}
		if n, err := v.PurgeHeld("later"); err != nil || n != 3 {
			t.Fatalf("purge: %d, %v", n, err)
		}
		if list, total, _ := v.HeldMessages("later", 0, 5); total != 0 || len(list) != 0 {
			t.Errorf("after the purge: %d listed, total %d", len(list), total)
		}
		if _, err := v.PurgeHeld("nosuch"); err == nil {
			t.Error("purged a missing exchange")
		}
	}
}
