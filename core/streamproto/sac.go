package streamproto

import (
	"slices"

	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/stream"
)

// Single active consumers, as RabbitMQ 3.11+ coordinates them
// (rabbit_stream_sac_coordinator): subscriptions to one stream that carry
// the property single-active-consumer=true and the same name form a
// group, of which one consumes at a time and the others wait.
//
//   - A group of a plain stream keeps its active consumer until it leaves;
//     then the one that subscribed first among the others takes over.
//   - A group of a super stream's partition (the property super-stream
//     names it) has as its active consumer the one at the partition's
//     index modulo the group's size, in subscription order, so that a
//     super stream's partitions spread over its consumers. When a
//     consumer comes or goes and that choice changes, the active one is
//     told to step down first, and the new one is chosen when it answers
//     (or leaves): two never read at once.
//
// The server tells a consumer of its part with a ConsumerUpdate; the
// client answers with the offset to start from, and only then does an
// activated subscription read its stream. A waiting subscription reads
// nothing and is sent nothing, whatever its credit.
//
// The groups are this node's: consumers of one group connected to
// different nodes of a cluster are coordinated each on their node.
//
// Invariants, kept under sacGroups.mu:
//   - a group has at most one member whose active is set;
//   - a subscription reads its stream (reading) only while active;
//   - a step-down asked of a member is answered by one activation of the
//     group, when the member answers or when it leaves, whichever first.
//
// Lock order: sacGroups.mu -> stream.Stream.mu (Consume, Cancel) ->
// subscription.mu -> outbound.mu. Nothing holding a stream's lock comes
// here.

// sacKey names a group: RabbitMQ's {vhost, stream, consumer name}.
type sacKey struct{ vhost, stream, name string }

// sacGroups are a server's single-active-consumer groups.
type sacGroups struct {
	mu     lockorder.Mutex[lockorder.StreamprotoSAC]
	groups map[sacKey]*sacGroup
}

type sacGroup struct {
	// partition is the stream's index among its super stream's
	// partitions, -1 for a stream of its own.
	partition int
	members   []*subscription // in subscription order
}

// sacRequest is a ConsumerUpdate sent and not answered yet.
type sacRequest struct {
	sub          *subscription
	active       bool
	steppingDown bool
}

// register adds sub to its group, and has the group's active consumer
// chosen or told to step down as the group's kind says.
func (g *sacGroups) register(sub *subscription, partition int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.groups == nil {
		g.groups = map[sacKey]*sacGroup{}
	}
	grp := g.groups[*sub.group]
	if grp == nil {
		grp = &sacGroup{partition: partition}
		g.groups[*sub.group] = grp
	}
	grp.members = append(grp.members, sub)
	current := grp.active()
	switch {
	case current == nil && grp.partition < 0, len(grp.members) == 1:
		g.activate(sub)
	case current != nil && grp.partition >= 0 && grp.chosen() != current:
		g.stepDown(current)
	}
}

// leave takes sub out of its group (an unsubscribe, or its connection
// ending) and stops its reading; the group's active consumer is chosen
// again if sub's going changes it.
func (g *sacGroups) leave(sub *subscription) {
	g.mu.Lock()
	defer g.mu.Unlock()
	wasActive, steppingDown := sub.active, sub.c.steppingDown(sub)
	g.deactivate(sub)
	sub.gone = true
	grp := g.groups[*sub.group]
	if grp == nil {
		return
	}
	grp.members = slices.DeleteFunc(grp.members, func(m *subscription) bool { return m == sub })
	if len(grp.members) == 0 {
		delete(g.groups, *sub.group)
		return
	}
	current := grp.active()
	switch {
	case grp.partition < 0:
		if wasActive {
			g.activate(grp.members[0])
		}
	case current != nil:
		if grp.chosen() != current {
			g.stepDown(current)
		}
	case wasActive || steppingDown:
		// Nobody reads, and no step-down is left to answer: sub was
		// the one reading or the one stepping down.
		g.activate(grp.chosen())
	}
}

// answered takes a client's ConsumerUpdateResponse: an activated
// subscription starts reading from the offset the client gives (or the
// one it subscribed with), and a step-down answered lets the group's
// next consumer be chosen.
func (g *sacGroups) answered(c *Conn, m *stream.ConsumerUpdateResponse) {
	g.mu.Lock()
	defer g.mu.Unlock()
	req, ok := c.sacRequests[m.CorrelationID]
	if !ok {
		c.log.Debug().Uint32("correlation_id", m.CorrelationID).Msg("a consumer update answer nothing asked for")
		return
	}
	delete(c.sacRequests, m.CorrelationID)
	sub := req.sub
	if m.Code != stream.CodeOK {
		c.log.Info().Uint8("subscription", sub.id).Uint16("code", uint16(m.Code)).Msg("a consumer update answered with an error code")
	}
	switch {
	case sub.gone:
	case sub.active && !sub.reading:
		from := sub.from
		if m.Offset.Type != stream.OffsetNone {
			from = offsetOf(m.Offset)
		}
		sub.reading = true
		if err := sub.log.Consume(sub, from, nil); err != nil {
			sub.reading = false
			c.log.Info().Err(err).Str("stream", sub.stream).Msg("an activated single active consumer cannot read its stream")
		}
	case !sub.active && req.steppingDown:
		if grp := g.groups[*sub.group]; grp != nil && grp.active() == nil {
			g.activate(grp.chosen())
		}
	}
}

// active is the group's active member, nil when none is.
func (grp *sacGroup) active() *subscription {
	for _, m := range grp.members {
		if m.active {
			return m
		}
	}
	return nil
}

// chosen is the member that should be active: the first of a plain
// stream's group, the partition's index modulo the size of a super
// stream partition's.
func (grp *sacGroup) chosen() *subscription {
	if grp.partition < 0 {
		return grp.members[0]
	}
	return grp.members[grp.partition%len(grp.members)]
}

// activate makes sub the active member and tells its client, which
// answers with where to start.
func (g *sacGroups) activate(sub *subscription) {
	sub.mu.Lock()
	sub.active = true
	sub.mu.Unlock()
	sub.c.consumerUpdate(sub, true, false)
}

// stepDown has sub stop reading and tells its client; the group chooses
// again when it answers.
func (g *sacGroups) stepDown(sub *subscription) {
	g.deactivate(sub)
	sub.c.consumerUpdate(sub, false, true)
}

// deactivate stops sub reading and drops what it read and did not send.
func (g *sacGroups) deactivate(sub *subscription) {
	sub.mu.Lock()
	sub.active = false
	sub.records = nil
	sub.mu.Unlock()
	if sub.reading {
		sub.reading = false
		sub.log.Cancel(sub)
	}
}

// consumerUpdate sends sub's client a ConsumerUpdate and remembers it
// until answered. Under sacGroups.mu.
func (c *Conn) consumerUpdate(sub *subscription, active, steppingDown bool) {
	c.sacCorrelation++
	id := c.sacCorrelation
	if c.sacRequests == nil {
		c.sacRequests = map[uint32]sacRequest{}
	}
	c.sacRequests[id] = sacRequest{sub: sub, active: active, steppingDown: steppingDown}
	c.out.send(&stream.ConsumerUpdate{CorrelationID: id, SubscriptionID: sub.id, Active: active})
}

// steppingDown reports whether sub was asked to step down and has not
// answered; it forgets sub's requests, sub leaving. Under sacGroups.mu.
func (c *Conn) steppingDown(sub *subscription) bool {
	asked := false
	for id, req := range c.sacRequests {
		if req.sub == sub {
			asked = asked || req.steppingDown
			delete(c.sacRequests, id)
		}
	}
	return asked
}

// partitionIndex is stream's index among superStream's partitions, -1
// when superStream is empty or does not have it.
func (c *Conn) partitionIndex(superStream, streamName string) int {
	if superStream == "" {
		return -1
	}
	bindings, ok := c.superStreamBindings(superStream)
	if !ok {
		return -1
	}
	var partitions []string
	for _, b := range bindings {
		if !slices.Contains(partitions, b.queue) {
			partitions = append(partitions, b.queue)
		}
	}
	return slices.Index(partitions, streamName)
}
