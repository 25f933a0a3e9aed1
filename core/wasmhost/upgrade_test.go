package wasmhost

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/internal/poll"
)

// TestUpgradeWhileRouting upgrades a plugin while publishers route through
// it: every route before, during and after the switch answers right, the
// exchange keeps its bindings, and later bindings reach the new version.
// New versions that cannot take over leave the running one in place.
func TestUpgradeWhileRouting(t *testing.T) {
	h, reg := hostWithTypes(t)
	v1 := load(t, h, "direct", buildGo(t, "direct"))
	if err := v1.Register(reg); err != nil {
		t.Fatal(err)
	}
	growPool(t, v1, 2)
	x := typ(t, v1, "x-direct")
	r := declare(t, x, "e", nil)
	bind(t, r, "q1", "k1", nil)
	bind(t, r, "q2", "k2", nil)

	var stop atomic.Bool
	var routes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				m := msg(t, "k1", nil, "")
				got, _, err := route(r, m)
				if err == nil && !slices.Equal(got, []string{"q1"}) {
					err = errors.New("routed to " + strings.Join(got, ","))
				}
				if err != nil {
					errs <- err
					return
				}
				routes.Add(1)
			}
		}()
	}
	// waitRoutes waits up to 30 s for n more routes, or for one to fail;
	// what follows judges what came.
	waitRoutes := func(n int64) {
		target := routes.Load() + n
		poll.Within(30*time.Second, func() bool { return routes.Load() >= target || len(errs) > 0 })
	}
	waitRoutes(200)
	v2, err := h.Upgrade(context.Background(), v1, buildGoWith(t, "direct", "-X main.version=2.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	waitRoutes(200)
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("a route failed across the upgrade: %v", err)
	default:
	}
	if info := v2.Info(); info.Version != "2.0.0" || info.Exchanges != 1 {
		t.Fatalf("after the upgrade: %+v", info)
	}
	if p, _ := h.plugin("direct"); p != v2 {
		t.Fatal("the host still lists the old version")
	}
	if d, why := v1.disabled(); !d || !strings.Contains(why, "upgraded to version 2.0.0") {
		t.Fatalf("old version: disabled %v (%s)", d, why)
	}
	// The type core holds is the same object, now served by v2; bindings
	// made now reach v2, and a fresh instance of v2 replays them all.
	if got, _ := reg.Lookup("x-direct"); got != x {
		t.Fatal("the registered type changed")
	}
	bind(t, r, "q3", "k3", nil)
	growPool(t, v2, 2)
	for range 4 {
		if got, _, err := route(r, msg(t, "k3", nil, "")); err != nil || !slices.Equal(got, []string{"q3"}) {
			t.Fatalf("k3 after the upgrade: %v %v", got, err)
		}
		if got, _, err := route(r, msg(t, "k2", nil, "")); err != nil || !slices.Equal(got, []string{"q2"}) {
			t.Fatalf("k2 after the upgrade: %v %v", got, err)
		}
	}

	// A version that refuses a binding the exchange has, or lacks a type
	// an exchange uses, is not taken; v2 carries on.
	_, err = h.Upgrade(context.Background(), v2, buildGoWith(t, "direct", "-X main.version=3.0.0 -X main.refuseKey=k2"))
	if !errors.Is(err, errUpgrade) || !strings.Contains(err.Error(), "version 3.0.0 refuses key k2") ||
		!strings.Contains(err.Error(), "with key 'k2'") {
		t.Fatalf("a version refusing a binding: %v", err)
	}
	_, err = h.Upgrade(context.Background(), v2, buildGoWith(t, "direct", "-X main.version=4.0.0 -X main.typeName=x-other"))
	if !errors.Is(err, errUpgrade) || !strings.Contains(err.Error(), "has no exchange type 'x-direct', which exchange 'e'") {
		t.Fatalf("a version without the type: %v", err)
	}
	if p, _ := h.plugin("direct"); p != v2 || v2.Info().Version != "2.0.0" {
		t.Fatal("a refused upgrade replaced the running version")
	}
	if d, _ := v2.disabled(); d {
		t.Fatal("a refused upgrade disabled the running version")
	}
	if got, _, err := route(r, msg(t, "k1", nil, "")); err != nil || !slices.Equal(got, []string{"q1"}) {
		t.Fatalf("after refused upgrades: %v %v", got, err)
	}
	var _ exchange.Router = r
}
