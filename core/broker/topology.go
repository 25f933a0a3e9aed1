package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// A cluster member's vhosts share their topology through topologyLink
// (vhost.Cluster): their commands are proposed to the metadata group like
// the broker-wide changes, their calls to a queue's home node and their
// forwarded messages travel as cluster calls.
//
// Forwarded messages go through one forwarder per destination node: a
// single sender that takes whatever accumulated while its last call was
// in flight and sends it as one call. So messages to a node arrive in the
// order they were published, a busy link carries batches (one call, one
// answer, one fsync on the far side for many messages), and an idle one
// adds a call's round trip and no waiting.

// The calls of vhosts: a queue's home answering for it, and messages
// forwarded to the queues homed on a node.
const (
	callTopology byte = 2
	callDeliver  byte = 3
)

// callTimeout bounds a call to a queue's home node.
const callTimeout = 10 * time.Second

// forwardBatchBytes is about the most one forwarding call carries (a
// larger message goes alone).
const forwardBatchBytes = 4 << 20

// forwardBacklog is how many bytes may wait to go to one node before
// clients publishing there are held back: the flow control between nodes,
// so that a node publishers outrun does not pile the difference up in
// memory.
const forwardBacklog = 64 << 20

type topologyLink struct{ b *Broker }

func (t topologyLink) Node() string { return t.b.cfg.Cluster.NodeName }

func (t topologyLink) Propose(cmd protocol.Table) error { return t.b.propose(cmd) }

// ProposeLater proposes cmd until it is committed, or the node leaves its
// cluster: it is a change this node owes the others (a queue it dropped),
// and a delete names the incarnation it ends, so trying again is safe.
func (t topologyLink) ProposeLater(cmd protocol.Table) {
	go func() {
		for t.b.cluster.Load() != nil {
			err := t.b.propose(cmd)
			var nq errNoQuorum
			if err == nil || !errors.As(err, &nq) {
				if err != nil {
					t.b.log.Warn().Err(err).Str("op", fmt.Sprint(cmd["op"])).Msg("a topology change this node owed the cluster failed")
				}
				return
			}
		}
	}()
}

// Sync waits until this node applied what the leader had committed when
// it was asked (a Raft read index: nothing is written to the log).
func (t topologyLink) Sync() error {
	n := t.b.cluster.Load()
	if n == nil {
		return cluster.ErrNoQuorum
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(t.b.cfg.Cluster.ChangeTimeout))
	defer cancel()
	return n.Barrier(ctx)
}

func (t topologyLink) Nodes() []string {
	n := t.b.cluster.Load()
	if n == nil {
		return []string{t.Node()}
	}
	var out []string
	for _, m := range n.Members() {
		out = append(out, m.Name)
	}
	return out
}

func (t topologyLink) NodeID(node string) uint64 {
	n := t.b.cluster.Load()
	if n == nil {
		return 0
	}
	id, _ := n.MemberID(node)
	return id
}

func (t topologyLink) Removed(id uint64) bool {
	n := t.b.cluster.Load()
	return n != nil && n.Removed(id)
}

func (t topologyLink) Up(node string) bool {
	n := t.b.cluster.Load()
	return n != nil && n.Alive(node)
}

// Call asks node to carry out a vhost's request. The answer is a field
// table: {"ok": answer} or {"code": code, "text": text}.
func (t topologyLink) Call(node string, req protocol.Table) (protocol.Table, error) {
	n := t.b.cluster.Load()
	if n == nil {
		return nil, reply.Internal("this node is not in a cluster")
	}
	payload, err := protocol.AppendTable([]byte{callTopology}, req)
	if err != nil {
		return nil, reply.Internal("could not encode the call: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	raw, err := n.Call(ctx, node, payload)
	if err != nil {
		return nil, reply.Internal("node '%s' did not answer: %v", node, err)
	}
	ans, _, err := protocol.DecodeTable(raw)
	if err != nil {
		return nil, reply.Internal("node '%s' answered a call that does not decode: %v", node, err)
	}
	if code, ok := ans["code"].(int64); ok {
		text, _ := ans["text"].(string)
		return nil, &reply.Error{Code: uint16(code), Text: text}
	}
	ok, _ := ans["ok"].(protocol.Table)
	return ok, nil
}

// answerTopology runs a vhost's call from another node.
func (b *Broker) answerTopology(payload []byte) ([]byte, error) {
	req, _, err := protocol.DecodeTable(payload)
	if err != nil {
		return nil, err
	}
	name, _ := req["vhost"].(string)
	var ans protocol.Table
	v, ok := b.VHost(name)
	if !ok {
		err = reply.NotFound("no vhost '%s'", name)
	} else {
		ans, err = v.HandleCall(req)
	}
	out := protocol.Table{"ok": ans}
	if err != nil {
		e := reply.As(err)
		out = protocol.Table{"code": int64(e.Code), "text": e.Text}
	}
	if out["ok"] == nil && err == nil {
		out["ok"] = protocol.Table{}
	}
	return protocol.AppendTable(nil, out)
}

// ---- forwarding

// forward is one message for queues homed on another node.
type forward struct {
	vhost  string
	queues []string
	m      *message.Message
	done   func(error)
}

// forwarder sends the messages for one node, one call at a time.
type forwarder struct {
	b    *Broker
	node string

	mu           lockorder.Mutex[lockorder.BrokerForwarder]
	pending      []forward
	pendingBytes int
	sending      bool
	drained      chan struct{} // closed when pendingBytes falls to forwardBacklog
}

func (t topologyLink) Forward(home, vh string, queues []string, m *message.Message, wait bool, done func(error)) {
	f := t.b.forwarder(home)
	if wait {
		f.waitForRoom()
	}
	f.add(forward{vhost: vh, queues: queues, m: m, done: done})
}

// waitForRoom holds a publisher while the node's backlog is full.
func (f *forwarder) waitForRoom() {
	for {
		f.mu.Lock()
		if f.pendingBytes <= forwardBacklog {
			f.mu.Unlock()
			return
		}
		if f.drained == nil {
			f.drained = make(chan struct{})
		}
		ch := f.drained
		f.mu.Unlock()
		select {
		case <-ch:
		case <-f.b.stop:
			return
		}
	}
}

// forwarder returns the forwarder to node, made on first use.
func (b *Broker) forwarder(node string) *forwarder {
	b.forwardMu.Lock()
	defer b.forwardMu.Unlock()
	f := b.forwarders[node]
	if f == nil {
		if b.forwarders == nil {
			b.forwarders = make(map[string]*forwarder)
		}
		f = &forwarder{b: b, node: node}
		b.forwarders[node] = f
	}
	return f
}

func (f *forwarder) add(fw forward) {
	f.mu.Lock()
	f.pending = append(f.pending, fw)
	f.pendingBytes += len(fw.m.Body) + len(fw.m.Props)
	start := !f.sending
	f.sending = true
	f.mu.Unlock()
	if start {
		go f.run()
	}
}

// run sends batches until nothing is pending.
func (f *forwarder) run() {
	for {
		f.mu.Lock()
		n, size := 0, 0
		for n < len(f.pending) && (n == 0 || size < forwardBatchBytes) {
			size += len(f.pending[n].m.Body) + len(f.pending[n].m.Props)
			n++
		}
		if n == 0 {
			f.sending = false
			f.mu.Unlock()
			return
		}
		batch := make([]forward, n)
		copy(batch, f.pending)
		clear(f.pending[:n])
		f.pending = f.pending[n:]
		if len(f.pending) == 0 {
			f.pending = nil
		}
		f.pendingBytes -= size
		if f.drained != nil && f.pendingBytes <= forwardBacklog {
			close(f.drained)
			f.drained = nil
		}
		f.mu.Unlock()
		f.send(batch)
	}
}

// send makes one forwarding call and reports each message's outcome.
func (f *forwarder) send(batch []forward) {
	results, err := f.call(batch)
	for i, fw := range batch {
		e := err
		if e == nil {
			e = results[i]
		}
		fw.done(e)
	}
}

func (f *forwarder) call(batch []forward) ([]error, error) {
	n := f.b.cluster.Load()
	if n == nil {
		return nil, errors.New("this node left its cluster")
	}
	payload := encodeForwards(batch)
	// No deadline: the node may hold the answer for as long as a resource
	// alarm of its own lasts. The call ends when the node is no longer
	// heard from, or this one stops.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.b.stop:
				cancel()
				return
			case <-tick.C:
				if !n.Alive(f.node) {
					cancel()
					return
				}
			}
		}
	}()
	raw, err := n.Call(ctx, f.node, payload)
	if err != nil {
		return nil, fmt.Errorf("forwarding to node '%s': %w", f.node, err)
	}
	if len(raw) != len(batch) {
		return nil, fmt.Errorf("node '%s' answered %d outcomes for %d messages", f.node, len(raw), len(batch))
	}
	out := make([]error, len(batch))
	for i, st := range raw {
		switch st {
		case deliverOK:
		case deliverRejected:
			out[i] = queuetype.ErrRejected
		default:
			out[i] = fmt.Errorf("node '%s' could not take the message", f.node)
		}
	}
	return out, nil
}

// The outcome of each forwarded message, one byte each in the answer.
const (
	deliverOK byte = iota
	deliverRejected
	deliverFailed
)

// encodeForwards lays out a batch: count(4), then per message vhost,
// queue names, exchange, routing key, flags, properties and body.
func encodeForwards(batch []forward) []byte {
	size := 5
	for _, fw := range batch {
		size += 32 + len(fw.vhost) + len(fw.m.Exchange) + len(fw.m.RoutingKey) + len(fw.m.Props) + len(fw.m.Body)
		for _, q := range fw.queues {
			size += 1 + len(q)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, callDeliver)
	b = binary.BigEndian.AppendUint32(b, uint32(len(batch)))
	for _, fw := range batch {
		b = appendShort(b, fw.vhost)
		b = binary.BigEndian.AppendUint16(b, uint16(len(fw.queues)))
		for _, q := range fw.queues {
			b = appendShort(b, q)
		}
		b = appendShort(b, fw.m.Exchange)
		b = appendShort(b, fw.m.RoutingKey)
		b = binary.BigEndian.AppendUint16(b, fw.m.Flags)
		b = binary.BigEndian.AppendUint32(b, uint32(len(fw.m.Props)))
		b = append(b, fw.m.Props...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(fw.m.Body)))
		b = append(b, fw.m.Body...)
	}
	return b
}

func appendShort(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}

// errForwardTruncated is a forwarding call that ends early.
var errForwardTruncated = errors.New("a forwarding call that ends early")

// forwardReader reads encodeForwards' layout.
type forwardReader struct {
	b   []byte
	err error
}

func (r *forwardReader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = errForwardTruncated
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *forwardReader) short() string {
	n := r.take(1)
	if n == nil {
		return ""
	}
	return string(r.take(int(n[0])))
}

func (r *forwardReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *forwardReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// bytes copies what it reads: a message kept in a queue must not pin the
// whole call's buffer.
func (r *forwardReader) bytes() []byte {
	n := r.u32()
	return append([]byte(nil), r.take(int(n))...)
}

// answerDeliver enqueues forwarded messages into the queues homed here and
// answers each one's outcome once it is settled (stored, for a persistent
// message), after any resource alarm of this node has cleared.
func (b *Broker) answerDeliver(payload []byte) ([]byte, error) {
	r := &forwardReader{b: payload}
	count := int(r.u32())
	if r.err != nil || count > len(payload) {
		return nil, errForwardTruncated
	}
	type item struct {
		v      *vhost.VHost
		queues []string
		m      *message.Message
	}
	items := make([]item, 0, count)
	for range count {
		var it item
		name := r.short()
		queues := make([]string, r.u16())
		for i := range queues {
			queues[i] = r.short()
		}
		exchange, key, flags := r.short(), r.short(), r.u16()
		props, body := r.bytes(), r.bytes()
		if r.err != nil {
			return nil, r.err
		}
		it.queues = queues
		it.v, _ = b.VHost(name)
		m, err := message.New(exchange, key, flags, props, body)
		if err == nil {
			it.m = m
		}
		items = append(items, it)
	}
	// A resource alarm holds forwarded messages back as it holds this
	// node's own publishers: the call is answered late, the sending
	// node's backlog fills, and its publishers wait in turn.
	for {
		raised, _, cleared := b.alarm.State()
		if !raised {
			break
		}
		select {
		case <-cleared:
		case <-b.stop:
			return nil, errors.New("the node is stopping")
		}
	}
	out := make([]byte, count)
	var wg sync.WaitGroup
	for i, it := range items {
		if it.v == nil || it.m == nil {
			out[i] = deliverFailed
			continue
		}
		wg.Add(1)
		it.v.Deliver(it.queues, it.m, func(err error) {
			switch {
			case err == nil:
			case errors.Is(err, queuetype.ErrRejected):
				out[i] = deliverRejected
			default:
				out[i] = deliverFailed
			}
			wg.Done()
		})
	}
	wg.Wait()
	return out, nil
}
