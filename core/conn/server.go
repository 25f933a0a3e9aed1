// Package conn speaks AMQP 0-9-1 to one client: the handshake, the frame
// loop, channels, publishing, consuming and acknowledgements.
//
// # Goroutines
//
// Each connection has a reader and a writer goroutine. The reader decodes
// frames and runs every method to completion in arrival order, which is
// what AMQP's ordering guarantees need; publishing routes and enqueues on
// the reader, so a fast publisher is slowed by its own work, not by a
// queue. The writer owns the socket's write side (see outbound): anything
// may append frames, the writer batches them out and sends heartbeats.
// Queues deliver to consumers from whatever goroutine enqueued (often
// another connection's reader), writing straight into the consumer's
// outbound buffer.
//
// # Locks
//
// channel.mu guards a channel's delivery state (delivery tags, unacked
// messages, prefetch counts, consumers), because queues deliver while
// holding their own lock. The order is queue.mu -> channel.mu ->
// outbound.mu; the reader never takes a queue lock while holding a channel
// lock (it collects under channel.mu, then settles with the queues).
//
// # Errors
//
// A *reply.Error raised by a method closes the channel (soft codes) or the
// connection (hard codes). After a channel.close the channel ignores
// everything but close and close-ok; after a connection.close the
// connection ignores everything but close and close-ok, then hangs up. A
// malformed frame closes the connection with 501, a frame out of place with
// 505, a method on a channel that is not open with 504. Nothing a client
// sends can take down another connection or the broker.
package conn

import (
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// Limits are the negotiable and enforced connection limits.
type Limits struct {
	FrameMax         uint32        // largest frame the broker accepts and offers
	ChannelMax       uint16        // most channels per connection
	Heartbeat        time.Duration // offered heartbeat interval; 0 disables
	MaxMessageSize   uint64        // largest message body accepted
	HandshakeTimeout time.Duration // time allowed from TCP accept to connection.open
	MaxConnections   int           // 0 = unlimited
}

// VHosts looks up virtual hosts by name.
type VHosts interface {
	VHost(name string) (*vhost.VHost, bool)
}

// Server runs AMQP connections against the broker's vhosts and users.
type Server struct {
	Limits  Limits
	Users   *auth.Store
	VHosts  VHosts
	Alarm   *Alarm
	Log     zerolog.Logger
	Version string

	nextID atomic.Uint64
	mu     sync.Mutex
	conns  map[*Conn]struct{}
	wg     sync.WaitGroup
}

// Serve runs one client connection to its end.
func (s *Server) Serve(nc net.Conn) {
	c := s.newConn(nc)
	if c == nil {
		return
	}
	defer s.forget(c)
	c.run()
}

func (s *Server) newConn(nc net.Conn) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*Conn]struct{})
	}
	if s.Limits.MaxConnections > 0 && len(s.conns) >= s.Limits.MaxConnections {
		s.Log.Warn().Str("remote", nc.RemoteAddr().String()).Int("limit", s.Limits.MaxConnections).
			Msg("connection refused: max_connections reached")
		nc.Close()
		return nil
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

// CloseAll closes every connection with 320 CONNECTION_FORCED and waits,
// up to timeout, for them to finish.
func (s *Server) CloseAll(reason string, timeout time.Duration) {
	s.mu.Lock()
	for c := range s.conns {
		c.forceClose(reason)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
}

// ConnInfo describes a connection for the admin API.
type ConnInfo struct {
	ID         uint64
	Name       string
	User       string
	VHost      string
	Channels   int
	ClientProp protocol.Table
	Since      time.Time
}

// Connections lists the open connections, oldest first.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Alarm is a resource alarm (memory or disk) that blocks publishers while
// it is raised, as RabbitMQ's do: publishing connections stop being read,
// and clients that announced the capability get connection.blocked.
type Alarm struct {
	up      atomic.Bool // raised, readable without the lock on every publish
	mu      sync.Mutex
	raised  bool
	reason  string
	cleared chan struct{}
}

// Set raises or clears the alarm; while it stays raised, reason replaces
// the last one (a second resource may join the first).
func (a *Alarm) Set(raised bool, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if raised == a.raised {
		if raised {
			a.reason = reason
		}
		return
	}
	a.raised, a.reason = raised, reason
	a.up.Store(raised)
	if raised {
		a.cleared = make(chan struct{})
	} else {
		close(a.cleared)
	}
}

// State returns whether the alarm is raised, why, and a channel closed when
// it clears.
func (a *Alarm) State() (raised bool, reason string, cleared <-chan struct{}) {
	if a == nil || !a.up.Load() {
		return false, "", nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.raised, a.reason, a.cleared
}
