package broker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// A new vhost's, user's, queue's or exchange's name is checked where the
// broker makes it, so every door (the API, warrenctl, an import, AMQP)
// refuses the same names; nothing is stored.
func TestNewNamesAreChecked(t *testing.T) {
	b := testBroker(t, t.TempDir())
	pw := "pw"
	bad := []string{"a\x00b", "rlo\u202e", "bad\xff", strings.Repeat("n", 256)}
	for _, name := range bad {
		if _, err := b.AddVHost(name); reply.As(err).Code != protocol.PreconditionFailed || !strings.Contains(err.Error(), "vhost name ") {
			t.Errorf("AddVHost(%q): %v", name, err)
		}
		if err := b.PutUser(name, &pw, nil); reply.As(err).Code != protocol.PreconditionFailed || !strings.Contains(err.Error(), "user name ") {
			t.Errorf("PutUser(%q): %v", name, err)
		}
		if err := b.PutUserHash(name, auth.HashPassword("pw"), auth.SHA256, nil); err == nil {
			t.Errorf("PutUserHash(%q) taken", name)
		}
		v, _ := b.VHost("/")
		if _, err := v.Declare(topology.QueueDef{Name: name}, false); reply.As(err).Code != protocol.PreconditionFailed {
			t.Errorf("Declare(%q): %v", name, err)
		}
		if err := v.CheckQueue(topology.QueueDef{Name: name}); err == nil {
			t.Errorf("CheckQueue(%q) taken", name)
		}
		if _, err := v.DeclareExchange(exchange.Definition{Name: name, Type: "direct"}, false); reply.As(err).Code != protocol.PreconditionFailed {
			t.Errorf("DeclareExchange(%q): %v", name, err)
		}
		if err := v.CheckExchange(exchange.Definition{Name: name, Type: "direct"}); err == nil {
			t.Errorf("CheckExchange(%q) taken", name)
		}
	}
	if len(b.VHosts()) != 1 || len(b.users.Users()) != 1 {
		t.Fatalf("stored: %q, %d users", b.VHosts(), len(b.users.Users()))
	}
	// A server-named queue's name is the broker's, and passes.
	v, _ := b.VHost("/")
	if _, err := v.Declare(topology.QueueDef{Name: ""}, false); err != nil {
		t.Fatal(err)
	}
}

// Names are checked when made, never when read back: what an older
// Warren stored opens, and can be changed and deleted.
func TestStoredNamesStillOpen(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	const vname, uname = "old\x00vhost", "old\u202euser"
	if err := b.store.PutMeta(storage.KindVHost, "", vname, protocol.Table{}); err != nil {
		t.Fatal(err)
	}
	if err := b.applyPutUser(&auth.User{Name: uname, PasswordHash: auth.HashPassword("pw"), Hashing: auth.SHA256}); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.VHost(vname); !ok {
		t.Fatalf("vhost %q did not come back: %q", vname, b.VHosts())
	}
	if _, err := b.users.Login(uname, "pw", true); err != nil {
		t.Fatalf("user %q: %v", uname, err)
	}
	pw := "new"
	if err := b.PutUser(uname, &pw, nil); err != nil {
		t.Fatalf("changing the old user's password: %v", err)
	}
	if _, err := b.AddVHost(vname); err != nil {
		t.Fatalf("adding the old vhost again: %v", err)
	}
	if err := b.DeleteUser(uname); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteVHost(vname); err != nil {
		t.Fatal(err)
	}
	if err := names.Check("vhost", vname); !errors.Is(err, names.ErrControl) {
		t.Fatal(err)
	}
}
