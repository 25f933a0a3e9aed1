package federation

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/paramcheck"
	"github.com/warrenmq/warren/protocol"
)

// The runtime parameter components of federation, and the policy keys
// that federate an exchange or a queue.
const (
	UpstreamComponent = "federation-upstream"
	SetComponent      = "federation-upstream-set"

	PolicyUpstream        = "federation-upstream"
	PolicyUpstreamSet     = "federation-upstream-set"
	PolicyUpstreamPattern = "federation-upstream-pattern"

	// AllUpstreams is the set every upstream of the vhost is in.
	AllUpstreams = "all"
)

// The ack modes, as for shovels.
const (
	OnConfirm = "on-confirm"
	OnPublish = "on-publish"
	NoAck     = "no-ack"
)

// RabbitMQ's defaults.
const (
	defaultPrefetch       = 1000
	defaultReconnectDelay = 5 * time.Second
	defaultMaxHops        = 1
)

// sharedKeys are the keys an upstream and a set's element both take, in
// RabbitMQ 3.10.8's order; bind-nowait, ha-policy and channel-use-mode
// are accepted and have no effect in Warren (binds always wait; there
// are no mirrored queues; the link uses a channel per purpose).
var sharedKeys = []paramcheck.Key{
	paramcheck.Optional("exchange", paramcheck.String),
	paramcheck.Optional("queue", paramcheck.String),
	paramcheck.Optional("consumer-tag", paramcheck.String),
	paramcheck.Optional("prefetch-count", paramcheck.Number),
	paramcheck.Optional("reconnect-delay", paramcheck.Number),
	paramcheck.Optional("max-hops", paramcheck.Number),
	paramcheck.Optional("expires", paramcheck.Number),
	paramcheck.Optional("message-ttl", paramcheck.Number),
	paramcheck.Optional("trust-user-id", paramcheck.Bool),
	paramcheck.Optional("ack-mode", paramcheck.OneOf(NoAck, OnPublish, OnConfirm)),
	paramcheck.Optional("resource-cleanup-mode", paramcheck.OneOf("default", "never")),
	paramcheck.Optional("ha-policy", paramcheck.String),
	paramcheck.Optional("bind-nowait", paramcheck.Bool),
	paramcheck.Optional("channel-use-mode", paramcheck.OneOf("multiple", "single")),
}

// CheckUpstream checks a federation-upstream parameter as RabbitMQ does:
// a uri (or a list of them) and the shared keys, each error naming its
// key, one per line.
func CheckUpstream(name string, value any) error {
	t, ok := value.(protocol.Table)
	if !ok {
		return fmt.Errorf("%s not a list %s", name, paramcheck.Show(value))
	}
	keys := append([]paramcheck.Key{paramcheck.Mandatory("uri", amqpclient.CheckURIs)}, sharedKeys...)
	return joined(paramcheck.Proplist(name, keys, t))
}

// CheckSet checks a federation-upstream-set parameter: a list of objects,
// each naming an upstream and perhaps overriding its keys.
func CheckSet(name string, value any) error {
	list, ok := value.([]any)
	if !ok {
		return fmt.Errorf("%s should be list, actually was %s", name, paramcheck.Show(value))
	}
	var errs []string
	keys := append([]paramcheck.Key{paramcheck.Mandatory("upstream", paramcheck.String)}, sharedKeys...)
	for _, e := range list {
		t, ok := e.(protocol.Table)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s not a list %s", name, paramcheck.Show(e)))
			continue
		}
		errs = append(errs, paramcheck.Proplist(name, keys, t)...)
	}
	return joined(errs)
}

func joined(errs []string) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "\n"))
}

// Federates says whether a policy definition federates what it applies to.
func Federates(def protocol.Table) bool {
	for _, k := range []string{PolicyUpstream, PolicyUpstreamSet, PolicyUpstreamPattern} {
		if _, ok := def[k].(string); ok {
			return true
		}
	}
	return false
}

// Upstream is one upstream as a link uses it: the federation-upstream
// parameter's keys, with a set's element's overriding them.
type Upstream struct {
	Name string
	URIs []string
	// Exchange and Queue name the upstream's exchange or queue; "" is the
	// federated one's own name.
	Exchange, Queue string
	ConsumerTag     string
	Prefetch        int
	ReconnectDelay  time.Duration // 0: not restarted after a failure
	MaxHops         int64
	// Expires and MessageTTL are the upstream queue's x-expires and
	// x-message-ttl in milliseconds; 0 is none.
	Expires, MessageTTL int64
	TrustUserID         bool
	AckMode             string
	// KeepResources (resource-cleanup-mode never) leaves the upstream
	// queue and exchange in place when the link stops for good.
	KeepResources bool
}

// Params are a vhost's federation parameters: its upstreams and sets by
// name.
type Params struct {
	Upstreams map[string]protocol.Table
	Sets      map[string][]any
}

// For is the upstreams a policy's definition names, among params, in a
// stable order: one upstream, a set's (every upstream for "all"), or
// those whose names match a pattern. A name with no upstream is passed
// over, as RabbitMQ does.
func (p Params) For(def protocol.Table) []Upstream {
	var elements []protocol.Table
	switch {
	case def[PolicyUpstream] != nil:
		name, _ := def[PolicyUpstream].(string)
		elements = []protocol.Table{{"upstream": name}}
	case def[PolicyUpstreamSet] != nil:
		set, _ := def[PolicyUpstreamSet].(string)
		if set == AllUpstreams {
			for _, n := range slices.Sorted(maps.Keys(p.Upstreams)) {
				elements = append(elements, protocol.Table{"upstream": n})
			}
			break
		}
		for _, e := range p.Sets[set] {
			if t, ok := e.(protocol.Table); ok {
				elements = append(elements, t)
			}
		}
	case def[PolicyUpstreamPattern] != nil:
		pattern, _ := def[PolicyUpstreamPattern].(string)
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil
		}
		for _, n := range slices.Sorted(maps.Keys(p.Upstreams)) {
			if re.MatchString(n) {
				elements = append(elements, protocol.Table{"upstream": n})
			}
		}
	}
	var out []Upstream
	for _, e := range elements {
		name, _ := e["upstream"].(string)
		if u, ok := p.Upstreams[name]; ok {
			out = append(out, readUpstream(name, e, u))
		}
	}
	return out
}

// readUpstream reads an upstream's keys, a set element's first.
func readUpstream(name string, element, upstream protocol.Table) Upstream {
	get := func(k string) (any, bool) {
		if v, ok := element[k]; ok {
			return v, true
		}
		v, ok := upstream[k]
		return v, ok
	}
	str := func(k, or string) string {
		if v, ok := get(k); ok {
			if s, ok := v.(string); ok {
				return s
			}
		}
		return or
	}
	num := func(k string, or float64) float64 {
		if v, ok := get(k); ok {
			if n, ok := paramcheck.NumberOf(v); ok {
				return n
			}
		}
		return or
	}
	flag := func(k string) bool {
		v, _ := get(k)
		b, _ := v.(bool)
		return b
	}
	u := Upstream{
		Name:           name,
		Exchange:       str("exchange", ""),
		Queue:          str("queue", ""),
		ConsumerTag:    str("consumer-tag", "federation-link-"+name),
		Prefetch:       int(num("prefetch-count", defaultPrefetch)),
		ReconnectDelay: time.Duration(num("reconnect-delay", defaultReconnectDelay.Seconds()) * float64(time.Second)),
		MaxHops:        int64(num("max-hops", defaultMaxHops)),
		Expires:        int64(num("expires", 0)),
		MessageTTL:     int64(num("message-ttl", 0)),
		TrustUserID:    flag("trust-user-id"),
		AckMode:        str("ack-mode", OnConfirm),
		KeepResources:  str("resource-cleanup-mode", "default") == "never",
	}
	if v, ok := get("uri"); ok {
		if amqpclient.CheckURIs("uri", v) == nil {
			u.URIs = amqpclient.URIs(v)
		}
	}
	return u
}
