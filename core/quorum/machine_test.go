package quorum

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestMachine runs the data-driven cases in testdata
// (github.com/cockroachdb/datadriven; -rewrite rewrites their expected
// output): each file is one queue's life, a command per entry, and the
// effects it asked for.
//
//	config maxlen=N maxbytes=N overflow=reject-publish limit=N dlx sac at-least-once [live]
//	dead-lettered ids=(1, 2)
//	enqueue id=N [size=N] [expires=MS]
//	checkout C [credit=N] [noack] [priority=N]
//	get C [noack]
//	settle C ack|requeue|discard ids=(1, 2)
//	cancel C | down C | expire now=MS | purge | state
//	suspect node=HEX | resume C...
func TestMachine(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		m := New(DefaultConfig())
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var effects []Effect
			name := ""
			if len(d.CmdArgs) > 0 {
				name = d.CmdArgs[0].Key
			}
			switch d.Cmd {
			case "config":
				cfg := DefaultConfig()
				cfg.MaxLength = argOr(t, d, "maxlen", int64(Unlimited))
				cfg.MaxBytes = argOr(t, d, "maxbytes", int64(Unlimited))
				cfg.DeliveryLimit = argOr(t, d, "limit", int64(Unlimited))
				if argOr(t, d, "overflow", "") == "reject-publish" {
					cfg.Overflow = RejectPublish
				}
				cfg.DeadLetter, cfg.SingleActive, cfg.AtLeastOnce = d.HasArg("dlx"), d.HasArg("sac"), d.HasArg("at-least-once")
				if d.HasArg("live") {
					effects = m.Configure(cfg) // a policy changed: the state stays
					break
				}
				m = New(cfg)
				return "ok"
			case "enqueue":
				effects = m.Enqueue(Msg{ID: argOr(t, d, "id", uint64(0)), Size: argOr(t, d, "size", int64(1)), ExpiresAt: argOr(t, d, "expires", int64(0))})
			case "checkout":
				effects = m.Checkout(ConsumerID(name), argOr(t, d, "credit", 0), d.HasArg("noack"), argOr(t, d, "priority", 0))
			case "get":
				effects = m.Get(ConsumerID(name), d.HasArg("noack"))
			case "settle":
				how := map[string]How{"ack": Ack, "requeue": Requeue, "discard": Discard}[d.CmdArgs[1].Key]
				effects = m.Settle(ConsumerID(name), how, idsOf(t, d))
			case "dead-lettered":
				effects = m.DeadLettered(idsOf(t, d))
			case "cancel":
				effects = m.Cancel(ConsumerID(name))
			case "down":
				effects = m.Down(ConsumerID(name))
			case "suspect":
				node, err := strconv.ParseUint(argOr(t, d, "node", ""), 16, 64)
				if err != nil {
					d.Fatalf(t, "node: %v", err)
				}
				effects = m.Suspect(node)
			case "resume":
				ids := make([]ConsumerID, len(d.CmdArgs))
				for i, a := range d.CmdArgs {
					ids[i] = ConsumerID(a.Key)
				}
				effects = m.Resume(ids)
			case "expire":
				effects = m.Expire(argOr(t, d, "now", int64(0)))
			case "purge":
				return strconv.Itoa(m.Purge())
			case "state":
				return m.String()
			default:
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			if len(effects) == 0 {
				return "(nothing)"
			}
			lines := make([]string, len(effects))
			for i, e := range effects {
				lines[i] = e.String()
			}
			return strings.Join(lines, "\n")
		})
	})
}

// TestMachineKeepsEveryMessageOnce applies random entries and checks the
// invariant that every message is in one place: ready, checked out to one
// consumer, or gone through an effect (or an ack), never two nor none.
func TestMachineKeepsEveryMessageOnce(t *testing.T) {
	for seed := range int64(50) {
		rng := rand.New(rand.NewSource(seed))
		cfg := DefaultConfig()
		if rng.Intn(2) == 0 {
			cfg.MaxLength = int64(rng.Intn(5) + 1)
		}
		if rng.Intn(2) == 0 {
			cfg.Overflow = RejectPublish
		}
		if rng.Intn(2) == 0 {
			cfg.DeliveryLimit = int64(rng.Intn(3))
		}
		cfg.SingleActive = rng.Intn(3) == 0
		m := New(cfg)
		where := map[uint64]string{} // message -> consumer holding it, "ready" or "gone"
		holders := []ConsumerID{"a", "b", "c"}
		apply := func(effects []Effect) {
			for _, e := range effects {
				switch e.Kind {
				case Deliver:
					if where[e.Msg.ID] != "ready" {
						t.Fatalf("seed %d: m%d delivered from %q", seed, e.Msg.ID, where[e.Msg.ID])
					}
					where[e.Msg.ID] = string(e.Consumer)
				default:
					where[e.Msg.ID] = "gone"
				}
			}
		}
		var next uint64
		for range 400 {
			c := holders[rng.Intn(len(holders))]
			switch rng.Intn(6) {
			case 0, 1:
				next++
				where[next] = "ready"
				apply(m.Enqueue(Msg{ID: next, Size: 1}))
			case 2:
				apply(m.Checkout(c, rng.Intn(3), rng.Intn(4) == 0, rng.Intn(3)-1))
			case 3:
				var held []uint64
				for id, w := range where {
					if w == string(c) {
						held = append(held, id)
					}
				}
				how := How(rng.Intn(3))
				// A requeue sends the message back to ready before any
				// redelivery the same entry makes.
				for _, id := range held {
					if how == Ack {
						where[id] = "gone"
					} else {
						where[id] = "ready"
					}
				}
				apply(m.Settle(c, how, held))
				if how == Discard {
					for _, id := range held {
						if where[id] == "ready" {
							t.Fatalf("seed %d: discarded m%d not dead", seed, id)
						}
					}
				}
			case 4:
				for id, w := range where {
					if w == string(c) {
						where[id] = "ready"
					}
				}
				apply(m.Down(c))
			case 5:
				apply(m.Cancel(c))
			}
			ready, out := 0, 0
			for _, w := range where {
				switch w {
				case "ready":
					ready++
				case "gone":
				default:
					out++
				}
			}
			if n, _ := m.Ready(); n != ready || m.CheckedOut() != out {
				t.Fatalf("seed %d: machine has %d ready and %d out, the effects say %d and %d\n%s", seed, n, m.CheckedOut(), ready, out, m)
			}
		}
	}
}

// idsOf reads a command's ids=(1, 2, 3).
func idsOf(t *testing.T, d *datadriven.TestData) []uint64 {
	t.Helper()
	var ids []uint64
	d.ScanArgs(t, "ids", &ids)
	return ids
}

// argOr returns the value of d's argument key scanned into a T, or def
// when d has no such argument.
func argOr[T any](t testing.TB, d *datadriven.TestData, key string, def T) T {
	t.Helper()
	d.MaybeScanArgs(t, key, &def)
	return def
}
