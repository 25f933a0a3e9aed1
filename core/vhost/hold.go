package vhost

import (
	"slices"

	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/storage"
)

// Messages an exchange type asked to hold (exchange.Result.Hold) wait in
// the vhost's hold.Queue and come back here when due, to be routed from
// their exchange with the type they named.

// newHold is the vhost's hold queue.
func (v *VHost) newHold() *hold.Queue {
	// A nil Store converts to a nil hold.Store: the interfaces' values.
	return hold.New(hold.Config{VHost: v.Name, Store: v.store, Log: &v.log, Release: v.releaseHeld})
}

// releaseHeld routes due messages and moves them into their queues,
// deleting them from the delay store in the same Txn.
func (v *VHost) releaseHeld(due []*hold.Held) {
	var txn *storage.Txn
	var moves []move
	var targets []queuetype.Local
	var r RouteBuffers
	for _, h := range due {
		txn = v.holds.Unstore(txn, h)
		x, err := v.Exchange(h.Exchange())
		if err != nil {
			v.holds.Drop(h, hold.DropExchangeDeleted, err)
			continue
		}
		if _, err := v.route(x, h.Msg, &r, h.Via); err != nil {
			v.holds.Drop(h, hold.DropRouteFailed, err)
			continue
		}
		v.holdPending(h.Msg, &r)
		fwd := v.forward(h.Msg, &r, false)
		if len(r.queues) == 0 {
			if fwd == nil {
				v.holds.Unroutable()
			}
			continue
		}
		mv := move{m: h.Msg, queues: slices.Clone(r.queues)}
		moves = append(moves, mv)
		for _, q := range mv.queues {
			if !slices.Contains(targets, q) {
				targets = append(targets, q)
			}
		}
	}
	v.moveDeadLetters(v.moveInto(moves, targets, txn, nil))
}

// Held is what the vhost holds for delayed routing: counts, the window in
// memory, drops by reason.
func (v *VHost) Held() *hold.Queue { return v.holds }

// PurgeHeld drops every message exchange name holds and reports how many.
func (v *VHost) PurgeHeld(name string) (int, error) {
	if _, err := v.Exchange(name); err != nil {
		return 0, err
	}
	return v.holds.DropExchange(name, hold.DropPurged), nil
}

// HeldMessages lists the messages exchange name holds, in due order,
// skipping the first offset and returning at most limit; total is how
// many it holds.
func (v *VHost) HeldMessages(name string, offset, limit int) (list []hold.Message, total int, err error) {
	if _, err := v.Exchange(name); err != nil {
		return nil, 0, err
	}
	return v.holds.List(name, offset, limit)
}
