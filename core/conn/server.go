// Package conn speaks AMQP 0-9-1 to one client: the handshake, the frame
// loop, channels, publishing, consuming and acknowledgements.
//
// # Goroutines
//
// Each connection has a reader and a writer goroutine. The reader decodes
// frames and runs every method to completion in arrival order, which is
// what AMQP's ordering guarantees need; publishing routes and enqueues on
// the reader, so a fast publisher is slowed by its own work, not by a
// queue. Anything may append frames to a connection's outbound buffer;
// the writer batches them out and sends heartbeats, and after a short run
// of quick frames a reader writes what its run held back itself, to the
// sockets whose writers are idle (run.go). One goroutine at a time writes
// a socket (outbound). Queues deliver to consumers from whatever goroutine
// enqueued (often another connection's reader), writing straight into the
// consumer's outbound buffer.
//
// # Locks
//
// channel.mu guards a channel's delivery state (delivery tags, unacked
// messages, prefetch counts, consumers), because queues deliver while
// holding their own lock. The order is queue.mu -> channel.mu ->
// outbound.mu; the reader never takes a queue lock while holding a channel
// lock (it collects under channel.mu, then settles with the queues).
// LOCKS.md at the repository's root has every lock in Warren in order.
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
//
// # Limits and shutdown
//
// A socket counts against Limits.MaxHandshakes until connection.open, and
// against Limits.MaxConnections after it, so sockets that never speak
// cannot lock clients out (they are also cut off at HandshakeTimeout).
// CloseAll, for shutdown, ends every connection by a deadline whatever it
// is doing: the reader gives up waits that do not involve the socket (a
// resource alarm, a transaction's sync), the socket's reads and writes time
// out, and finally the socket is closed under it.
package conn

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
)

// Limits are the negotiable and enforced connection limits.
type Limits struct {
	FrameMax         uint32        // largest frame the broker accepts and offers
	ChannelMax       uint16        // most channels per connection
	Heartbeat        time.Duration // offered heartbeat interval; 0 disables
	MaxMessageSize   uint64        // largest message body accepted
	HandshakeTimeout time.Duration // time allowed from TCP accept to connection.open
	// MaxConnections bounds the connections past connection.open, as
	// RabbitMQ's per-vhost and per-user limits count them: one more is
	// refused at connection.open with 530. Sockets still in the handshake
	// do not count, so silent sockets cannot lock clients out. 0 = no limit.
	MaxConnections int
	// MaxHandshakes bounds the sockets still in the handshake, which each
	// hold a file descriptor for up to HandshakeTimeout; one more is closed
	// at once. 0 = no limit.
	MaxHandshakes int
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
	// ClusterName is the name connection.start gives clients
	// (cluster_name), which federation links use to tell brokers apart;
	// nil: "warren".
	ClusterName func() string
	// Bodies, when set, lends the buffers large bodies are read into
	// (message.Bodies); without it each is allocated.
	Bodies *message.Bodies

	nextID atomic.Uint64
	locals atomic.Uint64 // local connections made (DialLocal)
	mu     lockorder.Mutex[lockorder.ConnServer]
	conns  map[*Conn]struct{} // every socket being served
	// handshaking counts conns not yet done with the handshake, opened
	// those past connection.open that still run.
	handshaking, opened int
	// openedIn counts opened per vhost, for the vhosts' max-connections;
	// openedBy per user and channelsOf their channels, for the users'
	// max-connections and max-channels.
	openedIn, openedBy, channelsOf map[string]int
	// refusing is set while sockets are being refused for MaxHandshakes,
	// so the log says so once, not once a socket.
	refusing bool
	closed   bool // CloseAll has begun: no new connections
	wg       sync.WaitGroup
	churn    churn
}

// churn counts connections (past connection.open) and channels opened and
// closed since the server started.
type churn struct {
	connectionsOpened, connectionsClosed atomic.Uint64
	channelsOpened, channelsClosed       atomic.Uint64
}

// Churn is how many connections and channels were opened and closed since
// the server started.
type Churn struct {
	ConnectionsOpened, ConnectionsClosed uint64
	ChannelsOpened, ChannelsClosed       uint64
}

// Churn returns the server's connection and channel churn.
func (s *Server) Churn() Churn {
	return Churn{
		ConnectionsOpened: s.churn.connectionsOpened.Load(), ConnectionsClosed: s.churn.connectionsClosed.Load(),
		ChannelsOpened: s.churn.channelsOpened.Load(), ChannelsClosed: s.churn.channelsClosed.Load(),
	}
}

// Serve runs one client connection to its end.
func (s *Server) Serve(nc net.Conn) {
	s.serve(nc, fromNetwork)
}

// origin is where a connection comes from, for its login.
type origin uint8

const (
	fromNetwork   origin = iota
	localAsUser          // the broker's own, logging in with credentials
	localAsBroker        // the broker's own, as the broker (auth.BrokerGrant)
)

func (s *Server) serve(nc net.Conn, from origin) {
	c := s.newConn(nc)
	if c == nil {
		return
	}
	c.origin = from
	defer s.forget(c)
	c.run()
}

func (s *Server) newConn(nc net.Conn) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[*Conn]struct{})
	}
	if s.closed {
		nc.Close()
		return nil
	}
	if s.Limits.MaxHandshakes > 0 && s.handshaking >= s.Limits.MaxHandshakes {
		if !s.refusing {
			s.refusing = true
			s.Log.Warn().Int("limit", s.Limits.MaxHandshakes).
				Msg("refusing sockets: max_handshakes connections are in the handshake")
		}
		nc.Close()
		return nil
	}
	s.refusing = false
	c := newConn(s, nc, s.nextID.Add(1))
	c.handshaking = true
	s.handshaking++
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return c
}

// handshakeOver stops counting c as in the handshake.
func (s *Server) handshakeOver(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.handshaking {
		c.handshaking = false
		s.handshaking--
	}
}

// admit counts c as opened to vh by user unless that is one over the
// broker's MaxConnections, vh's max-connections (vhostLimit) or the
// user's (userLimit; -1: none); it says which refused it.
func (s *Server) admit(c *Conn, vh, user string, vhostLimit, userLimit int64) (refused *reply.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// RabbitMQ's words for a connection over a vhost's limit, which the
	// broker's own limit uses too.
	overVHost := func(limit int64) *reply.Error {
		return reply.New(protocol.NotAllowed, "access to vhost '%s' refused for user '%s': connection limit (%d) is reached", vh, user, limit)
	}
	switch {
	case s.Limits.MaxConnections > 0 && s.opened >= s.Limits.MaxConnections:
		return overVHost(int64(s.Limits.MaxConnections))
	case vhostLimit >= 0 && int64(s.openedIn[vh]) >= vhostLimit:
		return overVHost(vhostLimit)
	case userLimit >= 0 && int64(s.openedBy[user]) >= userLimit:
		return reply.New(protocol.NotAllowed, "connection refused for user '%s': user connection limit (%d) is reached", user, userLimit)
	}
	if c.handshaking {
		c.handshaking = false
		s.handshaking--
	}
	c.counted = true
	c.countedIn = vh
	s.opened++
	if s.openedIn == nil {
		s.openedIn, s.openedBy = make(map[string]int), make(map[string]int)
	}
	s.openedIn[vh]++
	s.openedBy[user]++
	s.churn.connectionsOpened.Add(1)
	return nil
}

// AdmitOther counts a connection of another protocol (the stream
// protocol's) to vh by user, unless that is one over vh's max-connections
// or the user's: those count every protocol's connections, as RabbitMQ's
// connection tracking does. The broker's own MaxConnections bounds AMQP
// connections only. release uncounts it (once however often called).
func (s *Server) AdmitOther(vh, user string) (release func(), refused error) {
	vhostLimit, userLimit := int64(-1), int64(-1)
	if v, ok := s.VHosts.VHost(vh); ok {
		vhostLimit = orNone(v.Limit(topology.LimitMaxConnections))
	}
	if u, ok := s.Users.User(user); ok {
		userLimit = orNone(u.Limit(auth.UserMaxConnections))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case vhostLimit >= 0 && int64(s.openedIn[vh]) >= vhostLimit:
		return nil, fmt.Errorf("vhost connection limit (%d) is reached for vhost '%s'", vhostLimit, vh)
	case userLimit >= 0 && int64(s.openedBy[user]) >= userLimit:
		return nil, fmt.Errorf("user connection limit (%d) is reached for user '%s'", userLimit, user)
	}
	if s.openedIn == nil {
		s.openedIn, s.openedBy = make(map[string]int), make(map[string]int)
	}
	s.openedIn[vh]++
	s.openedBy[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.openedIn[vh]--; s.openedIn[vh] == 0 {
				delete(s.openedIn, vh)
			}
			if s.openedBy[user]--; s.openedBy[user] == 0 {
				delete(s.openedBy, user)
			}
		})
	}, nil
}

// openChannel counts a channel of user unless that is one over their
// max-channels (limit, -1: none), which it reports.
func (s *Server) openChannel(user string, limit int64) *reply.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit >= 0 && int64(s.channelsOf[user]) >= limit {
		return reply.New(protocol.NotAllowed, "number of channels opened for user '%s' has reached the maximum allowed user limit of (%d)", user, limit)
	}
	if s.channelsOf == nil {
		s.channelsOf = make(map[string]int)
	}
	s.channelsOf[user]++
	return nil
}

// closeChannel uncounts a channel of user.
func (s *Server) closeChannel(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.channelsOf[user]--; s.channelsOf[user] <= 0 {
		delete(s.channelsOf, user)
	}
}

func (s *Server) forget(c *Conn) {
	s.handshakeOver(c)
	s.mu.Lock()
	delete(s.conns, c)
	if c.counted {
		s.opened--
		if s.openedIn[c.countedIn]--; s.openedIn[c.countedIn] == 0 {
			delete(s.openedIn, c.countedIn)
		}
		if s.openedBy[c.user.Name]--; s.openedBy[c.user.Name] == 0 {
			delete(s.openedBy, c.user.Name)
		}
		s.churn.connectionsClosed.Add(1)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// CloseAll ends every connection, for shutdown, and refuses new ones.
// Each is sent connection.close 320 CONNECTION_FORCED and has until polite
// to finish: its socket's reads and writes fail then, and a publisher held
// by a resource alarm is let go at once, so no client state can hold it.
// Sockets still open at polite are closed under their connections. It
// reports whether every connection finished by hard; one still running then
// is busy inside the broker (a plugin call, say) and is left to end on its
// own.
func (s *Server) CloseAll(reason string, polite, hard time.Time) bool {
	s.mu.Lock()
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.forceClose(reason, polite)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	wait := time.NewTimer(time.Until(polite))
	defer wait.Stop()
	select {
	case <-done:
		return true
	case <-wait.C:
	}
	for _, c := range conns {
		c.nc.Close()
	}
	wait.Reset(time.Until(hard))
	select {
	case <-done:
		return true
	case <-wait.C:
		return false
	}
}

// Alarm is a resource alarm (memory or disk) that blocks publishers while
// it is raised, as RabbitMQ's do: publishing connections stop being read,
// and clients that announced the capability get connection.blocked.
type Alarm struct {
	up      atomic.Bool // raised, readable without the lock on every publish
	mu      lockorder.Mutex[lockorder.ConnAlarm]
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
