package federation

import "time"

// The states a link reports, as RabbitMQ 3.10.8's federation status does.
const (
	Starting = "starting" // connecting, declaring, binding
	Running  = "running"  // moving messages
	Error    = "error"    // stopped on a failure (Status.Error says which), retried after reconnect-delay
)

// The kinds of link.
const (
	ExchangeLink = "exchange"
	QueueLink    = "queue"
)

// Status is one link's state, as /api/federation-links lists it.
type Status struct {
	// ID is the link's identifier in the restart route: a hash of its
	// vhost, kind, federated exchange or queue, upstream and upstream
	// exchange or queue, so it stays the same across restarts.
	ID    string
	Type  string // ExchangeLink or QueueLink
	VHost string
	// Exchange and UpstreamExchange name an exchange link's ends; Queue,
	// UpstreamQueue and ConsumerTag a queue link's.
	Exchange, UpstreamExchange        string
	Queue, UpstreamQueue, ConsumerTag string
	Upstream                          string // the upstream parameter's name
	State                             string // Starting, Running or Error
	Error                             string // why, in Error
	// URI is the upstream's URI without its credentials.
	URI string
	// LocalConnection is the name of the link's connection to this
	// broker, while it runs.
	LocalConnection string
	Since           time.Time // when State was last set
}
