package streamproto

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/stream"
)

// RabbitMQVersion is the RabbitMQ release whose stream protocol Warren
// serves, given as "version" in the peer properties: stream clients turn
// features on by it (3.11 brings command versions and single active
// consumers, 3.13 super stream management and, with Publish v2 among
// the command versions, filtering), so it must name what Warren does,
// not Warren's own release, which goes as "warren_version".
const RabbitMQVersion = "3.13.7"

// Settings are a stream listener's limits and what it tells clients.
type Settings struct {
	// FrameMax is the largest frame accepted and offered in Tune.
	FrameMax uint32
	// Heartbeat is offered in Tune; 0 disables heartbeats.
	Heartbeat time.Duration
	// HandshakeTimeout bounds the time from accept to Open.
	HandshakeTimeout time.Duration
	// AdvertisedHost and AdvertisedPort are what metadata names this node
	// by (RabbitMQ's advertised_host and advertised_port).
	AdvertisedHost string
	AdvertisedPort uint32
	// MaxUnconfirmed bounds a connection's messages waiting for their
	// confirm; the reader pauses past it.
	MaxUnconfirmed int
	// SACSyncInterval is how often single active consumers are reported
	// to their coordinators (sac.go); 0 = a second.
	SACSyncInterval time.Duration
}

// VHosts looks up virtual hosts by name.
type VHosts interface {
	VHost(name string) (*vhost.VHost, bool)
}

// Server runs stream-protocol connections against the broker's vhosts and
// users.
type Server struct {
	Settings Settings
	Users    *auth.Store
	VHosts   VHosts
	Log      zerolog.Logger
	// Version is Warren's release, for the peer properties.
	Version string
	// Admit, when set, counts an opened connection against its vhost's
	// and user's max-connections (shared with AMQP's connections, as
	// RabbitMQ counts every protocol's); release uncounts it.
	Admit func(vhost, user string) (release func(), refused error)
	// Endpoint, when set, gives the host and port the node named node
	// advertises for the stream protocol (this node's own included);
	// ok is false when it cannot be learned now. Metadata names a
	// replicated stream's leader and replicas by it.
	Endpoint func(node string) (host string, port uint32, ok bool)
	// Node is this node's name in a cluster. Call, when set, sends a
	// single-active-consumer message to the node named (its HandleSAC),
	// and NodeUp says whether a node is up; without Call this node
	// coordinates every group (sac.go).
	Node   string
	Call   func(ctx context.Context, node string, payload []byte) error
	NodeUp func(node string) bool

	// lastChunk is the Deliver chunk built last (chunkOf).
	lastChunk atomic.Pointer[builtChunk]
	// sac is this node's single active consumers, coord the groups it
	// coordinates, outboxes the messages between them by node (sac.go).
	sac      sacAgent
	sacOnce  sync.Once
	loopOnce sync.Once
	coord    sacCoordinator
	outboxMu lockorder.Mutex[lockorder.StreamprotoSACOutboxes]
	outboxes map[string]*sacOutbox
	stop     chan struct{} // closed by CloseAll
	stopOnce sync.Once

	nextID atomic.Uint64
	mu     lockorder.Mutex[lockorder.StreamprotoServer]
	conns  map[*Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	totals totals
}

// totals count every connection's messages since the server started, so
// that they only grow (a connection's own counts go when it does).
type totals struct {
	published, confirmed, errored, delivered atomic.Uint64
}

// Totals are the server's message counts since it started: published
// (every message of a Publish, to a declared publisher), confirmed,
// errored (refused after publishing) and delivered to subscriptions.
type Totals struct {
	Published, Confirmed, Errored, Delivered uint64
}

// Totals reads the server's message counts.
func (s *Server) Totals() Totals {
	return Totals{
		Published: s.totals.published.Load(), Confirmed: s.totals.confirmed.Load(),
		Errored: s.totals.errored.Load(), Delivered: s.totals.delivered.Load(),
	}
}

// done is closed when the server stops (CloseAll).
func (s *Server) done() chan struct{} {
	s.sacOnce.Do(s.initSAC)
	return s.stop
}

// Serve runs one client connection to its end.
func (s *Server) Serve(nc net.Conn) {
	c := s.admit(nc)
	if c == nil {
		return
	}
	defer s.forget(c)
	c.run()
}

func (s *Server) admit(nc net.Conn) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		nc.Close()
		return nil
	}
	if s.conns == nil {
		s.conns = make(map[*Conn]struct{})
	}
	c := newConn(s, nc, s.nextID.Add(1))
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// CloseAll ends every connection (the broker stopping): each is told
// with a Close, then its socket is closed by the deadline. It reports
// whether all had ended by then.
func (s *Server) CloseAll(reason string, deadline time.Time) bool {
	s.mu.Lock()
	s.closed = true
	s.stopOnce.Do(func() { close(s.done()) })
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.closeWith(stream.CodeOK, reason)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
	}
	for _, c := range conns {
		c.nc.Close()
	}
	<-done
	return false
}

// Connections lists the open connections (past Open), oldest first.
func (s *Server) Connections() []ConnInfo {
	conns := s.openConns()
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		if info, ok := c.Info(); ok {
			out = append(out, info)
		}
	}
	return out
}

// Publishers lists every connection's publishers.
func (s *Server) Publishers() []PublisherInfo {
	var out []PublisherInfo
	for _, c := range s.openConns() {
		out = append(out, c.Publishers()...)
	}
	return out
}

// Consumers lists every connection's subscriptions.
func (s *Server) Consumers() []ConsumerInfo {
	var out []ConsumerInfo
	for _, c := range s.openConns() {
		out = append(out, c.Consumers()...)
	}
	return out
}

// openConns are the connections past Open, oldest first.
func (s *Server) openConns() []*Conn {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		if c.opened.Load() != nil {
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	return conns
}

// Close closes the named connection (an operator's request), telling
// the client why; it reports whether there was one.
func (s *Server) Close(name, reason string) bool {
	s.mu.Lock()
	var found *Conn
	for c := range s.conns {
		if c.name == name {
			found = c
			break
		}
	}
	s.mu.Unlock()
	if found == nil {
		return false
	}
	found.closeWith(stream.CodeOK, reason)
	return true
}
