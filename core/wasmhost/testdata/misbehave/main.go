// Command misbehave is a test plugin that routes like direct but
// misbehaves on request: the routing key picks the fault. The host's tests
// use it to prove a plugin cannot take the broker down.
package main

import (
	"strings"
	"time"

	"github.com/warrenmq/warren/sdk"
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:     "misbehave",
		Version:  "0.1.0",
		Features: sdk.FeatureHeaders,
		Types:    []sdk.ExchangeType{misType{}},
		Settings: []sdk.Setting{{Name: "greeting", Kind: sdk.StringSetting, Doc: "reported by Info"}},
		OnIdle:   func() { idles++ },
		OnSettingsChanged: func(s sdk.Table) error {
			if g, _ := s.Get("greeting"); must(g.AsString()) == "refuse" {
				return sdk.Errorf(sdk.PreconditionFailed, "greeting refused as asked")
			}
			return nil
		},
	})
}

func main() {}

func must[T any](v T, _ bool) T { return v }

type misType struct{}

func (misType) Name() string { return "x-misbehave" }

func (misType) ValidateDeclare(d *sdk.Declaration) error {
	if v, ok := d.Args.Get("x-foo"); ok {
		if _, ok := v.AsString(); !ok {
			return sdk.Errorf(sdk.PreconditionFailed, "x-foo must be a string")
		}
	}
	// x-as asks the broker to validate the declare as another type too,
	// right or wrong (ABI 1.1).
	if v, ok := d.Args.Get("x-as"); ok {
		s, _ := v.AsString()
		d.ValidateAs(s)
	}
	if v, ok := d.Args.Get("x-exists"); ok {
		s, _ := v.AsString()
		if !sdk.TypeExists(s) {
			return sdk.Errorf(sdk.NotFound, "no exchange type %s", s)
		}
	}
	return nil
}

func (misType) Create(d *sdk.Declaration) (sdk.Exchange, error) {
	return &exchange{byKey: make(map[string][]sdk.BindingID)}, nil
}

type exchange struct {
	byKey map[string][]sdk.BindingID
	order []sdk.BindingID // in the order added: replay must keep it
	sink  [][]byte
}

func (x *exchange) ValidateBinding(b *sdk.Binding) error {
	if _, ok := b.Args.Get("x-reject"); ok {
		return sdk.Errorf(sdk.PreconditionFailed, "binding rejected as asked")
	}
	if v, ok := b.Args.Get("x-as"); ok {
		s, _ := v.AsString()
		b.ValidateAs(s)
	}
	return nil
}

func (x *exchange) AddBinding(b *sdk.Binding) error {
	x.byKey[b.Key] = append(x.byKey[b.Key], b.ID)
	x.order = append(x.order, b.ID)
	return nil
}

func (x *exchange) RemoveBindings(ids []sdk.BindingID) error {
	for _, id := range ids {
		for k, list := range x.byKey {
			for i, y := range list {
				if y == id {
					x.byKey[k] = append(list[:i:i], list[i+1:]...)
				}
			}
		}
		for i, y := range x.order {
			if y == id {
				x.order = append(x.order[:i:i], x.order[i+1:]...)
				break
			}
		}
	}
	return nil
}

var spin, idles int

var fourHeaders = []string{"h9", "h7", "h5", "h3"}

var garbageMap map[int]*[32]byte

func (x *exchange) Route(m *sdk.Message, r *sdk.Result) error {
	switch key := m.RoutingKey(); {
	case key == "nop":
		return nil
	case key == "panic":
		panic("asked to panic")
	case key == "loop":
		for {
			spin++
		}
	case key == "sleep":
		time.Sleep(time.Hour)
	case key == "bomb":
		for {
			x.sink = append(x.sink, make([]byte, 1<<20))
		}
	case key == "garbage":
		// About 256 KiB of small garbage per call: bounded only if the
		// Go runtime gets to collect.
		m := map[int]*[32]byte{}
		for i := range 1024 {
			b := make([]byte, 200)
			b[0] = byte(i)
			x.sink = append(x.sink, b)
			m[i] = new([32]byte)
		}
		x.sink = x.sink[:0]
		garbageMap = m
	case key == "badid":
		r.Add(99999)
		return nil
	case key == "via":
		r.Via("direct", 1500*time.Millisecond)
		return nil
	case key == "stamp":
		r.Via("direct", time.Second)
		r.SetHeader("stamped", "yes")
		r.RemoveHeader("route-to")
		return nil
	case key == "stamp-now":
		r.Via("direct", 0)
		r.SetHeader("stamped", "yes")
		return nil
	case key == "error":
		return sdk.Errorf(sdk.PreconditionFailed, "refused: %s", "asked to")
	case key == "plain-error":
		return errPlain
	case key == "header":
		v, ok := m.Header("route-to")
		if s, isString := v.AsString(); ok && isString {
			r.AddAll(x.byKey[s])
		}
		return nil
	case key == "headers4", key == "headers4-scan":
		// Four header lookups, through the SDK's index or by scanning
		// the table for each (BenchmarkHeaderLookups compares them).
		found := 0
		h := m.Headers()
		for _, name := range fourHeaders {
			var ok bool
			if key == "headers4" {
				_, ok = m.Header(name)
			} else {
				_, ok = h.Get(name)
			}
			if ok {
				found++
			}
		}
		if found == len(fourHeaders) {
			r.AddAll(x.byKey["found"])
		}
		return nil
	case key == "first":
		// The first binding added: shows replay keeps binding order.
		if len(x.order) > 0 {
			r.Add(x.order[0])
		}
		return nil
	case strings.HasPrefix(key, "log:"):
		sdk.Log(sdk.LevelInfo, key[4:])
	}
	r.AddAll(x.byKey[m.RoutingKey()])
	return nil
}

type plainError struct{}

func (plainError) Error() string { return "a plain error" }

var errPlain error = plainError{}

func (x *exchange) Info() map[string]any {
	g, _ := sdk.Settings().Get("greeting")
	s, _ := g.AsString()
	return map[string]any{"bindings": len(x.order), "greeting": s, "idles": idles, "monotonic": int64(sdk.Monotonic())}
}
