package queue

import (
	"fmt"
	"math"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// Overflow is what a queue does when a length limit is reached.
type Overflow uint8

const (
	DropHead Overflow = iota
	RejectPublish
	RejectPublishDLX
)

func (o Overflow) String() string {
	switch o {
	case RejectPublish:
		return "reject-publish"
	case RejectPublishDLX:
		return "reject-publish-dlx"
	}
	return "drop-head"
}

// Unlimited marks an absent limit.
const Unlimited = -1

// Settings are a queue's behaviours as its arguments and policy decide them.
type Settings struct {
	MessageTTL     int64 // ms; Unlimited when none
	Expires        int64 // ms of disuse before the queue is deleted; Unlimited when none
	MaxLength      int64 // ready messages; Unlimited when none
	MaxLengthBytes int64 // ready body bytes; Unlimited when none
	Overflow       Overflow
	DeliveryLimit  int64 // deliveries before dead-lettering; Unlimited when none

	DeadLetterExchange   string
	HasDeadLetter        bool // DeadLetterExchange is set ("" is the default exchange)
	DeadLetterRoutingKey string
	HasDeadLetterKey     bool

	MaxPriority          uint8 // 0: not a priority queue
	SingleActiveConsumer bool

	// Quorum: x-queue-type is quorum (vhost makes it a quorum queue, and
	// checks the arguments only a quorum queue takes).
	Quorum bool
}

// DefaultSettings has no limits, no TTL and no dead-lettering.
func DefaultSettings() Settings {
	return Settings{MessageTTL: Unlimited, Expires: Unlimited, MaxLength: Unlimited,
		MaxLengthBytes: Unlimited, DeliveryLimit: Unlimited}
}

// ParseArgs reads queue.declare arguments into the settings they ask
// for. A new queue's arguments were checked first with CheckDeclareArgs,
// RabbitMQ's checks; ParseArgs refuses (406, naming the argument) only
// what it cannot read, and it also reads the arguments of queues restored
// from the store or declared through another node, so it takes what an
// older Warren accepted: an x-message-ttl or x-expires above
// message.MaxTTL counts as MaxTTL. Arguments the broker does not know
// are kept and ignored, as RabbitMQ does.
func ParseArgs(queue, vhost string, args protocol.Table) (Settings, error) {
	s := DefaultSettings()
	bad := func(arg string, why any) error {
		return reply.PreconditionFailed("invalid arg '%s' for queue '%s' in vhost '%s': %v", arg, queue, vhost, why)
	}
	for key, v := range args {
		var err error
		switch key {
		case "x-message-ttl":
			s.MessageTTL, err = nonNegative(v)
			s.MessageTTL = capTTL(s.MessageTTL)
		case "x-expires":
			s.Expires, err = positive(v)
			s.Expires = capTTL(s.Expires)
		case "x-max-length":
			s.MaxLength, err = nonNegative(v)
		case "x-max-length-bytes":
			s.MaxLengthBytes, err = nonNegative(v)
		case "x-delivery-limit":
			if TypeOf(args) == Quorum {
				s.DeliveryLimit = quorumDeliveryLimit(v)
			} else {
				s.DeliveryLimit, err = nonNegative(v)
			}
		case "x-overflow":
			s.Overflow, err = parseOverflow(v)
		case "x-dead-letter-exchange":
			s.DeadLetterExchange, err = str(v)
			s.HasDeadLetter = err == nil
		case "x-dead-letter-routing-key":
			s.DeadLetterRoutingKey, err = str(v)
			s.HasDeadLetterKey = err == nil
		case "x-max-priority":
			var p int64
			if p, err = nonNegative(v); err == nil && p > 255 {
				err = fmt.Errorf("{value_too_large,%d,255}", p)
			}
			s.MaxPriority = uint8(p)
		case "x-single-active-consumer":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("{unacceptable_type,%T}", v)
			}
			s.SingleActiveConsumer = b
		case "x-queue-type":
			t, ok := v.(string)
			switch {
			case !ok:
				err = fmt.Errorf("{unacceptable_type,%T}", v)
			case t == Classic, t == Quorum, t == Stream:
				// A stream's settings are its retention, which vhost
				// reads from these same arguments.
				s.Quorum = t == Quorum
			default:
				err = fmt.Errorf("%q", "unsupported queue type '"+t+"'")
			}
		case "x-queue-mode":
			m, ok := v.(string)
			if !ok || (m != "default" && m != "lazy") {
				err = fmt.Errorf("{unacceptable_value,%v}", v)
			}
		}
		if err != nil {
			return s, bad(key, err)
		}
	}
	if s.HasDeadLetterKey && !s.HasDeadLetter {
		return s, reply.PreconditionFailed("invalid arg 'x-dead-letter-routing-key' for queue '%s' in vhost '%s': x-dead-letter-exchange is required when x-dead-letter-routing-key is set", queue, vhost)
	}
	return s, nil
}

// capTTL bounds a TTL or expiry the broker has to live with (a restored
// queue's, a policy's) at message.MaxTTL, so deadline arithmetic in ms
// never overflows; ten years and "longer than ten years" are the same in
// practice.
func capTTL(ms int64) int64 { return min(ms, message.MaxTTL) }

// WithPolicy returns the settings in force once a policy definition is
// applied on top of the arguments. As in RabbitMQ, a limit set by both takes
// the smaller value, and for the rest the queue's own argument wins. A
// policy's message-ttl or expires above message.MaxTTL counts as MaxTTL:
// RabbitMQ 3.10.8 accepts such a policy, and its queues then fail with 541.
func (s Settings) WithPolicy(policy protocol.Table) Settings {
	lower := func(cur int64, key string) int64 {
		v, ok := policy[key]
		if !ok {
			return cur
		}
		n, err := nonNegative(v)
		if err != nil {
			return cur
		}
		if cur == Unlimited || n < cur {
			return n
		}
		return cur
	}
	s.MessageTTL = capTTL(lower(s.MessageTTL, "message-ttl"))
	s.Expires = capTTL(lower(s.Expires, "expires"))
	s.MaxLength = lower(s.MaxLength, "max-length")
	s.MaxLengthBytes = lower(s.MaxLengthBytes, "max-length-bytes")
	s.DeliveryLimit = lower(s.DeliveryLimit, "delivery-limit")
	if v, ok := policy["overflow"]; ok {
		if o, err := parseOverflow(v); err == nil && s.Overflow == DropHead {
			s.Overflow = o
		}
	}
	if v, ok := policy["dead-letter-exchange"]; ok && !s.HasDeadLetter {
		if x, err := str(v); err == nil {
			s.DeadLetterExchange, s.HasDeadLetter = x, true
		}
	}
	if v, ok := policy["dead-letter-routing-key"]; ok && !s.HasDeadLetterKey {
		if x, err := str(v); err == nil {
			s.DeadLetterRoutingKey, s.HasDeadLetterKey = x, true
		}
	}
	return s
}

// Integer reads any integer field value. Floats are refused, as RabbitMQ
// refuses them for every integer argument.
func Integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		// Policies arrive as JSON, where every number is a float64: a
		// whole one within int64's range counts.
		if n == math.Trunc(n) && n >= math.MinInt64 && n < math.MaxInt64 {
			return int64(n), true
		}
	}
	return 0, false
}

// quorumDeliveryLimit reads a quorum queue's x-delivery-limit as RabbitMQ
// 3.10.8 takes it: any value, which it compares a message's delivery
// count with in Erlang's order of terms (checked). A number limits: a
// message given back more often than it is dead-lettered, so a double
// counts as its floor and a limit below 1 as 0 (dead-lettered at its
// first return); anything else is no limit, since every number orders
// before a string, a boolean or a table.
func quorumDeliveryLimit(v any) int64 {
	var f float64
	switch n := v.(type) {
	case float32:
		f = float64(n)
	case float64:
		f = n
	default:
		if n, ok := Integer(v); ok {
			return max(n, 0)
		}
		return Unlimited
	}
	switch {
	case math.IsNaN(f) || f >= math.MaxInt64:
		return Unlimited
	case f < 0:
		return 0
	}
	return int64(f)
}

func nonNegative(v any) (int64, error) {
	n, ok := Integer(v)
	if !ok {
		return 0, fmt.Errorf("{unacceptable_type,%T}", v)
	}
	if n < 0 {
		return 0, fmt.Errorf("{value_negative,%d}", n)
	}
	return n, nil
}

func positive(v any) (int64, error) {
	n, err := nonNegative(v)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("{value_zero,0}")
	}
	return n, err
}

func str(v any) (string, error) {
	if s, ok := protocol.TextValue(v); ok {
		return s, nil
	}
	return "", fmt.Errorf("{unacceptable_type,%T}", v)
}

func parseOverflow(v any) (Overflow, error) {
	s, err := str(v)
	if err != nil {
		return DropHead, err
	}
	switch s {
	case "drop-head":
		return DropHead, nil
	case "reject-publish":
		return RejectPublish, nil
	case "reject-publish-dlx":
		return RejectPublishDLX, nil
	}
	return DropHead, fmt.Errorf("{unacceptable_value,%s}", s)
}
