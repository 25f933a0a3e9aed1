package auth

import (
	"errors"
	"testing"
)

func TestTopicPermissionRules(t *testing.T) {
	s := NewStore(nil)
	set := func(vhost, user, exchange, write, read string) {
		t.Helper()
		p, err := NewTopicPermission(vhost, user, exchange, write, read)
		if err != nil {
			t.Fatal(err)
		}
		s.SetTopicPermission(vhost, user, p)
	}
	set("v", "ann", "amq.topic", `^{username}\.`, `^{vhost}\.eu\.`)
	set("v", "ann", "empty", "", "")
	set("v", "a(b", "amq.topic", `^{username}\.`, ".*") // not an expression once expanded
	g, _ := s.Grant("v", "ann")
	other, _ := s.Grant("v", "bob")
	odd, _ := s.Grant("v", "a(b")
	for _, c := range []struct {
		what   string
		err    error
		refuse *TopicRefusal
	}{
		{"own prefix", g.PublishTopic("amq.topic", "ann.x"), nil},
		{"another prefix", g.PublishTopic("amq.topic", "bob.x"), &TopicRefusal{Perm: "write", RoutingKey: "bob.x", Exchange: "amq.topic"}},
		{"bind with the vhost's prefix", g.BindTopic("amq.topic", "v.eu.#"), nil},
		{"bind with another", g.BindTopic("amq.topic", "v.us.#"), &TopicRefusal{Perm: "read", RoutingKey: "v.us.#", Exchange: "amq.topic"}},
		{"an exchange without one", g.PublishTopic("other", "anything"), nil},
		{"empty allows the empty key", g.PublishTopic("empty", ""), nil},
		{"empty allows nothing else", g.PublishTopic("empty", "a"), &TopicRefusal{Perm: "write", RoutingKey: "a", Exchange: "empty"}},
		{"another user without one", other.PublishTopic("amq.topic", "bob.x"), nil},
		{"a name that breaks the expression", odd.PublishTopic("amq.topic", "a(b.x"), &TopicRefusal{Perm: "write", RoutingKey: "a(b.x", Exchange: "amq.topic"}},
	} {
		var r *TopicRefusal
		switch {
		case c.refuse == nil && c.err != nil:
			t.Errorf("%s: %v, want allowed", c.what, c.err)
		case c.refuse != nil && !errors.As(c.err, &r):
			t.Errorf("%s: %v, want a refusal", c.what, c.err)
		case c.refuse != nil && (r.Perm != c.refuse.Perm || r.RoutingKey != c.refuse.RoutingKey || r.Exchange != c.refuse.Exchange):
			t.Errorf("%s: %+v, want %+v", c.what, r, c.refuse)
		}
	}
	want := "access to topic 'bob.x' in exchange 'amq.topic' in vhost 'v' refused for user 'ann'"
	if err := g.PublishTopic("amq.topic", "bob.x"); err == nil || err.Error() != want {
		t.Errorf("refusal text %q, want %q", err, want)
	}
	if _, err := NewTopicPermission("v", "ann", "x", "(", ".*"); err == nil {
		t.Error("a bad expression was taken")
	}

	if got := len(s.TopicPermissions()); got != 3 {
		t.Fatalf("%d listed, want 3", got)
	}
	if !s.ClearTopicPermission("v", "ann", "empty") || s.ClearTopicPermission("v", "ann", "empty") {
		t.Error("clearing one exchange's")
	}
	for _, u := range []string{"a(b", "ann"} {
		s.PutUser(&User{Name: u})
		s.DeleteUser(u)
	}
	if got := s.TopicPermissions(); len(got) != 0 {
		t.Errorf("left after their users went: %v", got)
	}
	set("w", "cat", "amq.topic", ".*", ".*")
	s.ClearVHost("w")
	if got := s.TopicPermissions(); len(got) != 0 {
		t.Errorf("left after their vhost went: %v", got)
	}
}

// The cost a publish to a topic exchange pays: none set in the broker,
// one on another exchange, one on this exchange (a regular expression).
func BenchmarkPublishTopic(b *testing.B) {
	s := NewStore(nil)
	g, _ := s.Grant("v", "ann")
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			_ = g.PublishTopic("amq.topic", "ann.orders.eu")
		}
	})
	p, _ := NewTopicPermission("v", "ann", "other", ".*", ".*")
	s.SetTopicPermission("v", "ann", p)
	b.Run("another exchange", func(b *testing.B) {
		for b.Loop() {
			_ = g.PublishTopic("amq.topic", "ann.orders.eu")
		}
	})
	p, _ = NewTopicPermission("v", "ann", "amq.topic", `^{username}\.`, ".*")
	s.SetTopicPermission("v", "ann", p)
	b.Run("this exchange", func(b *testing.B) {
		for b.Loop() {
			_ = g.PublishTopic("amq.topic", "ann.orders.eu")
		}
	})
}
