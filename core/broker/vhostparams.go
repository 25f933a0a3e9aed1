package broker

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/storage"
)

// Runtime parameters of vhosts, as RabbitMQ's rabbit_runtime_parameters
// keeps them for its plugins' components (shovel, federation-upstream):
// a value (a JSON object, or a list as a federation-upstream-set's) per
// vhost, component and name. A part of the
// broker registers a component and checks its values; the broker stores
// and replicates them like the global parameters (node.go), through the
// metadata group, and tells the watchers when they changed, so that the
// component can act on them. vhost-limits and operator_policy, which
// RabbitMQ also calls components, are not these: the admin API and
// definitions handle them on their own paths.
//
// Only the node a change is asked of checks it: the others apply what
// the group committed, so a node where the component is not registered
// still holds its parameters (and lists and exports them).

// VHostParameter is one runtime parameter of a vhost, of a component a
// part of the broker registered.
type VHostParameter struct {
	VHost, Component, Name string
	// Value is the API's JSON value: an object (protocol.Table) or a list
	// ([]any); numbers int64 or float64, objects protocol.Table, lists
	// []any within.
	Value any
}

// ParameterComponent checks a component's values before they are set (on
// the node that is asked, before proposing).
type ParameterComponent interface {
	// Check returns nil or an error whose text names the bad key in
	// RabbitMQ's words (e.g. `Key "src-uri" not found in shovel`); user is
	// the acting user's name ("" when none, e.g. boot or an import).
	Check(vhost, name string, value any, user string) error
}

type vparamKey struct{ vhost, component, name string }

// vhostParams is the broker's part for vhost parameters. Every map and
// list is replaced whole, never changed in place, so readers take no lock.
type vhostParams struct {
	components atomic.Pointer[map[string]ParameterComponent]
	params     atomic.Pointer[map[vparamKey]VHostParameter]
	watchers   atomic.Pointer[[]func()]
	// changed wakes the goroutine that calls the watchers: applies run
	// under the metadata group's applyMu, an import's defsMu or a join's
	// joinMu, and the watchers must run under none of them.
	changed    chan struct{}
	notifyOnce sync.Once
}

// reservedComponents are the components the admin API and definitions
// handle themselves.
var reservedComponents = []string{"vhost-limits", operatorPolicyComponent}

// RegisterParameterComponent makes a component's parameters settable. It
// is called before the broker serves; a name already registered, empty,
// holding "/" (the store's key separates component and name with it) or
// one of the broker's own is a programming error, and panics.
func (b *Broker) RegisterParameterComponent(name string, c ParameterComponent) {
	if name == "" || strings.Contains(name, "/") || slices.Contains(reservedComponents, name) || c == nil {
		panic(fmt.Sprintf("broker: parameter component %q cannot be registered", name))
	}
	for {
		old := b.vparams.components.Load()
		next := map[string]ParameterComponent{}
		if old != nil {
			if _, dup := (*old)[name]; dup {
				panic(fmt.Sprintf("broker: parameter component %q registered twice", name))
			}
			maps.Copy(next, *old)
		}
		next[name] = c
		if b.vparams.components.CompareAndSwap(old, &next) {
			return
		}
	}
}

// ParameterComponents are the registered components' names, sorted.
func (b *Broker) ParameterComponents() []string {
	if m := b.vparams.components.Load(); m != nil {
		return slices.Sorted(maps.Keys(*m))
	}
	return nil
}

func (b *Broker) parameterComponent(name string) (ParameterComponent, bool) {
	if m := b.vparams.components.Load(); m != nil {
		c, ok := (*m)[name]
		return c, ok
	}
	return nil, false
}

// validationFailed is RabbitMQ's form of a refused parameter, which the
// admin API answers as it is (400).
func validationFailed(format string, args ...any) error {
	return reply.PreconditionFailed("Validation failed\n\n%s\n", fmt.Sprintf(format, args...))
}

// SetVHostParameter sets a parameter of a registered component, once the
// component's Check passed it; created says there was none before. An
// unknown component or a bad value is refused in RabbitMQ's words
// ("Validation failed ..."), a missing vhost is not found. Setting the
// value it has already changes nothing and tells no watcher.
func (b *Broker) SetVHostParameter(vhost, component, name string, value any, user string) (created bool, err error) {
	c, ok := b.parameterComponent(component)
	if !ok {
		return false, validationFailed("component %s not found", component)
	}
	if name == "" {
		return false, validationFailed("a parameter of component %s needs a name", component)
	}
	if _, ok := b.VHost(vhost); !ok {
		return false, reply.NotFound("no vhost '%s'", vhost)
	}
	// As the store and the log give it back, so that what Check sees, what
	// this node holds and what the others hold are the same.
	value, err = reencodeValue(value)
	if err != nil {
		return false, validationFailed("the value of parameter %s cannot be stored: %v", name, err)
	}
	if err := c.Check(vhost, name, value, user); err != nil {
		return false, validationFailed("%v", err)
	}
	_, existed := b.LookupVHostParameter(vhost, component, name)
	if err := b.change(setVHostParameter{Param: vhostParameterRecord{VHost: vhost, Component: component, Name: name, Value: value}}); err != nil {
		return false, err
	}
	return !existed, nil
}

// ClearVHostParameter removes a parameter (of any component, registered
// or not); one that is not there is not found.
func (b *Broker) ClearVHostParameter(vhost, component, name string) error {
	return b.change(clearVHostParameter{VHost: vhost, Component: component, Name: name})
}

// VHostParameters lists the parameters of a vhost and a component, ""
// meaning any, sorted by vhost, component and name. The values are not
// to be changed.
func (b *Broker) VHostParameters(vhost, component string) []VHostParameter {
	m := b.vparams.params.Load()
	if m == nil {
		return nil
	}
	var out []VHostParameter
	for k, p := range *m {
		if (vhost == "" || k.vhost == vhost) && (component == "" || k.component == component) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b VHostParameter) int {
		return cmp.Or(strings.Compare(a.VHost, b.VHost), strings.Compare(a.Component, b.Component), strings.Compare(a.Name, b.Name))
	})
	return out
}

// LookupVHostParameter finds one parameter; its value is not to be
// changed.
func (b *Broker) LookupVHostParameter(vhost, component, name string) (VHostParameter, bool) {
	if m := b.vparams.params.Load(); m != nil {
		p, ok := (*m)[vparamKey{vhost, component, name}]
		return p, ok
	}
	return VHostParameter{}, false
}

// WatchVHostParameters registers f, called whenever this node's set of
// vhost parameters changed: a set, a clear, a vhost deleted, a snapshot
// restored, a join that wiped. f runs on a goroutine of the broker's, one
// call at a time, with no broker lock held, after the change is applied
// and stored on this node; changes close together may make one call. It
// is also called once soon after it is registered, for the parameters
// restored at start. f must not block for long: the calls after it wait.
// It is called no more once the broker shuts down.
func (b *Broker) WatchVHostParameters(f func()) {
	for {
		old := b.vparams.watchers.Load()
		var next []func()
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, f)
		if b.vparams.watchers.CompareAndSwap(old, &next) {
			break
		}
	}
	b.vparams.notifyOnce.Do(func() {
		b.wg.Add(1)
		go b.notifyVHostParameters()
	})
	b.vhostParametersChanged()
}

// vhostParametersChanged wakes the watchers' goroutine, without waiting.
func (b *Broker) vhostParametersChanged() {
	select {
	case b.vparams.changed <- struct{}{}:
	default: // a wake-up is pending already: it reads the state after this change
	}
}

func (b *Broker) notifyVHostParameters() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case <-b.vparams.changed:
		}
		if ws := b.vparams.watchers.Load(); ws != nil {
			for _, f := range *ws {
				f()
			}
		}
	}
}

// vparamStoreName is a parameter's name in the store: component/name.
func vparamStoreName(component, name string) string { return component + "/" + name }

func (b *Broker) applySetVHostParameter(r vhostParameterRecord) error {
	if _, ok := b.VHost(r.VHost); !ok {
		return reply.NotFound("no vhost '%s'", r.VHost)
	}
	p := VHostParameter{VHost: r.VHost, Component: r.Component, Name: r.Name, Value: nonNilValue(r.Value)}
	k := vparamKey{p.VHost, p.Component, p.Name}
	if old, ok := b.LookupVHostParameter(p.VHost, p.Component, p.Name); ok && reflect.DeepEqual(old.Value, p.Value) {
		return nil // as RabbitMQ: the same value again is no change
	}
	if err := b.store.PutMeta(storage.KindVHostParameter, p.VHost, vparamStoreName(p.Component, p.Name), vhostParameterRecord{Value: p.Value}.Table()); err != nil {
		return reply.Internal("could not store parameter '%s' of component '%s' in vhost '%s': %v", p.Name, p.Component, p.VHost, err)
	}
	b.updateVHostParams(func(m map[vparamKey]VHostParameter) { m[k] = p })
	b.vhostParametersChanged()
	return nil
}

func (b *Broker) applyClearVHostParameter(vhost, component, name string) error {
	if _, ok := b.LookupVHostParameter(vhost, component, name); !ok {
		return reply.NotFound("no parameter '%s' of component '%s' in vhost '%s'", name, component, vhost)
	}
	if err := b.store.DeleteMeta(storage.KindVHostParameter, vhost, vparamStoreName(component, name)); err != nil {
		return reply.Internal("could not delete parameter '%s' of component '%s' in vhost '%s': %v", name, component, vhost, err)
	}
	b.updateVHostParams(func(m map[vparamKey]VHostParameter) { delete(m, vparamKey{vhost, component, name}) })
	b.vhostParametersChanged()
	return nil
}

// dropVHostParameters forgets a deleted vhost's parameters in memory (the
// store's DeleteVHost removes them there); it reports whether it had any.
func (b *Broker) dropVHostParameters(vhost string) bool {
	if len(b.VHostParameters(vhost, "")) == 0 {
		return false
	}
	b.updateVHostParams(func(m map[vparamKey]VHostParameter) {
		for k := range m {
			if k.vhost == vhost {
				delete(m, k)
			}
		}
	})
	return true
}

// updateVHostParams replaces the parameters with a changed copy.
func (b *Broker) updateVHostParams(change func(map[vparamKey]VHostParameter)) {
	for {
		old := b.vparams.params.Load()
		next := map[vparamKey]VHostParameter{}
		if old != nil {
			maps.Copy(next, *old)
		}
		change(next)
		if b.vparams.params.CompareAndSwap(old, &next) {
			return
		}
	}
}

// restoreVHostParameters reads the stored parameters at start, once the
// vhosts are restored.
func (b *Broker) restoreVHostParameters() error {
	recs, err := b.store.Meta(storage.KindVHostParameter, "")
	if err != nil {
		return err
	}
	m := map[vparamKey]VHostParameter{}
	for _, r := range recs {
		component, name, ok := strings.Cut(r.Name, "/")
		if !ok {
			return fmt.Errorf("vhost parameter '%s' in vhost '%s': the stored name has no component", r.Name, r.VHost)
		}
		rec, err := readVHostParameterRecord(r.Rec)
		if err != nil {
			return fmt.Errorf("parameter '%s' of component '%s' in vhost '%s': %w", name, component, r.VHost, err)
		}
		if _, ok := b.VHost(r.VHost); !ok {
			b.log.Warn().Str("vhost", r.VHost).Str("component", component).Str("name", name).Msg("stored parameter of a vhost that is gone ignored")
			continue
		}
		m[vparamKey{r.VHost, component, name}] = VHostParameter{VHost: r.VHost, Component: component, Name: name, Value: nonNilValue(rec.Value)}
	}
	b.vparams.params.Store(&m)
	return nil
}

// reencodeValue is a parameter's value (an object or a list) as the
// store gives it back.
func reencodeValue(v any) (any, error) {
	t, err := tablerec.Reencode(protocol.Table{"value": nonNilValue(v)})
	if err != nil {
		return nil, err
	}
	return nonNilValue(t["value"]), nil
}
