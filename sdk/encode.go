package sdk

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"time"
)

// MakeTable encodes m as a Table. It serves Info results and tests; values
// may be nil, bool, the integer types (int as a 64-bit 'l'), float32,
// float64, string, []byte, time.Time, []any, map[string]any, Table and
// Value.
func MakeTable(m map[string]any) (Table, error) {
	b, err := appendTable(nil, m)
	if err != nil {
		return Table{}, err
	}
	return Table{raw: b}, nil
}

func appendTable(b []byte, m map[string]any) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) > math.MaxUint8 {
			return nil, fmt.Errorf("sdk: table key %.32q... longer than 255 bytes", k)
		}
		b = append(b, byte(len(k)))
		b = append(b, k...)
		var err error
		if b, err = appendValue(b, m[k]); err != nil {
			return nil, fmt.Errorf("sdk: table key %q: %w", k, err)
		}
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b, nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	be := binary.BigEndian
	switch x := v.(type) {
	case nil:
		return append(b, 'V'), nil
	case bool:
		if x {
			return append(b, 't', 1), nil
		}
		return append(b, 't', 0), nil
	case int8:
		return append(b, 'b', byte(x)), nil
	case uint8:
		return append(b, 'B', x), nil
	case int16:
		return be.AppendUint16(append(b, 's'), uint16(x)), nil
	case uint16:
		return be.AppendUint16(append(b, 'u'), x), nil
	case int32:
		return be.AppendUint32(append(b, 'I'), uint32(x)), nil
	case uint32:
		return be.AppendUint32(append(b, 'i'), x), nil
	case int:
		return be.AppendUint64(append(b, 'l'), uint64(x)), nil
	case int64:
		return be.AppendUint64(append(b, 'l'), uint64(x)), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("uint64 %d does not fit a signed 64-bit field", x)
		}
		return be.AppendUint64(append(b, 'l'), x), nil
	case float32:
		return be.AppendUint32(append(b, 'f'), math.Float32bits(x)), nil
	case float64:
		return be.AppendUint64(append(b, 'd'), math.Float64bits(x)), nil
	case string:
		return append(be.AppendUint32(append(b, 'S'), uint32(len(x))), x...), nil
	case []byte:
		return append(be.AppendUint32(append(b, 'x'), uint32(len(x))), x...), nil
	case time.Time:
		return be.AppendUint64(append(b, 'T'), uint64(x.Unix())), nil
	case map[string]any:
		return appendTable(append(b, 'F'), x)
	case Table:
		if !x.Valid() {
			return append(b, 'F', 0, 0, 0, 0), nil
		}
		return append(append(b, 'F'), x.raw...), nil
	case Value:
		return appendRaw(b, x), nil
	case []any:
		b = append(b, 'A')
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		for i, e := range x {
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, fmt.Errorf("array index %d: %w", i, err)
			}
		}
		be.PutUint32(b[start:], uint32(len(b)-start-4))
		return b, nil
	}
	return nil, fmt.Errorf("unsupported type %T", v)
}

// appendRaw re-encodes a Value read from a table.
func appendRaw(b []byte, v Value) []byte {
	b = append(b, v.kind)
	if v.kind == 'S' || v.kind == 'x' {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v.data)))
	}
	return append(b, v.data...)
}

// MakeMessage builds a Message for tests of an exchange's Route, with
// headers (encoded like MakeTable) and a body. Pass nil headers for a
// message without them.
func MakeMessage(routingKey string, headers map[string]any, body []byte) (*Message, error) {
	m := &Message{key: routingKey, body: body}
	if headers != nil {
		t, err := appendTable(nil, headers)
		if err != nil {
			return nil, err
		}
		m.flags = propFlag(propHeaders)
		m.props = t
	}
	return m, nil
}
