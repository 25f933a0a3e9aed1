package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/protocol"
)

// decode reads a JSON request body into v. An empty body is {}. Unknown
// fields are ignored, as RabbitMQ ignores them; a body that is not JSON is
// RabbitMQ's 400 "not_json", and a field of the wrong type is a 400 that
// names the field. Numbers in free-form objects (arguments, headers,
// definitions) arrive as json.Number, for amqpTable to tell integers from
// floats.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body) // bounded by admin.max_body_size (bounds.go)
	dec.UseNumber()
	err := dec.Decode(v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return nil
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return badRequest("the request body must be a JSON object")
		}
		return badRequest("field '%s' must be %s, not a JSON %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	if tooLarge(err) {
		return errBodyTooLarge
	}
	return badRequest("not_json")
}

// jsonKind names a Go kind as JSON would.
func jsonKind(kind string) string {
	switch {
	case kind == "bool":
		return "a boolean"
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "map", kind == "struct":
		return "an object"
	case kind == "slice":
		return "an array"
	}
	return "of another type"
}

// amqpTable converts a JSON object into a field table as RabbitMQ's
// to_amqp_table does: integers as long (int64), other numbers as double,
// strings, booleans, null as void, arrays and objects nested.
func amqpTable(m map[string]any) protocol.Table {
	if m == nil {
		return nil
	}
	t := make(protocol.Table, len(m))
	for k, v := range m {
		t[k] = amqpValue(v)
	}
	return t
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		return amqpTable(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	}
	return v
}

// flag is a boolean field of a request body. RabbitMQ's API takes true and
// false as JSON booleans or as the strings "true" and "false", and
// rabbitmqadmin sends the strings.
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true", `"true"`:
		*f = true
	case "false", `"false"`, "null":
		*f = false
	default:
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[bool]()}
	}
	return nil
}

// count is an integer field of a request body, given as a JSON number or
// a string of digits, as RabbitMQ takes it (rabbitmqadmin sends strings).
type count int

func (c *count) UnmarshalJSON(b []byte) error {
	s := string(b)
	if unquoted, err := strconv.Unquote(s); err == nil {
		s = unquoted
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[int]()}
	}
	*c = count(n)
	return nil
}
