package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"github.com/warrenmq/warren/internal/lockorder"
)

// Calls are the nodes' data plane beside Raft: a node asks another to do
// something (enqueue a forwarded message, deliver to a consumer) and gets
// an answer. They travel on their own connection per pair of nodes, so a
// large message never queues behind Raft's heartbeats or the other way
// round, and many calls share it at once, each with an id:
//
//	frameCall:  id(8) | payload
//	frameReply: id(8) | status(1): 0 answer, 1 error text | payload
//
// A call whose connection breaks fails with ErrCallBroken: the caller
// cannot tell whether the other node acted on it. The callee runs each
// call on its own goroutine, at most maxCallsInFlight per connection
// (reading the next waits), so a slow handler holds back only its caller.

const (
	frameCall  = 6
	frameReply = 7

	maxCallsInFlight = 256
)

// ErrCallBroken is a call whose connection broke before its answer came.
var ErrCallBroken = errors.New("cluster: the connection to the node broke during the call; it may or may not have acted on it")

// CallHandler answers a call from another node.
type CallHandler func(from uint64, payload []byte) ([]byte, error)

// callLink is a caller's connection to one peer.
type callLink struct {
	c       net.Conn
	wmu     lockorder.Mutex[lockorder.ClusterCallWrites] // writes
	w       *bufio.Writer
	mu      lockorder.Mutex[lockorder.ClusterCalls] // pending and err
	pending map[uint64]chan callAnswer
	next    uint64
	err     error // set once the link broke
}

type callAnswer struct {
	payload []byte
	err     error
}

// SetCallHandler installs (or replaces) the handler of calls from other
// nodes; Config.OnCall installs one before the node serves.
func (n *Node) SetCallHandler(h CallHandler) { n.tr.onCall.Store(&h) }

// Call sends payload to the node named name and waits for its answer.
func (n *Node) Call(ctx context.Context, name string, payload []byte) ([]byte, error) {
	m, ok := n.memberNamed(name)
	if !ok {
		return nil, fmt.Errorf("cluster: no node %q in the cluster", name)
	}
	return n.tr.call(ctx, m, payload)
}

// call runs one call on the link to m, dialing it if need be.
func (t *Transport) call(ctx context.Context, m Member, payload []byte) ([]byte, error) {
	if t.isBlocked(m.ID) {
		return nil, ErrCallBroken
	}
	l, err := t.link(ctx, m)
	if err != nil {
		return nil, err
	}
	ch := make(chan callAnswer, 1)
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil, ErrCallBroken
	}
	l.next++
	id := l.next
	l.pending[id] = ch
	l.mu.Unlock()

	l.wmu.Lock()
	err = writeFrameTo(l.w, frameCall, binary.BigEndian.AppendUint64(nil, id), payload)
	if err == nil {
		err = l.w.Flush()
	}
	l.wmu.Unlock()
	if err != nil {
		t.breakLink(m.ID, l, err)
	}
	select {
	case a := <-ch:
		return a.payload, a.err
	case <-ctx.Done():
		l.mu.Lock()
		delete(l.pending, id)
		l.mu.Unlock()
		return nil, ctx.Err()
	}
}

// link is the call connection to m, dialed on first use. One call dials
// while the others wait for its link: a burst of calls to a peer must not
// open a connection each, whose handshakes would time out one another.
func (t *Transport) link(ctx context.Context, m Member) (*callLink, error) {
	for {
		t.mu.Lock()
		if l := t.links[m.ID]; l != nil {
			t.mu.Unlock()
			return l, nil
		}
		if wait, ok := t.dialing[m.ID]; ok {
			t.mu.Unlock()
			select {
			case <-wait: // dialed, or failed: look again
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		t.dialing[m.ID] = done
		t.mu.Unlock()
		l, err := t.dialLink(ctx, m)
		t.mu.Lock()
		delete(t.dialing, m.ID)
		t.mu.Unlock()
		close(done)
		return l, err
	}
}

// dialLink dials a call connection to m.
func (t *Transport) dialLink(ctx context.Context, m Member) (*callLink, error) {
	c, err := t.dial(ctx, m.Addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: calling %s: %w", m.Name, err)
	}
	if !t.track(c) {
		c.Close()
		return nil, ErrStopped
	}
	l := &callLink{c: c, w: bufio.NewWriterSize(c, 64<<10), pending: map[uint64]chan callAnswer{}}
	t.mu.Lock()
	t.links[m.ID] = l // link lets one call dial at a time: there is no other
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.readReplies(m.ID, l)
	}()
	return l, nil
}

// readReplies hands each answer to its call until the link breaks.
func (t *Transport) readReplies(peer uint64, l *callLink) {
	r := bufio.NewReaderSize(l.c, 64<<10)
	for {
		typ, body, err := readFrame(r)
		if err == nil && (typ != frameReply || len(body) < 9) {
			err = errors.New("cluster: malformed call answer")
		}
		if err != nil {
			t.breakLink(peer, l, err)
			return
		}
		id := binary.BigEndian.Uint64(body)
		a := callAnswer{payload: body[9:]}
		if body[8] != 0 {
			a = callAnswer{err: errors.New(string(body[9:]))}
		}
		l.mu.Lock()
		ch := l.pending[id]
		delete(l.pending, id)
		l.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
}

// breakLink fails every pending call of a link and forgets it.
func (t *Transport) breakLink(peer uint64, l *callLink, err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	pending := l.pending
	l.pending = map[uint64]chan callAnswer{}
	l.mu.Unlock()
	for _, ch := range pending {
		ch <- callAnswer{err: ErrCallBroken}
	}
	t.mu.Lock()
	if t.links[peer] == l {
		delete(t.links, peer)
	}
	t.mu.Unlock()
	t.untrack(l.c)
}

// serveCall runs one call received on c and writes its answer; slots
// bounds the calls in flight on the connection.
func (t *Transport) serveCall(c net.Conn, wmu *lockorder.Mutex[lockorder.ClusterServeWrites], slots chan struct{}, from uint64, body []byte) {
	if len(body) < 8 {
		c.Close()
		return
	}
	slots <- struct{}{}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() { <-slots }()
		id := body[:8]
		var answer []byte
		var err error
		if h := t.onCall.Load(); h == nil {
			err = errors.New("cluster: this node takes no calls")
		} else {
			answer, err = (*h)(from, body[8:])
		}
		status := []byte{0}
		if err != nil {
			status, answer = []byte{1}, []byte(err.Error())
		}
		wmu.Lock()
		defer wmu.Unlock()
		if writeFrame(c, frameReply, append(append(append([]byte{}, id...), status...), answer...)) != nil {
			c.Close()
		}
	}()
}
