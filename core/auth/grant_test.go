package auth

import (
	"errors"
	"testing"

	"github.com/warrenmq/warren/protocol"
)

func TestGrantRules(t *testing.T) {
	// own.* may be configured, written and read; pub.* only written;
	// src.* only read.
	p, err := NewPermission(`^own\.`, `^(own|pub)\.`, `^(own|src)\.`)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStore(nil)
	s.SetPermission("v", "u", p)
	g, ok := s.Grant("v", "u")
	if !ok || !g.Permitted() {
		t.Fatal("no grant for u in v")
	}
	dlx := func(name string) protocol.Table { return protocol.Table{"x-dead-letter-exchange": name} }
	ae := func(name string) protocol.Table { return protocol.Table{"alternate-exchange": name} }
	for _, c := range []struct {
		what  string
		check error
		want  *Refusal // nil: allowed
	}{
		{"declare own queue", g.DeclareQueue("own.q", nil, true), nil},
		{"declare other queue", g.DeclareQueue("q", nil, true), &Refusal{Perm: "configure", Kind: KindQueue, Name: "q"}},
		{"redeclare other queue", g.DeclareQueue("q", nil, false), &Refusal{Perm: "configure", Kind: KindQueue, Name: "q"}},
		{"new queue, writable DLX", g.DeclareQueue("own.q", dlx("pub.x"), true), nil},
		{"new queue, DLX not writable", g.DeclareQueue("own.q", dlx("src.x"), true), &Refusal{Perm: "write", Kind: KindExchange, Name: "src.x"}},
		{"new queue, default exchange as DLX", g.DeclareQueue("own.q", dlx(""), true), &Refusal{Perm: "write", Kind: KindExchange, Name: "amq.default"}},
		{"redeclared queue, its DLX not asked", g.DeclareQueue("own.q", dlx("src.x"), false), nil},
		{"DLX of a type the vhost refuses", g.DeclareQueue("own.q", protocol.Table{"x-dead-letter-exchange": int32(1)}, true), nil},
		{"delete own queue", g.DeleteQueue("own.q"), nil},
		{"delete other queue", g.DeleteQueue("src.q"), &Refusal{Perm: "configure", Kind: KindQueue, Name: "src.q"}},
		{"read src queue", g.ReadQueue("src.q"), nil},
		{"read pub queue", g.ReadQueue("pub.q"), &Refusal{Perm: "read", Kind: KindQueue, Name: "pub.q"}},
		{"declare own exchange", g.DeclareExchange("own.x", nil, true), nil},
		{"new exchange, writable AE", g.DeclareExchange("own.x", ae("pub.x"), true), nil},
		{"new exchange, AE not writable", g.DeclareExchange("own.x", ae("other"), true), &Refusal{Perm: "write", Kind: KindExchange, Name: "other"}},
		{"redeclared exchange, its AE not asked", g.DeclareExchange("own.x", ae("other"), false), nil},
		{"delete other exchange", g.DeleteExchange("pub.x"), &Refusal{Perm: "configure", Kind: KindExchange, Name: "pub.x"}},
		{"bind src exchange to pub queue", g.Bind("src.x", KindQueue, "pub.q"), nil},
		{"bind into a queue not writable", g.Bind("src.x", KindQueue, "src.q"), &Refusal{Perm: "write", Kind: KindQueue, Name: "src.q"}},
		{"bind from an exchange not readable", g.Bind("pub.x", KindExchange, "own.x"), &Refusal{Perm: "read", Kind: KindExchange, Name: "pub.x"}},
		{"bind from the default exchange", g.Bind("", KindQueue, "own.q"), &Refusal{Perm: "read", Kind: KindExchange, Name: "amq.default"}},
		{"publish to pub exchange", g.Publish("pub.x"), nil},
		{"publish to the default exchange", g.Publish(""), &Refusal{Perm: "write", Kind: KindExchange, Name: "amq.default"}},
		{"read held of src exchange", g.ReadHeld("src.x"), nil},
		{"read held of pub exchange", g.ReadHeld("pub.x"), &Refusal{Perm: "read", Kind: KindExchange, Name: "pub.x"}},
	} {
		if c.want == nil {
			if c.check != nil {
				t.Errorf("%s: %v, want allowed", c.what, c.check)
			}
			continue
		}
		c.want.User, c.want.VHost = "u", "v"
		var got *Refusal
		if !errors.As(c.check, &got) || *got != *c.want {
			t.Errorf("%s: %v, want %+v", c.what, c.check, *c.want)
		}
	}
	if r := g.DeleteQueue("src.q"); r.Error() != "access to queue 'src.q' in vhost 'v' refused for user 'u'" {
		t.Errorf("refusal text %q", r)
	}
}

func TestNoPermissionInTheVHostAllowsNothing(t *testing.T) {
	s := NewStore(nil)
	all, _ := NewPermission(".*", ".*", ".*")
	s.SetPermission("other", "u", all)
	g, ok := s.Grant("v", "u")
	if ok || g.Permitted() {
		t.Fatal("a grant in a vhost without a permission")
	}
	for _, err := range []error{g.DeclareQueue("q", nil, false), g.ReadQueue("q"), g.Publish("x"), g.Bind("x", KindQueue, "q")} {
		if err == nil {
			t.Error("allowed without a permission")
		}
	}
	var zero Grant
	if zero.Publish("x") == nil {
		t.Error("the zero grant allows a publish")
	}
}

// The publish path asks Publish for every message.
func TestAllowedChecksAllocateNothing(t *testing.T) {
	p, _ := NewPermission(".*", `^app\.`, ".*")
	g := Grant{User: "u", VHost: "v", perm: p}
	if n := testing.AllocsPerRun(100, func() {
		if g.Publish("app.x") != nil || g.ReadQueue("q") != nil {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("%v allocations per allowed check, want 0", n)
	}
}
