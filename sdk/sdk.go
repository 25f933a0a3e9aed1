// Package sdk is the Go guest SDK of Warren's routing ABI: with it, an
// exchange type is a plain Go type, and the SDK provides the module's
// exports, its memory handling and the encoding of sdk/ABI.md.
//
// A plugin is a main package built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my-plugin.wasm .
//
// It registers its description in an init function (a reactor's main is
// never called; keep an empty one to satisfy the compiler):
//
//	package main
//
//	import "github.com/warrenmq/warren/sdk"
//
//	func init() {
//		sdk.Register(sdk.Plugin{
//			Name:     "my-plugin", // the .wasm file is my-plugin.wasm
//			Version:  "1.0.0",
//			Features: sdk.FeatureHeaders,
//			Types:    []sdk.ExchangeType{myType{}},
//		})
//	}
//
//	func main() {}
//
// An ExchangeType validates declares and creates one Exchange per exchange
// of its type; the Exchange keeps its bindings and routes. The broker runs
// several instances of the module and replays every exchange and binding
// into each, so an Exchange's state must follow from its bindings (in the
// order they are added) alone: no randomness that survives a call, no
// reading the clock to decide where a binding goes.
//
// Everything the SDK does on the route path is free of allocation, and
// Route implementations should be too: garbage collection in a guest runs
// inside the calls that allocate, on the publisher's time. Go compiled to
// WebAssembly is several times slower than native, and function calls are
// its dearest part (tens of ns each): keep Route's call depth shallow.
// A panic in Route is not recovered (a deferred recover would cost more
// than the rest of the SDK's route path); the host reports the panic's
// message as the failure and replaces the instance.
//
// The package builds on any platform: the encoding and dispatch are plain
// Go and can be tested natively (MakeMessage, MakeTable); only the exports
// and host imports need GOOS=wasip1.
package sdk

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/warrenmq/warren/sdk/abi"
)

// Plugin describes the module: what warren_describe answers.
type Plugin struct {
	// Name is the plugin's name, the name of its .wasm file without the
	// extension and what `warrenctl plugins enable` takes.
	Name    string
	Version string
	// Features says what Route needs besides the routing key.
	Features Feature
	Types    []ExchangeType
	// Settings declares the settings the plugin reads (broker.toml's
	// per-plugin settings); the broker refuses any others.
	Settings []Setting
	// OnIdle, when set, runs in warren_idle, off the route path, about
	// once a second on an instance that was used: trim caches here.
	OnIdle func()
	// OnSettingsChanged, when set, runs when an operator changed the
	// plugin's settings in the running broker, with all of them; an error
	// refuses the change. Settings() answers the new settings from then
	// on, with or without it.
	OnSettingsChanged func(settings Table) error
}

// Feature is a bit set of what Route receives.
type Feature uint32

const (
	FeatureHeaders    Feature = abi.FeatureHeaders    // the property list, for the headers
	FeatureProperties Feature = abi.FeatureProperties // the property list
	FeatureBody       Feature = abi.FeatureBody       // the body
)

// Setting declares one setting.
type Setting struct {
	Name string
	Kind SettingKind
	Doc  string
}

// SettingKind is the type a setting must have.
type SettingKind uint8

const (
	AnySetting    SettingKind = abi.SettingAny
	BoolSetting   SettingKind = abi.SettingBool
	IntSetting    SettingKind = abi.SettingInt
	FloatSetting  SettingKind = abi.SettingFloat
	StringSetting SettingKind = abi.SettingString
	ArraySetting  SettingKind = abi.SettingArray
	TableSetting  SettingKind = abi.SettingTable
)

// ExchangeType is one exchange type the plugin provides.
type ExchangeType interface {
	// Name is the type clients declare, e.g. "x-content".
	Name() string
	// ValidateDeclare checks a declare's arguments before the exchange
	// exists.
	ValidateDeclare(d *Declaration) error
	// Create makes the routing state of an exchange. It is also called
	// for exchanges recovered after a restart, without ValidateDeclare, so
	// it must accept whatever ValidateDeclare accepted.
	Create(d *Declaration) (Exchange, error)
}

// Exchange is the routing state of one exchange.
type Exchange interface {
	// ValidateBinding checks a binding before it is added; b.ID is not
	// assigned yet.
	ValidateBinding(b *Binding) error
	// AddBinding adds a binding. It must accept what ValidateBinding
	// accepted: after a restart, bindings come back through AddBinding
	// alone, in the order they were first added.
	AddBinding(b *Binding) error
	// RemoveBindings removes bindings by id. The slice is reused after
	// the call.
	RemoveBindings(ids []BindingID) error
	// Route adds to r the bindings m goes to, or asks for another type
	// with r.Via. An error fails this publish only.
	Route(m *Message, r *Result) error
}

// PolicyChanger is implemented by exchanges that read their policy.
type PolicyChanger interface {
	// PolicyChanged hands the policy now in force; not Valid when none.
	PolicyChanged(policy Table) error
}

// Deleter is implemented by exchanges that release something on delete.
type Deleter interface {
	Delete()
}

// Informer is implemented by exchanges with figures for the admin API.
type Informer interface {
	// Info returns values MakeTable can encode.
	Info() map[string]any
}

// Declaration is what exchange.declare fixed about an exchange. The plugin
// may keep it.
type Declaration struct {
	VHost      string
	Name       string
	Type       string
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       Table

	validateAs []string
}

// ValidateAs asks the broker, from ValidateDeclare, to validate the same
// declare as exchange type typ would once ValidateDeclare returns without
// error: typ's refusal is the client's answer. A type the broker does not
// know is refused with 406. An exchange that hands messages to another
// type (Result.Via) uses it so that a declare that type would refuse is
// refused at once (ABI 1.1).
func (d *Declaration) ValidateAs(typ string) { d.validateAs = append(d.validateAs, typ) }

// ValidatingAs returns the types ValidateAs named, in order; for tests.
func (d *Declaration) ValidatingAs() []string { return d.validateAs }

// BindingID names a binding in Route's answer. The broker assigns it and
// may reuse it after the binding is removed.
type BindingID uint32

// DestKind says where a binding leads.
type DestKind uint8

const (
	ToQueue    DestKind = abi.DestQueue
	ToExchange DestKind = abi.DestExchange
)

// Binding is one binding of the exchange. The plugin may keep it.
type Binding struct {
	ID          BindingID
	Kind        DestKind
	Destination string // queue or exchange name
	Key         string
	Args        Table

	validateAs []string
}

// ValidateAs asks the broker, from ValidateBinding, to validate the same
// binding as an exchange of type typ (with this exchange's declaration)
// would, once ValidateBinding returns without error (ABI 1.1).
func (b *Binding) ValidateAs(typ string) { b.validateAs = append(b.validateAs, typ) }

// ValidatingAs returns the types ValidateAs named, in order; for tests.
func (b *Binding) ValidatingAs() []string { return b.validateAs }

// Result collects what Route decides. Add the bindings the message goes
// to, or call Via to hand the message to another exchange type over this
// exchange's bindings, now or after a hold.
type Result struct {
	ids    []uint32
	via    string
	hold   time.Duration
	hasVia bool
	// headers holds the entries SetHeader and RemoveHeader encoded, as
	// the body of a field table; headerErr the first that failed.
	headers   []byte
	headerErr error
}

// Reset empties r, keeping its capacity (the SDK resets it before each
// Route; tests reusing one Result call it).
func (r *Result) Reset() {
	r.ids = r.ids[:0]
	r.via, r.hold, r.hasVia = "", 0, false
	r.headers, r.headerErr = r.headers[:0], nil
}

// SetHeader sets a header of the message the broker holds and later routes
// (ABI 1.1): it replaces a header of the same name or adds one. It goes
// with Via and a hold greater than zero; otherwise Route fails. v is what
// MakeTable encodes; a nil v removes the header. Encoding reuses r's
// buffer; passing v as an interface may box it (a small allocation).
func (r *Result) SetHeader(name string, v any) {
	if len(name) > 255 {
		r.headerErr = fmt.Errorf("header name %.32q... longer than 255 bytes", name)
		return
	}
	r.headers = append(append(r.headers, byte(len(name))), name...)
	var err error
	if r.headers, err = appendValue(r.headers, v); err != nil && r.headerErr == nil {
		r.headerErr = fmt.Errorf("header %q: %w", name, err)
	}
}

// RemoveHeader removes a header of the message the broker holds and later
// routes, as SetHeader(name, nil).
func (r *Result) RemoveHeader(name string) { r.SetHeader(name, nil) }

// HeaderChanges returns what SetHeader and RemoveHeader recorded, as a
// Table (removals as void values); for tests.
func (r *Result) HeaderChanges() Table {
	if len(r.headers) == 0 {
		return Table{}
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(r.headers)))
	return Table{raw: append(b, r.headers...)}
}

// Add routes the message to binding id. Adding one twice is harmless.
func (r *Result) Add(id BindingID) { r.ids = append(r.ids, uint32(id)) }

// AddAll routes the message to every binding of ids.
func (r *Result) AddAll(ids []BindingID) {
	for _, id := range ids {
		r.ids = append(r.ids, uint32(id))
	}
}

// Via asks the broker to route the message with exchange type typ over
// this exchange's bindings, after holding it for hold (0: at once); the
// broker keeps held messages durable and owns the timer. Bindings added
// to the same Result are an error: it is one or the other.
func (r *Result) Via(typ string, hold time.Duration) {
	r.via, r.hold, r.hasVia = typ, hold, true
}

// Len is the number of binding ids added so far.
func (r *Result) Len() int { return len(r.ids) }

// ID returns the i-th binding id added.
func (r *Result) ID(i int) BindingID { return BindingID(r.ids[i]) }

// Bindings returns the ids added so far (for tests; it allocates).
func (r *Result) Bindings() []BindingID {
	out := make([]BindingID, len(r.ids))
	for i, id := range r.ids {
		out[i] = BindingID(id)
	}
	return out
}

// ViaType returns what Via set.
func (r *Result) ViaType() (typ string, hold time.Duration, ok bool) {
	return r.via, r.hold, r.hasVia
}

// Error is an AMQP reply the client sees: a reply code and a text without
// the code's name (the broker prefixes it, e.g. "PRECONDITION_FAILED - ").
// Errors that are not an *Error are reported as 406 PRECONDITION_FAILED.
type Error struct {
	Code uint16
	Text string
}

func (e *Error) Error() string { return e.Text }

// Reply codes a plugin may use.
const (
	AccessRefused      = 403
	NotFound           = 404
	ResourceLocked     = 405
	PreconditionFailed = 406
	InternalError      = 541
)

// Errorf returns an *Error with the code and a formatted text.
func Errorf(code uint16, format string, args ...any) error {
	return &Error{Code: code, Text: fmt.Sprintf(format, args...)}
}

// Register sets the plugin's description. Call it once, from init.
func Register(p Plugin) {
	if registered != nil {
		panic("sdk: Register called twice")
	}
	registered = newDispatcher(p)
}

// Level is a log level.
type Level int32

const (
	LevelDebug Level = abi.LogDebug
	LevelInfo  Level = abi.LogInfo
	LevelWarn  Level = abi.LogWarn
	LevelError Level = abi.LogError
)

// Log writes a line to the broker's log, tagged with the plugin's name.
// The broker drops lines beyond about 50 a second.
func Log(level Level, msg string) { hostLog(level, msg) }

// Logf formats a line for Log.
func Logf(level Level, format string, args ...any) { hostLog(level, fmt.Sprintf(format, args...)) }

// Monotonic reads the host's monotonic clock: time since an arbitrary
// point, for measuring intervals.
func Monotonic() time.Duration { return time.Duration(hostMonotonic()) }

// Now reads the host's wall clock.
func Now() time.Time { return time.Unix(0, hostWall()) }

// Settings returns the plugin's settings from the broker's configuration,
// as they are now: an operator may change them in a running broker (see
// Plugin.OnSettingsChanged).
func Settings() Table {
	if !settingsRead {
		settings = Table{raw: hostConfig()}
		settingsRead = true
	}
	return settings
}

// TypeExists reports whether clients can declare exchanges of type name on
// the broker now: a built-in type, or one of an enabled plugin (ABI 1.1).
func TypeExists(name string) bool { return hostTypeExists(name) }

var (
	settings     Table
	settingsRead bool
)
