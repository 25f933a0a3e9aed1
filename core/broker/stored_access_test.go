package broker

import (
	"context"
	"testing"

	"github.com/warrenmq/warren/core/topology"
)

// Topic permissions survive a restart, each user's in each vhost one
// stored record; deleting a user or a vhost deletes theirs, in the store
// too.
func TestTopicPermissionsAreStored(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	pw := "pw"
	for _, err := range []error{
		b.PutUser("ann", &pw, nil),
		b.PutUser("bob", &pw, nil),
		func() error { _, err := b.AddVHost("v"); return err }(),
		b.SetTopicPermission("/", "ann", "amq.topic", `^{username}\.`, ".*"),
		b.SetTopicPermission("/", "ann", "events", "", "^eu"),
		b.SetTopicPermission("/", "ann", "events", "^e", "^eu"), // replaces the one before
		b.SetTopicPermission("/", "bob", "amq.topic", ".*", ".*"),
		b.SetTopicPermission("v", "ann", "amq.topic", ".*", ".*"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetTopicPermission("nowhere", "ann", "amq.topic", ".*", ".*"); err == nil {
		t.Fatal("a topic permission in a vhost that does not exist")
	}
	if err := b.SetTopicPermission("/", "ann", "", ".*", ".*"); err == nil {
		t.Fatal("a topic permission on no exchange")
	}
	if err := b.DeleteUser("bob"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteVHost("v"); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	b = testBroker(t, dir)
	got := b.Users().TopicPermissions()
	if len(got) != 2 {
		t.Fatalf("after a restart: %v", got)
	}
	g, _ := b.Users().Grant("/", "ann")
	if g.PublishTopic("amq.topic", "ann.x") != nil || g.PublishTopic("amq.topic", "bob.x") == nil ||
		g.PublishTopic("events", "e1") != nil || g.BindTopic("events", "us") == nil {
		t.Fatal("the stored topic permissions are not those set")
	}
	if err := b.PutUser("bob", &pw, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Users().TopicPermission("/", "bob", "amq.topic"); ok {
		t.Fatal("a deleted user's topic permission came back with the user")
	}
	if err := b.ClearTopicPermission("/", "ann", ""); err != nil {
		t.Fatal(err)
	}
	if err := b.ClearTopicPermission("/", "ann", ""); err == nil {
		t.Fatal("cleared what was not there")
	}
}

// A vhost's limits survive a restart; cleared, they stay cleared.
func TestVHostLimitsAreStored(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	if _, err := b.AddVHost("v"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetVHostLimits("v", topology.Limits{"max-queues": 3, "max-connections": 0}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetVHostLimits("v", topology.Limits{"max-channels": 3}); err == nil {
		t.Fatal("an unknown limit was taken")
	}
	if err := b.SetVHostLimits("nowhere", topology.Limits{"max-queues": 3}); err == nil {
		t.Fatal("limits of a vhost that does not exist")
	}
	if err := b.SetVHostMetadata("v", topology.Metadata{Description: "staging", Tags: []string{"eu"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetVHostLimits("/", topology.Limits{"max-queues": 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetVHostLimits("/", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	v, _ := b.VHost("v")
	if l := v.Limits(); len(l) != 2 || l["max-queues"] != 3 || l["max-connections"] != 0 {
		t.Fatalf("after a restart: %v", l)
	}
	if m := v.Metadata(); m.Description != "staging" || len(m.Tags) != 1 || m.Tags[0] != "eu" {
		t.Fatalf("metadata after a restart: %+v (the limits, set before it, must not have dropped it)", m)
	}
	root, _ := b.VHost("/")
	if l := root.Limits(); l != nil {
		t.Fatalf("cleared limits came back: %v", l)
	}
}

// A user's limits survive a restart and a change of their password.
func TestUserLimitsAreStored(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	pw := "pw"
	if err := b.PutUser("ann", &pw, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUserLimits("ann", map[string]int64{"max-connections": 2, "max-channels": 9}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUserLimits("ann", map[string]int64{"max-queues": 2}); err == nil {
		t.Fatal("a limit users do not have was taken")
	}
	pw2 := "pw2"
	if err := b.PutUser("ann", &pw2, []string{"management"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	u, ok := b.Users().User("ann")
	if !ok || len(u.Limits) != 2 || u.Limits["max-connections"] != 2 || u.Limits["max-channels"] != 9 {
		t.Fatalf("after a restart: %+v", u)
	}
	if _, err := b.Users().Login("ann", "pw2", false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUserLimits("ann", nil); err != nil {
		t.Fatal(err)
	}
	if u, _ := b.Users().User("ann"); len(u.Limits) != 0 {
		t.Fatalf("cleared: %v", u.Limits)
	}
}
