package vhost_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// failingStore refuses to store the binding whose key is failKey.
type failingStore struct {
	*storage.Store
	failKey string
}

var errDiskFull = errors.New("disk full")

func (s *failingStore) PutBinding(vhostName string, seq uint64, rec protocol.Table) error {
	if rec["routing_key"] == s.failKey {
		return errDiskFull
	}
	return s.Store.PutBinding(vhostName, seq, rec)
}

// bindAllVHost is a vhost on a store that fails the binding keyed
// failKey, with a durable exchange x and durable queues q0..q3.
func bindAllVHost(t *testing.T, failKey string) (*vhost.VHost, *storage.Store) {
	t.Helper()
	st := memStore(t)
	v := newVHost(t, vhost.Config{Store: &failingStore{Store: st, failKey: failKey}})
	mustExchange(t, v, "x", "direct", nil)
	for i := range 4 {
		mustQueue(t, v, fmt.Sprintf("q%d", i), nil)
	}
	return v, st
}

func bindingList(n int) []vhost.Binding {
	out := make([]vhost.Binding, n)
	for i := range out {
		out[i] = vhost.Binding{Source: "x", Dest: exchange.Destination{Kind: exchange.ToQueue, Name: fmt.Sprintf("q%d", i%4)}, Key: fmt.Sprintf("k%d", i)}
	}
	return out
}

// keysRouted and keysStored are the bindings' keys from x, in memory and
// in the store, in their order.
func keysRouted(v *vhost.VHost) []string {
	var out []string
	for _, b := range v.Bindings() {
		if b.Source == "x" {
			out = append(out, b.Key)
		}
	}
	return out
}

func keysStored(t *testing.T, st *storage.Store) []string {
	t.Helper()
	recs, err := st.Meta(storage.KindBinding, "/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Rec["source"] == "x" {
			out = append(out, r.Rec["routing_key"].(string))
		}
	}
	return out
}

func keys(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("k%d", i))
	}
	return out
}

// BindAll makes its list as Bind would one by one: in order, a binding
// given twice made once, every one stored and routed.
func TestBindAll(t *testing.T) {
	v, st := bindAllVHost(t, "")
	list := bindingList(1000)
	list = append(list, list[7]) // again: made once
	made, err := v.BindAll(list)
	if err != nil || made != len(list) {
		t.Fatalf("made %d of %d: %v", made, len(list), err)
	}
	if got := keysRouted(v); !slices.Equal(got, keys(0, 1000)) {
		t.Fatalf("routed %d bindings, out of order or missing", len(got))
	}
	if got := keysStored(t, st); !slices.Equal(got, keys(0, 1000)) {
		t.Fatalf("stored %d bindings, out of order or missing", len(got))
	}
	publish(t, v, "x", "k999", "routed")
	if got := ready(t, mustQueue(t, v, "q3", nil)); got != 1 {
		t.Fatalf("q3 holds %d messages, want 1", got)
	}
}

// A binding whose record cannot be stored stops the list there: the ones
// before it are stored and routed, and nothing of it or after it is left
// in the store or in memory.
func TestBindAllStopsAtAFailedWrite(t *testing.T) {
	v, st := bindAllVHost(t, "k500")
	made, err := v.BindAll(bindingList(1000))
	if made != 500 || err == nil || !strings.Contains(err.Error(), errDiskFull.Error()) {
		t.Fatalf("made %d, %v; want 500 and the store's error", made, err)
	}
	if got := keysRouted(v); !slices.Equal(got, keys(0, 500)) {
		t.Fatalf("routed %d bindings, want the first 500", len(got))
	}
	if got := keysStored(t, st); !slices.Equal(got, keys(0, 500)) {
		t.Fatalf("stored %d bindings, want the first 500", len(got))
	}
}

// A binding the checks refuse (no such queue) stops the list there too.
func TestBindAllStopsAtARefusedBinding(t *testing.T) {
	v, st := bindAllVHost(t, "")
	list := bindingList(10)
	list[6].Dest.Name = "nowhere"
	made, err := v.BindAll(list)
	if made != 6 || err == nil {
		t.Fatalf("made %d, %v; want 6 and a refusal", made, err)
	}
	if got := keysRouted(v); !slices.Equal(got, keys(0, 6)) {
		t.Fatalf("routed %v", got)
	}
	if got := keysStored(t, st); !slices.Equal(got, keys(0, 6)) {
		t.Fatalf("stored %v", got)
	}
}
