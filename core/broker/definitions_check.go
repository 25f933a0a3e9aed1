package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidDefinitions is what every *InvalidError is: a definitions
// document refused before anything in it was applied.
var ErrInvalidDefinitions = errors.New("invalid definitions")

// Problem is one bad value in a definitions document.
type Problem struct {
	Entity string // "queue 'orders' in vhost '/'", or "users[3]" when it has no name
	Field  string // "durable"; "" when the entity as a whole is the problem
	Reason string
}

func (p Problem) String() string {
	if p.Field == "" {
		return p.Entity + ": " + p.Reason
	}
	return p.Entity + ": " + p.Field + ": " + p.Reason
}

// InvalidError lists every bad value of a refused document.
type InvalidError struct{ Problems []Problem }

// maxReported bounds the problems an error's text lists.
const maxReported = 20

func (e *InvalidError) Error() string {
	var sb strings.Builder
	sb.WriteString("invalid definitions: ")
	for i, p := range e.Problems {
		if i == maxReported {
			fmt.Fprintf(&sb, "; and %d more", len(e.Problems)-i)
			break
		}
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(p.String())
	}
	return sb.String()
}

// Is makes errors.Is(err, ErrInvalidDefinitions) hold.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalidDefinitions }

// problems collects what validation finds.
type problems struct{ list []Problem }

func (p *problems) add(entity, field, format string, args ...any) {
	p.list = append(p.list, Problem{Entity: entity, Field: field, Reason: fmt.Sprintf(format, args...)})
}

// object reads the fields of one entity of a document, noting each bad
// one against the entity's description.
type object struct {
	m      map[string]any
	entity string
	p      *problems
}

func (o *object) bad(field, format string, args ...any) { o.p.add(o.entity, field, format, args...) }

// has reports whether a field is present and not null.
func (o *object) has(field string) bool { return o.m[field] != nil }

// str reads a string field; a missing one is "" and, when required, a
// problem.
func (o *object) str(field string, required bool) string {
	v, ok := o.m[field]
	if !ok || v == nil {
		if required {
			o.bad(field, "missing")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		o.bad(field, "must be a string, not %s", jsonKind(v))
	}
	return s
}

// name reads a required, non-empty string.
func (o *object) name(field string) string {
	s := o.str(field, true)
	if s == "" && o.has(field) {
		if _, isString := o.m[field].(string); isString {
			o.bad(field, "must not be empty")
		}
	}
	return s
}

// boolean reads a boolean field; a missing one is def, or a problem when
// required.
func (o *object) boolean(field string, def, required bool) bool {
	v, ok := o.m[field]
	if !ok || v == nil {
		if required {
			o.bad(field, "missing")
		}
		return def
	}
	b, ok := v.(bool)
	if !ok {
		o.bad(field, "must be true or false, not %s", jsonKind(v))
	}
	return b
}

// integer reads a whole-number field; a missing one is def.
func (o *object) integer(field string, def int) int {
	v, ok := o.m[field]
	if !ok || v == nil {
		return def
	}
	n, isNumber := v.(json.Number)
	if !isNumber {
		o.bad(field, "must be a whole number, not %s", jsonKind(v))
		return def
	}
	i, err := n.Int64()
	if err != nil || int64(int(i)) != i {
		o.bad(field, "must be a whole number, not %s", n)
		return def
	}
	return int(i)
}

// tags reads a user's tags: a list of strings, or one string of
// comma-separated tags as RabbitMQ's older files and API clients write
// them.
func (o *object) tags(field string) []string {
	out := []string{}
	switch v := o.m[field].(type) {
	case nil:
	case string:
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				o.bad(field, "must be strings, not %s", jsonKind(e))
				continue
			}
			out = append(out, s)
		}
	default:
		o.bad(field, "must be a string or a list of strings, not %s", jsonKind(v))
	}
	return out
}

// limits reads an object of integer limits (a user's, a vhost's); absent
// or empty, none: an empty map, which says so (nil would keep a user's).
func (o *object) limits(field string) map[string]int64 {
	out := map[string]int64{}
	switch v := o.m[field].(type) {
	case nil:
	case map[string]any:
		for k, x := range v {
			num, isNum := x.(json.Number)
			n, err := num.Int64()
			if !isNum || err != nil {
				o.bad(field, "%s must be an integer, not %v", k, x)
				continue
			}
			out[k] = n
		}
	case []any:
		if len(v) > 0 { // Erlang's empty proplist is an empty list
			o.bad(field, "must be an object, not a non-empty list")
		}
	default:
		o.bad(field, "must be an object, not %s", jsonKind(v))
	}
	return out
}
