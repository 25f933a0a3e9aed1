package vhost_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warrenmq/warren/core/denseset"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// gate is a point a test holds a goroutine at: entered is closed when the
// first goroutine arrives, and everyone waits until release.
type gate struct {
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) wait() {
	g.once.Do(func() { close(g.entered) })
	<-g.open
}

func (g *gate) release() { close(g.open) }

// slowType is an exchange type whose calls can be held at a gate, as a
// plugin running to its deadline holds them: routing (a fanout) waits at
// route, a declare's validation at declare.
type slowType struct {
	route, declare *gate
}

func (t *slowType) Name() string { return "x-slow" }

func (t *slowType) ValidateDeclare(def exchange.Definition) error {
	if def.Args["slow"] == true {
		t.declare.wait()
	}
	return nil
}

func (t *slowType) Create(exchange.Definition) (exchange.Router, error) {
	return &slowRouter{t: t}, nil
}

type slowRouter struct {
	t        *slowType
	bindings denseset.Set[*exchange.Binding]
}

func (r *slowRouter) ValidateBinding(*exchange.Binding) error { return nil }
func (r *slowRouter) AddBinding(b *exchange.Binding) error {
	r.bindings.Add(b)
	return nil
}
func (r *slowRouter) RemoveBindings(bs []*exchange.Binding) error {
	for _, b := range bs {
		r.bindings.Remove(b)
	}
	return nil
}
func (r *slowRouter) PolicyChanged(protocol.Table) error { return nil }
func (r *slowRouter) Delete()                            {}
func (r *slowRouter) Info() map[string]any               { return nil }
func (r *slowRouter) Route(m *message.Message, res *exchange.Result) error {
	if m.RoutingKey == "slow" {
		r.t.route.wait()
	}
	res.Bindings = append(res.Bindings, r.bindings.Items()...)
	return nil
}

func newSlowVHost(t *testing.T) (*vhost.VHost, *slowType) {
	t.Helper()
	types := exchange.NewRegistry()
	slow := &slowType{route: newGate(), declare: newGate()}
	if err := types.Register(slow); err != nil {
		t.Fatal(err)
	}
	return newVHost(t, vhost.Config{Types: types, Store: memStore(t)}), slow
}

// A router that takes its time (a plugin call running to its deadline)
// holds up neither declares nor publishers of other exchanges, nor
// listings. It used to: it routed under the vhost's read lock, a declare
// queued for the write lock, and every new publisher queued behind it.
func TestSlowRouteStallsOnlyItsOwnExchange(t *testing.T) {
	v, slow := newSlowVHost(t)
	mustExchange(t, v, "slow", "x-slow", nil)
	mustQueue(t, v, "behind-slow", nil)
	mustBind(t, v, "slow", "behind-slow", "")

	published := make(chan struct{})
	go func() {
		defer close(published)
		publish(t, v, "slow", "slow", "held in the router")
	}()
	<-slow.route.entered

	within(t, "declaring, binding, publishing and listing beside a slow route", func() {
		mustExchange(t, v, "other", "direct", nil)
		q := mustQueue(t, v, "other-q", nil)
		mustBind(t, v, "other", "other-q", "k")
		publish(t, v, "other", "k", "routed")
		if got := ready(t, q); got != 1 {
			t.Errorf("other-q holds %d messages, want 1", got)
		}
		_ = v.Queues()
		_ = v.Exchanges()
		_ = v.Bindings()
		if err := v.DeleteExchange("other", false); err != nil {
			t.Error(err)
		}
	})
	slow.route.release()
	within(t, "the slow publish", func() { <-published })
}

// A declare whose type takes its time to validate (a plugin call) holds
// up no publisher.
func TestSlowDeclareStallsNoPublisher(t *testing.T) {
	v, slow := newSlowVHost(t)
	q := mustQueue(t, v, "q", nil)
	declared := make(chan error, 1)
	go func() {
		_, err := v.DeclareExchange(exchange.Definition{Name: "slowly", Type: "x-slow", Args: protocol.Table{"slow": true}}, false)
		declared <- err
	}()
	<-slow.declare.entered
	within(t, "publishing beside a slow declare", func() {
		publish(t, v, "", "q", "routed")
		publish(t, v, "amq.fanout", "", "nowhere")
		if got := ready(t, q); got != 1 {
			t.Errorf("q holds %d messages, want 1", got)
		}
		_ = v.Queues()
	})
	slow.declare.release()
	within(t, "the slow declare", func() {
		if err := <-declared; err != nil {
			t.Error(err)
		}
	})
}

// slowStore holds metadata writes at a gate, as a slow fsync does.
type slowStore struct {
	*storage.Store
	meta *gate
}

func (s *slowStore) PutMeta(kind storage.Kind, vhostName, name string, rec protocol.Table) error {
	if name == "slow" {
		s.meta.wait()
	}
	return s.Store.PutMeta(kind, vhostName, name, rec)
}

// A durable declare waiting for its synced write holds up no publisher and
// no listing: the write is made without the vhost's locks.
func TestSyncedDeclareStallsNoPublisher(t *testing.T) {
	st := memStore(t)
	slow := &slowStore{Store: st, meta: newGate()}
	v := newVHost(t, vhost.Config{Store: slow})
	q := mustQueue(t, v, "q", nil)
	mustBind(t, v, "amq.direct", "q", "k")

	declared := make(chan struct{})
	go func() {
		defer close(declared)
		mustQueue(t, v, "slow", nil)
	}()
	<-slow.meta.entered
	within(t, "publishing and listing beside a synced declare", func() {
		publish(t, v, "amq.direct", "k", "routed")
		publish(t, v, "", "q", "routed too")
		if got := ready(t, q); got != 2 {
			t.Errorf("q holds %d messages, want 2", got)
		}
		if _, err := v.Queue("q", nil); err != nil {
			t.Error(err)
		}
		_ = v.Queues()
	})
	// The queue being declared is not visible before its record is stored.
	if _, err := v.Queue("slow", nil); err == nil {
		t.Error("a queue is visible before its declaration is stored")
	}
	slow.meta.release()
	within(t, "the synced declare", func() { <-declared })
	if _, err := v.Queue("slow", nil); err != nil {
		t.Error(err)
	}
}

// infoType's routers count the Info calls they get after Delete.
type infoType struct{ late *atomic.Int32 }

func (infoType) Name() string                              { return "x-info" }
func (infoType) ValidateDeclare(exchange.Definition) error { return nil }
func (t infoType) Create(exchange.Definition) (exchange.Router, error) {
	return &infoRouter{late: t.late}, nil
}

type infoRouter struct {
	slowRouter
	late    *atomic.Int32
	deleted atomic.Bool
}

func (r *infoRouter) Delete() { r.deleted.Store(true) }
func (r *infoRouter) Info() map[string]any {
	if r.deleted.Load() {
		r.late.Add(1)
	}
	return map[string]any{"k": 1}
}

// A listing that found an exchange before its delete marked it does not
// ask its router for figures: the router is released without the
// exchange's lock (deleteExchange), so the plugin's state would be read
// while it is torn down (a race the topology stress test found).
func TestListingSkipsADeletedExchangesRouter(t *testing.T) {
	types := exchange.NewRegistry()
	var late atomic.Int32
	if err := types.Register(infoType{&late}); err != nil {
		t.Fatal(err)
	}
	v := newVHost(t, vhost.Config{Types: types, Store: memStore(t)})
	mustExchange(t, v, "gone", "x-info", nil)
	x, err := v.Exchange("gone")
	if err != nil {
		t.Fatal(err)
	}
	// The state between deleteExchange marking it and the listing that
	// found it before: marked, router released, still in the list.
	x.MarkDeletedForTest()
	for _, info := range v.Exchanges() {
		if info.Name == "gone" && info.Info != nil {
			t.Fatalf("a deleted exchange's figures were asked for: %v", info.Info)
		}
	}
	if n := late.Load(); n != 0 {
		t.Fatalf("Info called %d times after Delete", n)
	}
}
