// Package tablejson renders AMQP field tables as JSON the way RabbitMQ's
// management API and definitions files show them: byte arrays as base64,
// timestamps as RFC 3339, decimals as their unscaled integer, nested
// tables and arrays recursively, and the floats JSON has no number for as
// the strings "NaN", "Infinity" and "-Infinity" (RabbitMQ 3.10 cannot
// encode those and drops the connection that sent one; Warren accepts
// them, so it must be able to show them).
//
// The result is made of maps, slices, strings, numbers, booleans and nil
// only, so encoding/json never fails on it.
package tablejson

import (
	"encoding/base64"
	"math"
	"time"

	"github.com/warrenmq/warren/protocol"
)

// Render renders a table; nil becomes an empty object, as RabbitMQ writes
// an empty table.
func Render(t protocol.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = Value(v)
	}
	return out
}

// Value renders one field value.
func Value(v any) any {
	switch x := v.(type) {
	case protocol.Table:
		return Render(x)
	case map[string]any:
		return Render(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Value(e)
		}
		return out
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case protocol.Decimal:
		return x.Value
	case float32:
		return float(float64(x))
	case float64:
		return float(x)
	}
	return v
}

// float names the floats JSON has no number for, with JavaScript's names.
func float(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}
