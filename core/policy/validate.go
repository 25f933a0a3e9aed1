package policy

import (
	"fmt"
	"regexp"

	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/protocol"
)

// Every way of setting a policy (the admin API, warrenctl set_policy which
// calls it, a definitions import, a restart reading the store) builds it
// with New, and New checks each definition value here, so a policy with a
// value Warren would ignore or misread is refused, naming the key, and
// never stored. The rules are RabbitMQ 3.10.8's, checked against it:
// integers must be integers (1.5 and "10" are refused), message-ttl,
// max-length, max-length-bytes and delivery-limit must not be negative,
// expires must be positive, overflow is one of its three words, max-age
// is a positive interval ("0s" is refused), stream-max-segment-size-bytes
// is at most 3000000000, and the exchange and routing-key names are
// strings. RabbitMQ's reasons read "<value> is not a valid maximum
// length"; Warren's add the key. A max-age without digits ("h"), which
// RabbitMQ answers with 500, is refused like any other bad one.
//
// A policy read back from the store or from the metadata log is built
// with Restore, which does not check these values again: a value an
// older Warren accepted keeps its policy, and the readers of each value
// (queue.Settings.WithPolicy, a stream's retention) skip one they cannot
// read, as they always have.

// checkValue validates one definition value.
func checkValue(key string, v any) error {
	switch key {
	case "message-ttl":
		return integer(key, v, 0, "a valid message TTL")
	case "max-length", "max-length-bytes":
		return integer(key, v, 0, "a valid maximum length")
	case "stream-max-segment-size-bytes":
		if n, ok := queue.Integer(v); ok && n > queue.MaxSegmentBytes {
			return fmt.Errorf("%s: %s is not a valid segment size (at most %d)", key, show(v), queue.MaxSegmentBytes)
		}
		return integer(key, v, 0, "a valid segment size")
	case "max-age":
		if a, ok := v.(string); !ok || !validAge(a) {
			return fmt.Errorf("%s: %s is not a valid max age (a positive number and one of Y, M, D, h, m, s)", key, show(v))
		}
	case "delivery-limit":
		return integer(key, v, 0, "a valid delivery limit")
	case "expires":
		return integer(key, v, 1, "a valid expiry")
	case "overflow":
		s, ok := v.(string)
		if !ok || (s != "drop-head" && s != "reject-publish" && s != "reject-publish-dlx") {
			return fmt.Errorf("%s: %s is not a valid overflow value (drop-head, reject-publish or reject-publish-dlx)", key, show(v))
		}
	case "queue-mode":
		s, ok := v.(string)
		if !ok || (s != "default" && s != "lazy") {
			return fmt.Errorf("%s: %s is not a valid queue mode (default or lazy)", key, show(v))
		}
	case "federation-upstream":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %s is not a valid federation upstream name", key, show(v))
		}
	case "federation-upstream-set":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %s is not a valid federation upstream set name", key, show(v))
		}
	case "federation-upstream-pattern":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %s is not a valid federation upstream pattern name", key, show(v))
		}
		if _, err := regexp.Compile(s); err != nil {
			return fmt.Errorf("%s: could not compile pattern %s to a regular expression. Error: %v", key, s, err)
		}
	case "alternate-exchange", "dead-letter-exchange", "dead-letter-routing-key":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: %s is not a string", key, show(v))
		}
	}
	return nil
}

// checkFederation refuses a definition that names its upstreams more
// than one way, as RabbitMQ does.
func checkFederation(def protocol.Table) error {
	n := 0
	for _, k := range []string{"federation-upstream", "federation-upstream-set", "federation-upstream-pattern"} {
		if _, ok := def[k]; ok {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("cannot specify federation-upstream, federation-upstream-set or federation-upstream-pattern together")
	}
	return nil
}

// integer checks that v is an integer of at least min.
func integer(key string, v any, min int64, what string) error {
	n, ok := queue.Integer(v)
	if !ok || n < min {
		return fmt.Errorf("%s: %s is not %s", key, show(v), what)
	}
	return nil
}

// validAge says whether s is a stream's max age, as x-max-age takes it:
// a positive interval.
func validAge(s string) bool {
	d, ok := queue.ParseInterval(s)
	return ok && d > 0
}

// show writes a value as the refusal quotes it: strings quoted.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}
