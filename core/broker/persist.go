package broker

import (
	"fmt"
	"sort"
	"time"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/storage"
)

// openStore opens the data directory and brings back what it holds, in an
// order where everything finds what it refers to: recovery of the message
// index first (keeping only durable queues' entries), then vhosts, users
// and permissions, and per vhost its policies, exchanges, queues with their
// messages, and bindings in creation order, then the vhosts' parameters.
// A data directory that has never held a vhost or a user gets the
// configured defaults, stored.
func (b *Broker) openStore() error {
	cfg := b.cfg.Storage
	sync := storage.SyncAlways
	if cfg.Sync == "never" {
		sync = storage.SyncNever
	}
	walDamage := storage.WALDamageRefuse
	if cfg.WALDamage == "truncate" {
		walDamage = storage.WALDamageTruncate
	}
	start := time.Now()
	st, err := storage.Open(cfg.DataDir, storage.Options{Sync: sync, SyncInterval: time.Duration(cfg.SyncInterval),
		WALDamage: walDamage, Logger: b.log, CacheSize: int64(cfg.CacheSize), BodyLogMin: bodyLogMin(cfg.BodyLogMin)})
	if err != nil {
		return err
	}
	b.store = st
	if b.cfg.Cluster.Enabled() {
		// The node's identity is the data directory's; its groups are
		// made before the node starts, since quorum queues and streams
		// restored from the store start their members first, and the
		// node then carries their messages.
		id, err := cluster.Identity(st, b.cfg.Cluster.NodeName)
		if err != nil {
			st.Close()
			b.store = nil
			return fmt.Errorf("data directory %s: recording the node's id: %w", cfg.DataDir, err)
		}
		b.groups.Store(cluster.NewNodeGroups(id, b.log))
	}
	if err := b.restore(start); err != nil {
		b.stopGroups()
		st.Close()
		b.store = nil
		return err
	}
	return nil
}

func (b *Broker) restore(start time.Time) error {
	st := b.store
	queues, err := st.Meta(storage.KindQueue, "")
	if err != nil {
		return err
	}
	// Every queue record is read before recovery keeps the messages of
	// those it names: one this release cannot read stops the start
	// rather than have its messages dropped as a gone queue's.
	queueRecs := make([]storedQueue, len(queues))
	keep := make(map[uint64]bool, len(queues))
	for i, q := range queues {
		rec, err := topology.ReadQueueRecord(q.Rec)
		if err != nil {
			return fmt.Errorf("queue '%s' in vhost '%s': %w", q.Name, q.VHost, err)
		}
		queueRecs[i] = storedQueue{vhost: q.VHost, name: q.Name, rec: rec}
		if rec.StoreID != 0 {
			keep[rec.StoreID] = true
		}
	}
	stats, err := st.Recover(keep)
	if err != nil {
		return fmt.Errorf("recovering the message store: %w", err)
	}

	vhosts, err := st.Meta(storage.KindVHost, "")
	if err != nil {
		return err
	}
	users, err := st.Meta(storage.KindUser, "")
	if err != nil {
		return err
	}
	if len(vhosts) == 0 && len(users) == 0 {
		return b.firstBoot()
	}
	if err := b.restoreGlobalParameters(); err != nil {
		return err
	}
	for _, u := range users {
		rec, err := readUserRecord(u.Rec)
		if err != nil {
			return fmt.Errorf("user '%s': %w", u.Name, err)
		}
		b.users.PutUser(rec.user(u.Name))
	}
	for _, vr := range vhosts {
		rec, err := readVHostRecord(vr.Rec)
		if err != nil {
			return fmt.Errorf("vhost '%s': %w", vr.Name, err)
		}
		if err := b.restoreVHost(vr.Name, queueRecs, stats.Queues); err != nil {
			return fmt.Errorf("restoring vhost %q: %w", vr.Name, err)
		}
		if v, ok := b.VHost(vr.Name); ok {
			v.SetLimits(rec.Limits)
			if rec.Description != "" || len(rec.Tags) > 0 {
				v.SetMetadata(topology.Metadata{Description: rec.Description, Tags: rec.Tags})
			}
		}
	}
	if err := b.restoreVHostParameters(); err != nil {
		return err
	}
	held, err := b.restoreHeld()
	if err != nil {
		return fmt.Errorf("reading held messages: %w", err)
	}
	perms, err := st.Meta(storage.KindPermission, "")
	if err != nil {
		return err
	}
	for _, p := range perms {
		rec, err := readPermissionRecord(p.Rec)
		if err != nil {
			return fmt.Errorf("permission of user '%s' in vhost '%s': %w", p.Name, p.VHost, err)
		}
		perm, err := auth.NewPermission(rec.Configure, rec.Write, rec.Read)
		if err != nil {
			b.log.Warn().Err(err).Str("vhost", p.VHost).Str("user", p.Name).Msg("stored permission ignored")
			continue
		}
		b.users.SetPermission(p.VHost, p.Name, perm)
	}
	topicPerms, err := st.Meta(storage.KindTopicPermission, "")
	if err != nil {
		return err
	}
	for _, p := range topicPerms {
		rec, err := readTopicPermissionsRecord(p.Rec)
		if err != nil {
			return fmt.Errorf("topic permissions of user '%s' in vhost '%s': %w", p.Name, p.VHost, err)
		}
		for _, e := range rec.Exchanges {
			perm, err := auth.NewTopicPermission(p.VHost, p.Name, e.Exchange, e.Write, e.Read)
			if err != nil {
				b.log.Warn().Err(err).Str("vhost", p.VHost).Str("user", p.Name).Str("exchange", e.Exchange).Msg("stored topic permission ignored")
				continue
			}
			b.users.SetTopicPermission(p.VHost, p.Name, perm)
		}
	}
	ev := b.log.Info()
	if time.Since(start) > time.Second {
		ev = b.log.Info().Dur("elapsed", time.Since(start))
	}
	ev.Int("vhosts", len(vhosts)).Int("queues", len(queues)).Int64("messages", stats.Entries).Int64("held", held.kept).
		Int64("transient_dropped", stats.Transient).Int64("held_transient_dropped", held.transient).
		Int64("held_orphaned_dropped", held.orphaned).Msg("restored from the data directory")
	return nil
}

// heldFigures is what became of the held messages found at start.
type heldFigures struct {
	kept      int64 // persistent messages of durable exchanges: held again
	transient int64 // transient ones (not persistent, or of a non-durable exchange): dropped
	orphaned  int64 // of an exchange or vhost that is gone: dropped
}

// restoreHeld moves the delay store's first-format records to the current
// one, then counts every exchange's held messages (keys only: the vhosts
// read them as they come due). A transient held message was written to the
// store without a sync only to keep it out of memory; it does not survive
// a restart, like a transient message in a queue, and is dropped here and
// counted. (After a crash of the machine, rather than of the process, some
// of them may never have reached the disk: those are not counted.)
func (b *Broker) restoreHeld() (heldFigures, error) {
	st := b.store
	var f heldFigures
	moved := 0
	err := st.ScanHeld(func(due int64, seq uint64, rec []byte) bool {
		txn := st.Begin()
		txn.DeleteHeld(due, seq)
		if vh, x, ok := hold.LegacyNames(rec); ok {
			txn.PutHeldAt(storage.HeldSpan{VHost: vh, Exchange: x}, due, seq, rec)
			moved++
		} else {
			b.log.Warn().Int64("due", due).Msg("held message of the first format unreadable; dropped")
			f.orphaned++
		}
		txn.Commit(false, nil)
		return true
	})
	if err != nil {
		return f, err
	}
	if moved > 0 {
		b.log.Info().Int("messages", moved).Msg("held messages moved to the per-exchange delay store")
	}
	drop := st.Begin()
	err = st.HeldSpans(func(sp storage.HeldSpan, n int64) {
		v, found := b.VHost(sp.VHost)
		if found {
			_, err := v.Exchange(sp.Exchange)
			found = err == nil
		}
		switch {
		case !found:
			b.log.Warn().Str("vhost", sp.VHost).Str("exchange", sp.Exchange).Int64("messages", n).
				Msg("held messages of an exchange that is gone dropped")
			f.orphaned += n
			drop.DeleteHeldSpan(sp)
		case sp.Transient:
			f.transient += n
			drop.DeleteHeldSpan(sp)
		default:
			v.Held().Restore(sp.Exchange, int(n))
			f.kept += n
		}
	})
	if err != nil {
		drop.Abort()
		return f, err
	}
	return f, drop.CommitWait()
}

// firstBoot stores the configured default vhost, user and permission.
func (b *Broker) firstBoot() error {
	d := b.cfg.Defaults
	if _, err := b.AddVHost(d.VHost); err != nil {
		return err
	}
	pw := d.Password // config.Validate refuses an empty user or password
	if err := b.PutUser(d.User, &pw, []string{"administrator"}); err != nil {
		return err
	}
	if err := b.SetPermission(d.VHost, d.User, ".*", ".*", ".*"); err != nil {
		return err
	}
	b.log.Info().Str("vhost", d.VHost).Str("user", d.User).Msg("new data directory: created the default vhost and user")
	return nil
}

// storedQueue is a queue's record, read, with the store's key.
type storedQueue struct {
	vhost, name string
	rec         topology.QueueRecord
}

func (b *Broker) restoreVHost(name string, queues []storedQueue, levels map[uint64][]storage.Level) error {
	v := b.newVHost(name)
	st := b.store
	for _, kind := range []storage.Kind{storage.KindPolicy, storage.KindOperatorPolicy} {
		pols, err := st.Meta(kind, name)
		if err != nil {
			return err
		}
		for _, p := range pols {
			rec, err := topology.ReadPolicyRecord(p.Rec)
			if err != nil {
				return fmt.Errorf("%s '%s': %w", kind, p.Name, err)
			}
			pol, err := rec.Policy(p.Name)
			if err != nil {
				b.log.Warn().Err(err).Str("vhost", name).Stringer("kind", kind).Msg("stored policy ignored")
				continue
			}
			pol.Operator = kind == storage.KindOperatorPolicy
			v.RestorePolicy(pol)
		}
	}
	exchanges, err := st.Meta(storage.KindExchange, name)
	if err != nil {
		return err
	}
	for _, x := range exchanges {
		rec, err := topology.ReadExchangeRecord(x.Rec)
		if err != nil {
			return fmt.Errorf("exchange '%s': %w", x.Name, err)
		}
		v.RestoreExchange(rec.Definition(name, x.Name))
	}
	for _, q := range queues {
		if q.vhost != name {
			continue
		}
		if err := v.RestoreQueue(q.rec.Def(q.name), q.rec.StoreID, levels[q.rec.StoreID]); err != nil {
			b.log.Error().Err(err).Str("vhost", name).Str("queue", q.name).Msg("queue could not be restored")
		}
	}
	binds, err := st.Meta(storage.KindBinding, name)
	if err != nil {
		return err
	}
	sort.Slice(binds, func(i, j int) bool { return binds[i].Seq < binds[j].Seq })
	for _, bd := range binds {
		rec, err := topology.ReadBindingRecord(bd.Rec)
		if err != nil {
			return fmt.Errorf("binding %d: %w", bd.Seq, err)
		}
		if err := v.RestoreBinding(bd.Seq, rec.Source, rec.Destination, rec.Key, rec.Args); err != nil {
			b.log.Warn().Err(err).Str("vhost", name).Str("source", rec.Source).Str("destination", rec.Destination.Name).Msg("stored binding could not be restored")
		}
	}
	return nil
}

// bodyLogMin is storage.body_log_min as the store takes it: 0 turns the
// body log off, which the store spells -1.
func bodyLogMin(n config.Size) int {
	if n == 0 {
		return -1
	}
	return int(n)
}
