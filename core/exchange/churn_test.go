package exchange

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// TestChurnedRoutersRouteAsFreshOnes binds and unbinds at random on each
// built-in type, growing and shrinking the exchange many times over, and
// checks every few changes that it routes a set of messages exactly as a
// router built afresh from the bindings left does. Removal reorders the
// routers' sets; this is what says it loses or keeps nothing on the way.
func TestChurnedRoutersRouteAsFreshOnes(t *testing.T) {
	words := []string{"a", "b", "", "*", "#"}
	randomKey := func(rng *rand.Rand, words []string) string {
		ws := make([]string, rng.IntN(4))
		for i := range ws {
			ws[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(ws, ".")
	}
	randomHeaders := func(rng *rand.Rand) protocol.Table {
		tab := protocol.Table{}
		for range rng.IntN(3) {
			tab[[]string{"h", "i", "j"}[rng.IntN(3)]] = []any{"1", "2", int32(1), nil}[rng.IntN(4)]
		}
		return tab
	}
	for _, typ := range []Type{Direct{}, Fanout{}, Topic{}, Headers{}} {
		t.Run(typ.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(29, 14))
			var msgs []*message.Message
			for range 30 {
				headers := randomHeaders(rng)
				delete(headers, "h") // a void value is a binding's, not a message's
				msgs = append(msgs, newMessage(t, randomKey(rng, words[:3]), headers))
			}
			r, _ := typ.Create(Definition{Name: "churn", Type: typ.Name()})
			var bound []*Binding
			for step := range 4000 {
				grow := rng.IntN(100) < 65
				if step%800 >= 400 {
					grow = !grow
				}
				if grow || len(bound) == 0 {
					args := randomHeaders(rng)
					if rng.IntN(2) == 0 {
						args["x-match"] = "any"
					}
					b := &Binding{Destination: Destination{Name: fmt.Sprint("q", rng.IntN(50))}, Key: randomKey(rng, words), Args: args}
					if err := r.AddBinding(b); err != nil {
						t.Fatal(err)
					}
					bound = append(bound, b)
				} else {
					i := rng.IntN(len(bound))
					if err := r.RemoveBindings([]*Binding{bound[i]}); err != nil {
						t.Fatal(err)
					}
					bound = slices.Delete(bound, i, i+1)
				}
				if step%25 != 0 {
					continue
				}
				fresh, _ := typ.Create(Definition{Name: "fresh", Type: typ.Name()})
				for _, b := range bound {
					if err := fresh.AddBinding(b); err != nil {
						t.Fatal(err)
					}
				}
				for _, m := range msgs {
					if got, want := routed(t, r, m), routed(t, fresh, m); !slices.Equal(got, want) {
						t.Fatalf("step %d, key %q: the churned router routes to %v, a fresh one to %v", step, m.RoutingKey, got, want)
					}
				}
			}
		})
	}
}

// routed names the distinct bindings r routes m to, sorted.
func routed(t *testing.T, r Router, m *message.Message) []string {
	t.Helper()
	var res Result
	if err := r.Route(m, &res); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range res.Bindings {
		out = append(out, fmt.Sprintf("%s %q %v", b.Destination.Name, b.Key, b.Args))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
