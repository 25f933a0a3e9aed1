package exchange

import (
	"fmt"
	"sort"

	"github.com/warrenmq/warren/internal/lockorder"
)

// Registry maps type names to types. The built-in types are always present;
// plugins register and unregister theirs while the broker runs. It is the
// only place types are looked up, so enabling a plugin is one Register call.
type Registry struct {
	mu       lockorder.RWMutex[lockorder.ExchangeRegistry]
	types    map[string]Type
	builtins map[string]bool
}

// NewRegistry returns a registry holding the built-in types.
func NewRegistry() *Registry {
	r := &Registry{types: make(map[string]Type), builtins: make(map[string]bool)}
	for _, t := range []Type{Direct{}, Fanout{}, Topic{}, Headers{}} {
		r.types[t.Name()] = t
		r.builtins[t.Name()] = true
	}
	return r
}

// Register adds t. A name already taken is an error: two plugins may not
// provide the same type, and a plugin may not replace a built-in.
func (r *Registry) Register(t Type) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.types[t.Name()]; taken {
		return fmt.Errorf("exchange type %q is already registered", t.Name())
	}
	r.types[t.Name()] = t
	return nil
}

// Unregister removes a plugin's type. Built-in types cannot be removed.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.builtins[name] {
		delete(r.types, name)
	}
}

// Lookup returns the type registered under name.
func (r *Registry) Lookup(name string) (Type, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.types[name]
	return t, ok
}

// Names lists the registered type names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.types))
	for n := range r.types {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
