package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
)

// Operator policies, as RabbitMQ has them: policies an administrator sets
// over the users' own, to cap what a queue may hold. They take the limits
// of OperatorKeys only; where a queue has both, the user's policy and the
// operator's are merged and the lower of two numbers wins (Effective), so
// a user's policy can tighten an operator's limit but never lift it.

// OperatorKeys are the keys an operator policy takes (RabbitMQ 3.10.8's).
// max-in-memory-length and max-in-memory-bytes are taken and kept, as
// RabbitMQ 3.10 takes them, but do nothing: Warren's quorum queues do not
// hold bodies in memory by count.
var OperatorKeys = map[string]bool{
	"expires": true, "message-ttl": true, "max-length": true, "max-length-bytes": true,
	"max-in-memory-length": true, "max-in-memory-bytes": true, "delivery-limit": true,
}

// NewOperator validates and compiles an operator policy: a definition of
// OperatorKeys only, each a whole number in range.
func NewOperator(name, pattern string, applyTo ApplyTo, priority int, def protocol.Table) (*Policy, error) {
	p, err := Restore(name, pattern, applyTo, priority, def)
	if err != nil {
		return nil, err
	}
	p.Operator = true
	for _, k := range sortedKeys(def) {
		if !OperatorKeys[k] {
			return nil, fmt.Errorf("operator policy %q: %q is not an operator policy setting (%s)", name, k, strings.Join(operatorKeyList(), ", "))
		}
		if err := checkValue(k, def[k]); err != nil {
			return nil, fmt.Errorf("operator policy %q: %w", name, err)
		}
	}
	return p, nil
}

func operatorKeyList() []string {
	keys := make([]string, 0, len(OperatorKeys))
	for k := range OperatorKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Effective is the definition in force on a queue that user (its policy)
// and operator (its operator policy) cover, either or both nil: their
// keys together, and of a key both set, the lower number. It is user's or
// operator's own table when only one applies, and nil when neither does.
func Effective(user, operator *Policy) protocol.Table {
	switch {
	case operator == nil && user == nil:
		return nil
	case operator == nil:
		return user.Definition
	case user == nil:
		return operator.Definition
	}
	out := make(protocol.Table, len(user.Definition)+len(operator.Definition))
	for k, v := range user.Definition {
		out[k] = v
	}
	for k, v := range operator.Definition {
		mine, ok := queue.Integer(out[k])
		theirs, _ := queue.Integer(v)
		if !ok || theirs < mine {
			out[k] = v
		}
	}
	return out
}
