package exchange

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

// TestHeadersIndexAgreesWithScan binds random header bindings, removes
// some, and routes random messages, checking each time that Route's answer
// (through the index of anchors, reading the headers in place) is what
// testing every binding against the decoded headers gives. The messages'
// headers may name a key twice, which only the decoded table's last entry
// keeps.
func TestHeadersIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "x-t"}
	values := []any{"1", "2", []byte("1"), int32(1), int64(2), 1.0, nil, true}
	randomTable := func(maxLen int) protocol.Table {
		tab := protocol.Table{}
		for range rng.IntN(maxLen + 1) {
			tab[names[rng.IntN(len(names))]] = values[rng.IntN(len(values))]
		}
		return tab
	}
	modes := []any{nil, "all", "any", "all-with-x", "any-with-x"}

	r, _ := Headers{}.Create(Definition{Name: "h", Type: "headers"})
	var bound []*Binding
	for round := range 200 {
		for range 5 {
			args := randomTable(3)
			if mode := modes[rng.IntN(len(modes))]; mode != nil {
				args["x-match"] = mode
			}
			b := &Binding{Destination: Destination{Name: fmt.Sprint("q", len(bound))}, Args: args}
			if err := r.AddBinding(b); err != nil {
				t.Fatal(err)
			}
			bound = append(bound, b)
		}
		if round%3 == 0 {
			i := rng.IntN(len(bound))
			if err := r.RemoveBindings([]*Binding{bound[i]}); err != nil {
				t.Fatal(err)
			}
			bound = append(bound[:i], bound[i+1:]...)
		}
		for range 20 {
			var entries []any // key, value, key, value...
			for range rng.IntN(5) {
				entries = append(entries, names[rng.IntN(len(names))], values[rng.IntN(len(values))])
			}
			m := messageWithEntries(t, entries...)
			var res Result
			if err := r.Route(m, &res); err != nil {
				t.Fatal(err)
			}
			got := destinations(res.Bindings)
			var want []string
			for _, b := range bound {
				if matchesDecoded(b, m.Headers()) {
					want = append(want, b.Destination.Name)
				}
			}
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("round %d, headers %v: routed to %v, want %v", round, entries, got, want)
			}
		}
	}
}

// messageWithEntries is a message whose headers table holds entries (key,
// value, key, value...) in that order, repeated keys and all, which a
// protocol.Table cannot express.
func messageWithEntries(t *testing.T, entries ...any) *message.Message {
	t.Helper()
	table := []byte{0, 0, 0, 0}
	for i := 0; i < len(entries); i += 2 {
		key := entries[i].(string)
		table = append(table, byte(len(key)))
		table = append(table, key...)
		var err error
		if table, err = protocol.AppendFieldValue(table, entries[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	binary.BigEndian.PutUint32(table, uint32(len(table)-4))
	m, err := message.New("x", "", protocol.FlagHeaders, table, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// matchesDecoded is the headers exchange's rule written out plainly over a
// decoded table: the oracle Route is checked against.
func matchesDecoded(b *Binding, headers protocol.Table) bool {
	mode, _ := b.Args["x-match"].(string)
	withX := strings.HasSuffix(mode, "-with-x")
	tested, matched := 0, 0
	for k, v := range b.Args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		tested++
		if hv, ok := headers[k]; ok && (v == nil || ValuesEqual(v, hv)) {
			matched++
		}
	}
	if strings.HasPrefix(mode, "any") {
		return matched > 0
	}
	return matched == tested
}

// destinations is the sorted names bs lead to, each once; it fails the
// comparison on a binding returned twice, which Route of headers never does.
func destinations(bs []*Binding) []string {
	var names []string
	for _, b := range bs {
		names = append(names, b.Destination.Name)
	}
	sort.Strings(names)
	return names
}

// BenchmarkHeadersRoute1k routes through 1,000 bindings, one of which
// matches: "all" bindings that each name the same region and their own key
// (the warrenperf headers1k load), and "any" bindings that each name their
// own key and an alias. The "many" cases send the headers a Celery task
// message carries beside the two that route it.
func BenchmarkHeadersRoute1k(b *testing.B) {
	celery := protocol.Table{
		"lang": "py", "task": "tasks.add", "id": "0b6c2f5e-7a8d-4d1e-9f3a-2c4b5d6e7f80",
		"shadow": nil, "eta": nil, "expires": nil, "group": nil, "group_index": nil,
		"retries": int32(0), "timelimit": []any{nil, nil},
		"root_id": "0b6c2f5e-7a8d-4d1e-9f3a-2c4b5d6e7f80", "parent_id": nil,
		"argsrepr": "(2, 2)", "kwargsrepr": "{}", "origin": "gen4242@worker-1",
		"ignore_result": false,
	}
	for _, bc := range []struct {
		name, mode string
		extra      protocol.Table
	}{{"all", "all", nil}, {"any", "any", nil}, {"all-many", "all", celery}, {"any-many", "any", celery}} {
		b.Run(bc.name, func(b *testing.B) {
			r, _ := Headers{}.Create(Definition{Name: "bench", Type: "headers"})
			for i := range 1000 {
				args := protocol.Table{"x-match": bc.mode, "key": fmt.Sprint("k", i)}
				if bc.mode == "all" {
					args["region"] = "emea"
				} else {
					args["alias"] = fmt.Sprint("a", i)
				}
				if err := r.AddBinding(&Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Args: args}); err != nil {
					b.Fatal(err)
				}
			}
			headers := protocol.Table{"region": "emea", "key": "k42"}
			for k, v := range bc.extra {
				headers[k] = v
			}
			p := protocol.Properties{Flags: protocol.FlagHeaders, Headers: headers}
			raw, err := p.Append(nil)
			if err != nil {
				b.Fatal(err)
			}
			var res Result
			b.ReportAllocs()
			for b.Loop() {
				// A fresh message each time, as each publish is.
				m, err := message.New("bench", "", p.Flags, raw, nil)
				if err != nil {
					b.Fatal(err)
				}
				res.Reset()
				_ = r.Route(m, &res)
				if len(res.Bindings) != 1 {
					b.Fatalf("routed to %d bindings", len(res.Bindings))
				}
			}
		})
	}
}

// TestHeadersAnchorAvoidsSharedValues binds "all" bindings that share
// their first argument's value and differ in another: each is indexed
// under the argument that tells it apart, so a message's headers lead to
// the one binding it matches rather than to all of them.
func TestHeadersAnchorAvoidsSharedValues(t *testing.T) {
	r, _ := Headers{}.Create(Definition{Name: "h", Type: "headers"})
	for i := range 100 {
		args := protocol.Table{"a-region": "emea", "key": fmt.Sprint("k", i)}
		if err := r.AddBinding(&Binding{Destination: Destination{Name: fmt.Sprint("q", i)}, Args: args}); err != nil {
			t.Fatal(err)
		}
	}
	hr := r.(*headersRouter)
	if set := hr.anchored["a-region"]["emea"]; set != nil && set.Len() > 1 {
		t.Errorf("%d bindings indexed under the value they all share", set.Len())
	}
	var res Result
	if err := r.Route(newMessage(t, "", protocol.Table{"a-region": "emea", "key": "k42"}), &res); err != nil {
		t.Fatal(err)
	}
	if got := destinations(res.Bindings); fmt.Sprint(got) != "[q42]" {
		t.Errorf("routed to %v, want [q42]", got)
	}
}
