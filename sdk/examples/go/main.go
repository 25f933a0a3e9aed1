// Command go-key is an exchange type written with the Go SDK. x-go-key
// routes a message to the bindings whose key equals its routing key, or,
// when the exchange was declared with the argument x-key-header, equals
// that header's value (a message without the header falls back to its
// routing key). Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o go-key.wasm .
package main

import "github.com/warrenmq/warren/sdk"

func init() {
	sdk.Register(sdk.Plugin{
		Name:     "go-key", // the file is go-key.wasm
		Version:  "1.0.0",
		Features: sdk.FeatureHeaders,
		Types:    []sdk.ExchangeType{keyType{}},
	})
}

// main is never called in a reactor; the compiler wants one.
func main() {}

type keyType struct{}

func (keyType) Name() string { return "x-go-key" }

func (keyType) ValidateDeclare(d *sdk.Declaration) error {
	_, err := keyHeader(d)
	return err
}

func (keyType) Create(d *sdk.Declaration) (sdk.Exchange, error) {
	h, err := keyHeader(d)
	if err != nil {
		return nil, err
	}
	return &keyExchange{header: h, byKey: map[string][]sdk.BindingID{}, keyOf: map[sdk.BindingID]string{}}, nil
}

// keyHeader reads the declare's x-key-header argument: none, or a string.
func keyHeader(d *sdk.Declaration) (string, error) {
	v, ok := d.Args.Get("x-key-header")
	if !ok {
		return "", nil
	}
	if s, ok := v.AsString(); ok && s != "" {
		return s, nil
	}
	return "", sdk.Errorf(sdk.PreconditionFailed, "x-key-header must be a non-empty string")
}

type keyExchange struct {
	header string
	byKey  map[string][]sdk.BindingID
	keyOf  map[sdk.BindingID]string
}

func (x *keyExchange) ValidateBinding(*sdk.Binding) error { return nil }

func (x *keyExchange) AddBinding(b *sdk.Binding) error {
	x.byKey[b.Key] = append(x.byKey[b.Key], b.ID)
	x.keyOf[b.ID] = b.Key
	return nil
}

func (x *keyExchange) RemoveBindings(ids []sdk.BindingID) error {
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

func (x *keyExchange) Route(m *sdk.Message, r *sdk.Result) error {
	key := m.RoutingKey()
	if x.header != "" {
		if v, ok := m.Header(x.header); ok {
			if s, ok := v.AsString(); ok {
				key = s
			}
		}
	}
	r.AddAll(x.byKey[key]) // a map lookup with a view string does not allocate
	return nil
}

func (x *keyExchange) Info() map[string]any { return map[string]any{"bindings": len(x.keyOf)} }
