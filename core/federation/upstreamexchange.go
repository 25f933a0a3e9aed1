package federation

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/protocol"
)

// UpstreamExchangeType is the exchange type "x-federation-upstream": the
// internal exchange a downstream broker's link declares on this one,
// between the federated exchange and the link's queue. It routes as a
// fanout, but only the messages that may still go to that downstream
// (ShouldForward, with its x-max-hops, x-downstream-name and
// x-downstream-vhost), so a ring of brokers does not send a message
// round again.
type UpstreamExchangeType struct{}

// UpstreamExchange is the type's name.
const UpstreamExchange = "x-federation-upstream"

func (UpstreamExchangeType) Name() string { return UpstreamExchange }

// ValidateDeclare asks for x-max-hops as a long, as RabbitMQ does.
func (UpstreamExchangeType) ValidateDeclare(def exchange.Definition) error {
	v, ok := def.Args[MaxHopsArg]
	if !ok {
		return reply.PreconditionFailed("Argument %s missing", MaxHopsArg)
	}
	if _, isLong := v.(int64); !isLong {
		return reply.PreconditionFailed("Argument %s must be of type long", MaxHopsArg)
	}
	return nil
}

func (UpstreamExchangeType) Create(def exchange.Definition) (exchange.Router, error) {
	hops, _ := queue.Integer(def.Args[MaxHopsArg])
	name, _ := def.Args[DownstreamNameArg].(string)
	vhost, _ := def.Args[DownstreamVHostArg].(string)
	f, err := (exchange.Fanout{}).Create(def)
	if err != nil {
		return nil, err
	}
	return &upstreamRouter{Router: f, maxHops: hops, downstream: name, vhost: vhost}, nil
}

type upstreamRouter struct {
	exchange.Router // a fanout's
	maxHops         int64
	downstream      string
	vhost           string
}

func (r *upstreamRouter) Route(m *message.Message, res *exchange.Result) error {
	if m.Flags&protocol.FlagHeaders != 0 && !ShouldForward(m.Headers(), r.maxHops, r.downstream, r.vhost) {
		return nil
	}
	return r.Router.Route(m, res)
}
