package vhost

import (
	"time"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/message"
)

// What the external tests (package vhost_test) need of the package's
// unexported state: each shows what no exported call does.

// StoreWritersForTest: TestUnbindingChurn gives a queue more bindings than BindAll writes at once.
const StoreWritersForTest = storeWriters

// SetHoldWindowForTest: TestHoldWindow needs a window small enough that held messages are read back from the store.
func (v *VHost) SetHoldWindowForTest(capacity, batch int, lookahead time.Duration) {
	v.holds = hold.New(hold.Config{VHost: v.Name, Store: v.store, Log: &v.log, Release: v.releaseHeld,
		Capacity: capacity, Batch: batch, Lookahead: lookahead})
}

// BoundToForTest: TestUnbindingChurn checks the index of bindings by destination (count, and no empty set left) against its model.
func (v *VHost) BoundToForTest(dest exchange.Destination) (n int, indexed bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	_, indexed = v.byDest[dest]
	return len(v.boundTo(dest)), indexed
}

// RouteForTest: TestUnbindingChurn asks the exchange's router itself where a key goes, without publishing.
func (x *Exchange) RouteForTest(m *message.Message, res *exchange.Result) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.router.Route(m, res)
}

// MarkDeletedForTest: TestListingSkipsADeletedExchangesRouter lists x as deleteExchange leaves it between marking it and dropping it from the list.
func (x *Exchange) MarkDeletedForTest() {
	x.mu.Lock()
	x.deleted = true
	x.mu.Unlock()
	x.router.Delete()
}
