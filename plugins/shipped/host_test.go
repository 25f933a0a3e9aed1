package shipped_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/wasmhost"
	"github.com/warrenmq/warren/plugins/consistent-hash/chash"
	"github.com/warrenmq/warren/plugins/shipped"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/sdk"
)

// The shipped modules, loaded into the broker's plugin host: they load,
// describe themselves, and route as their packages do natively.

func loadShipped(t testing.TB) map[string]*wasmhost.Plugin {
	t.Helper()
	return loadModules(t, shipped.Modules())
}

// loadModules loads modules by plugin name into one host whose types,
// and the built-in ones, are what type_exists and validate-as find.
func loadModules(t testing.TB, modules map[string][]byte) map[string]*wasmhost.Plugin {
	t.Helper()
	types := exchange.NewRegistry()
	h, err := wasmhost.New(wasmhost.Config{
		CacheDir:    t.TempDir(),
		PoolSize:    2,
		CallTimeout: 5 * time.Second, // a cold instance on a slow machine
		Logger:      zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		LookupType:  types.Lookup,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	out := map[string]*wasmhost.Plugin{}
	for name, wasm := range modules {
		p, err := h.Load(context.Background(), name, wasm)
		if err != nil {
			t.Fatalf("loading %s: %v", name, err)
		}
		if err := p.Register(types); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

func typeOf(t testing.TB, p *wasmhost.Plugin, name string) exchange.Type {
	t.Helper()
	for _, x := range p.Types() {
		if x.Name() == name {
			return x
		}
	}
	t.Fatalf("plugin %s has no type %s", p.Name(), name)
	return nil
}

func declare(t testing.TB, typ exchange.Type, args protocol.Table) (exchange.Router, error) {
	t.Helper()
	def := exchange.Definition{VHost: "/", Name: "x-" + typ.Name(), Type: typ.Name(), Durable: true, Args: args}
	if err := typ.ValidateDeclare(def); err != nil {
		return nil, err
	}
	return typ.Create(def)
}

func bind(r exchange.Router, seq *uint64, queue, key string, args protocol.Table) error {
	*seq++
	b := &exchange.Binding{Destination: exchange.Destination{Kind: exchange.ToQueue, Name: queue}, Key: key, Args: args, Seq: *seq}
	if err := r.ValidateBinding(b); err != nil {
		return err
	}
	return r.AddBinding(b)
}

func publish(t *testing.T, r exchange.Router, key string, p protocol.Properties) ([]string, *exchange.Result) {
	t.Helper()
	props, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := message.New("x", key, p.Flags, props, nil)
	if err != nil {
		t.Fatal(err)
	}
	var res exchange.Result
	if err := r.Route(m, &res); err != nil {
		t.Fatalf("routing %q: %v", key, err)
	}
	var qs []string
	for _, b := range res.Bindings {
		qs = append(qs, b.Destination.Name)
	}
	return qs, &res
}

func headers(h protocol.Table) protocol.Properties {
	return protocol.Properties{Flags: protocol.FlagHeaders, Headers: h}
}

func TestShippedThroughHost(t *testing.T) {
	ps := loadShipped(t)
	for name, types := range map[string]string{
		"consistent-hash": "x-consistent-hash",
		"delayed-message": "x-delayed-message",
		"jms":             "x-jms-topic x-jms-queue",
	} {
		info := ps[name].Info()
		if got := strings.Join(info.Types, " "); got != types {
			t.Errorf("%s provides %q, want %q", name, got, types)
		}
	}

	t.Run("consistent-hash", func(t *testing.T) {
		typ := typeOf(t, ps["consistent-hash"], "x-consistent-hash")
		r, err := declare(t, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The same exchange natively, to compare the module with.
		native, _ := chash.Type{}.Create(&sdk.Declaration{})
		var seq uint64
		for i, w := range []string{"1", "2", "3"} {
			q := fmt.Sprint("q", i)
			if err := bind(r, &seq, q, w, nil); err != nil {
				t.Fatal(err)
			}
			_ = native.AddBinding(&sdk.Binding{ID: sdk.BindingID(i), Destination: q, Key: w})
		}
		counts := map[string]int{}
		const n = 3000
		for i := range n {
			key := fmt.Sprint("customer-", i)
			qs, _ := publish(t, r, key, protocol.Properties{})
			if len(qs) != 1 {
				t.Fatalf("%s reached %v", key, qs)
			}
			m, _ := sdk.MakeMessage(key, nil, nil)
			var nr sdk.Result
			_ = native.Route(m, &nr)
			if want := fmt.Sprint("q", nr.ID(0)); qs[0] != want {
				t.Fatalf("%s: the module routed to %s, the package to %s", key, qs[0], want)
			}
			counts[qs[0]]++
		}
		for i, w := range []float64{1, 2, 3} {
			if share := float64(counts[fmt.Sprint("q", i)]) / n; math.Abs(share-w/6) > 0.04 {
				t.Errorf("q%d has %.3f of the keys, want about %.3f", i, share, w/6)
			}
		}
		if err := bind(r, &seq, "bad", "0", nil); err == nil || !strings.Contains(err.Error(), "binding key '0' is not a valid weight") {
			t.Errorf("weight 0: %v", err)
		}
		_, err = declare(t, typ, protocol.Table{"hash-header": "a", "hash-property": "message_id"})
		if err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
			t.Errorf("both hash arguments: %v", err)
		}
	})

	t.Run("delayed-message", func(t *testing.T) {
		typ := typeOf(t, ps["delayed-message"], "x-delayed-message")
		if _, err := declare(t, typ, nil); err == nil || !strings.Contains(err.Error(), "Invalid argument, 'x-delayed-type' must be an existing exchange type") {
			t.Errorf("no x-delayed-type: %v", err)
		}
		r, err := declare(t, typ, protocol.Table{"x-delayed-type": "topic"})
		if err != nil {
			t.Fatal(err)
		}
		var seq uint64
		if err := bind(r, &seq, "q", "a.#", nil); err != nil {
			t.Fatal(err)
		}
		qs, res := publish(t, r, "a.b", headers(protocol.Table{"x-delay": int32(1500)}))
		if len(qs) != 0 || res.Via != "topic" || res.Hold != 1500*time.Millisecond {
			t.Errorf("x-delay 1500: bindings %v, via %q after %v", qs, res.Via, res.Hold)
		}
		if !reflect.DeepEqual(res.SetHeaders, protocol.Table{"x-delay": int32(-1500)}) {
			t.Errorf("a held message's headers become %v, want x-delay negated", res.SetHeaders)
		}
		qs, res = publish(t, r, "a.b", protocol.Properties{})
		if len(qs) != 0 || res.Via != "topic" || res.Hold != 0 || res.SetHeaders != nil {
			t.Errorf("no x-delay: bindings %v, via %q after %v", qs, res.Via, res.Hold)
		}
		h, _ := declare(t, typ, protocol.Table{"x-delayed-type": "x-consistent-hash"})
		if err := bind(h, &seq, "q", "zero", nil); err == nil || !strings.Contains(err.Error(), "not a valid weight") {
			t.Errorf("a consistent-hash binding through the delayed type: %v", err)
		}
		// ABI 1.1's checks: the type must exist, and take the arguments.
		if _, err := declare(t, typ, protocol.Table{"x-delayed-type": "x-foo"}); err == nil ||
			!strings.Contains(err.Error(), "must be an existing exchange type, not 'x-foo'") {
			t.Errorf("x-delayed-type x-foo: %v", err)
		}
		if _, err := declare(t, typ, protocol.Table{"x-delayed-type": "x-consistent-hash", "hash-header": "h", "hash-property": "message_id"}); err == nil ||
			!strings.Contains(err.Error(), "mutually exclusive") {
			t.Errorf("consistent-hash arguments through the delayed type: %v", err)
		}
		hd, _ := declare(t, typ, protocol.Table{"x-delayed-type": "headers"})
		if err := bind(hd, &seq, "q", "", protocol.Table{"x-match": "most"}); err == nil || !strings.Contains(err.Error(), "x-match") {
			t.Errorf("a headers binding through the delayed type: %v", err)
		}
	})

	t.Run("jms", func(t *testing.T) {
		topic, err := declare(t, typeOf(t, ps["jms"], "x-jms-topic"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var seq uint64
		for _, b := range []struct {
			q, key string
			args   protocol.Table
		}{
			{"all", "stock.#", nil},
			{"sql", "stock.*", protocol.Table{"x-selector": "weight > 10 AND color IN ('red', 'blue')"}},
			{"erl", "stock.ibm", protocol.Table{"rjms_erlang_selector": `{'>', {'ident', <<"weight">>}, 10}.`}},
			{"urgent", "#", protocol.Table{"x-selector": "JMSPriority >= 7"}},
		} {
			if err := bind(topic, &seq, b.q, b.key, b.args); err != nil {
				t.Fatal(err)
			}
		}
		cases := []struct {
			key   string
			props protocol.Properties
			want  string
		}{
			{"stock.ibm", headers(protocol.Table{"weight": int32(20), "color": "red"}), "all sql erl"},
			{"stock.ibm", headers(protocol.Table{"weight": int64(5), "color": "red"}), "all"},
			// rjms_erlang_selector bindings ignore the key, as RabbitMQ's.
			{"stock.hp", headers(protocol.Table{"weight": 11.5, "color": "blue"}), "all sql erl"},
			{"stock.hp", protocol.Properties{}, "all"},
			{"bond.x", protocol.Properties{Flags: protocol.FlagPriority, Priority: 9}, "urgent"},
		}
		for _, c := range cases {
			qs, _ := publish(t, topic, c.key, c.props)
			if got := strings.Join(qs, " "); got != c.want {
				t.Errorf("%s %v: routed to %q, want %q", c.key, c.props.Headers, got, c.want)
			}
		}
		err = bind(topic, &seq, "bad", "#", protocol.Table{"x-selector": "weight >"})
		if err == nil || !strings.Contains(err.Error(), "invalid selector in binding argument x-selector") {
			t.Errorf("bad selector: %v", err)
		}

		queue, err := declare(t, typeOf(t, ps["jms"], "x-jms-queue"), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = bind(queue, &seq, "orders", "orders", nil)
		if qs, _ := publish(t, queue, "orders", protocol.Properties{}); strings.Join(qs, " ") != "orders" {
			t.Errorf("x-jms-queue: routed to %v", qs)
		}
		if qs, _ := publish(t, queue, "orders.x", protocol.Properties{}); len(qs) != 0 {
			t.Errorf("x-jms-queue: orders.x routed to %v", qs)
		}
	})
}

// BenchmarkShippedRoute routes through each shipped module in the host:
// the cost a publisher pays per message, WebAssembly included.
func BenchmarkShippedRoute(b *testing.B) {
	ps := loadShipped(b)
	var seq uint64
	msg := func(key string, h protocol.Table) *message.Message {
		p := protocol.Properties{}
		if h != nil {
			p = headers(h)
		}
		props, _ := p.Append(nil)
		m, _ := message.New("x", key, p.Flags, props, nil)
		return m
	}
	cases := []struct {
		name, plugin, typ string
		args              protocol.Table
		bind              func(r exchange.Router)
		m                 *message.Message
	}{
		{"consistent-hash/8-weighted", "consistent-hash", "x-consistent-hash", nil, func(r exchange.Router) {
			for i := range 8 {
				_ = bind(r, &seq, fmt.Sprint("q", i), fmt.Sprint(i%3+1), nil)
			}
		}, msg("customer-12345", nil)},
		{"delayed-message", "delayed-message", "x-delayed-message", protocol.Table{"x-delayed-type": "direct"}, func(r exchange.Router) {
			_ = bind(r, &seq, "q", "k", nil)
		}, msg("k", protocol.Table{"x-delay": int32(5000)})},
		{"jms-topic/20-selectors", "jms", "x-jms-topic", nil, func(r exchange.Router) {
			for i := range 20 {
				_ = bind(r, &seq, fmt.Sprint("q", i), fmt.Sprintf("stock.%d.*", i%4), protocol.Table{
					"x-selector": fmt.Sprintf("weight > %d AND color IN ('red', 'blue')", i)})
			}
		}, msg("stock.1.ibm", protocol.Table{"weight": int32(12), "color": "blue", "region": "eu"})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r, err := declare(b, typeOf(b, ps[c.plugin], c.typ), c.args)
			if err != nil {
				b.Fatal(err)
			}
			c.bind(r)
			var res exchange.Result
			b.ReportAllocs()
			for b.Loop() {
				res.Reset()
				if err := r.Route(c.m, &res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
