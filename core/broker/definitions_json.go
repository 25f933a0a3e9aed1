package broker

import (
	"encoding/json"
	"fmt"

	"github.com/warrenmq/warren/protocol"
)

// Field tables (arguments, policy definitions) cross into definitions as
// JSON objects. The rendering is the admin API's: byte arrays as base64,
// timestamps as RFC 3339, NaN and the infinities as strings. Reading goes
// the way RabbitMQ reads JSON into a table: whole numbers become signed
// 64-bit integers ('l'), other numbers doubles, objects tables, lists
// arrays, null void.

// tableFromJSON reads a JSON object decoded with UseNumber into a table;
// a missing (nil) value is an empty table.
func tableFromJSON(v any) (protocol.Table, error) {
	switch m := v.(type) {
	case nil:
		return nil, nil
	case []any:
		if len(m) == 0 {
			return nil, nil // what RabbitMQ before 3.7 wrote for an empty table
		}
	case map[string]any:
		t := make(protocol.Table, len(m))
		for k, e := range m {
			val, err := valueFromJSON(e)
			if err != nil {
				return nil, fmt.Errorf("%q: %v", k, err)
			}
			t[k] = val
		}
		if len(t) == 0 {
			return nil, nil
		}
		return t, nil
	}
	return nil, fmt.Errorf("must be an object, not %s", jsonKind(v))
}

func valueFromJSON(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s out of range", x)
		}
		return f, nil
	case map[string]any:
		t, err := tableFromJSON(x)
		if t == nil && err == nil {
			t = protocol.Table{}
		}
		return t, err
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			val, err := valueFromJSON(e)
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	}
	return v, nil // string, bool, nil
}

// jsonKind names a decoded JSON value's type for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
