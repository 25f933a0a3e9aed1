package delayed

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/warrenmq/warren/sdk"
)

func declare(t *testing.T, args map[string]any) (*sdk.Declaration, error) {
	t.Helper()
	tb, err := sdk.MakeTable(args)
	if err != nil {
		t.Fatal(err)
	}
	d := &sdk.Declaration{Name: "delayed", Type: TypeName, Durable: true, Args: tb}
	return d, Type{}.ValidateDeclare(d)
}

func create(t *testing.T, args map[string]any) *Exchange {
	t.Helper()
	d, err := declare(t, args)
	if err != nil && !strings.Contains(err.Error(), "must be an existing exchange type, not") {
		t.Fatal(err)
	}
	x, err := Type{}.Create(d)
	if err != nil {
		t.Fatal(err)
	}
	return x.(*Exchange)
}

func check406(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want %q", what, err, want)
		return
	}
	if e, ok := err.(*sdk.Error); !ok || e.Code != sdk.PreconditionFailed {
		t.Errorf("%s: want a 406 *sdk.Error, got %#v", what, err)
	}
}

// The types TypeExists knows in these tests, besides the built-in ones.
func TestMain(m *testing.M) {
	sdk.SetTypes(map[string]bool{"x-jms-topic": true, "x-jms-queue": true, "x-consistent-hash": true, "x-content": true})
	m.Run()
}

// TestDeclare checks the argument and that the type exists; the rest of
// the check (the delayed type's own arguments) is the broker's, asked for
// with ValidateAs and tested end to end in tests/shipped_test.go.
func TestDeclare(t *testing.T) {
	const invalid = "Invalid argument, 'x-delayed-type' must be an existing exchange type"
	cases := []struct {
		args map[string]any
		want string // "" accepted
	}{
		{map[string]any{"x-delayed-type": "direct"}, ""},
		{map[string]any{"x-delayed-type": "topic"}, ""},
		{map[string]any{"x-delayed-type": "fanout"}, ""},
		{map[string]any{"x-delayed-type": "headers"}, ""},
		{map[string]any{"x-delayed-type": "x-jms-topic"}, ""},
		{map[string]any{"x-delayed-type": "x-jms-queue"}, ""},
		{map[string]any{"x-delayed-type": "x-consistent-hash", "hash-header": "h"}, ""},
		{map[string]any{"x-delayed-type": "x-content"}, ""}, // another plugin's
		{nil, invalid},
		{map[string]any{"x-delayed-type": ""}, invalid},
		{map[string]any{"x-delayed-type": 5}, invalid},
		{map[string]any{"x-delayed-type": nil}, invalid},
		{map[string]any{"x-delayed-type": "x-delayed-message"}, invalid + " other than x-delayed-message"},
		{map[string]any{"x-delayed-type": "dirct"}, invalid + ", not 'dirct'"},
		{map[string]any{"x-delayed-type": "x-foo"}, invalid + ", not 'x-foo'"},
	}
	for _, c := range cases {
		d, err := declare(t, c.args)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			} else if as := d.ValidatingAs(); len(as) != 1 || as[0] != c.args["x-delayed-type"] {
				t.Errorf("%v: validates as %v", c.args, as)
			}
			continue
		}
		check406(t, "declare", err, c.want)
	}
	// Create checks the form only: at a restart the delayed type may not
	// be enabled yet.
	d, _ := declare(t, map[string]any{"x-delayed-type": "x-later"})
	if _, err := (Type{}).Create(d); err != nil {
		t.Errorf("Create refused a type that is not there yet: %v", err)
	}
	d, _ = declare(t, map[string]any{"x-delayed-type": "x-delayed-message"})
	if _, err := (Type{}).Create(d); err == nil {
		t.Error("Create accepted x-delayed-message as its own delayed type")
	}
}

// route routes a message with the given headers (nil: none) and returns
// the type and hold Route asked for.
func route(t *testing.T, x *Exchange, headers map[string]any) (string, time.Duration, error) {
	t.Helper()
	m, err := sdk.MakeMessage("key", headers, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r sdk.Result
	if err := x.Route(m, &r); err != nil {
		return "", 0, err
	}
	if r.Len() != 0 {
		t.Fatalf("Route added bindings %v", r.Bindings())
	}
	typ, hold, ok := r.ViaType()
	if !ok {
		t.Fatal("Route did not ask for a type")
	}
	return typ, hold, nil
}

func TestRoute(t *testing.T) {
	x := create(t, map[string]any{"x-delayed-type": "topic"})
	cases := []struct {
		headers map[string]any
		want    time.Duration
	}{
		{nil, 0},
		{map[string]any{}, 0},
		{map[string]any{"other": 5}, 0},
		{map[string]any{"x-delay": 5000}, 5 * time.Second},
		{map[string]any{"x-delay": int8(7)}, 7 * time.Millisecond},
		{map[string]any{"x-delay": uint8(200)}, 200 * time.Millisecond},
		{map[string]any{"x-delay": int16(1000)}, time.Second},
		{map[string]any{"x-delay": uint16(60000)}, time.Minute},
		{map[string]any{"x-delay": int32(1500)}, 1500 * time.Millisecond},
		{map[string]any{"x-delay": uint32(math.MaxUint32)}, math.MaxUint32 * time.Millisecond},
		{map[string]any{"x-delay": int64(1)}, time.Millisecond},
		// No delay: zero, negative.
		{map[string]any{"x-delay": 0}, 0},
		{map[string]any{"x-delay": -1000}, 0},
		{map[string]any{"x-delay": int64(math.MinInt64)}, 0},
		// Floats and decimals are truncated, as RabbitMQ's plugin does.
		{map[string]any{"x-delay": 1500.9}, 1500 * time.Millisecond},
		{map[string]any{"x-delay": float32(2.5)}, 2 * time.Millisecond},
		{map[string]any{"x-delay": 0.9}, 0},
		{map[string]any{"x-delay": -3.5}, 0},
		{map[string]any{"x-delay": math.NaN()}, 0},
		// Strings of digits, as RabbitMQ's plugin reads them.
		{map[string]any{"x-delay": "2500"}, 2500 * time.Millisecond},
		{map[string]any{"x-delay": "+10"}, 10 * time.Millisecond},
		{map[string]any{"x-delay": "-10"}, 0},
		{map[string]any{"x-delay": "-99999999999999999999999"}, 0},
		// Other types mean no delay.
		{map[string]any{"x-delay": true}, 0},
		{map[string]any{"x-delay": nil}, 0},
		{map[string]any{"x-delay": map[string]any{"ms": 5}}, 0},
		{map[string]any{"x-delay": []byte("5000")}, 0},
		{map[string]any{"x-delay": time.Unix(5000, 0)}, 0},
		// Beyond RabbitMQ's 2^32-1 ms (which it routes at once): held.
		{map[string]any{"x-delay": int64(math.MaxUint32) + 1}, (math.MaxUint32 + 1) * time.Millisecond},
		{map[string]any{"x-delay": MaxDelay}, time.Duration(MaxDelay) * time.Millisecond},
	}
	for _, c := range cases {
		typ, hold, err := route(t, x, c.headers)
		if err != nil {
			t.Errorf("%v: %v", c.headers, err)
			continue
		}
		if typ != "topic" || hold != c.want {
			t.Errorf("%v: via %s after %v, want topic after %v", c.headers, typ, hold, c.want)
		}
	}
	// A decimal 'D': 1234.5 (scale 1, 12345) is 1234 ms.
	raw := []byte{0, 0, 0, 0, 7, 'x', '-', 'd', 'e', 'l', 'a', 'y', 'D', 1, 0, 0, 0x30, 0x39}
	binary.BigEndian.PutUint32(raw, uint32(len(raw)-4))
	var r sdk.Result
	if err := x.Route(sdk.RawMessage("k", 0x2000, raw, nil), &r); err != nil {
		t.Fatal(err)
	}
	if _, hold, _ := r.ViaType(); hold != 1234*time.Millisecond {
		t.Errorf("decimal 1234.5: hold %v", hold)
	}
}

func TestRouteErrors(t *testing.T) {
	x := create(t, map[string]any{"x-delayed-type": "direct"})
	cases := []struct {
		delay any
		want  string
	}{
		{"5s", "x-delay must be an integer number of milliseconds, not '5s'"},
		{"", "x-delay must be an integer number of milliseconds, not ''"},
		{"1.5", "not '1.5'"},
		{" 10", "not ' 10'"},
		{MaxDelay + 1, "x-delay of 9223372036855 ms is beyond the longest hold, 9223372036854 ms"},
		{int64(math.MaxInt64), "beyond the longest hold"},
		{"99999999999999999999", "x-delay of 99999999999999999999 ms is beyond the longest hold"},
		{1e300, "beyond the longest hold"},
		{math.Inf(1), "beyond the longest hold"},
	}
	for _, c := range cases {
		_, _, err := route(t, x, map[string]any{"x-delay": c.delay})
		check406(t, fmt.Sprintf("x-delay %#v", c.delay), err, c.want)
	}
}

// TestBindings: a binding is checked by the broker as the delayed type
// would check it (end to end in tests/shipped_test.go); the exchange keeps
// no bindings.
func TestBindings(t *testing.T) {
	for _, typ := range []string{"direct", "headers", "x-consistent-hash", "x-content"} {
		x := create(t, map[string]any{"x-delayed-type": typ})
		b := &sdk.Binding{ID: 3, Destination: "q", Key: "k"}
		if err := x.ValidateBinding(b); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		if as := b.ValidatingAs(); len(as) != 1 || as[0] != typ {
			t.Errorf("%s: binding validates as %v", typ, as)
		}
		if err := x.AddBinding(b); err != nil {
			t.Errorf("AddBinding: %v", err)
		}
		if err := x.RemoveBindings([]sdk.BindingID{3}); err != nil {
			t.Errorf("RemoveBindings: %v", err)
		}
	}
}

// A held message's x-delay is negated in its own type where that can
// hold it; a message routed at once keeps its headers.
func TestNegatedDelay(t *testing.T) {
	x := create(t, map[string]any{"x-delayed-type": "direct"})
	cases := []struct {
		delay any
		want  any
	}{
		{int32(1500), int32(-1500)},
		{int64(5000), int64(-5000)},
		{int8(7), int8(-7)},
		{int16(1000), int16(-1000)},
		{uint8(200), int64(-200)},
		{uint32(math.MaxUint32), int64(-math.MaxUint32)},
		{int32(math.MaxInt32), int32(-math.MaxInt32)},
		{"2500", int64(-2500)},
		{1500.5, -1500.5},
	}
	for _, c := range cases {
		m, _ := sdk.MakeMessage("k", map[string]any{"x-delay": c.delay}, nil)
		var r sdk.Result
		if err := x.Route(m, &r); err != nil {
			t.Fatal(err)
		}
		want, _ := sdk.MakeTable(map[string]any{"x-delay": c.want})
		if got := r.HeaderChanges(); string(got.Raw()) != string(want.Raw()) {
			t.Errorf("x-delay %#v: sets %x, want %x", c.delay, got.Raw(), want.Raw())
		}
	}
	for _, h := range []map[string]any{nil, {"x-delay": 0}, {"x-delay": -5}, {"x-delay": true}} {
		m, _ := sdk.MakeMessage("k", h, nil)
		var r sdk.Result
		_ = x.Route(m, &r)
		if r.HeaderChanges().Valid() {
			t.Errorf("%v: headers changed on a message routed at once", h)
		}
	}
}

func TestInfoAndAllocations(t *testing.T) {
	x := create(t, map[string]any{"x-delayed-type": "x-jms-topic"})
	if info := x.Info(); info["delayed_type"] != "x-jms-topic" {
		t.Errorf("info: %v", info)
	}
	// Routing at once allocates nothing; holding boxes the negated delay
	// for SetHeader (one small allocation per held message, beside the
	// broker's storing it).
	for _, c := range []struct {
		delay any
		most  float64
	}{{0, 0}, {1000, 1}} {
		m, _ := sdk.MakeMessage("k", map[string]any{"a": "b", "x-delay": c.delay}, nil)
		var r sdk.Result
		if n := testing.AllocsPerRun(100, func() {
			r.Reset()
			m.Reset(m.RoutingKey(), m.Flags(), m.RawProperties(), nil)
			_ = x.Route(m, &r)
		}); n > c.most {
			t.Errorf("Route with x-delay %v allocates %.1f times", c.delay, n)
		}
	}
}
