package vhost

import (
	"sort"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/storage"
)

// Dead letters of a Local (Host.MoveDeadLetters) are republished to its
// dead-letter exchange, each with an x-death record.
// Without a dead-letter exchange (or when it does not exist) they are
// dropped, as RabbitMQ drops them.
//
// The move is atomic in the store: one Txn deletes the messages from q's
// index and stores them in their new queues, which are all locked (in
// Order) from before the Txn is written until after, so no consumer sees a
// moved message before its move is committed.
//
// A move can make its targets dead-letter in turn (a length limit
// overflowing, a TTL of 0). Those dead letters are not moved from inside
// the move, where other targets are still locked, but put on a work list
// that this loop drains once no queue is locked. Every message carries its
// x-death history and a cycle without a rejection is cut (dropCycles), so
// the list runs dry.
// deadLetters are messages that left q for its dead-letter exchange.
type deadLetters struct {
	q    queuetype.Local
	dead []queue.Dead
}

// moveDeadLetters moves each batch on the work list, and the batches the
// moves produce, until none is left. It runs with no lock held.
func (v *VHost) moveDeadLetters(work []deadLetters) {
	for len(work) > 0 {
		next := work[0]
		work[0] = deadLetters{}
		work = work[1:]
		settings, qid, deleted := next.q.DeadLetterFrom()
		if settings.HasDeadLetter {
			v.countDeadLetters(next.q, next.dead)
		}
		var txn *storage.Txn
		if v.store != nil {
			txn = v.store.Begin()
			if !deleted {
				for _, d := range next.dead {
					if d.Stored {
						txn.DeleteEntry(qid, d.Level, d.Seq, storage.Deleted{MsgID: d.Msg.ID, Marked: d.Deliveries > 0, Size: len(d.Msg.Body)})
					}
				}
			}
		}
		moves, targets := v.deadLetterRoutes(next.q.Name(), settings, next.dead)
		work = v.moveInto(moves, targets, txn, work)
	}
}

// countDeadLetters counts messages leaving q for its dead-letter exchange,
// by reason, in q's statistics and the vhost's.
func (v *VHost) countDeadLetters(q queuetype.Local, dead []queue.Dead) {
	for _, d := range dead {
		if k, ok := stats.DeadLetterKind(string(d.Reason)); ok {
			q.Meter().Inc(k)
			v.Counters.Inc(k)
		}
	}
}

// moveInto enqueues messages that are moving from somewhere else in the
// store (a dead-lettering queue, the delay store) into their queues, with
// txn holding the deletion at the source: the targets are locked in Order,
// filled, txn committed (deletion and insertions together), and unlocked;
// then each delivers what it received. The dead letters the targets
// produce on the way are appended to work for the caller to move: nothing
// here calls back into the vhost while a queue is locked.
func (v *VHost) moveInto(moves []move, targets []queuetype.Local, txn *storage.Txn, work []deadLetters) []deadLetters {
	sort.Slice(targets, func(i, j int) bool { return targets[i].Order() < targets[j].Order() })
	for _, t := range targets {
		t.LockForMove()
	}
	for _, mv := range moves {
		for _, t := range mv.queues {
			t.EnqueueMoved(mv.m, txn)
		}
	}
	if txn != nil {
		txn.Commit(false, nil)
	}
	for _, t := range targets {
		if dead := t.UnlockMoved(); len(dead) > 0 {
			work = append(work, deadLetters{q: t, dead: dead})
		}
	}
	for _, t := range targets {
		if dead := t.Serve(); len(dead) > 0 {
			work = append(work, deadLetters{q: t, dead: dead})
		}
	}
	return work
}

type move struct {
	m      *message.Message
	queues []queuetype.Local
}

// deadLetterRoutes works out where each dead letter goes, and the distinct
// queues involved.
func (v *VHost) deadLetterRoutes(queueName string, s queue.Settings, dead []queue.Dead) ([]move, []queuetype.Local) {
	if !s.HasDeadLetter {
		return nil, nil
	}
	x, err := v.Exchange(s.DeadLetterExchange)
	if err != nil {
		v.log.Debug().Str("queue", queueName).Str("dlx", s.DeadLetterExchange).Int("messages", len(dead)).
			Msg("dead-letter exchange missing; messages dropped")
		return nil, nil
	}
	var r RouteBuffers
	var moves []move
	var targets []queuetype.Local
	seen := make(map[queuetype.Local]bool)
	now := time.Now()
	for _, d := range dead {
		m, err := queue.DeadLettered(d, queueName, s, now)
		if err != nil {
			v.log.Warn().Err(err).Str("queue", queueName).Msg("cannot dead-letter message; dropped")
			continue
		}
		if _, err := v.route(x, m, &r, ""); err != nil {
			v.log.Warn().Err(err).Str("queue", queueName).Msg("dead-letter routing failed; message dropped")
			continue
		}
		v.holdPending(m, &r)
		if d.Reason != queue.Rejected {
			dropCycles(&r, m)
		}
		v.forward(m, &r, false)
		if len(r.queues) == 0 {
			continue
		}
		mv := move{m: m, queues: append([]queuetype.Local(nil), r.queues...)}
		for _, t := range mv.queues {
			if !seen[t] {
				seen[t] = true
				targets = append(targets, t)
			}
		}
		moves = append(moves, mv)
	}
	return moves, targets
}

// dropCycles removes from r.queues and r.others every queue the message
// would reach again without a rejection on the way: an automatic
// dead-letter cycle, which RabbitMQ breaks by dropping the message there.
func dropCycles(r *RouteBuffers, m *message.Message) {
	deaths, _ := m.Headers()["x-death"].([]any)
	if len(deaths) == 0 {
		return
	}
	r.queues = withoutCycles(r.queues, deaths, queuetype.Local.Name)
	r.others = withoutCycles(r.others, deaths, queuetype.Queue.Name)
}

// withoutCycles keeps the queues of qs that are not a cycle, in place.
func withoutCycles[Q any](qs []Q, deaths []any, name func(Q) string) []Q {
	kept := qs[:0]
	for _, q := range qs {
		if !queue.IsCycle(name(q), deaths) {
			kept = append(kept, q)
		}
	}
	clear(qs[len(kept):])
	return kept
}

// deadLetterOne republishes a message that left queue from as a dead
// letter (a quorum queue's: Host.DeadLetter) to its dead-letter exchange's
// queues, with x-death. With done nil it is at most once: what cannot be
// routed is dropped. With done (at least once) it says whether every
// queue reached took the message (and synced it, when it is persistent);
// false (no exchange, no route, a refusal) leaves the message where it
// was for another try.
func (v *VHost) deadLetterOne(from string, s queue.Settings, m *message.Message, why queue.Reason, counters *stats.Meter, done func(ok bool)) {
	// Counted once: at most once as it leaves, at least once when its
	// targets have it.
	count := func() {
		if k, ok := stats.DeadLetterKind(string(why)); ok {
			counters.Inc(k)
			v.Counters.Inc(k)
		}
	}
	if done == nil {
		count()
	} else {
		answer := done
		done = func(ok bool) {
			if ok {
				count()
			}
			answer(ok)
		}
	}
	failed := func() {
		if done != nil {
			done(false)
		}
	}
	x, err := v.Exchange(s.DeadLetterExchange)
	if err != nil {
		failed() // at most once, a missing dead-letter exchange drops the message, as RabbitMQ
		return
	}
	dead, err := queue.DeadLettered(queue.Dead{Entry: queue.Entry{Msg: m}, Reason: why}, from, s, time.Now())
	if err != nil {
		v.log.Warn().Err(err).Str("queue", from).Msg("cannot dead-letter message")
		failed()
		return
	}
	var r RouteBuffers
	if _, err := v.route(x, dead, &r, ""); err != nil {
		v.log.Warn().Err(err).Str("queue", from).Msg("dead-letter routing failed")
		failed()
		return
	}
	held := v.holdPending(dead, &r)
	if why != queue.Rejected {
		dropCycles(&r, dead)
	}
	out := v.enqueue(dead, &r)
	f := v.forward(dead, &r, false)
	if done == nil {
		return
	}
	if out.Rejected || out.Queues == 0 && f == nil && !held {
		done(false)
		return
	}
	synced := func() {
		if out.Stored || held {
			v.AfterSync(func(err error) { done(err == nil) })
			return
		}
		done(true)
	}
	if f == nil {
		synced()
		return
	}
	f.Then(func(err error) {
		if err != nil {
			done(false)
			return
		}
		synced()
	})
}
