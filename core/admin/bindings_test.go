package admin

import (
	"strings"
	"testing"

	"github.com/warrenmq/warren/protocol"
)

// properties_key as RabbitMQ 3.10.8 writes it (the keys without arguments
// are RabbitMQ's own answers, from its /api/bindings); with arguments the
// hash is Warren's, so only its shape and stability are checked.
func TestPropertiesKey(t *testing.T) {
	cases := []struct{ key, want string }{
		{"", "~"},
		{"q1", "q1"},
		{"a.#", "a.%23"},
		{"k/ey %", "k%2Fey+%25"},
		{"rk 1", "rk+1"},
		{"a~b", "a%7Eb"},
		{"-_.09AZaz", "-_.09AZaz"},
		{"é", "%C3%A9"},
		{"*.stock.#", "%2A.stock.%23"},
	}
	for _, c := range cases {
		if got := propertiesKey(c.key, nil); got != c.want {
			t.Errorf("propertiesKey(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	args := protocol.Table{"foo": "bar", "n": int64(1)}
	k := propertiesKey("k/ey %", args)
	key, hash, ok := strings.Cut(k, "~")
	if !ok || key != "k%2Fey+%25" || len(hash) != 6 || strings.ContainsAny(hash, "+/=~") {
		t.Fatalf("with arguments: %q", k)
	}
	// The same arguments in another map give the same key; others another.
	if again := propertiesKey("k/ey %", protocol.Table{"n": int64(1), "foo": "bar"}); again != k {
		t.Fatalf("unstable: %q then %q", k, again)
	}
	if other := propertiesKey("k/ey %", protocol.Table{"foo": "baz"}); other == k {
		t.Fatal("different arguments, same key")
	}
	if empty := propertiesKey("", args); !strings.HasPrefix(empty, "~") || len(empty) != 7 {
		t.Fatalf("empty key with arguments: %q", empty)
	}
}

// quotePlus as RabbitMQ's Location header writes a properties key.
func TestQuotePlus(t *testing.T) {
	for in, want := range map[string]string{"rk+1~Ajat_Q": "rk%2B1~Ajat_Q", "a.%23": "a.%2523", "~": "~", "a b": "a+b"} {
		if got := quotePlus(in); got != want {
			t.Errorf("quotePlus(%q) = %q, want %q", in, got, want)
		}
	}
}
