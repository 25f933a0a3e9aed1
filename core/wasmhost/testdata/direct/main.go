// Command direct is a test plugin with the direct exchange's semantics
// (binding key == routing key), the baseline of the host's benchmarks
// against core's built-in direct type.
package main

import "github.com/warrenmq/warren/sdk"

// Set with -ldflags=-X to build other versions for the live upgrade
// tests: another version string, another type name, a binding key the
// version refuses.
var (
	version   = "1.0.0"
	typeName  = "x-direct"
	refuseKey = ""
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:    "direct",
		Version: version,
		Types:   []sdk.ExchangeType{directType{}},
	})
}

func main() {}

type directType struct{}

func (directType) Name() string                           { return typeName }
func (directType) ValidateDeclare(*sdk.Declaration) error { return nil }
func (directType) Create(*sdk.Declaration) (sdk.Exchange, error) {
	return &direct{byKey: make(map[string][]sdk.BindingID), keyOf: make(map[sdk.BindingID]string)}, nil
}

type direct struct {
	byKey map[string][]sdk.BindingID
	keyOf map[sdk.BindingID]string
}

func (x *direct) ValidateBinding(*sdk.Binding) error { return nil }

func (x *direct) AddBinding(b *sdk.Binding) error {
	if refuseKey != "" && b.Key == refuseKey {
		return sdk.Errorf(sdk.PreconditionFailed, "version %s refuses key %s", version, b.Key)
	}
	x.byKey[b.Key] = append(x.byKey[b.Key], b.ID)
	x.keyOf[b.ID] = b.Key
	return nil
}

func (x *direct) RemoveBindings(ids []sdk.BindingID) error {
	for _, id := range ids {
		key := x.keyOf[id]
		delete(x.keyOf, id)
		list := x.byKey[key]
		for i, y := range list {
			if y == id {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(x.byKey, key)
		} else {
			x.byKey[key] = list
		}
	}
	return nil
}

func (x *direct) Route(m *sdk.Message, r *sdk.Result) error {
	r.AddAll(x.byKey[m.RoutingKey()])
	return nil
}
