// Package paramcheck checks the values of runtime parameters (a shovel,
// a federation upstream) as RabbitMQ 3.10.8's rabbit_parameter_validation
// does, in its words, so that a client reading the reason of a 400 reads
// what RabbitMQ would have said, each line naming the key.
package paramcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/warrenmq/warren/protocol"
)

// Key is one accepted key of a value and how it is checked.
type Key struct {
	Name      string
	Mandatory bool
	Check     func(name string, v any) error
}

// Proplist checks v against keys: a missing mandatory key, a value its
// check refuses, and keys not in the list ("Unrecognised terms ... in
// <what>") are each one line of the result, in the keys' order.
func Proplist(what string, keys []Key, v protocol.Table) []string {
	var errs []string
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k.Name] = true
		x, ok := v[k.Name]
		switch {
		case !ok && k.Mandatory:
			errs = append(errs, fmt.Sprintf("Key %q not found in %s", k.Name, what))
		case ok:
			if err := k.Check(k.Name, x); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	var unknown []string
	for k := range v {
		if !seen[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		errs = append(errs, fmt.Sprintf("Unrecognised terms %s in %s", strings.Join(unknown, ", "), what))
	}
	return errs
}

// NumberOf is a JSON number's value.
func NumberOf(x any) (float64, bool) {
	switch n := x.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// Number, String, Bool, Table and OneOf are the checks.

func Number(name string, x any) error {
	if _, ok := NumberOf(x); !ok {
		return fmt.Errorf("%s should be a number, actually was %s", name, Show(x))
	}
	return nil
}

func String(name string, x any) error {
	if _, ok := x.(string); !ok {
		return fmt.Errorf("%s should be binary, actually was %s", name, Show(x))
	}
	return nil
}

func Bool(name string, x any) error {
	if _, ok := x.(bool); !ok {
		return fmt.Errorf("%s should be boolean, actually was %s", name, Show(x))
	}
	return nil
}

func Table(name string, x any) error {
	if _, ok := x.(protocol.Table); !ok {
		return fmt.Errorf("%s should be an object, actually was %s", name, Show(x))
	}
	return nil
}

func OneOf(options ...string) func(string, any) error {
	return func(name string, x any) error {
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("%s should be binary, actually was %s", name, Show(x))
		}
		if !slices.Contains(options, s) {
			return fmt.Errorf("%s should be one of %s, actually was %q", name, strings.Join(options, ", "), s)
		}
		return nil
	}
}

// Show renders a value in an error as JSON would have it.
func Show(x any) string {
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

// Optional and Mandatory make a Key.
func Optional(name string, check func(string, any) error) Key {
	return Key{Name: name, Check: check}
}

func Mandatory(name string, check func(string, any) error) Key {
	return Key{Name: name, Mandatory: true, Check: check}
}
