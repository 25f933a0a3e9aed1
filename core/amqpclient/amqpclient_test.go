package amqpclient

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/protocol"
)

func TestParseURI(t *testing.T) {
	for _, tc := range []struct {
		uri, vhost, redacted string
		local, user          bool
	}{
		{"amqp://", "/", "amqp://", true, false},
		{"amqp:///v1", "v1", "amqp:///v1", true, false},
		{"amqp://u:p@/v1", "v1", "amqp:///v1", true, true},
		{"amqp://u:p@host:5673/%2F", "/", "amqp://host:5673/%2F", false, true},
		{"amqps://host/a%2Fb?cacertfile=/x&verify=verify_none", "a/b", "amqps://host/a%2Fb", false, false},
	} {
		u, err := ParseURI(tc.uri)
		if err != nil {
			t.Fatalf("%s: %v", tc.uri, err)
		}
		if u.vhost != tc.vhost || u.local != tc.local || u.hasUser != tc.user || u.Redacted() != tc.redacted {
			t.Errorf("%s: vhost %q local %v user %v redacted %q", tc.uri, u.vhost, u.local, u.hasUser, u.Redacted())
		}
	}
}

// Queue and consumer arguments reach amqp091-go as its own tables, at
// every level, which its validation asks.
func TestClientTable(t *testing.T) {
	in := protocol.Table{"x-max-length": int64(5), "nested": protocol.Table{"a": []any{protocol.Table{"b": "c"}}}}
	out := Table(in)
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, ok := out["nested"].(amqp.Table)["a"].([]any)[0].(amqp.Table); !ok {
		t.Fatalf("nested table not converted: %#v", out)
	}
}

// A federation upstream's URI without a path is in the federated
// exchange's vhost; "/" and a named vhost are what they say.
func TestOrVHost(t *testing.T) {
	for uri, want := range map[string]string{"amqp://h": "down", "amqp://h/": "/", "amqp://h/up": "up", "amqp://": "down", "amqp:///x": "x"} {
		u, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.OrVHost("down").VHost(); got != want {
			t.Errorf("%s: %q, want %q", uri, got, want)
		}
	}
}
