package amqpclient

import (
	"errors"
	"fmt"
	"math/rand/v2"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/protocol"
)

// Connect opens a connection to one of uris: one at random, then the
// others, as RabbitMQ's shovels and federation links try them. The
// error names each URI tried (without credentials) and why it failed.
func Connect(d Dialer, uris []string) (*amqp.Connection, URI, error) {
	return ConnectIn(d, uris, "")
}

// ConnectIn is Connect with the vhost of a URI that names none (URI.OrVHost);
// "" leaves it "/". On failure the URI is the last one tried.
func ConnectIn(d Dialer, uris []string, vhost string) (*amqp.Connection, URI, error) {
	var errs []error
	var last URI
	for _, i := range rand.Perm(len(uris)) {
		u, err := ParseURI(uris[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if vhost != "" {
			u = u.OrVHost(vhost)
		}
		last = u
		c, err := d.Dial(u)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.Redacted(), err))
			continue
		}
		return c, u, nil
	}
	return nil, last, errors.Join(errs...)
}

// CheckURIs checks a definition's URI key (name) as RabbitMQ's
// parameter validation does: a URI, or a non-empty list of them.
func CheckURIs(name string, x any) error {
	switch x := x.(type) {
	case string:
		if _, err := ParseURI(x); err != nil {
			return fmt.Errorf("%q not a valid URI: %v", x, err)
		}
		return nil
	case []any:
		if len(x) == 0 {
			return fmt.Errorf("%s should name at least one URI", name)
		}
		for _, e := range x {
			if _, ok := e.(string); !ok {
				return fmt.Errorf("%s should be a URI or a list of URIs, actually held %s", name, show(e))
			}
			if err := CheckURIs(name, e); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s should be list, actually was %s", name, show(x))
}

// URIs is a checked URI key's value as a list.
func URIs(x any) []string {
	if s, ok := x.(string); ok {
		return []string{s}
	}
	var out []string
	for _, e := range x.([]any) {
		out = append(out, e.(string))
	}
	return out
}

// Table is a field table as amqp091-go takes it: its own Table type at
// every level.
func Table(t protocol.Table) amqp.Table {
	if t == nil {
		return nil
	}
	out := amqp.Table{}
	for k, v := range t {
		out[k] = value(v)
	}
	return out
}

func value(v any) any {
	switch x := v.(type) {
	case protocol.Table:
		return Table(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = value(e)
		}
		return out
	}
	return v
}

// FromClient is a table amqp091-go decoded as the broker's code reads
// tables: protocol.Table at every level.
func FromClient(t amqp.Table) protocol.Table {
	if t == nil {
		return nil
	}
	out := protocol.Table{}
	for k, v := range t {
		out[k] = fromClient(v)
	}
	return out
}

func fromClient(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		return FromClient(x)
	case map[string]any:
		return FromClient(amqp.Table(x))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromClient(e)
		}
		return out
	}
	return v
}

// show renders a value in an error as JSON would have it.
func show(x any) string {
	switch x := x.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	case protocol.Table:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprint(x)
}
