package cluster

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The transport carries Raft messages between nodes over TCP. Every node
// dials every peer it sends to; a connection carries frames one way, from
// the dialer, except for the join request, which is answered on the same
// connection. A connection starts with a mutual challenge-response on the
// cluster secret, so a node that does not know the secret can neither
// send to nor impersonate a member:
//
//	dialer   -> hello:  magic "WRNC", version, dialer's id, nonce A
//	listener -> nonce B, HMAC(secret, "listener" | A | B)
//	dialer   -> HMAC(secret, "dialer" | A | B)
//
// With TLS (Config.TLS), connections are TLS 1.3 and the two HMACs also
// cover keying material exported from the TLS session, which binds the
// proof to that session: a man in the middle who terminates TLS on both
// sides cannot relay it. Certificates are therefore not verified: the
// secret is what authenticates a node, TLS what keeps the traffic private.
//
// Frames are a type byte, a big-endian uint32 length and a body: a Raft
// message (protobuf) of the metadata group, one of another group (a
// quorum queue's: its group id as a uvarint, then the message), a join
// request and its answer, a ping, or the metadata index the sender has
// applied. Every group shares a peer's connection, so a
// flush carries the heartbeats of all the groups that have one due.
//
// Sending never blocks the node: each peer has a bounded queue drained by
// its own goroutine; when the queue is full or the peer cannot be reached
// the message is dropped and Raft is told (ReportUnreachable), which it
// copes with by retrying.
//
// Ids are per incarnation (identity.go), and a new incarnation of a node
// listens where the one it replaces did: a Raft message whose To is not
// this node's id was meant for that one, and is dropped, for a leader
// that counts it would hand this one a log it does not have. Nothing
// from an incarnation the cluster removed (forbid) is taken, as etcd
// refuses its removed members.

// version is the cluster protocol's: a node refuses a peer of another,
// rather than have either misread the other's messages. Version 2 came
// with ordered proposals (proposals.go), whose tags a node of version 1
// would read as other numbers; version 3 with a replicated stream's
// batched appends (core/stream's entryAppendBatch), which a node of
// version 2 could not apply, and the node calls that ask a node where
// its stream protocol listens and carry single-active-consumer messages
// (no release has had version 3 without them). The nodes of a cluster run releases of
// one version, and a change of it takes every node down and up again.
const (
	magic          = "WRNC"
	version        = 3
	nonceLen       = 32
	macLen         = sha256.Size
	frameRaft      = 1
	frameJoin      = 2
	frameJoinReply = 3
	frameLeave     = 4
	framePing      = 5 // keeps the peer's view of us fresh, and times the link (pingBody)
	frameGroup     = 7 // a Raft message of a group other than the metadata's
	frameApplied   = 8 // the metadata log index the sender has applied (uvarint)

	// maxFrame bounds a frame: a metadata snapshot of a large broker
	// (100,000 queues and bindings) is tens of megabytes.
	maxFrame = 256 << 20
	// sendQueue is how many messages wait for one peer before new ones
	// are dropped: the metadata group sends at most MaxInflightMsgs
	// appends per peer, plus heartbeats and votes; each quorum queue's
	// group a few more (a thousand groups heartbeat in the same tick).
	sendQueue = 16384
	// dialTimeout and the handshake deadline keep a dead peer from
	// holding its sender for long.
	dialTimeout = 2 * time.Second
	// pingEvery is how often a sender with nothing to send pings its peer;
	// a peer not heard from for aliveWithin is reported down.
	pingEvery   = time.Second
	aliveWithin = 3 * pingEvery
)

var errAuth = errors.New("cluster: the peer does not know the cluster secret")

// Transport sends and receives Raft messages.
type Transport struct {
	id     uint64
	secret []byte
	tls    *tls.Config // nil: plain TCP
	log    zerolog.Logger
	ln     net.Listener

	// deliver gets every Raft message received, with its group (0: the
	// metadata group); onJoin answers join and leave requests. Both are
	// set before Serve.
	deliver func(group uint64, m *raftpb.Message)
	onJoin  func(ctx context.Context, req joinRequest) ([]Member, error)
	// onApplied hears the metadata index a peer has applied; applied is
	// this node's, told to every peer as it moves and with each ping.
	onApplied func(from, index uint64)
	applied   atomic.Uint64

	mu      lockorder.Mutex[lockorder.ClusterTransport]
	peers   map[uint64]*peer
	blocked map[uint64]bool // tests: links cut by Block
	// lose, in tests, loses a message on its way: it is not sent.
	lose    func(group uint64, m *raftpb.Message) bool
	removed map[uint64]bool      // incarnations the cluster removed (forbid)
	heard   map[uint64]time.Time // when each peer last sent us a frame
	echo    map[uint64]pingEcho  // the last ping each peer sent us, to echo back
	rtt     map[uint64]time.Duration
	links   map[uint64]*callLink     // call connections, by peer (calls.go)
	dialing map[uint64]chan struct{} // a call link being dialed, closed when done
	onCall  atomic.Pointer[CallHandler]
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup

	unreachable  func(group, id uint64)          // reports a dropped message to Raft
	snapshotSent func(group, id uint64, ok bool) // reports how sending a snapshot went
	// dead hears of a peer whose process is gone (see lost); nil: nobody
	// listens.
	dead func(id uint64)
}

// outMsg is a Raft message on its way, with its group (0: the metadata
// group).
type outMsg struct {
	group uint64
	m     *raftpb.Message
	// applied, in a message without m, is this node's applied index
	// (frameApplied).
	applied uint64
}

// peer is one destination and its sender goroutine.
type peer struct {
	id    uint64
	addr  string
	queue chan outMsg
	stop  chan struct{}
}

// newTransport listens on addr for other nodes; with serverTLS (which
// holds the node's certificate), over TLS.
func newTransport(id uint64, addr string, secret []byte, serverTLS *tls.Config, log zerolog.Logger) (*Transport, error) {
	if len(secret) == 0 {
		return nil, errors.New("cluster: a cluster secret is required")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: listening for nodes: %w", err)
	}
	if serverTLS != nil {
		serverTLS = serverTLS.Clone()
		serverTLS.MinVersion = tls.VersionTLS13
		ln = tls.NewListener(ln, serverTLS)
	}
	return &Transport{id: id, secret: secret, tls: serverTLS, log: log, ln: ln,
		peers: map[uint64]*peer{}, blocked: map[uint64]bool{}, removed: map[uint64]bool{}, heard: map[uint64]time.Time{},
		echo: map[uint64]pingEcho{}, rtt: map[uint64]time.Duration{}, links: map[uint64]*callLink{}, dialing: map[uint64]chan struct{}{},
		conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// serve accepts connections until close.
func (t *Transport) serve() {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			c, err := t.ln.Accept()
			if err != nil {
				return
			}
			if !t.track(c) {
				c.Close()
				return
			}
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				defer t.untrack(c)
				t.receive(c)
			}()
		}
	}()
}

func (t *Transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transport) untrack(c net.Conn) {
	c.Close()
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

// receive authenticates a dialer and reads its frames.
func (t *Transport) receive(c net.Conn) {
	c.SetDeadline(time.Now().Add(dialTimeout))
	from, err := t.accept(c)
	if errors.Is(err, io.EOF) {
		return // closed before a word: another node's probe (lost)
	}
	if err != nil {
		t.log.Warn().Err(err).Str("remote", c.RemoteAddr().String()).Msg("refused a cluster connection")
		return
	}
	c.SetDeadline(time.Time{})
	if t.isRemoved(from) {
		t.log.Warn().Str("peer", idString(from)).Str("remote", c.RemoteAddr().String()).
			Msg("a node the cluster removed (forgotten, or replaced by a new incarnation of its name) is still running; its messages are dropped: wipe its data directory, or reset it with join_cluster, to bring it back")
		return
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var wmu lockorder.Mutex[lockorder.ClusterServeWrites] // answers to calls, written from their goroutines
	misaddressed := false
	slots := make(chan struct{}, maxCallsInFlight)
	for {
		typ, body, err := readFrame(r)
		if err != nil {
			go t.lost(from)
			return
		}
		if t.isBlocked(from) {
			continue // tests: the link is cut
		}
		t.mu.Lock()
		t.heard[from] = time.Now()
		t.mu.Unlock()
		switch typ {
		case framePing:
			t.pinged(from, body)
		case frameApplied:
			index, n := binary.Uvarint(body)
			if n <= 0 {
				t.log.Warn().Uint64("from", from).Msg("dropping a malformed applied index")
				return
			}
			if t.onApplied != nil {
				t.onApplied(from, index)
			}
		case frameCall:
			t.serveCall(c, &wmu, slots, from, body)
		case frameRaft, frameGroup:
			var group uint64
			if typ == frameGroup {
				g, n := binary.Uvarint(body)
				if n <= 0 || g == 0 {
					t.log.Warn().Uint64("from", from).Msg("dropping a Raft message with a malformed group")
					return
				}
				group, body = g, body[n:]
			}
			m := &raftpb.Message{}
			if err := proto.Unmarshal(body, m); err != nil {
				t.log.Warn().Err(err).Uint64("from", from).Msg("dropping a malformed Raft message")
				return
			}
			if m.GetTo() != t.id {
				// For the incarnation of this node that this one
				// replaces: see the transport's doc.
				if !misaddressed {
					misaddressed = true
					t.log.Info().Str("peer", idString(from)).Str("to", idString(m.GetTo())).Uint64("group", group).
						Msg("dropping Raft messages meant for another incarnation of this node until the cluster replaces it")
				}
				continue
			}
			t.deliver(group, m)
		case frameJoin, frameLeave:
			var req joinRequest
			if err := req.unmarshal(body); err != nil {
				return
			}
			req.leave = typ == frameLeave
			ctx, cancel := context.WithTimeout(context.Background(), joinTimeout)
			members, err := t.onJoin(ctx, req)
			cancel()
			// The answer: 0 and the members (the joiner must know
			// where to send before its log tells it), or 1 and why not.
			var answer []byte
			if err != nil {
				answer = append([]byte{1}, err.Error()...)
			} else {
				answer = append([]byte{0}, encodeSnapshot(members, nil)...)
			}
			wmu.Lock()
			err = writeFrame(c, frameJoinReply, answer)
			wmu.Unlock()
			if err != nil {
				return
			}
		default:
			return
		}
	}
}

// lost checks, when a peer's connection to this node ends, whether the
// peer's process is gone: a dial to its address is refused at once when
// nothing listens there (a process killed, or stopped), while a process
// that is merely slow or cut off by the network does not refuse. Only
// then is dead told, so that its groups need not wait out an election
// timeout to replace a leader the kernel already saw die. A process
// being killed may close its connections before its listener, so a dial
// that connects is tried again a few times.
func (t *Transport) lost(id uint64) {
	t.mu.Lock()
	p, closed := t.peers[id], t.closed
	t.mu.Unlock()
	if p == nil || closed || t.dead == nil {
		return
	}
	for range lostProbes {
		if t.isBlocked(id) {
			return
		}
		c, err := net.DialTimeout("tcp", p.addr, dialTimeout)
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.log.Debug().Uint64("peer", id).Msg("a peer's connection ended and its address refuses connections: it is down")
			// Down, not merely quiet: no longer alive until it is heard
			// from again, so nothing waits for it (Node.awaitSeen).
			t.mu.Lock()
			delete(t.heard, id)
			t.mu.Unlock()
			t.dead(id)
			return
		}
		if err != nil {
			return // unreachable, not refused: the election timeout decides
		}
		c.Close()
		time.Sleep(lostProbeEvery)
	}
}

// A lost peer is probed lostProbes times, lostProbeEvery apart.
const (
	lostProbes     = 5
	lostProbeEvery = 50 * time.Millisecond
)

// accept runs the listener's side of the handshake and returns the
// dialer's id.
func (t *Transport) accept(c net.Conn) (uint64, error) {
	if tc, ok := c.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return 0, fmt.Errorf("TLS: %w", err)
		}
	}
	hello := make([]byte, len(magic)+1+8+nonceLen)
	if _, err := io.ReadFull(c, hello); err != nil {
		return 0, err
	}
	if string(hello[:len(magic)]) != magic {
		return 0, errors.New("not a Warren cluster peer")
	}
	if v := hello[len(magic)]; v != version {
		return 0, fmt.Errorf("a peer of cluster protocol version %d, this node's is %d: every node of a cluster must run a release of the same version", v, version)
	}
	from := binary.BigEndian.Uint64(hello[len(magic)+1:])
	nonceA := hello[len(magic)+9:]
	nonceB := make([]byte, nonceLen)
	rand.Read(nonceB)
	if _, err := c.Write(append(nonceB, t.mac(c, "listener", nonceA, nonceB)...)); err != nil {
		return 0, err
	}
	proof := make([]byte, macLen)
	if _, err := io.ReadFull(c, proof); err != nil {
		return 0, err
	}
	if !hmac.Equal(proof, t.mac(c, "dialer", nonceA, nonceB)) {
		return 0, errAuth
	}
	return from, nil
}

// dial connects to addr and runs the dialer's side of the handshake. It
// dials from the listen address's IP (when that is a specific one), so
// that connections leave by the interface the cluster uses and a peer, or
// a firewall, sees which node is calling.
func (t *Transport) dial(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	if la, ok := t.ln.Addr().(*net.TCPAddr); ok && !la.IP.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: la.IP}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(dialTimeout))
	if t.tls != nil {
		// Not verified: see the transport's doc; the secret, bound to
		// this session, authenticates the peer.
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster TLS handshake with %s: %w", addr, err)
		}
		c = tc
	}
	hello := append([]byte(magic), version)
	hello = binary.BigEndian.AppendUint64(hello, t.id)
	nonceA := make([]byte, nonceLen)
	rand.Read(nonceA)
	hello = append(hello, nonceA...)
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, err
	}
	answer := make([]byte, nonceLen+macLen)
	if _, err := io.ReadFull(c, answer); err != nil {
		c.Close()
		return nil, fmt.Errorf("cluster handshake with %s: %w", addr, err)
	}
	nonceB := answer[:nonceLen]
	if !hmac.Equal(answer[nonceLen:], t.mac(c, "listener", nonceA, nonceB)) {
		c.Close()
		return nil, fmt.Errorf("%s: %w", addr, errAuth)
	}
	if _, err := c.Write(t.mac(c, "dialer", nonceA, nonceB)); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// mac is a side's proof that it knows the secret: an HMAC of its role,
// both nonces and, over TLS, the session's exported keying material.
func (t *Transport) mac(c net.Conn, role string, nonceA, nonceB []byte) []byte {
	h := hmac.New(sha256.New, t.secret)
	h.Write([]byte(role))
	h.Write(nonceA)
	h.Write(nonceB)
	if tc, ok := c.(*tls.Conn); ok {
		st := tc.ConnectionState()
		if ekm, err := st.ExportKeyingMaterial("warren cluster transport", nil, 32); err == nil {
			h.Write(ekm)
		}
	}
	return h.Sum(nil)
}

// setPeer adds a peer or changes its address.
func (t *Transport) setPeer(id uint64, addr string) {
	if id == t.id {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if p, ok := t.peers[id]; ok {
		if p.addr == addr {
			return
		}
		close(p.stop)
	}
	p := &peer{id: id, addr: addr, queue: make(chan outMsg, sendQueue), stop: make(chan struct{})}
	t.peers[id] = p
	if _, ok := t.heard[id]; !ok {
		// A new peer is taken to be up until it has had the time to say
		// so: a node that just joined or started has heard nobody yet.
		t.heard[id] = time.Now()
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		t.sendLoop(p)
	}()
}

// removePeer stops sending to a peer.
func (t *Transport) removePeer(id uint64) {
	t.mu.Lock()
	if p, ok := t.peers[id]; ok {
		close(p.stop)
		delete(t.peers, id)
	}
	l := t.links[id]
	t.mu.Unlock()
	if l != nil {
		t.breakLink(id, l, errors.New("node removed"))
	}
}

// send queues a group's messages for their peers, dropping those that do
// not fit.
func (t *Transport) send(group uint64, msgs []*raftpb.Message) {
	var dropped []*raftpb.Message
	t.mu.Lock()
	for _, m := range msgs {
		p, ok := t.peers[m.GetTo()]
		if !ok || t.closed || t.lose != nil && t.lose(group, m) {
			continue
		}
		select {
		case p.queue <- outMsg{group: group, m: m}:
		default:
			dropped = append(dropped, m)
		}
	}
	t.mu.Unlock()
	for _, m := range dropped {
		t.failed(outMsg{group: group, m: m})
	}
}

// sendApplied tells every peer the metadata index this node has
// applied. A peer whose queue is full misses it: the next one, or the
// next ping, tells it.
func (t *Transport) sendApplied(index uint64) {
	t.applied.Store(index)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	for _, p := range t.peers {
		select {
		case p.queue <- outMsg{applied: index}:
		default:
		}
	}
}

// sendLoop keeps a connection to one peer and writes its queue to it.
func (t *Transport) sendLoop(p *peer) {
	var c net.Conn
	var w *bufio.Writer
	defer func() {
		if c != nil {
			t.untrack(c)
		}
	}()
	var buf []byte
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		var m outMsg
		select {
		case <-p.stop:
			return
		case m = <-p.queue:
		case <-ping.C:
			// Dial if need be and ping, so that the peer knows we are
			// up even when Raft has nothing to tell it.
			if t.isBlocked(p.id) {
				continue
			}
			if c == nil {
				if c, w = t.connect(p); c == nil {
					continue
				}
			}
			err := writeFrameTo(w, framePing, t.pingBody(p.id))
			if a := t.applied.Load(); err == nil && a > 0 {
				err = writeFrameTo(w, frameApplied, binary.AppendUvarint(nil, a))
			}
			if err != nil || w.Flush() != nil {
				t.untrack(c)
				c, w = nil, nil
			}
			continue
		}
		if t.isBlocked(p.id) {
			t.failed(m)
			continue
		}
		if c == nil {
			if c, w = t.connect(p); c == nil {
				t.failed(m)
				t.drain(p, time.Now().Add(100*time.Millisecond))
				continue
			}
		}
		// Write what else is queued in the same flush; snapshots are
		// reported once flushed, and a failed flush to every group that
		// had a message in it.
		var snaps []outMsg
		groups := map[uint64]bool{}
		var err error
		for {
			switch {
			case m.m == nil:
				err = writeFrameTo(w, frameApplied, binary.AppendUvarint(buf[:0], m.applied))
			default:
				if m.m.GetType() == raftpb.MsgSnap {
					snaps = append(snaps, m)
				}
				groups[m.group] = true
				typ := byte(frameRaft)
				buf = buf[:0]
				if m.group != 0 {
					typ, buf = frameGroup, binary.AppendUvarint(buf, m.group)
				}
				if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf, m.m); err == nil {
					err = writeFrameTo(w, typ, buf)
				}
			}
			if err != nil || len(p.queue) == 0 {
				break
			}
			m = <-p.queue
		}
		if err == nil {
			err = w.Flush()
		}
		for _, s := range snaps {
			t.snapshotSent(s.group, s.m.GetTo(), err == nil)
		}
		if err != nil {
			for g := range groups {
				t.unreachable(g, p.id)
			}
			t.untrack(c)
			c, w = nil, nil
		}
	}
}

// connect dials a peer; nil when it cannot be reached (or the transport
// is closing).
func (t *Transport) connect(p *peer) (net.Conn, *bufio.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	conn, err := t.dial(ctx, p.addr)
	cancel()
	if err != nil {
		return nil, nil
	}
	if !t.track(conn) {
		conn.Close()
		return nil, nil
	}
	return conn, bufio.NewWriterSize(conn, 64<<10)
}

// A ping carries the time it was sent (on the sender's clock) and echoes
// the last ping received from the peer: that ping's send time and how long
// it was held here. The peer gets the link's round trip as now - sent -
// held, with its own clock only, whatever the two clocks say.
type pingEcho struct {
	sent     int64     // the peer's clock, unix ns
	received time.Time // ours
}

func (t *Transport) pingBody(to uint64) []byte {
	body := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
	t.mu.Lock()
	e, ok := t.echo[to]
	t.mu.Unlock()
	if ok {
		body = binary.BigEndian.AppendUint64(body, uint64(e.sent))
		body = binary.BigEndian.AppendUint64(body, uint64(time.Since(e.received)))
	}
	return body
}

// pinged records a peer's ping and, if it echoes one of ours, the round
// trip.
func (t *Transport) pinged(from uint64, body []byte) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(body) >= 8 {
		t.echo[from] = pingEcho{sent: int64(binary.BigEndian.Uint64(body)), received: now}
	}
	if len(body) >= 24 {
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(body[8:])))
		held := time.Duration(binary.BigEndian.Uint64(body[16:]))
		if rtt := now.Sub(sent) - held; rtt >= 0 && rtt < time.Minute {
			t.rtt[from] = rtt
		}
	}
}

// latency is the last round trip measured to a peer (0: none yet).
func (t *Transport) latency(id uint64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rtt[id]
}

// alive reports whether a peer sent us anything lately.
func (t *Transport) alive(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Since(t.heard[id]) < aliveWithin
}

// failed reports a message that could not be sent.
func (t *Transport) failed(m outMsg) {
	if m.m == nil {
		return // an applied index: the next one, or the next ping, tells it
	}
	if m.m.GetType() == raftpb.MsgSnap {
		t.snapshotSent(m.group, m.m.GetTo(), false)
	}
	t.unreachable(m.group, m.m.GetTo())
}

// drain drops what is queued for an unreachable peer until deadline, so
// that a dead peer costs one dial per interval rather than one per
// message.
func (t *Transport) drain(p *peer, deadline time.Time) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-timer.C:
			return
		case <-p.queue:
		}
	}
}

// request sends a join or leave request to addr and waits for its answer:
// the cluster's members.
func (t *Transport) request(ctx context.Context, addr string, req joinRequest) ([]Member, error) {
	c, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	typ := byte(frameJoin)
	if req.leave {
		typ = frameLeave
	}
	if err := writeFrame(c, typ, req.marshal()); err != nil {
		return nil, err
	}
	rt, body, err := readFrame(bufio.NewReader(c))
	if err != nil {
		return nil, err
	}
	if rt != frameJoinReply || len(body) == 0 {
		return nil, errors.New("cluster: unexpected answer to a join request")
	}
	if body[0] != 0 {
		return nil, errors.New(string(body[1:]))
	}
	members, _, err := decodeSnapshot(body[1:])
	return members, err
}

// block cuts (or restores) the link with a peer both ways, for tests.
func (t *Transport) block(id uint64, cut bool) {
	t.mu.Lock()
	t.blocked[id] = cut
	l := t.links[id]
	t.mu.Unlock()
	if cut && l != nil {
		t.breakLink(id, l, errors.New("link cut"))
	}
}

// forbid refuses (or takes again) the connections of an incarnation the
// cluster removed; one has none already, as the cluster removes a node
// only once it is down (Node.Forget, handleJoin).
func (t *Transport) forbid(id uint64, removed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !removed {
		delete(t.removed, id)
		return
	}
	t.removed[id] = true
}

func (t *Transport) isRemoved(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removed[id]
}

func (t *Transport) isBlocked(id uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked[id]
}

// close stops listening and sending and waits for the goroutines.
func (t *Transport) close() {
	t.mu.Lock()
	t.closed = true
	for _, p := range t.peers {
		close(p.stop)
	}
	t.peers = map[uint64]*peer{}
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.ln.Close()
	t.wg.Wait()
}

func writeFrame(w io.Writer, typ byte, body []byte) error {
	bw := bufio.NewWriterSize(w, len(body)+5)
	if err := writeFrameTo(bw, typ, body); err != nil {
		return err
	}
	return bw.Flush()
}

// writeFrameTo writes one frame whose body is the parts, one after another.
func writeFrameTo(w *bufio.Writer, typ byte, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > maxFrame {
		return fmt.Errorf("cluster: a frame of %d bytes is over the limit", n)
	}
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(n))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("cluster: a frame of %d bytes is over the limit", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}
