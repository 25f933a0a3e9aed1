package queue

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// The checks in this file are the ones RabbitMQ 3.10.8 makes before it
// declares a queue or adds a consumer (rabbit_amqqueue's
// check_declare_arguments and check_consume_arguments), made for every
// queue type in one place so that every way in (queue.declare, PUT
// /api/queues, a definitions import, basic.consume) refuses the same
// arguments with the same words. They are made for a new queue only: a
// redeclare is compared with what is there, and a queue restored from
// the store or a replicated declare is read with ParseArgs and the
// readers of each type, which take what an older Warren accepted.
//
// In RabbitMQ's order: x-dead-letter-exchange must be a string (the
// channel checks it first), then x-queue-type, then each argument the
// queue's type takes is checked in a fixed order (declareChecks), then
// an argument only other types take is refused, naming the type
// ("... of queue type rabbit_classic_queue"). The reasons are written
// as RabbitMQ's Erlang terms print: {value_negative,-1},
// "expected integer, got double", invalid_max_age.
//
// Warren departs from RabbitMQ where RabbitMQ's answer is a crash:
//   - a NaN or infinite double makes RabbitMQ drop the connection (its
//     decoder has no such floats); Warren refuses it like any other
//     double, with 406 "expected integer, got double";
//   - an x-max-age (or an x-stream-offset interval) with no digits ("h",
//     "", "-1h") is RabbitMQ's 541 INTERNAL_ERROR; Warren's 406
//     invalid_max_age;
//   - an x-stream-offset RabbitMQ's check lets through but its stream
//     then fails on (1.5, true, "bogus": 541) is Warren's 406
//     {invalid_stream_offset_arg,...} (see core/stream's ParseOffset);
//   - x-delivery-limit is a classic queue's argument too (RabbitMQ
//     limits deliveries of quorum queues only), where it must be a
//     non-negative integer; a quorum queue takes any value, as
//     RabbitMQ's do.

// The queue types, as x-queue-type names them.
const (
	Classic = "classic"
	Quorum  = "quorum"
	Stream  = "stream"
)

// TypeOf is the type args ask for: x-queue-type, classic without one.
func TypeOf(args protocol.Table) string {
	if t, ok := args["x-queue-type"].(string); ok {
		return t
	}
	return Classic
}

// typeRules are what each type takes (rabbit_*_queue:capabilities() in
// RabbitMQ 3.10.8): its module's name, the declare arguments and the
// consumer arguments.
var typeRules = map[string]struct {
	module              string
	queueArgs, consumer []string
}{
	Classic: {"rabbit_classic_queue", []string{
		"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-overflow", "x-queue-mode",
		"x-queue-version", "x-single-active-consumer", "x-queue-type", "x-queue-master-locator",
		"x-delivery-limit", // Warren's own: RabbitMQ 3.10.8 limits deliveries of quorum queues only
	}, []string{"x-cancel-on-ha-failover", "x-priority", "x-credit"}},
	Quorum: {"rabbit_quorum_queue", []string{
		"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
		"x-expires", "x-max-length", "x-max-length-bytes", "x-max-in-memory-length",
		"x-max-in-memory-bytes", "x-overflow", "x-single-active-consumer", "x-queue-type",
		"x-quorum-initial-group-size", "x-delivery-limit", "x-message-ttl", "x-queue-leader-locator",
	}, []string{"x-priority", "x-credit"}},
	Stream: {"rabbit_stream_queue", []string{
		"x-max-length-bytes", "x-queue-type", "x-max-age", "x-stream-max-segment-size-bytes",
		"x-initial-cluster-size", "x-queue-leader-locator",
	}, []string{"x-stream-offset", "x-credit"}},
}

// MaxSegmentBytes is the largest x-stream-max-segment-size-bytes (and
// policy stream-max-segment-size-bytes) RabbitMQ 3.10.8 takes.
const MaxSegmentBytes = 3_000_000_000

// check is one argument's check; it returns RabbitMQ's reason, "" when
// the value is good. args is the whole table (a routing key needs an
// exchange).
type check func(v any, args protocol.Table) string

// declareChecks are rabbit_amqqueue:declare_args(), in its order: when
// several arguments are bad, the first here is the one named.
var declareChecks = []struct {
	key   string
	check check
}{
	{"x-expires", checkExpires},
	{"x-message-ttl", checkTTL},
	{"x-dead-letter-exchange", checkString(nil, "")},
	{"x-dead-letter-routing-key", checkRoutingKey},
	{"x-dead-letter-strategy", checkString([]string{"at-most-once", "at-least-once"}, "invalid_dlx_strategy")},
	{"x-max-length", checkNonNegative},
	{"x-max-length-bytes", checkNonNegative},
	{"x-max-in-memory-length", checkNonNegative},
	{"x-max-in-memory-bytes", checkNonNegative},
	{"x-max-priority", checkMaxPriority},
	{"x-overflow", checkString([]string{"drop-head", "reject-publish", "reject-publish-dlx"}, "invalid_overflow")},
	{"x-queue-mode", checkQueueMode},
	{"x-queue-version", checkQueueVersion},
	{"x-single-active-consumer", checkBool},
	{"x-quorum-initial-group-size", checkPositive},
	{"x-max-age", checkMaxAge},
	{"x-stream-max-segment-size-bytes", checkNonNegative},
	{"x-initial-cluster-size", checkPositive},
	{"x-queue-leader-locator", checkString(LeaderLocators, "invalid_queue_locator_arg")},
	// RabbitMQ 3.10.8 checks no x-delivery-limit: a quorum queue takes
	// any value (quorumDeliveryLimit reads it). A classic queue's is
	// Warren's own, a non-negative integer.
	{"x-delivery-limit", checkDeliveryLimit},
}

// consumeChecks are rabbit_amqqueue:consume_args().
var consumeChecks = []struct {
	key   string
	check check
}{
	{"x-priority", checkInteger},
	{"x-cancel-on-ha-failover", checkBool},
	{"x-stream-offset", checkStreamOffset},
}

// LeaderLocators are the x-queue-leader-locator values RabbitMQ 3.10.8
// takes; random and least-leaders are its deprecated names for balanced.
var LeaderLocators = []string{"client-local", "balanced", "random", "least-leaders"}

// CheckDeclareArgs refuses the arguments of a new queue as RabbitMQ
// 3.10.8 refuses them, with 406 PRECONDITION_FAILED and its text.
func CheckDeclareArgs(queue, vhost string, args protocol.Table) error {
	in := fmt.Sprintf("queue '%s' in vhost '%s'", queue, vhost)
	if x, ok := args["x-dead-letter-exchange"]; ok {
		if _, isString := x.(string); !isString {
			return reply.PreconditionFailed("invalid type '%s' for arg 'x-dead-letter-exchange' in %s", TypeName(x), in)
		}
	}
	if x, ok := args["x-queue-type"]; ok {
		t, isString := x.(string)
		switch {
		case !isString:
			return badArg("x-queue-type", in, unacceptable(x))
		case typeRules[t].module == "":
			return badArg("x-queue-type", in, erlString("unsupported queue type '"+t+"'"))
		}
	}
	rules := typeRules[TypeOf(args)]
	for _, c := range declareChecks {
		x, ok := args[c.key]
		if !ok || !slices.Contains(rules.queueArgs, c.key) {
			continue
		}
		if why := c.check(x, args); why != "" {
			return badArg(c.key, in, why)
		}
	}
	if err := otherTypes(in, rules.module, rules.queueArgs, args, func(t string) []string { return typeRules[t].queueArgs }); err != nil {
		return err
	}
	if n, ok := integer(args["x-stream-max-segment-size-bytes"]); ok && n > MaxSegmentBytes {
		// rabbit_stream_queue's own check, after the arguments'.
		return reply.PreconditionFailed("Exceeded max value for x-stream-max-segment-size-bytes")
	}
	return nil
}

// CheckConsumeArgs refuses basic.consume arguments as RabbitMQ 3.10.8
// does for a queue of type qtype (Classic, Quorum or Stream).
func CheckConsumeArgs(queue, vhost, qtype string, args protocol.Table) error {
	in := fmt.Sprintf("queue '%s' in vhost '%s'", queue, vhost)
	rules, ok := typeRules[qtype]
	if !ok {
		rules = typeRules[Classic]
	}
	for _, c := range consumeChecks {
		x, ok := args[c.key]
		if !ok || !slices.Contains(rules.consumer, c.key) {
			continue
		}
		if why := c.check(x, args); why != "" {
			return badArg(c.key, in, why)
		}
	}
	return otherTypes(in, rules.module, rules.consumer, args, func(t string) []string { return typeRules[t].consumer })
}

// otherTypes refuses an argument that some type takes but this one does
// not, first in name order (RabbitMQ names the first in the table's wire
// order, which a decoded table no longer has).
func otherTypes(in, module string, own []string, args protocol.Table, of func(string) []string) error {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if slices.Contains(own, k) {
			continue
		}
		for _, t := range []string{Classic, Quorum, Stream} {
			if slices.Contains(of(t), k) {
				return reply.PreconditionFailed("invalid arg '%s' for %s of queue type %s", k, in, module)
			}
		}
	}
	return nil
}

func badArg(key, in, why string) error {
	return reply.PreconditionFailed("invalid arg '%s' for %s: %s", key, in, why)
}

// erlString writes s as Erlang's ~p prints a string: quoted.
func erlString(s string) string { return strconv.Quote(s) }

func unacceptable(x any) string { return "{unacceptable_type," + TypeName(x) + "}" }

// TypeName names a field value's type as RabbitMQ's table parser does
// (rabbit_binary_parser), the name its refusals quote.
func TypeName(x any) string {
	switch x.(type) {
	case string:
		return "longstr"
	case []byte:
		return "binary"
	case bool:
		return "bool"
	case int8:
		return "byte"
	case uint8:
		return "unsignedbyte"
	case int16:
		return "short"
	case uint16:
		return "unsignedshort"
	case int32:
		return "signedint"
	case uint32:
		return "unsignedint"
	case int64, int:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case protocol.Decimal:
		return "decimal"
	case time.Time:
		return "timestamp"
	case protocol.Table, map[string]any:
		return "table"
	case []any:
		return "array"
	case nil:
		return "void"
	}
	return fmt.Sprintf("%T", x)
}

// integer reads an argument of one of the integer field types; unlike
// Integer it refuses every float, as RabbitMQ refuses a double for an
// integer argument however whole it is.
func integer(v any) (int64, bool) {
	switch v.(type) {
	case float32, float64:
		return 0, false
	}
	return Integer(v)
}

func checkInteger(v any, _ protocol.Table) string {
	if _, ok := integer(v); !ok {
		return erlString("expected integer, got " + TypeName(v))
	}
	return ""
}

func checkNonNegative(v any, args protocol.Table) string {
	if why := checkInteger(v, args); why != "" {
		return why
	}
	if n, _ := integer(v); n < 0 {
		return fmt.Sprintf("{value_negative,%d}", n)
	}
	return ""
}

func checkDeliveryLimit(v any, args protocol.Table) string {
	if TypeOf(args) == Quorum {
		return ""
	}
	return checkNonNegative(v, args)
}

func checkPositive(v any, args protocol.Table) string {
	if why := checkNonNegative(v, args); why != "" {
		return why
	}
	if n, _ := integer(v); n == 0 {
		return "{value_zero,0}"
	}
	return ""
}

// checkTTL is rabbit_misc:check_expiry: at most ten years of ms.
func checkTTL(v any, args protocol.Table) string {
	if why := checkInteger(v, args); why != "" {
		return why
	}
	switch n, _ := integer(v); {
	case n < 0:
		return fmt.Sprintf("{value_negative,%d}", n)
	case n > message.MaxTTL:
		return fmt.Sprintf("{value_too_large,%d}", n)
	}
	return ""
}

func checkExpires(v any, args protocol.Table) string {
	if why := checkInteger(v, args); why != "" {
		return why
	}
	if n, _ := integer(v); n == 0 {
		return "{value_zero,0}"
	}
	return checkTTL(v, args)
}

func checkMaxPriority(v any, args protocol.Table) string {
	if why := checkNonNegative(v, args); why != "" {
		return why
	}
	if n, _ := integer(v); n > 255 {
		return fmt.Sprintf("{max_value_exceeded,%d}", n)
	}
	return ""
}

func checkBool(v any, _ protocol.Table) string {
	if _, ok := v.(bool); !ok {
		return unacceptable(v)
	}
	return ""
}

// checkString takes a string, one of allowed unless allowed is nil;
// another string is refused with why.
func checkString(allowed []string, why string) check {
	return func(v any, _ protocol.Table) string {
		s, ok := v.(string)
		switch {
		case !ok:
			return unacceptable(v)
		case allowed != nil && !slices.Contains(allowed, s):
			return why
		}
		return ""
	}
}

func checkRoutingKey(v any, args protocol.Table) string {
	if _, ok := v.(string); !ok {
		return unacceptable(v)
	}
	if _, ok := args["x-dead-letter-exchange"]; !ok {
		return "routing_key_but_no_dlx_defined"
	}
	return ""
}

func checkQueueMode(v any, _ protocol.Table) string {
	s, ok := v.(string)
	switch {
	case !ok:
		return unacceptable(v)
	case s != "default" && s != "lazy":
		return erlString("unsupported queue mode '" + s + "'")
	}
	return ""
}

func checkQueueVersion(v any, args protocol.Table) string {
	if why := checkNonNegative(v, args); why != "" {
		return why
	}
	if n, _ := integer(v); n != 1 && n != 2 {
		return erlString(fmt.Sprintf("unsupported queue version '%d'", n))
	}
	return ""
}

func checkMaxAge(v any, _ protocol.Table) string {
	s, ok := v.(string)
	if !ok {
		return unacceptable(v)
	}
	if d, ok := ParseInterval(s); !ok || d <= 0 {
		return "invalid_max_age"
	}
	return ""
}

// checkStreamOffset is RabbitMQ's check of x-stream-offset: a string must
// be first, last, next or a positive interval; other values pass here
// and are read by the stream when the consumer starts.
func checkStreamOffset(v any, _ protocol.Table) string {
	s, ok := v.(string)
	if !ok {
		return ""
	}
	switch s {
	case "first", "last", "next":
		return ""
	}
	if d, ok := ParseInterval(s); !ok || d <= 0 {
		return InvalidOffset(v)
	}
	return ""
}

// InvalidOffset is RabbitMQ's reason for a refused x-stream-offset.
func InvalidOffset(v any) string {
	var shown string
	switch x := v.(type) {
	case string:
		shown = "<<" + strconv.Quote(x) + ">>"
	default:
		shown = fmt.Sprint(x)
	}
	return "{invalid_stream_offset_arg,{" + TypeName(v) + "," + shown + "}}"
}

// ParseInterval reads "<n><unit>" with RabbitMQ's units (Y, M, D, h, m,
// s): an x-max-age, a policy's max-age, an x-stream-offset interval. The
// digits may be any number of them; a length of time beyond a Duration's
// range (some 292 years) is taken as the longest Duration, as RabbitMQ,
// which counts in unbounded integers, takes "99999999999Y". "0s" reads as
// 0: the checks refuse it for a new queue, a consumer or a policy, and a
// stored queue keeps it as no limit.
func ParseInterval(s string) (time.Duration, bool) {
	if len(s) < 2 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'Y':
		unit = 365 * 24 * time.Hour
	case 'M':
		unit = 30 * 24 * time.Hour
	case 'D':
		unit = 24 * time.Hour
	case 'h':
		unit = time.Hour
	case 'm':
		unit = time.Minute
	case 's':
		unit = time.Second
	default:
		return 0, false
	}
	limit := time.Duration(math.MaxInt64) / unit
	var n time.Duration
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= limit {
			n = n*10 + time.Duration(c-'0')
		}
	}
	if n > limit {
		return time.Duration(math.MaxInt64), true
	}
	return n * unit, true
}
