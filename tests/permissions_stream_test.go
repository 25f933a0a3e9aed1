package tests

import (
	"slices"
	"strings"
	"testing"

	wire "github.com/warrenmq/warren/protocol/stream"
)

// The stream protocol's door of the permission table
// (permissions_table_test.go): every command a client sends, what it
// needs, and the refusal's code (ACCESS_REFUSED) when one need is lacking.

// The stream door's fixtures, made afresh before each command.
const (
	permStream      = "perm.s"        // a stream
	permNewStream   = "perm.new-s"    // absent: creates make it
	permSuper       = "perm.ss"       // a super stream, its one partition permSuperPart
	permSuperPart   = "perm.ss-0"     //
	permNewSuper    = "perm.new-ss"   // absent
	permNewSuperPrt = "perm.new-ss-0" // absent
)

func init() {
	permNames = append(permNames, permStream, permNewStream, permSuper, permSuperPart, permNewSuper, permNewSuperPrt)
}

// streamRow is one command: what it needs (all of them), or, for the
// commands that take either of two permissions, the pair (refused only
// when both lack); do runs it as the user and returns its code.
type streamRow struct {
	op     operation
	either operation
	do     func(user, guest *rawStream) wire.ResponseCode
}

var (
	opStreamRead      = operation{{"read", "queue", permStream}}
	opStreamWrite     = operation{{"write", "queue", permStream}}
	opSuperManagement = operation{
		{"configure", "exchange", permNewSuper}, {"configure", "queue", permNewSuperPrt},
		{"write", "queue", permNewSuperPrt}, {"read", "exchange", permNewSuper},
	}
)

// streamRows covers every command a stream client sends.
var streamRows = map[string]streamRow{
	"Create": {op: operation{{"configure", "queue", permNewStream}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Create{Stream: permNewStream})
	}},
	"Delete": {op: operation{{"configure", "queue", permStream}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Delete{Stream: permStream})
	}},
	"DeclarePublisher": {op: opStreamWrite, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.DeclarePublisher{PublisherID: 1, Reference: "p", Stream: permStream})
	}},
	"QueryPublisherSequence": {op: opStreamRead, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.QueryPublisherSequence{Reference: "p", Stream: permStream})
	}},
	"Subscribe": {op: opStreamRead, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Subscribe{SubscriptionID: 1, Stream: permStream, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}, Credit: 1})
	}},
	// StoreOffset has no response: a refused one stores nothing, which
	// the guest's query shows.
	"StoreOffset": {op: opStreamRead, do: func(u, g *rawStream) wire.ResponseCode {
		u.send(&wire.StoreOffset{Reference: "r", Stream: permStream, Offset: 5})
		u.call(&wire.ExchangeCommandVersions{}) // a fence: the store went before its answer
		if g.call(&wire.QueryOffset{Reference: "r", Stream: permStream}) == wire.CodeNoOffset {
			return wire.CodeAccessRefused
		}
		return wire.CodeOK
	}},
	"QueryOffset": {op: opStreamRead, do: func(u, g *rawStream) wire.ResponseCode {
		g.send(&wire.StoreOffset{Reference: "r", Stream: permStream, Offset: 5})
		g.call(&wire.ExchangeCommandVersions{})
		return u.call(&wire.QueryOffset{Reference: "r", Stream: permStream})
	}},
	"StreamStats": {op: opStreamRead, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.StreamStats{Stream: permStream})
	}},
	"ResolveOffsetSpec": {op: opStreamRead, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.ResolveOffsetSpec{Stream: permStream, Offset: wire.OffsetSpec{Type: wire.OffsetFirst}})
	}},
	"Metadata": {either: operation{{"read", "queue", permStream}, {"write", "queue", permStream}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Metadata{Streams: []string{permStream}})
	}},
	"Route": {op: operation{{"write", "exchange", permSuper}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Route{RoutingKey: "k0", SuperStream: permSuper})
	}},
	"Partitions": {either: operation{{"read", "exchange", permSuper}, {"write", "exchange", permSuper}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.Partitions{SuperStream: permSuper})
	}},
	"CreateSuperStream": {op: opSuperManagement, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.CreateSuperStream{Name: permNewSuper, Partitions: []string{permNewSuperPrt}, BindingKeys: []string{"k0"}})
	}},
	"DeleteSuperStream": {op: operation{{"configure", "exchange", permSuper}, {"configure", "queue", permSuperPart}}, do: func(u, _ *rawStream) wire.ResponseCode {
		return u.call(&wire.DeleteSuperStream{Name: permSuper})
	}},

	// Commands that touch no resource, or none but one a command above
	// checked: a Publish goes through a publisher its declaration
	// checked, Credit and Unsubscribe through a subscription; the
	// handshake's, the connection's own.
	"Publish": {}, "DeletePublisher": {}, "Credit": {}, "Unsubscribe": {},
	"PeerProperties": {}, "SaslHandshake": {}, "SaslAuthenticate": {}, "Tune": {}, "Open": {}, "Close": {},
	"Heartbeat": {}, "ExchangeCommandVersions": {}, "ConsumerUpdate": {},
}

// serverOnly are the commands only the broker sends.
var serverOnly = []wire.Key{wire.KeyPublishConfirm, wire.KeyPublishError, wire.KeyDeliver, wire.KeyMetadataUpdate}

// TestEveryStreamCommandAsksPermissions runs streamRows as a user with
// every permission, then without each need in turn; a command of the
// protocol without a row fails it.
func TestEveryStreamCommandAsksPermissions(t *testing.T) {
	m := startMgmt(t)
	for k := wire.KeyDeclarePublisher; k <= wire.KeyResolveOffsetSpec; k++ {
		name, _, _ := strings.Cut(k.String(), " ") // "Create (0x000d)"
		if _, ok := streamRows[name]; !ok && !slices.Contains(serverOnly, k) {
			t.Errorf("stream command %s has no row in streamRows (say what it needs)", k)
		}
	}
	d := permDoor{set: m, act: m}
	d.addUsers()
	user := permUser("management")
	guest := dialStreamAs(t, m.s, "guest", "guest", m.vhost)
	if code := guest.call(&wire.Create{Stream: "perm.probe"}); code != wire.CodeOK {
		t.Fatalf("guest cannot create in the test's vhost: %#x", code)
	}
	fixtures := func() {
		d.fixtures()
		for _, q := range []string{permStream, permNewStream, permSuperPart, permNewSuperPrt} {
			m.call("DELETE", "/api/queues/"+m.v()+"/"+q, "")
		}
		for _, x := range []string{permSuper, permNewSuper} {
			m.call("DELETE", "/api/exchanges/"+m.v()+"/"+x, "")
		}
		if code := guest.call(&wire.Create{Stream: permStream}); code != wire.CodeOK {
			t.Fatalf("fixture %s: %#x", permStream, code)
		}
		if code := guest.call(&wire.CreateSuperStream{Name: permSuper, Partitions: []string{permSuperPart}, BindingKeys: []string{"k0"}}); code != wire.CodeOK {
			t.Fatalf("fixture %s: %#x", permSuper, code)
		}
	}
	names := make([]string, 0, len(streamRows))
	for name, r := range streamRows {
		if r.do != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	run := func(name string) wire.ResponseCode {
		fixtures()
		u := dialStreamAs(t, m.s, user, user, m.vhost)
		defer u.nc.Close()
		return streamRows[name].do(u, guest)
	}
	for _, name := range names {
		r := streamRows[name]
		d.grant(user, ".*", ".*", ".*")
		if code := run(name); code != wire.CodeOK {
			t.Errorf("%s with every permission: code %#x", name, code)
			continue
		}
		for _, n := range r.op {
			configure, write, read := permissionsLacking(n)
			d.grant(user, configure, write, read)
			if code := run(name); code != wire.CodeAccessRefused {
				t.Errorf("%s without %s on %s: code %#x, want ACCESS_REFUSED", name, n.perm, n.name, code)
			}
		}
		if len(r.either) > 0 {
			for _, n := range r.either {
				configure, write, read := permissionsLacking(n)
				d.grant(user, configure, write, read)
				if code := run(name); code != wire.CodeOK {
					t.Errorf("%s without %s on %s alone: code %#x, want OK", name, n.perm, n.name, code)
				}
			}
			// Without both: the user may neither read nor write the name.
			lacking := "^$"
			d.grant(user, ".*", lacking, lacking)
			if code := run(name); code != wire.CodeAccessRefused {
				t.Errorf("%s without %s: code %#x, want ACCESS_REFUSED", name, strings.Join([]string{r.either[0].perm, r.either[1].perm}, " and "), code)
			}
		}
	}
}
