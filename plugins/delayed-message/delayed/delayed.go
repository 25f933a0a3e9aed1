// Package delayed is the x-delayed-message exchange type: a message with
// an x-delay header is held for that many milliseconds, then routed as the
// exchange's x-delayed-type would route it, over the exchange's own
// bindings. The plugin's main package registers it; it is a package of its
// own so its logic runs natively in tests.
//
// The plugin only decides: Route answers Result.Via(delayed type, hold),
// and the broker keeps held messages (durably, for persistent messages on
// a durable exchange), owns the timers, and routes each message through
// its own router of the delayed type when due. A message without a delay
// is routed through that type at once (Via with no hold).
//
// Bindings are checked as the delayed type would check them, for the
// built-in types and the types Warren ships (x-consistent-hash,
// x-jms-topic, x-jms-queue), whose checks this package links in; other
// plugin types check a binding only when a message is first routed
// through them.
package delayed

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/plugins/consistent-hash/chash"
	"github.com/warrenmq/warren/plugins/jms/router"
	"github.com/warrenmq/warren/sdk"
)

// Version is the plugin's version.
const Version = "1.0.0"

// Names the type reads.
const (
	TypeName       = "x-delayed-message"
	ArgDelayedType = "x-delayed-type"
	HeaderDelay    = "x-delay"
)

// MaxDelay is the longest hold, in milliseconds: what a time.Duration
// holds (about 292 years). RabbitMQ's plugin holds at most 2^32-1 ms
// (49.7 days) and routes longer delays at once; Warren holds them.
const MaxDelay = math.MaxInt64 / int64(time.Millisecond)

// builtin are the broker's own types.
var builtin = map[string]bool{"direct": true, "fanout": true, "topic": true, "headers": true}

// shipped are the plugin types Warren ships, whose checks run here.
var shipped = map[string]sdk.ExchangeType{
	chash.TypeName:       chash.Type{},
	router.TopicTypeName: router.TopicType{},
	router.QueueTypeName: router.QueueType{},
}

// Type is the x-delayed-message exchange type.
type Type struct{}

var (
	_ sdk.ExchangeType = Type{}
	_ sdk.Exchange     = (*Exchange)(nil)
	_ sdk.Informer     = (*Exchange)(nil)
)

func (Type) Name() string { return TypeName }

// errType is RabbitMQ's answer to a missing or unknown x-delayed-type.
func errType(why string) error {
	return sdk.Errorf(sdk.PreconditionFailed, "Invalid argument, 'x-delayed-type' must be an existing exchange type%s", why)
}

// DelayedType reads and checks the x-delayed-type argument: a built-in
// type, a shipped one, or another plugin's (an x- name); not
// x-delayed-message itself.
func DelayedType(args sdk.Table) (string, error) {
	v, ok := args.Get(ArgDelayedType)
	if !ok {
		return "", errType("")
	}
	s, ok := v.AsString()
	switch {
	case !ok || s == "":
		return "", errType("")
	case s == TypeName:
		return "", errType(" other than x-delayed-message")
	case builtin[s] || shipped[s] != nil || strings.HasPrefix(s, "x-"):
		return strings.Clone(s), nil
	}
	return "", errType(", not '" + s + "'")
}

func (Type) ValidateDeclare(d *sdk.Declaration) error {
	typ, err := DelayedType(d.Args)
	if err != nil {
		return err
	}
	// The delayed type's own arguments (hash-header, say) are checked as
	// that type would.
	if t := shipped[typ]; t != nil {
		inner := *d
		inner.Type = typ
		return t.ValidateDeclare(&inner)
	}
	return nil
}

func (Type) Create(d *sdk.Declaration) (sdk.Exchange, error) {
	typ, err := DelayedType(d.Args)
	if err != nil {
		return nil, err
	}
	x := &Exchange{typ: typ}
	if t := shipped[typ]; t != nil {
		inner := *d
		inner.Type = typ
		if x.inner, err = t.Create(&inner); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// Exchange is one x-delayed-message exchange. It keeps no bindings: the
// broker routes a due message through its own router of the delayed type,
// built from the exchange's bindings.
type Exchange struct {
	typ   string
	inner sdk.Exchange // an exchange of a shipped delayed type, to check bindings; nil otherwise
}

// ValidateBinding checks the binding as the delayed type would.
func (x *Exchange) ValidateBinding(b *sdk.Binding) error {
	if x.typ == "headers" {
		return validateHeaders(b.Args)
	}
	if x.inner != nil {
		return x.inner.ValidateBinding(b)
	}
	return nil
}

// validateHeaders is the headers exchange's check: x-match, if given, is
// one of its four modes.
func validateHeaders(args sdk.Table) error {
	v, ok := args.Get("x-match")
	if !ok {
		return nil
	}
	switch s, _ := v.AsString(); s {
	case "all", "any", "all-with-x", "any-with-x":
		return nil
	}
	return sdk.Errorf(sdk.PreconditionFailed, "Invalid x-match field value %s; expected all, any, all-with-x, or any-with-x", describe(v))
}

func describe(v sdk.Value) string {
	if s, ok := v.AsString(); ok {
		return "'" + s + "'"
	}
	return "of type '" + string(v.Kind()) + "'"
}

// AddBinding accepts the binding: the exchange keeps no state of its
// bindings (and a replay must not fail on what was accepted before).
func (x *Exchange) AddBinding(*sdk.Binding) error { return nil }

func (x *Exchange) RemoveBindings([]sdk.BindingID) error { return nil }

// Route hands the message to the delayed type, after its x-delay.
func (x *Exchange) Route(m *sdk.Message, r *sdk.Result) error {
	v, ok := m.Header(HeaderDelay)
	hold, err := Delay(v, ok)
	if err != nil {
		return err
	}
	r.Via(x.typ, hold)
	return nil
}

// Delay reads an x-delay header: milliseconds as an integer of any width,
// a float or decimal (truncated), or a string of decimal digits (as
// RabbitMQ's plugin reads them). A delay of 0 or less, an absent header
// or a value of another type (boolean, table, ...) means no delay; a
// string that is not an integer, or a delay beyond MaxDelay, is refused
// with 406.
func Delay(v sdk.Value, present bool) (time.Duration, error) {
	if !present {
		return 0, nil
	}
	var ms int64
	switch v.Kind() {
	case 'b', 'B', 's', 'u', 'I', 'i', 'l':
		ms, _ = v.AsInt()
	case 'f', 'd', 'D':
		f, _ := v.AsFloat()
		switch {
		case math.IsNaN(f) || f < 1:
			return 0, nil
		case f >= float64(MaxDelay)+1:
			return 0, sdk.Errorf(sdk.PreconditionFailed, "x-delay of %g ms is beyond the longest hold, %d ms", f, MaxDelay)
		}
		ms = int64(f)
	case 'S':
		s, _ := v.AsString()
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			var ne *strconv.NumError
			if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
				return 0, sdk.Errorf(sdk.PreconditionFailed, "x-delay must be an integer number of milliseconds, not '%s'", s)
			}
			if strings.HasPrefix(s, "-") {
				return 0, nil // hugely negative: no delay
			}
			return 0, sdk.Errorf(sdk.PreconditionFailed, "x-delay of %s ms is beyond the longest hold, %d ms", s, MaxDelay)
		}
		ms = n
	default:
		return 0, nil
	}
	if ms <= 0 {
		return 0, nil
	}
	if ms > MaxDelay {
		return 0, sdk.Errorf(sdk.PreconditionFailed, "x-delay of %d ms is beyond the longest hold, %d ms", ms, MaxDelay)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Info reports the exchange's figures for the admin API.
func (x *Exchange) Info() map[string]any {
	return map[string]any{"delayed_type": x.typ}
}
