package streamproto

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/stream"
)

// Single active consumers, as RabbitMQ 3.11+ coordinates them: the
// subscriptions to one stream that carry the property
// single-active-consumer=true and the same name form a group, of which
// one consumes at a time and the others wait, across the whole cluster.
//
// Two parts, which talk only by messages (sacMessage):
//
//   - The coordinator (saccoord.go holds its rules) keeps each group's
//     members and decides who is active. A group's coordinator is the node
//     leading its stream's Raft group (the node itself for a stream of a
//     node of its own), as RabbitMQ's sits in its stream coordinator.
//   - The agent is each node's own subscriptions: it registers them with
//     their group's coordinator, carries out its updates (a ConsumerUpdate
//     to the client, then reading from the offset the client answers), and
//     reports its clients' answers to step-downs.
//
// Messages go through an outbox per node, in order, after every lock is
// released (to this node's own coordinator or agent too). One that cannot
// be delivered (a node down, an election) is dropped: every agent reports
// its members to their coordinators each SACSyncInterval (sync), which
// mends whatever was lost and rebuilds a new coordinator's state after
// the leadership moved. A coordinator drops the members of a node that is
// down or has not reported for sacStale intervals, and forgets the groups
// of the streams it no longer leads. So a consumer on a node that fails
// is replaced within moments of its node being found down; while the
// cluster is split, each side's coordinator may keep an active member
// (RabbitMQ's, in a partition, has the same window).
//
// The agent's invariants, kept under sacAgent.mu:
//   - a subscription reads its stream (reading) only while active;
//   - it is active from its coordinator's activation until a step-down
//     or its leaving; a step-down it was told of and whose answer has not
//     come is steppingDown.
//
// Lock order: sacAgent.mu -> stream.Stream.mu (Consume, Cancel) ->
// subscription.mu -> outbound.mu; sacAgent.mu and sacCoordinator.mu ->
// Server.outboxMu, sacOutbox.mu (messages are queued under the lock that
// decided them, so that they go in that order; they are delivered with
// no lock held). Nothing holding a stream's lock comes here.

// sacSyncInterval is how often agents report to coordinators, when
// Settings.SACSyncInterval is 0; sacStale is after how many intervals
// without a report a node's members are dropped.
const (
	sacSyncInterval = time.Second
	sacStale        = 5
)

// sacMessage is what agents and coordinators send each other.
type sacMessage struct {
	Op        sacOp
	Key       sacKey       `json:",omitzero"`
	Member    sacMember    `json:",omitzero"`
	Partition int          `json:",omitempty"`
	Node      string       `json:",omitempty"` // sync: the reporting node; update: the coordinator
	Reports   []sacReports `json:",omitempty"` // sync: its members, by group
	Updates   []sacUpdate  `json:",omitempty"` // update
}

type sacOp string

const (
	sacRegister    sacOp = "register"     // agent to coordinator: Member joins Key
	sacLeave       sacOp = "leave"        // agent to coordinator: Member left Key
	sacSteppedDown sacOp = "stepped-down" // agent to coordinator: Member's client answered a step-down
	sacSync        sacOp = "sync"         // agent to coordinator: every member Node has in its groups
	sacApply       sacOp = "update"       // coordinator to agent: activate or step down
)

// sacReports are a node's members of one group.
type sacReports struct {
	Key     sacKey
	Members []sacReport
}

// sacAgent is this node's single-active-consumer subscriptions.
type sacAgent struct {
	mu     lockorder.Mutex[lockorder.StreamprotoSAC]
	run    uint64
	subs   map[sacMember]*subscription
	joins  uint64          // subscriptions joined so far
	synced map[string]bool // coordinators reported to at the last sync
}

// sacCoordinator is the groups this node coordinates.
type sacCoordinator struct {
	mu       lockorder.Mutex[lockorder.StreamprotoSACCoordinator]
	st       sacState
	reported map[string]time.Time // when each node last synced
}

// sacRequest is a ConsumerUpdate sent and not answered yet.
type sacRequest struct {
	sub          *subscription
	active       bool
	steppingDown bool
}

// member is sub's name in its group.
func (srv *Server) member(sub *subscription) sacMember {
	return sacMember{Node: srv.Node, Run: srv.sacRun(), Conn: sub.c.id, Sub: sub.id}
}

// sacRun is this server's run.
func (srv *Server) sacRun() uint64 {
	srv.sacOnce.Do(srv.initSAC)
	return srv.sac.run
}

// initSAC draws the server's run and makes its stop channel, at first use.
func (srv *Server) initSAC() {
	var b [8]byte
	rand.Read(b[:])
	srv.sac.run = binary.BigEndian.Uint64(b[:]) | 1
	srv.stop = make(chan struct{})
}

// ---- the agent

// join adds sub (just subscribed, answered, reading nothing) to its
// group: the coordinator activates it or has it wait.
func (srv *Server) join(sub *subscription, partition int) {
	m := srv.member(sub)
	coordinator, known := srv.coordinatorOf(*sub.group)
	srv.sac.mu.Lock()
	if srv.sac.subs == nil {
		srv.sac.subs = map[sacMember]*subscription{}
	}
	srv.sac.subs[m] = sub
	srv.sac.joins++
	sub.partition, sub.joined = partition, srv.sac.joins
	if known {
		srv.post(coordinator, sacMessage{Op: sacRegister, Key: *sub.group, Member: m, Partition: partition})
	}
	srv.sac.mu.Unlock()
	srv.startSyncLoop()
}

// leave takes sub out of its group (an unsubscribe, or its connection
// ending) and stops its reading.
func (srv *Server) leave(sub *subscription) {
	m := srv.member(sub)
	coordinator, known := srv.coordinatorOf(*sub.group)
	srv.sac.mu.Lock()
	srv.deactivate(sub)
	sub.gone = true
	sub.c.forgetRequests(sub)
	delete(srv.sac.subs, m)
	if known {
		srv.post(coordinator, sacMessage{Op: sacLeave, Key: *sub.group, Member: m})
	}
	srv.sac.mu.Unlock()
}

// apply carries out a coordinator's updates of this node's members. A
// step-down of a member that does not read is answered at once.
func (srv *Server) apply(coordinator string, ups []sacUpdate) {
	srv.sac.mu.Lock()
	defer srv.sac.mu.Unlock()
	for _, u := range ups {
		sub := srv.sac.subs[u.Member]
		if sub == nil || sub.gone || *sub.group != u.Key {
			continue // gone: its leave tells the coordinator
		}
		switch {
		case u.Active && !sub.active:
			sub.mu.Lock()
			sub.active = true
			sub.mu.Unlock()
			sub.steppingDown = false
			sub.c.consumerUpdate(sub, true, false)
		case !u.Active && sub.active:
			srv.deactivate(sub)
			sub.steppingDown = true
			sub.c.consumerUpdate(sub, false, true)
		case !u.Active && !sub.steppingDown:
			srv.post(coordinator, sacMessage{Op: sacSteppedDown, Key: u.Key, Member: u.Member})
		}
	}
}

// answered takes a client's ConsumerUpdateResponse: an activated
// subscription starts reading from the offset the client gives (or the
// one it subscribed with), and a step-down answered goes to the
// coordinator, which may then activate another.
func (srv *Server) answered(c *Conn, m *stream.ConsumerUpdateResponse) {
	srv.sac.mu.Lock()
	req, ok := c.sacRequests[m.CorrelationID]
	srv.sac.mu.Unlock()
	if !ok {
		c.log.Debug().Uint32("correlation_id", m.CorrelationID).Msg("a consumer update answer nothing asked for")
		return
	}
	coordinator, known := srv.coordinatorOf(*req.sub.group)
	srv.sac.mu.Lock()
	defer srv.sac.mu.Unlock()
	if _, ok := c.sacRequests[m.CorrelationID]; !ok {
		return // the subscription left meanwhile
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
	case !sub.active && req.steppingDown && sub.steppingDown:
		sub.steppingDown = false
		if known {
			srv.post(coordinator, sacMessage{Op: sacSteppedDown, Key: *sub.group, Member: srv.member(sub)})
		}
	}
}

// deactivate stops sub reading and drops what it read and did not send;
// sacAgent.mu is held.
func (srv *Server) deactivate(sub *subscription) {
	sub.mu.Lock()
	sub.active = false
	sub.records = nil
	formed := sub.formed
	sub.formed = nil
	sub.mu.Unlock()
	if formed != nil {
		formed.Release()
	}
	if sub.reading {
		sub.reading = false
		sub.log.Cancel(sub)
	}
}

// consumerUpdate sends sub's client a ConsumerUpdate and remembers it
// until answered; sacAgent.mu is held.
func (c *Conn) consumerUpdate(sub *subscription, active, steppingDown bool) {
	c.sacCorrelation++
	id := c.sacCorrelation
	if c.sacRequests == nil {
		c.sacRequests = map[uint32]sacRequest{}
	}
	c.sacRequests[id] = sacRequest{sub: sub, active: active, steppingDown: steppingDown}
	c.out.send(&stream.ConsumerUpdate{CorrelationID: id, SubscriptionID: sub.id, Active: active})
}

// forgetRequests drops sub's unanswered ConsumerUpdates, sub leaving;
// sacAgent.mu is held.
func (c *Conn) forgetRequests(sub *subscription) {
	for id, req := range c.sacRequests {
		if req.sub == sub {
			delete(c.sacRequests, id)
		}
	}
}

// startSyncLoop starts syncLoop, once: when the node has its first
// member, or coordinates its first group.
func (srv *Server) startSyncLoop() {
	srv.loopOnce.Do(func() { go srv.syncLoop() })
}

// syncLoop reports this node's members to their coordinators each
// interval, and has this node's coordinator tidy its groups, until the
// server closes.
func (srv *Server) syncLoop() {
	interval := srv.Settings.SACSyncInterval
	if interval <= 0 {
		interval = sacSyncInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-srv.done():
			return
		}
		srv.sync()
		srv.tidy(interval)
	}
}

// sync sends each coordinator this node's members of the groups it
// coordinates, and an empty report to one it reported to last time and
// has none for now (so that it drops what a lost leave left).
//
// The reports are built and posted under sacAgent.mu, as registrations
// and leaves are, so that a coordinator receives them in the order the
// agent made its changes: a report never overtakes a registration it
// does not include. Where each group's coordinator is, is learned first,
// with no lock held (it asks the vhost).
func (srv *Server) sync() {
	srv.sac.mu.Lock()
	keys := map[sacKey]bool{}
	for _, sub := range srv.sac.subs {
		keys[*sub.group] = true
	}
	srv.sac.mu.Unlock()
	coordinators := map[sacKey]string{}
	for key := range keys {
		if node, ok := srv.coordinatorOf(key); ok {
			coordinators[key] = node
		}
	}

	srv.sac.mu.Lock()
	defer srv.sac.mu.Unlock()
	byKey := map[sacKey][]*subscription{}
	for _, sub := range srv.sac.subs {
		byKey[*sub.group] = append(byKey[*sub.group], sub)
	}
	reports := map[string][]sacReports{}
	for _, key := range sortedKeys(byKey) {
		node, ok := coordinators[key]
		if !ok {
			continue // a group joined meanwhile (its registration is on its way), or no coordinator now
		}
		subs := byKey[key]
		slices.SortFunc(subs, func(a, b *subscription) int { return cmp.Compare(a.joined, b.joined) })
		rs := make([]sacReport, len(subs))
		for i, sub := range subs {
			rs[i] = sacReport{Member: srv.member(sub), Partition: sub.partition, Active: sub.active, SteppingDown: sub.steppingDown}
		}
		reports[node] = append(reports[node], sacReports{Key: key, Members: rs})
	}
	now := map[string]bool{}
	for _, node := range slices.Sorted(maps.Keys(reports)) {
		now[node] = true
		srv.post(node, sacMessage{Op: sacSync, Node: srv.Node, Reports: reports[node]})
	}
	for node := range srv.sac.synced {
		if !now[node] {
			srv.post(node, sacMessage{Op: sacSync, Node: srv.Node})
		}
	}
	srv.sac.synced = now
}

// ---- the coordinator

// coordinate runs one message to this node's coordinator and sends the
// updates it calls for.
func (srv *Server) coordinate(msg sacMessage) {
	if msg.Op != sacSync {
		if node, ok := srv.coordinatorOf(msg.Key); !ok || node != srv.Node {
			return // not this node's group (any more): the sender's sync finds the right one
		}
	}
	srv.startSyncLoop() // which tidies the groups
	c := &srv.coord
	c.mu.Lock()
	defer c.mu.Unlock() // updates are posted under it, in the order they were decided
	var ups []sacUpdate
	switch msg.Op {
	case sacRegister:
		ups = c.st.register(msg.Key, msg.Member, msg.Partition)
	case sacLeave:
		ups = c.st.leave(msg.Key, msg.Member)
	case sacSteppedDown:
		ups = c.st.steppedDown(msg.Key, msg.Member)
	case sacSync:
		if c.reported == nil {
			c.reported = map[string]time.Time{}
		}
		c.reported[msg.Node] = time.Now()
		reports := map[sacKey][]sacReport{}
		for _, r := range msg.Reports {
			reports[r.Key] = r.Members
		}
		ups = c.st.sync(msg.Node, reports)
	}
	srv.sendUpdates(ups)
}

// tidy forgets the groups this node no longer coordinates, and drops the
// members of nodes down or silent for sacStale intervals.
func (srv *Server) tidy(interval time.Duration) {
	c := &srv.coord
	c.mu.Lock()
	keys := sortedKeys(c.st.groups)
	c.mu.Unlock()
	var gone []sacKey
	for _, key := range keys {
		if node, ok := srv.coordinatorOf(key); ok && node != srv.Node {
			gone = append(gone, key)
		}
	}
	c.mu.Lock()
	for _, key := range gone {
		c.st.forget(key)
	}
	if c.reported == nil {
		c.reported = map[string]time.Time{}
	}
	var ups []sacUpdate
	for _, node := range c.st.nodes() {
		last, ok := c.reported[node]
		if !ok {
			c.reported[node] = time.Now() // registered, not synced yet: the clock starts
			continue
		}
		if !srv.nodeUp(node) || time.Since(last) > sacStale*interval {
			ups = append(ups, c.st.dropNode(node)...)
		}
	}
	srv.sendUpdates(ups)
	c.mu.Unlock()
}

// sendUpdates sends each member's node its updates, in order;
// sacCoordinator.mu is held.
func (srv *Server) sendUpdates(ups []sacUpdate) {
	var nodes []string
	byNode := map[string][]sacUpdate{}
	for _, u := range ups {
		if _, ok := byNode[u.Member.Node]; !ok {
			nodes = append(nodes, u.Member.Node)
		}
		byNode[u.Member.Node] = append(byNode[u.Member.Node], u)
	}
	for _, node := range nodes {
		srv.post(node, sacMessage{Op: sacApply, Node: srv.Node, Updates: byNode[node]})
	}
}

// coordinatorOf is the node coordinating group key: this node for a
// stream of its own, else the stream's Raft leader; ok is false while
// there is none (an election), or the stream is gone.
func (srv *Server) coordinatorOf(key sacKey) (string, bool) {
	if srv.Call == nil {
		return srv.Node, true
	}
	vh, ok := srv.VHosts.VHost(key.VHost)
	if !ok {
		return "", false
	}
	q, err := vh.Queue(key.Stream, nil)
	if err != nil {
		return "", false
	}
	view, replicated := q.Status()
	if !replicated {
		return srv.Node, true
	}
	return view.Leader, view.Leader != ""
}

// nodeUp says whether node is up, as the cluster sees it.
func (srv *Server) nodeUp(node string) bool {
	return node == srv.Node || srv.NodeUp == nil || srv.NodeUp(node)
}

// ---- delivery

// HandleSAC takes a single-active-consumer message from another node
// (the broker's call).
func (srv *Server) HandleSAC(payload []byte) error {
	var msg sacMessage
	if err := json.Unmarshal(payload, &msg); err != nil {
		return err
	}
	srv.receive(msg)
	return nil
}

// receive runs a message here: an update to the agent, the rest to the
// coordinator.
func (srv *Server) receive(msg sacMessage) {
	if msg.Op == sacApply {
		srv.apply(msg.Node, msg.Updates)
		return
	}
	srv.coordinate(msg)
}

// sacOutbox is one node's messages waiting to go, in order.
type sacOutbox struct {
	mu      lockorder.Mutex[lockorder.StreamprotoSACOutbox]
	queue   []sacMessage
	running bool
}

// sacCallTimeout bounds one message's call to another node.
const sacCallTimeout = 3 * time.Second

// post queues msg for node (this node's own included) and has it sent
// after whatever is queued for it already.
func (srv *Server) post(node string, msg sacMessage) {
	srv.outboxMu.Lock()
	if srv.outboxes == nil {
		srv.outboxes = map[string]*sacOutbox{}
	}
	box := srv.outboxes[node]
	if box == nil {
		box = &sacOutbox{}
		srv.outboxes[node] = box
	}
	srv.outboxMu.Unlock()
	box.mu.Lock()
	if msg.Op == sacSync {
		// A report supersedes the ones still queued (it was built after
		// them): a node that does not answer holds one, not one a second.
		box.queue = slices.DeleteFunc(box.queue, func(m sacMessage) bool { return m.Op == sacSync })
	}
	box.queue = append(box.queue, msg)
	start := !box.running
	box.running = true
	box.mu.Unlock()
	if start {
		go srv.send(node, box)
	}
}

// send delivers box's messages until it is empty.
func (srv *Server) send(node string, box *sacOutbox) {
	for {
		box.mu.Lock()
		if len(box.queue) == 0 {
			box.running = false
			box.mu.Unlock()
			return
		}
		msg := box.queue[0]
		box.queue[0] = sacMessage{}
		box.queue = box.queue[1:]
		box.mu.Unlock()
		if node == srv.Node || srv.Call == nil {
			srv.receive(msg)
			continue
		}
		payload, err := json.Marshal(msg)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), sacCallTimeout)
			err = srv.Call(ctx, node, payload)
			cancel()
		}
		if err != nil {
			srv.Log.Debug().Err(err).Str("node", node).Str("op", string(msg.Op)).Msg("a single-active-consumer message not delivered; the next sync mends it")
		}
	}
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
