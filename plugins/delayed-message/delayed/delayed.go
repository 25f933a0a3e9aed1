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
// is routed through that type at once (Via with no hold). A held message
// has its x-delay header negated, as RabbitMQ's plugin does, so a
// consumer can tell it was delayed.
//
// Declares and bindings are checked as the delayed type would check them,
// by the broker (ABI 1.1's validate-as): a declare with an x-delayed-type
// that does not exist, or with arguments that type refuses, and a binding
// that type would refuse, are refused at once, not when a held message
// comes due. Create checks the argument's form only: at a restart the
// delayed type's plugin may be enabled after this one.
package delayed

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/warren/sdk"
)

// Version is the plugin's version.
const Version = "1.1.0"

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

// DelayedType reads the x-delayed-type argument: a non-empty string other
// than x-delayed-message itself. Whether the type exists is checked at
// declare (ValidateDeclare), not here.
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
	}
	return strings.Clone(s), nil
}

// ValidateDeclare refuses an x-delayed-type that is not an exchange type
// of this broker, and asks the broker to check the declare's arguments
// as that type would (hash-header of x-consistent-hash, say).
func (Type) ValidateDeclare(d *sdk.Declaration) error {
	typ, err := DelayedType(d.Args)
	if err != nil {
		return err
	}
	if !sdk.TypeExists(typ) {
		return errType(", not '" + typ + "'")
	}
	d.ValidateAs(typ)
	return nil
}

func (Type) Create(d *sdk.Declaration) (sdk.Exchange, error) {
	typ, err := DelayedType(d.Args)
	if err != nil {
		return nil, err
	}
	return &Exchange{typ: typ}, nil
}

// Exchange is one x-delayed-message exchange. It keeps no bindings: the
// broker routes a due message through its own router of the delayed type,
// built from the exchange's bindings.
type Exchange struct {
	typ string
}

// ValidateBinding asks the broker to check the binding as the delayed type
// would, so a binding it would refuse is refused now rather than when a
// message is due.
func (x *Exchange) ValidateBinding(b *sdk.Binding) error {
	b.ValidateAs(x.typ)
	return nil
}

// AddBinding accepts the binding: the exchange keeps no state of its
// bindings (and a replay must not fail on what was accepted before).
func (x *Exchange) AddBinding(*sdk.Binding) error { return nil }

func (x *Exchange) RemoveBindings([]sdk.BindingID) error { return nil }

// Route hands the message to the delayed type, after its x-delay. A held
// message's x-delay is negated, as RabbitMQ's plugin does.
func (x *Exchange) Route(m *sdk.Message, r *sdk.Result) error {
	v, ok := m.Header(HeaderDelay)
	hold, err := Delay(v, ok)
	if err != nil {
		return err
	}
	r.Via(x.typ, hold)
	if hold > 0 {
		r.SetHeader(HeaderDelay, Negated(v, hold))
	}
	return nil
}

// Negated is the x-delay a held message is delivered with: the delay
// negated, in the header's own integer type when it is a signed integer
// (RabbitMQ's plugin keeps the type), as a float when it was one, and as a
// 64-bit integer otherwise (an unsigned type cannot hold it; a string was
// read as a number).
func Negated(v sdk.Value, hold time.Duration) any {
	ms := hold.Milliseconds()
	switch v.Kind() {
	case 'b':
		if ms <= math.MaxInt8 {
			return int8(-ms)
		}
	case 's':
		if ms <= math.MaxInt16 {
			return int16(-ms)
		}
	case 'I':
		if ms <= math.MaxInt32 {
			return int32(-ms)
		}
	case 'f', 'd', 'D':
		f, _ := v.AsFloat()
		return -f
	}
	return -ms
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
