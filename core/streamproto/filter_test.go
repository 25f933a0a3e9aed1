package streamproto

import (
	"testing"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/protocol"
)

func TestFilterWants(t *testing.T) {
	headers, err := (&protocol.Properties{Flags: protocol.FlagHeaders, Headers: protocol.Table{message.StreamFilterHeader: "ny"}}).Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	amqp091, err := message.New("", "s", protocol.FlagHeaders, headers, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	ny, al, none := message.NewAMQP10("s", "ny", nil), message.NewAMQP10("s", "al", nil), message.NewAMQP10("s", "", nil)
	chunk := func(ms ...*message.Message) []record {
		var out []record
		for i, m := range ms {
			out = append(out, record{offset: uint64(i), m: m})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		props map[string]string
		chunk []record
		want  bool
	}{
		{"a value asked for", map[string]string{"filter.0": "ny"}, chunk(al, ny), true},
		{"none asked for", map[string]string{"filter.0": "ny"}, chunk(al, al), false},
		{"unvalued, not asked for", map[string]string{"filter.0": "ny"}, chunk(none, al), false},
		{"unvalued, asked for", map[string]string{"filter.0": "ny", "match-unfiltered": "true"}, chunk(al, none), true},
		{"match-unfiltered without an unvalued one", map[string]string{"filter.0": "tx", "match-unfiltered": "true"}, chunk(al, ny), false},
		{"several values", map[string]string{"filter.0": "tx", "filter.1": "al"}, chunk(ny, al), true},
		{"an AMQP 0-9-1 header", map[string]string{"filter.0": "ny"}, chunk(al, amqp091), true},
	} {
		f := filterOf(tc.props)
		if f == nil {
			t.Fatalf("%s: no filter of %v", tc.name, tc.props)
		}
		if got := f.wants(tc.chunk); got != tc.want {
			t.Errorf("%s: wants = %v, want %v", tc.name, got, tc.want)
		}
	}
	if f := filterOf(map[string]string{"name": "x", "match-unfiltered": "true"}); f != nil {
		t.Errorf("no filter.N property: filter %+v, want none", f)
	}
	// A filter value survives the store's decoding (message.New).
	back, err := message.New(ny.Exchange, ny.RoutingKey, ny.Flags, ny.Props, ny.Body)
	if err != nil || back.StreamFilterValue() != "ny" {
		t.Errorf("read back: %v %q", err, back.StreamFilterValue())
	}
}
