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
	if err != nil {
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
		// The delayed type's own arguments are checked as it would.
		{map[string]any{"x-delayed-type": "x-consistent-hash", "hash-header": "h", "hash-property": "message_id"}, "hash-header and hash-property are mutually exclusive"},
		{map[string]any{"x-delayed-type": "x-consistent-hash", "hash-property": "priority"}, "Unsupported property"},
	}
	for _, c := range cases {
		d, err := declare(t, c.args)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.args, err)
			}
			continue
		}
		check406(t, "declare", err, c.want)
		if _, err := (Type{}).Create(d); err == nil {
			t.Errorf("%v: Create accepted what ValidateDeclare refused", c.args)
		}
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

func TestBindings(t *testing.T) {
	cases := []struct {
		typ  string
		key  string
		args map[string]any
		want string // "" accepted
	}{
		{"direct", "anything", map[string]any{"x-match": "whatever"}, ""},
		{"topic", "a.*.#", nil, ""},
		{"fanout", "", nil, ""},
		{"headers", "", map[string]any{"x-match": "any", "a": 1}, ""},
		{"headers", "", map[string]any{"x-match": "all-with-x"}, ""},
		{"headers", "", map[string]any{"a": 1}, ""},
		{"headers", "", map[string]any{"x-match": "most"}, "Invalid x-match field value 'most'; expected all, any, all-with-x, or any-with-x"},
		{"headers", "", map[string]any{"x-match": 1}, "Invalid x-match field value of type 'l'"},
		{"x-consistent-hash", "3", nil, ""},
		{"x-consistent-hash", "0", nil, "binding key '0' is not a valid weight"},
		{"x-consistent-hash", "many", nil, "binding key 'many' is not a valid weight"},
		{"x-jms-topic", "stock.#", map[string]any{"x-selector": "weight > 10"}, ""},
		{"x-jms-topic", "stock.#", map[string]any{"x-selector": "weight >"}, "invalid selector in binding argument x-selector"},
		{"x-jms-topic", "#", map[string]any{"rjms_erlang_selector": "{'>', {'ident', <<\"w\">>}, 1}."}, ""},
		{"x-jms-queue", "q", map[string]any{"x-selector": "a = 1"}, "x-jms-queue bindings take no selector"},
		{"x-content", "", map[string]any{"anything": "goes"}, ""}, // not checked here
	}
	for _, c := range cases {
		x := create(t, map[string]any{"x-delayed-type": c.typ})
		tb, _ := sdk.MakeTable(c.args)
		b := &sdk.Binding{ID: 3, Destination: "q", Key: c.key, Args: tb}
		err := x.ValidateBinding(b)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s %q %v: %v", c.typ, c.key, c.args, err)
			}
		} else {
			check406(t, c.typ+" "+c.key, err, c.want)
		}
		// The exchange keeps no bindings: adding and removing always work.
		if err := x.AddBinding(b); err != nil {
			t.Errorf("AddBinding: %v", err)
		}
		if err := x.RemoveBindings([]sdk.BindingID{3}); err != nil {
			t.Errorf("RemoveBindings: %v", err)
		}
	}
}

func TestInfoAndAllocations(t *testing.T) {
	x := create(t, map[string]any{"x-delayed-type": "x-jms-topic"})
	if info := x.Info(); info["delayed_type"] != "x-jms-topic" {
		t.Errorf("info: %v", info)
	}
	m, _ := sdk.MakeMessage("k", map[string]any{"a": "b", "x-delay": 1000}, nil)
	var r sdk.Result
	if n := testing.AllocsPerRun(100, func() {
		r.Reset()
		m.Reset(m.RoutingKey(), m.Flags(), m.RawProperties(), nil)
		_ = x.Route(m, &r)
	}); n != 0 {
		t.Errorf("Route allocates %.1f times", n)
	}
}
