// Package policy matches policies to exchanges and queues: users'
// policies, and the operator policies that cap them (operator.go).
//
// A policy is a name, a regular expression over entity names, the kind of
// entity it applies to, a priority and a definition (a table of keys such as
// "dead-letter-exchange" or "max-length"). At most one policy applies to an
// entity: among those whose pattern matches, the one with the highest
// priority; ties go to the name that sorts first, so the choice never depends
// on map order.
package policy

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/warrenmq/warren/protocol"
)

// ApplyTo says which entities a policy covers.
type ApplyTo string

const (
	Queues    ApplyTo = "queues"
	Exchanges ApplyTo = "exchanges"
	All       ApplyTo = "all"
)

// Policy is one policy: a user's, or with Operator an operator's
// (operator.go).
type Policy struct {
	Name       string
	Pattern    string
	ApplyTo    ApplyTo
	Priority   int
	Definition protocol.Table
	Operator   bool

	re *regexp.Regexp
}

// ExchangeKeys and QueueKeys are the definition keys Warren acts on.
var (
	ExchangeKeys = map[string]bool{"alternate-exchange": true,
		"federation-upstream": true, "federation-upstream-set": true, "federation-upstream-pattern": true}
	QueueKeys = map[string]bool{
		"federation-upstream": true, "federation-upstream-set": true, "federation-upstream-pattern": true,
		"dead-letter-exchange": true, "dead-letter-routing-key": true, "message-ttl": true,
		"expires": true, "max-length": true, "max-length-bytes": true, "overflow": true,
		"delivery-limit": true, "queue-mode": true,
		"max-age": true, "stream-max-segment-size-bytes": true, // streams
	}
)

// New validates and compiles a policy. Unknown definition keys are refused
// rather than ignored, so a typo does not pass for a working policy.
func New(name, pattern string, applyTo ApplyTo, priority int, def protocol.Table) (*Policy, error) {
	p, err := Restore(name, pattern, applyTo, priority, def)
	if err != nil {
		return nil, err
	}
	for _, k := range sortedKeys(def) {
		if !ExchangeKeys[k] && !QueueKeys[k] {
			return nil, fmt.Errorf("policy %q: unknown definition key %q", name, k)
		}
		if err := checkValue(k, def[k]); err != nil {
			return nil, fmt.Errorf("policy %q: %w", name, err)
		}
	}
	if err := checkFederation(def); err != nil {
		return nil, fmt.Errorf("policy %q: %w", name, err)
	}
	return p, nil
}

// Restore compiles a policy that was validated when it was set (read back
// from the store, or applied from the metadata log) without checking its
// definition's keys and values again, so that a check made stricter since
// never drops a policy that was accepted (see validate.go).
func Restore(name, pattern string, applyTo ApplyTo, priority int, def protocol.Table) (*Policy, error) {
	if name == "" {
		return nil, fmt.Errorf("policy name must not be empty")
	}
	switch applyTo {
	case "":
		applyTo = All
	case Queues, Exchanges, All:
	default:
		return nil, fmt.Errorf("policy %q: apply-to must be queues, exchanges or all, not %q", name, applyTo)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("policy %q: bad pattern %q: %v", name, pattern, err)
	}
	if len(def) == 0 {
		return nil, fmt.Errorf("policy %q: empty definition", name)
	}
	return &Policy{Name: name, Pattern: pattern, ApplyTo: applyTo, Priority: priority, Definition: def, re: re}, nil
}

// sortedKeys orders a definition's keys, so the first bad one reported
// does not depend on map order.
func sortedKeys(def protocol.Table) []string {
	keys := make([]string, 0, len(def))
	for k := range def {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Matches reports whether the policy covers an entity of the given kind.
func (p *Policy) Matches(kind ApplyTo, name string) bool {
	if p.ApplyTo != All && p.ApplyTo != kind {
		return false
	}
	return p.re.MatchString(name)
}

// Set is a vhost's policies. It is not safe for concurrent use; the vhost
// guards it.
type Set struct {
	byName map[string]*Policy
	sorted []*Policy // priority descending, then name
}

// Put adds or replaces a policy.
func (s *Set) Put(p *Policy) {
	if s.byName == nil {
		s.byName = make(map[string]*Policy)
	}
	s.byName[p.Name] = p
	s.sort()
}

// Delete removes a policy and reports whether it existed.
func (s *Set) Delete(name string) bool {
	if _, ok := s.byName[name]; !ok {
		return false
	}
	delete(s.byName, name)
	s.sort()
	return true
}

func (s *Set) sort() {
	s.sorted = s.sorted[:0]
	for _, p := range s.byName {
		s.sorted = append(s.sorted, p)
	}
	sort.Slice(s.sorted, func(i, j int) bool {
		a, b := s.sorted[i], s.sorted[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Name < b.Name
	})
}

// For returns the policy that applies to an entity, or nil.
func (s *Set) For(kind ApplyTo, name string) *Policy {
	for _, p := range s.sorted {
		if p.Matches(kind, name) {
			return p
		}
	}
	return nil
}

// List returns the policies in precedence order.
func (s *Set) List() []*Policy {
	return append([]*Policy(nil), s.sorted...)
}
