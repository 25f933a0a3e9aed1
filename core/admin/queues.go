package admin

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/tablejson"
	"github.com/warrenmq/warren/protocol"
)

func (a *api) routeQueues(mux *router) {
	a.handle(mux, "GET /api/queues", management, a.queues)
	a.handle(mux, "GET /api/queues/{vhost}", management, a.queues)
	a.handle(mux, "GET /api/queues/{vhost}/{queue}", management, a.queue)
	a.handle(mux, "PUT /api/queues/{vhost}/{queue}", management, a.putQueue)
	a.handle(mux, "DELETE /api/queues/{vhost}/{queue}", management, a.deleteQueue)
	a.handle(mux, "DELETE /api/queues/{vhost}/{queue}/contents", management, a.purgeQueue)
	a.handle(mux, "POST /api/queues/{vhost}/{queue}/get", management, a.getMessages)
	a.handle(mux, "POST /api/queues/{vhost}/{queue}/actions", administrator, a.queueAction)
	a.handle(mux, "GET /api/queues/{vhost}/{queue}/bindings", management, a.queueBindings)
}

// queueJSON is a queue as RabbitMQ lists it, less the Erlang process
// figures Warren has no counterpart for.
type queueJSON struct {
	Arguments                 map[string]any `json:"arguments"`
	AutoDelete                bool           `json:"auto_delete"`
	ConsumerDetails           []consumerJSON `json:"consumer_details,omitempty"`
	Consumers                 int            `json:"consumers"`
	Durable                   bool           `json:"durable"`
	EffectivePolicyDefinition map[string]any `json:"effective_policy_definition"`
	Exclusive                 bool           `json:"exclusive"`
	MessageBytes              int64          `json:"message_bytes"`
	MessageBytesReady         int64          `json:"message_bytes_ready"`
	// Memory is what its messages in memory take (RabbitMQ's is its
	// process's memory); absent for a queue whose messages are not in
	// this process (a quorum queue's and a stream's are their group's).
	Memory *int64 `json:"memory,omitempty"`
	// ConsumerUtilisation (and consumer_capacity, RabbitMQ's later name
	// for it) is the share of the last statistics interval its consumers
	// could take a message at once; absent where the queue does not
	// measure it (a quorum queue, a stream, one homed on another node).
	ConsumerUtilisation           *float64       `json:"consumer_utilisation,omitempty"`
	ConsumerCapacity              *float64       `json:"consumer_capacity,omitempty"`
	MessageStats                  map[string]any `json:"message_stats,omitempty"`
	Messages                      int            `json:"messages"`
	MessagesDetails               details        `json:"messages_details"`
	MessagesReady                 int            `json:"messages_ready"`
	MessagesReadyDetails          details        `json:"messages_ready_details"`
	MessagesUnacknowledged        int            `json:"messages_unacknowledged"`
	MessagesUnacknowledgedDetails details        `json:"messages_unacknowledged_details"`
	Name                          string         `json:"name"`
	Node                          string         `json:"node"`
	Policy                        *string        `json:"policy"`
	OperatorPolicy                *string        `json:"operator_policy"`
	State                         string         `json:"state"`
	Type                          string         `json:"type"`
	VHost                         string         `json:"vhost"`
	// A quorum queue's group: RabbitMQ's leader, members and online, and
	// Warren's Raft figures.
	Leader  string    `json:"leader,omitempty"`
	Members []string  `json:"members,omitempty"`
	Online  []string  `json:"online,omitempty"`
	Raft    *raftJSON `json:"warren_raft,omitempty"`
}

// raftJSON is a quorum queue's Raft group as this node sees it; match is
// how far each member's log matches the leader's.
type raftJSON struct {
	Role       string            `json:"role"`
	Term       uint64            `json:"term"`
	Commit     uint64            `json:"commit_index"`
	Applied    uint64            `json:"applied_index"`
	LogEntries uint64            `json:"log_entries"`
	LogBytes   uint64            `json:"log_bytes"`
	Match      map[string]uint64 `json:"match"`
	// Voters are the group's configuration as this member has it, by
	// node; an incarnation the cluster no longer has (a node forgotten,
	// or come back on an empty data directory) by its Raft id.
	Voters []string `json:"voters,omitempty"`
}

// queueView renders a queue snapshot; defs are the vhost's policy
// definitions by name, for effective_policy_definition.
func (a *api) queueView(vhostName, node string, q vhost.QueueInfo, defs *policyDefs) queueJSON {
	out := queueJSON{
		Arguments: tablejson.Render(q.Args), AutoDelete: q.AutoDelete, Consumers: q.Consumers, Durable: q.Durable,
		Exclusive: q.Exclusive, MessageBytes: q.ReadyBytes, MessageBytesReady: q.ReadyBytes, Memory: memoryOfQueue(q),
		ConsumerUtilisation: utilisationOf(q), ConsumerCapacity: utilisationOf(q),
		MessageStats: messageStats(q.Counters, q.Rates),
		Messages:     q.Ready + q.Unacked, MessagesReady: q.Ready, MessagesUnacknowledged: q.Unacked,
		MessagesDetails:               details{Rate: q.ReadyRate + q.UnackedRate},
		MessagesReadyDetails:          details{Rate: q.ReadyRate},
		MessagesUnacknowledgedDetails: details{Rate: q.UnackedRate},
		Name:                          q.Name, Node: node, State: "running", Type: "classic", VHost: vhostName,
		EffectivePolicyDefinition: map[string]any{},
	}
	if q.Type != "" {
		out.Type = q.Type
	}
	if view, ok := q.QuorumStatus(); ok {
		// RabbitMQ's fields for a quorum queue, and Warren's view of its
		// Raft group (each member's log position on the leader); a
		// stream in a cluster has the same.
		out.Leader, out.Members, out.Online = view.Leader, view.Members, view.Online
		if view.Members == nil {
			// A group of one: its only member is this node.
			out.Leader, out.Members, out.Online = node, []string{node}, []string{node}
			view.Match = map[string]uint64{node: view.Raft.Match[view.Raft.Leader]}
		}
		if view.Leader != "" {
			out.Node = view.Leader // RabbitMQ lists a quorum queue on its leader's node
		}
		if view.Raft.Role != "" {
			st := view.Raft
			out.Raft = &raftJSON{Role: st.Role, Term: st.Term, Commit: st.Commit, Applied: st.Applied,
				LogEntries: st.LogEntries, LogBytes: st.LogBytes, Match: view.Match, Voters: view.Voters}
		}
	}
	if q.Home != "" {
		out.Node = q.Home // homed on another node of the cluster
	}
	if q.Down {
		out.State = "down" // as RabbitMQ lists a queue whose node is down
	}
	if q.Policy != "" {
		name := q.Policy
		out.Policy = &name
	}
	if q.OperatorPolicy != "" {
		name := q.OperatorPolicy
		out.OperatorPolicy = &name
	}
	if d := defs.effective(q.Policy, q.OperatorPolicy); d != nil {
		out.EffectivePolicyDefinition = d
	}
	return out
}

// policyDefs are a vhost's policies and operator policies by name, with
// their definitions rendered once for a whole listing.
type policyDefs struct {
	user, operator         map[string]*policy.Policy
	userJSON, operatorJSON map[string]map[string]any
}

func policyDefinitions(v *vhost.VHost) *policyDefs {
	d := &policyDefs{user: map[string]*policy.Policy{}, operator: map[string]*policy.Policy{},
		userJSON: map[string]map[string]any{}, operatorJSON: map[string]map[string]any{}}
	for _, p := range v.Policies() {
		d.user[p.Name], d.userJSON[p.Name] = p, tablejson.Render(p.Definition)
	}
	for _, p := range v.OperatorPolicies() {
		d.operator[p.Name], d.operatorJSON[p.Name] = p, tablejson.Render(p.Definition)
	}
	return d
}

// effective is effective_policy_definition of a queue under the policy
// and operator policy named (either ""): the operator's caps merged in
// (policy.Effective); nil when neither is known.
func (d *policyDefs) effective(user, operator string) map[string]any {
	u, op := d.user[user], d.operator[operator]
	switch {
	case op == nil && u == nil:
		return nil
	case op == nil:
		return d.userJSON[user]
	case u == nil:
		return d.operatorJSON[operator]
	}
	return tablejson.Render(policy.Effective(u, op))
}

// queueRow is a queue as a listing sorts and pages it, before it is
// rendered. Its figures are read when first needed: a listing sorted by
// name reads those of the page's queues only.
type queueRow struct {
	vhost string
	entry vhost.QueueEntry
	info  *vhost.QueueInfo
	defs  *policyDefs // the vhost's policies
}

func (q *queueRow) figures() *vhost.QueueInfo {
	if q.info == nil {
		info := q.entry.Info()
		q.info = &info
	}
	return q.info
}

var queueLister = lister[*queueRow]{
	name: func(q *queueRow) string { return q.entry.Name },
	field: func(q *queueRow, key string) (any, bool) {
		switch key {
		case "vhost":
			return q.vhost, true
		case "durable":
			return q.entry.Durable, true
		case "policy":
			if q.entry.Policy == "" {
				return nil, true
			}
			return q.entry.Policy, true
		case "messages":
			return q.figures().Ready + q.figures().Unacked, true
		case "messages_ready":
			return q.figures().Ready, true
		case "messages_unacknowledged":
			return q.figures().Unacked, true
		case "consumers":
			return q.figures().Consumers, true
		case "message_bytes":
			return q.figures().ReadyBytes, true
		}
		return nil, false
	},
}

func (a *api) queues(c *call) (any, error) {
	p, err := pagingOf(c.r.URL.Query())
	if err != nil {
		return nil, err
	}
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	var rows []*queueRow
	for _, v := range vs {
		defs := policyDefinitions(v)
		entries := v.QueueEntries()
		all := make([]queueRow, len(entries))
		rows = slices.Grow(rows, len(entries))
		for i, e := range entries {
			all[i] = queueRow{vhost: v.Name, entry: e, defs: defs}
			rows = append(rows, &all[i])
		}
	}
	node := a.b.NodeName()
	return list(rows, p, queueLister, func(q *queueRow) queueJSON { return a.queueView(q.vhost, node, *q.figures(), q.defs) })
}

// pathQueue is the queue the path names, and its vhost.
func (c *call) pathQueue() (*vhost.VHost, *queue.Queue, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, nil, err
	}
	q, err := lookupQueue(v, c.path("queue"))
	return v, q, err
}

// lookupQueue finds the named classic queue of this node: errNotFound
// when there is none (of another type or node, the vhost asks it), and
// RabbitMQ's 400 (405 RESOURCE_LOCKED in AMQP) for another connection's
// exclusive queue, which RabbitMQ's API may not purge, get from or delete
// either (checked against RabbitMQ 3.10.8).
func lookupQueue(v *vhost.VHost, name string) (*queue.Queue, error) {
	t, err := v.Queue(name, nil)
	q, ok := classicqueue.Of(t)
	if !ok {
		return nil, errNotFound
	}
	return q, err
}

func (a *api) queue(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	info, ok := v.QueueInfo(c.path("queue"))
	if !ok {
		return nil, errNotFound
	}
	out := a.queueView(v.Name, a.b.NodeName(), info, policyDefinitions(v))
	out.ConsumerDetails = []consumerJSON{}
	for _, cons := range a.consumersOf(c, v.Name) {
		if cons.Queue.Name == info.Name {
			out.ConsumerDetails = append(out.ConsumerDetails, cons)
		}
	}
	// RabbitMQ shows consumer_details on a single queue, even when empty.
	type withConsumers struct {
		queueJSON
		ConsumerDetails []consumerJSON `json:"consumer_details"`
	}
	return withConsumers{queueJSON: out, ConsumerDetails: out.ConsumerDetails}, nil
}

// queueBody is PUT /api/queues/{vhost}/{queue}'s body.
type queueBody struct {
	Durable    flag           `json:"durable"`
	AutoDelete flag           `json:"auto_delete"`
	Exclusive  flag           `json:"exclusive"`
	Arguments  map[string]any `json:"arguments"`
}

func (a *api) putQueue(c *call) (any, error) {
	var body queueBody
	v, err := c.declareVHost(&body)
	if err != nil {
		return nil, err
	}
	name := c.path("queue")
	args := amqpTable(body.Arguments)
	g := c.grant(v.Name)
	isNew := !v.HasQueue(name)
	if err := allow(g, g.DeclareQueue(name, args, isNew), refusedPlain); err != nil {
		return nil, err
	}
	// An exclusive queue declared here would belong to no connection;
	// RabbitMQ's API declares it on a connection of its own that closes at
	// once, so it would vanish. Warren declares it owned by nobody instead.
	d, err := v.Declare(topology.QueueDef{Name: name, Durable: bool(body.Durable), AutoDelete: bool(body.AutoDelete),
		Exclusive: bool(body.Exclusive), Args: args}, false)
	if err != nil {
		return nil, err
	}
	if home := d.Home(); home != "" {
		return nil, badRequest("queue '%s' in vhost '%s' is on node '%s'", name, v.Name, home)
	}
	return createdOrUpdated(d.Created)
}

// existingQueue is the path's vhost and queue name once the user may use
// the vhost and the queue exists, here or on another node; errNotFound
// otherwise. RabbitMQ answers 404 for a missing queue before it asks for
// a permission on it.
func (c *call) existingQueue() (*vhost.VHost, string, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, "", err
	}
	name := c.path("queue")
	if !v.HasQueue(name) {
		return nil, "", errNotFound
	}
	return v, name, nil
}

func (a *api) deleteQueue(c *call) (any, error) {
	v, name, err := c.existingQueue()
	if err != nil {
		return nil, err
	}
	g := c.grant(v.Name)
	if err := allow(g, g.DeleteQueue(name), refusedPlain); err != nil {
		return nil, err
	}
	ifUnused, ifEmpty := c.query("if-unused") == "true", c.query("if-empty") == "true"
	q, err := lookupQueue(v, name)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, err // another connection's exclusive queue
	}
	if q == nil {
		// Homed on another node, or a quorum queue: the vhost asks it.
		_, err := v.DeleteQueue(name, nil, ifUnused, ifEmpty)
		var re *reply.Error
		if errors.As(err, &re) && re.Code == protocol.PreconditionFailed {
			return nil, badRequest("%s", strings.TrimPrefix(re.Text, "PRECONDITION_FAILED - "))
		}
		return nil, err
	}
	_, err = v.DeleteQueue(q.Name, q.Owner, ifUnused, ifEmpty)
	var re *reply.Error
	if errors.As(err, &re) && re.Code == protocol.PreconditionFailed {
		// RabbitMQ's words for the two conditions.
		if ifEmpty && q.Stats().Ready > 0 {
			return nil, badRequest("queue '%s' in vhost '%s' not empty", q.Name, v.Name)
		}
		return nil, badRequest("queue '%s' in vhost '%s' in use", q.Name, v.Name)
	}
	return nil, err
}

func (a *api) purgeQueue(c *call) (any, error) {
	v, name, err := c.existingQueue()
	if err != nil {
		return nil, err
	}
	g := c.grant(v.Name)
	if err := allow(g, g.ReadQueue(name), refusedPlain); err != nil {
		return nil, err
	}
	q, err := lookupQueue(v, name)
	if err != nil && !errors.Is(err, errNotFound) {
		return nil, err
	}
	if q == nil {
		_, err := v.PurgeQueue(name, nil)
		return nil, err
	}
	q.Purge()
	return nil, nil
}

// queueAction is POST /api/queues/{vhost}/{queue}/actions: sync and
// cancel_sync, RabbitMQ's for a classic queue's mirrors. Warren mirrors
// no classic queue, so there is nothing to synchronise: both are taken,
// for any queue, and change nothing (RabbitMQ 3.10.8 answers 204 for an
// unmirrored queue and for a quorum queue alike).
func (a *api) queueAction(c *call) (any, error) {
	if _, _, err := c.existingQueue(); err != nil {
		return nil, err
	}
	var body struct {
		Action *string `json:"action"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if err := keysPresent(field{"action", body.Action != nil}); err != nil {
		return nil, err
	}
	switch *body.Action {
	case "sync", "cancel_sync":
		return nil, nil
	}
	return nil, badRequest("unknown action '%s' (sync or cancel_sync)", *body.Action)
}

// getBody is POST /api/queues/{vhost}/{queue}/get's body.
type getBody struct {
	Count    *count `json:"count"`
	AckMode  string `json:"ackmode"`
	Encoding string `json:"encoding"`
	Truncate *count `json:"truncate"`
	Requeue  *flag  `json:"requeue"` // before 3.7; ackmode replaced it
}

// gotMessage is one message POST .../get answers with.
type gotMessage struct {
	PayloadBytes    int            `json:"payload_bytes"`
	Redelivered     bool           `json:"redelivered"`
	Exchange        string         `json:"exchange"`
	RoutingKey      string         `json:"routing_key"`
	MessageCount    int            `json:"message_count"`
	Properties      map[string]any `json:"properties"`
	Payload         string         `json:"payload"`
	PayloadEncoding string         `json:"payload_encoding"`
}

// getMessages takes up to count messages, as basic.get with an ack, and
// then settles them all as ackmode says: ack_requeue_true and
// reject_requeue_true put them back (redelivered), ack_requeue_false
// drops them, reject_requeue_false rejects them (dead-lettering them where
// the queue says so). Settling after the last get is what RabbitMQ does,
// so a requeueing get of 5 sees 5 different messages.
func (a *api) getMessages(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	var body getBody
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Count == nil {
		return nil, badRequest("[{key_missing,count}]")
	}
	if *body.Count < 0 {
		return nil, badRequest("field 'count' must not be negative")
	}
	mode := body.AckMode
	if mode == "" && body.Requeue != nil {
		mode = map[bool]string{true: "ack_requeue_true", false: "ack_requeue_false"}[bool(*body.Requeue)]
	}
	switch mode {
	case "ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false":
	default:
		return nil, badRequest("field 'ackmode' must be ack_requeue_true, ack_requeue_false, reject_requeue_true or reject_requeue_false")
	}
	switch body.Encoding {
	case "auto", "base64":
	default:
		return nil, badRequest("Unsupported encoding. Please use auto or base64.")
	}
	name := c.path("queue")
	// Permission before existence, as RabbitMQ (a get of a queue that is
	// not there is refused too).
	g := c.grant(v.Name)
	if err := allow(g, g.ReadQueue(name), refusedWithText); err != nil {
		return nil, err
	}
	if !v.HasQueue(name) {
		// RabbitMQ keeps the code's name in this one reason.
		return nil, &reply.Error{Code: protocol.NotFound, Text: "NOT_FOUND - NOT_FOUND - no queue '" + name + "' in vhost '" + v.Name + "'"}
	}
	q, err := v.Source(name, nil) // on another node: through its home
	if err != nil {
		return nil, err
	}
	out := []gotMessage{}
	var taken []queue.Entry
	for range int(*body.Count) {
		d, remaining, ok := q.Get(false)
		if !ok {
			break
		}
		taken = append(taken, d.Entry)
		out = append(out, renderMessage(d, remaining, body.Encoding, (*int)(body.Truncate)))
	}
	if len(taken) > 0 {
		switch mode {
		case "ack_requeue_false":
			q.Ack(taken)
		case "reject_requeue_false":
			q.Reject(taken)
		default:
			q.Requeue(taken)
		}
	}
	return out, nil
}

// renderMessage shows a message as RabbitMQ's get does: with encoding auto
// the payload is a string when it is valid UTF-8, else base64; truncate
// cuts the payload (not payload_bytes) to so many bytes.
func renderMessage(d queue.Delivery, remaining int, encoding string, truncate *int) gotMessage {
	m := d.Entry.Msg
	body := m.Body
	if truncate != nil && *truncate >= 0 && *truncate < len(body) {
		body = body[:*truncate]
	}
	g := gotMessage{PayloadBytes: len(m.Body), Redelivered: d.Redelivered, Exchange: m.Exchange,
		RoutingKey: m.RoutingKey, MessageCount: remaining, Properties: propertiesJSON(m.Flags, m.Props)}
	if encoding == "auto" && utf8.Valid(body) {
		g.Payload, g.PayloadEncoding = string(body), "string"
	} else {
		g.Payload, g.PayloadEncoding = base64.StdEncoding.EncodeToString(body), "base64"
	}
	return g
}

func (a *api) queueBindings(c *call) (any, error) {
	name := c.path("queue")
	v, q, err := c.pathQueue()
	if err != nil {
		if v == nil || !v.HasQueue(name) {
			return nil, err
		}
		// A quorum queue, or one homed on another node.
	} else {
		name = q.Name
	}
	return sortedBindings(bindingsOf(v, true, func(b vhost.BindingInfo) bool {
		return b.Destination.Name == name && b.Destination.Kind.String() == "queue"
	})), nil
}

func memoryOfQueue(q vhost.QueueInfo) *int64 {
	if !q.HasMemory {
		return nil
	}
	return &q.Memory
}

func utilisationOf(q vhost.QueueInfo) *float64 {
	if !q.HasUtilisation {
		return nil
	}
	u := q.ConsumerUtilisation
	return &u
}
