package quorumqueue

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/quorum"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// TestSettingsInForce: the machine's config follows the arguments and the
// policy as RabbitMQ 3.10's quorum queues do: at-least-once dead-lettering
// only with a dead-letter exchange and overflow reject-publish (drop-head
// falls back to at most once), reject-publish-dlx taken as
// reject-publish, and x-dead-letter-strategy winning over the policy's.
func TestSettingsInForce(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   protocol.Table
		policy protocol.Table
		want   func(quorum.Config) bool
	}{
		{"no limits", protocol.Table{},
			nil, func(c quorum.Config) bool {
				return c == quorum.DefaultConfig() || c.Overflow == quorum.RejectPublish && !c.AtLeastOnce
			}},
		{"at least once", protocol.Table{"x-dead-letter-exchange": "dlx", "x-overflow": "reject-publish", "x-dead-letter-strategy": "at-least-once"},
			nil, func(c quorum.Config) bool { return c.AtLeastOnce && c.DeadLetter }},
		{"drop-head falls back to at most once", protocol.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once"},
			nil, func(c quorum.Config) bool { return !c.AtLeastOnce && c.Overflow != quorum.RejectPublish }},
		{"reject-publish-dlx is reject-publish", protocol.Table{"x-overflow": "reject-publish-dlx"},
			nil, func(c quorum.Config) bool { return c.Overflow == quorum.RejectPublish }},
		{"the policy's strategy", protocol.Table{"x-dead-letter-exchange": "dlx", "x-overflow": "reject-publish"},
			protocol.Table{"dead-letter-strategy": "at-least-once"}, func(c quorum.Config) bool { return c.AtLeastOnce }},
		{"the argument wins over the policy", protocol.Table{"x-dead-letter-exchange": "dlx", "x-overflow": "reject-publish", "x-dead-letter-strategy": "at-most-once"},
			protocol.Table{"dead-letter-strategy": "at-least-once"}, func(c quorum.Config) bool { return !c.AtLeastOnce }},
		{"the policy's limits", protocol.Table{},
			protocol.Table{"max-length": int64(7), "delivery-limit": int64(3)}, func(c quorum.Config) bool { return c.MaxLength == 7 && c.DeliveryLimit == 3 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := protocol.Table{"x-queue-type": "quorum"}
			for k, v := range c.args {
				args[k] = v
			}
			base, err := queue.ParseArgs("q", "/", args)
			if err != nil {
				t.Fatal(err)
			}
			qq := &Queue{name: "q", args: args, base: base}
			var p *policy.Policy
			if c.policy != nil {
				p = &policy.Policy{Name: "p", Definition: c.policy}
			}
			s, cfg := qq.inForce(p)
			if !c.want(cfg) {
				t.Errorf("config %+v from settings %+v", cfg, s)
			}
			if *qq.settings.Load() != s {
				t.Errorf("settings in force not recorded")
			}
		})
	}
}

// TestGlobalQosRefused: a quorum queue refuses a consumer under a global
// prefetch with RabbitMQ 3.10.8's reply, read through a member here or one
// on another node; nothing else is refused.
func TestGlobalQosRefused(t *testing.T) {
	v := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop()})
	t.Cleanup(v.Close)
	qq := &Queue{h: v.Host(), name: "q"}
	for _, src := range []queuetype.Source{member{qq: qq}, elsewhere{qq: qq}} {
		err := queuetype.Refused(src, queuetype.AskGlobalPrefetch)
		if e := reply.As(err); e == nil || e.Code != protocol.NotImplemented || e.Text != "NOT_IMPLEMENTED - queue 'q' in vhost '/' does not support global qos" {
			t.Errorf("%T: global prefetch: %v", src, err)
		}
		for _, a := range []queuetype.Asked{queuetype.AskGet, queuetype.AskNackOrReject} {
			if err := queuetype.Refused(src, a); err != nil {
				t.Errorf("%T refuses %v: %v", src, a, err)
			}
		}
	}
}
