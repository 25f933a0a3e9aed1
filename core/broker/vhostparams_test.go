package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// fakeComponent stands for a registered component (shovel): a value
// needs the key "src-uri".
type fakeComponent struct {
	mu    sync.Mutex
	users []string // the acting users Check was given
}

func (f *fakeComponent) Check(vhost, name string, value any, user string) error {
	f.mu.Lock()
	f.users = append(f.users, user)
	f.mu.Unlock()
	if t, isObject := value.(protocol.Table); isObject { // a list is taken as it is
		if _, ok := t["src-uri"]; !ok {
			return errors.New(`Key "src-uri" not found in fake`)
		}
	}
	return nil
}

func (f *fakeComponent) lastUser() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.users) == 0 {
		return "<none>"
	}
	return f.users[len(f.users)-1]
}

func mustAddVHost(t testing.TB, b *Broker, name string) {
	t.Helper()
	if _, err := b.AddVHost(name); err != nil {
		t.Fatal(err)
	}
}

// paramNames lists parameters as vhost/component/name=value JSON.
func paramNames(ps []VHostParameter) []string {
	var out []string
	for _, p := range ps {
		v, _ := json.Marshal(p.Value)
		out = append(out, fmt.Sprintf("%s/%s/%s=%s", p.VHost, p.Component, p.Name, v))
	}
	return out
}

func TestVHostParametersSetListClear(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	fake := &fakeComponent{}
	b.RegisterParameterComponent("fake", fake)
	b.RegisterParameterComponent("other", &fakeComponent{})
	if got := b.ParameterComponents(); !reflect.DeepEqual(got, []string{"fake", "federation-upstream", "federation-upstream-set", "other", "shovel"}) {
		t.Fatalf("components %v", got)
	}
	mustAddVHost(t, b, "v")

	value := protocol.Table{"src-uri": "amqp://", "n": int64(3), "f": 1.5, "ok": true,
		"list": []any{"a", int64(1)}, "nested": protocol.Table{"k": "v"}}
	created, err := b.SetVHostParameter("v", "fake", "s1", value, "alice")
	if err != nil || !created {
		t.Fatalf("set: %v, created %v", err, created)
	}
	if fake.lastUser() != "alice" {
		t.Fatalf("Check was given user %q", fake.lastUser())
	}
	if created, err := b.SetVHostParameter("v", "fake", "s1", value, ""); err != nil || created {
		t.Fatalf("the same again: %v, created %v", err, created)
	}
	for _, p := range []struct{ vh, comp, name string }{{"/", "fake", "b"}, {"/", "other", "a"}, {"v", "fake", "a"}} {
		if _, err := b.SetVHostParameter(p.vh, p.comp, p.name, protocol.Table{"src-uri": p.name}, ""); err != nil {
			t.Fatal(err)
		}
	}
	// A value may be a list, as a federation-upstream-set's is.
	set := []any{protocol.Table{"upstream": "a", "max-hops": int64(2)}, protocol.Table{"upstream": "b"}}
	if _, err := b.SetVHostParameter("v", "fake", "set", set, ""); err != nil {
		t.Fatal(err)
	}
	want := []string{`//fake/b={"src-uri":"b"}`, `//other/a={"src-uri":"a"}`, `v/fake/a={"src-uri":"a"}`,
		`v/fake/s1={"f":1.5,"list":["a",1],"n":3,"nested":{"k":"v"},"ok":true,"src-uri":"amqp://"}`,
		`v/fake/set=[{"max-hops":2,"upstream":"a"},{"upstream":"b"}]`}
	if got := paramNames(b.VHostParameters("", "")); !reflect.DeepEqual(got, want) {
		t.Fatalf("all parameters\n got %q\nwant %q", got, want)
	}
	if got := paramNames(b.VHostParameters("v", "")); len(got) != 3 {
		t.Fatalf("vhost v's: %q", got)
	}
	if got := paramNames(b.VHostParameters("", "other")); len(got) != 1 {
		t.Fatalf("component other's: %q", got)
	}
	if p, ok := b.LookupVHostParameter("v", "fake", "s1"); !ok || !reflect.DeepEqual(p.Value, value) {
		t.Fatalf("lookup: %+v %v", p, ok)
	}

	refusals := []struct {
		vh, comp, name string
		value          protocol.Table
		code           uint16
		text           string
	}{
		{"v", "no-such-component", "x", protocol.Table{"uri": "u"}, protocol.PreconditionFailed, "Validation failed\n\ncomponent no-such-component not found\n"},
		{"v", "fake", "x", protocol.Table{"dest-uri": "u"}, protocol.PreconditionFailed, "Validation failed\n\nKey \"src-uri\" not found in fake\n"},
		{"v", "fake", "", protocol.Table{"src-uri": "u"}, protocol.PreconditionFailed, "Validation failed"},
		{"nowhere", "fake", "x", protocol.Table{"src-uri": "u"}, protocol.NotFound, "no vhost 'nowhere'"},
		{"v", "fake", "x", protocol.Table{"src-uri": struct{}{}}, protocol.PreconditionFailed, "cannot be stored"},
	}
	for _, r := range refusals {
		_, err := b.SetVHostParameter(r.vh, r.comp, r.name, r.value, "")
		if e := reply.As(err); err == nil || e.Code != r.code || !strings.Contains(e.Text, r.text) {
			t.Errorf("%+v: %v, want %d %q", r, err, r.code, r.text)
		}
	}
	if len(b.VHostParameters("", "")) != 5 {
		t.Fatal("a refused parameter was set")
	}

	if err := b.ClearVHostParameter("/", "other", "a"); err != nil {
		t.Fatal(err)
	}
	if e := reply.As(b.ClearVHostParameter("/", "other", "a")); e == nil || e.Code != protocol.NotFound {
		t.Fatalf("clearing a missing parameter: %v", e)
	}

	// Kept across a restart, with their values' types, whether or not
	// the component is registered yet.
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	want = []string{want[0], want[2], want[3], want[4]}
	if got := paramNames(b.VHostParameters("", "")); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a restart\n got %q\nwant %q", got, want)
	}
	if p, _ := b.LookupVHostParameter("v", "fake", "set"); !reflect.DeepEqual(p.Value, set) {
		t.Fatalf("after a restart the list is %#v, want %#v", p.Value, set)
	}
	if p, _ := b.LookupVHostParameter("v", "fake", "s1"); !reflect.DeepEqual(p.Value, value) {
		t.Fatalf("after a restart the value is %#v, want %#v", p.Value, value)
	}
	// A parameter of a component not registered can be cleared, not set.
	if err := b.ClearVHostParameter("v", "fake", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetVHostParameter("v", "fake", "a", protocol.Table{"src-uri": "a"}, ""); err == nil {
		t.Fatal("a parameter of a component not registered was set")
	}
}

func TestVHostParametersGoWithTheirVHost(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir)
	b.RegisterParameterComponent("fake", &fakeComponent{})
	mustAddVHost(t, b, "v")
	for _, vh := range []string{"/", "v"} {
		if _, err := b.SetVHostParameter(vh, "fake", "s", protocol.Table{"src-uri": vh}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.DeleteVHost("v"); err != nil {
		t.Fatal(err)
	}
	if got := paramNames(b.VHostParameters("", "")); !reflect.DeepEqual(got, []string{`//fake/s={"src-uri":"/"}`}) {
		t.Fatalf("after deleting vhost v: %q", got)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir)
	mustAddVHost(t, b, "v")
	if got := paramNames(b.VHostParameters("", "")); !reflect.DeepEqual(got, []string{`//fake/s={"src-uri":"/"}`}) {
		t.Fatalf("after a restart and the vhost made again: %q", got)
	}
}

// The watchers are called once when registered, after each change, and
// with no broker lock held (they may call the broker).
func TestWatchVHostParameters(t *testing.T) {
	b := testBroker(t, t.TempDir())
	b.RegisterParameterComponent("fake", &fakeComponent{})
	mustAddVHost(t, b, "v")
	var calls atomic.Int64
	seen := make(chan []string, 100)
	b.WatchVHostParameters(func() {
		calls.Add(1)
		seen <- paramNames(b.VHostParameters("", "")) // takes no lock, but VHosts does
		b.VHosts()
	})
	wait := func(what string, want ...string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-seen:
				if reflect.DeepEqual(got, want) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: the watcher never saw %q", what, want)
			}
		}
	}
	wait("registered")
	if _, err := b.SetVHostParameter("v", "fake", "s", protocol.Table{"src-uri": "a"}, ""); err != nil {
		t.Fatal(err)
	}
	wait("set", `v/fake/s={"src-uri":"a"}`)
	if _, err := b.SetVHostParameter("v", "fake", "s", protocol.Table{"src-uri": "b"}, ""); err != nil {
		t.Fatal(err)
	}
	wait("changed", `v/fake/s={"src-uri":"b"}`)
	if err := b.ClearVHostParameter("v", "fake", "s"); err != nil {
		t.Fatal(err)
	}
	wait("cleared")
	if _, err := b.SetVHostParameter("v", "fake", "t", protocol.Table{"src-uri": "c"}, ""); err != nil {
		t.Fatal(err)
	}
	wait("set again", `v/fake/t={"src-uri":"c"}`)
	if err := b.DeleteVHost("v"); err != nil {
		t.Fatal(err)
	}
	wait("vhost deleted")
	// Nothing changed, nothing called (once a wake-up still pending has
	// been taken).
	time.Sleep(100 * time.Millisecond)
	before := calls.Load()
	if err := b.DeleteVHost("v"); err == nil {
		t.Fatal("deleted a missing vhost")
	}
	time.Sleep(50 * time.Millisecond)
	if calls.Load() != before {
		t.Fatal("a watcher was called with nothing changed")
	}
}

func TestVHostParametersInDefinitions(t *testing.T) {
	b := testBroker(t, t.TempDir())
	b.RegisterParameterComponent("fake", &fakeComponent{})
	doc := `{"vhosts": [{"name": "v"}],
		"queues": [{"name": "q", "vhost": "v", "durable": true}],
		"parameters": [
			{"vhost": "v", "component": "fake", "name": "s2", "value": {"src-uri": "amqp://", "n": 1}},
			{"vhost": "v", "component": "fake", "name": "s1", "value": {"src-uri": "amqp://x"}},
			{"vhost": "v", "component": "vhost-limits", "name": "limits", "value": {"max-queues": 10}}]}`
	if err := b.ImportDefinitions(context.Background(), []byte(doc), ""); err != nil {
		t.Fatal(err)
	}
	if got := paramNames(b.VHostParameters("", "")); !reflect.DeepEqual(got, []string{`v/fake/s1={"src-uri":"amqp://x"}`, `v/fake/s2={"n":1,"src-uri":"amqp://"}`}) {
		t.Fatalf("imported %q", got)
	}
	out, _ := json.Marshal(b.ExportDefinitions().Parameters)
	want := `[{"value":{"max-queues":10},"vhost":"v","component":"vhost-limits","name":"limits"},` +
		`{"value":{"src-uri":"amqp://x"},"vhost":"v","component":"fake","name":"s1"},` +
		`{"value":{"n":1,"src-uri":"amqp://"},"vhost":"v","component":"fake","name":"s2"}]`
	if string(out) != want {
		t.Fatalf("exported\n %s\nwant %s", out, want)
	}
	part, err := b.ExportVHostDefinitions("v")
	if err != nil || len(part.Parameters) != 3 || part.Parameters[2].Name != "s2" {
		t.Fatalf("vhost v's export: %+v, %v", part, err)
	}

	// Exported, imported elsewhere: the same.
	data, _ := json.Marshal(b.ExportDefinitions())
	other := testBroker(t, t.TempDir())
	other.RegisterParameterComponent("fake", &fakeComponent{})
	if err := other.ImportDefinitions(context.Background(), data, ""); err != nil {
		t.Fatal(err)
	}
	if a, b := paramNames(b.VHostParameters("", "")), paramNames(other.VHostParameters("", "")); !reflect.DeepEqual(a, b) {
		t.Fatalf("moved\n%q\nbecame %q", a, b)
	}

	for _, c := range []struct{ param, want string }{
		{`{"vhost": "v", "component": "fake", "name": "bad", "value": {"dest-uri": "x"}}`, `parameter 'bad' of component 'fake' in vhost 'v': value: Key "src-uri" not found in fake`},
		{`{"vhost": "v", "component": "fake", "name": "bad", "value": 3}`, `parameter 'bad' of component 'fake' in vhost 'v': value: must be an object`},
		{`{"vhost": "nowhere", "component": "fake", "name": "bad", "value": {"src-uri": "x"}}`, `parameter 'bad' of component 'fake' in vhost 'nowhere': vhost`},
		{`{"vhost": "v", "component": "no-such-component", "name": "up", "value": {"uri": "x"}}`, `no component 'no-such-component' (it has vhost-limits, operator_policy, fake, federation-upstream, federation-upstream-set, shovel)`},
	} {
		err := b.ImportDefinitions(context.Background(), []byte(`{"parameters": [`+c.param+`]}`), "")
		if !errors.Is(err, ErrInvalidDefinitions) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.param, err, c.want)
		}
	}
	// Scoped to a vhost, a parameter goes into it.
	if err := b.ImportDefinitions(context.Background(), []byte(`{"parameters": [{"vhost": "elsewhere", "component": "fake", "name": "s3", "value": {"src-uri": "y"}}]}`), "/"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.LookupVHostParameter("/", "fake", "s3"); !ok {
		t.Fatal("a vhost-scoped import did not put the parameter in its vhost")
	}
}
