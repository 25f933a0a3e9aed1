package mqtt

import (
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol/mqtt"
)

// Settings are an MQTT listener's choices, from broker.toml's [mqtt].
type Settings struct {
	// VHost is the vhost of a client whose user name names none.
	VHost string
	// Exchange is the topic exchange topics route through.
	Exchange string
	// AllowAnonymous lets a client without a user name in as
	// DefaultUser with DefaultPassword.
	AllowAnonymous               bool
	DefaultUser, DefaultPassword string
	// Prefetch bounds a connection's QoS 1 deliveries not acknowledged.
	Prefetch int
	// MaxPacketSize is the largest packet taken once CONNECT is
	// accepted, announced to MQTT 5 clients.
	MaxPacketSize int
	// SubscriptionTTL is a persistent session's queues' x-expires, and
	// the longest session expiry granted; 0 is none.
	SubscriptionTTL time.Duration
	// HandshakeTimeout bounds the time from accept to CONNECT.
	HandshakeTimeout time.Duration
}

// VHosts looks up virtual hosts by name.
type VHosts interface {
	VHost(name string) (*vhost.VHost, bool)
}

// Server runs MQTT connections against the broker's vhosts and users.
type Server struct {
	Settings Settings
	Users    *auth.Store
	VHosts   VHosts
	Log      zerolog.Logger
	// Admit, when set, counts an accepted connection against its vhost's
	// and user's max-connections (shared with AMQP's); release uncounts
	// it.
	Admit func(vhost, user string) (release func(), refused error)
	// Retained keeps retained messages (retain.go); nil: retained
	// messages are not kept (routed as any other, refused in 5.0).
	Retained RetainStore

	retain retainer
	nextID atomic.Uint64
	mu     lockorder.Mutex[lockorder.MQTTServer]
	conns  map[*Conn]struct{}
	// sessions are the connections past CONNECT by vhost and client id:
	// a second CONNECT with the same id takes the session over.
	sessions map[sessionKey]*Conn
	closed   bool
	wg       sync.WaitGroup
}

type sessionKey struct{ vhost, clientID string }

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
		s.sessions = make(map[sessionKey]*Conn)
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

// claim records c as its session's connection and returns the one it
// takes over, if any.
func (s *Server) claim(c *Conn) (old *Conn) {
	k := sessionKey{c.vh.Name, c.clientID}
	s.mu.Lock()
	defer s.mu.Unlock()
	old = s.sessions[k]
	s.sessions[k] = c
	return old
}

// release forgets c as its session's connection, unless another took it
// over.
func (s *Server) release(c *Conn) {
	k := sessionKey{c.vh.Name, c.clientID}
	s.mu.Lock()
	if s.sessions[k] == c {
		delete(s.sessions, k)
	}
	s.mu.Unlock()
}

// CloseAll ends every connection (the broker stopping), telling MQTT 5
// clients why (Server shutting down); it reports whether all had ended
// by the deadline, after which their sockets are closed.
func (s *Server) CloseAll(deadline time.Time) bool {
	s.mu.Lock()
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.kick(mqtt.ReasonServerShuttingDown, "broker shutdown")
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	for _, c := range conns {
		c.nc.Close()
	}
	<-done
	return false
}

// ConnInfo is an MQTT connection as listings show it.
type ConnInfo struct {
	ID          uint64
	Name        string // "peer -> local", as RabbitMQ names connections
	Protocol    string // "MQTT 3.1.1", "MQTT 5.0", "MQTT 3.1"
	ClientID    string
	User, VHost string
	Peer, Local string
	KeepAlive   uint16 // seconds
	CleanStart  bool
	ConnectedAt time.Time
	RecvOctets  uint64
	SendOctets  uint64
	// Subscriptions counts the session's topic filters; Unacked its QoS
	// 1 deliveries waiting for PUBACK.
	Subscriptions, Unacked int
}

// Connections lists the connections past CONNECT, oldest first.
func (s *Server) Connections() []ConnInfo {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	out := make([]ConnInfo, 0, len(conns))
	for _, c := range conns {
		if info, ok := c.Info(); ok {
			out = append(out, info)
		}
	}
	return out
}

// Close closes the named connection (an operator's request), telling an
// MQTT 5 client so (Administrative action); it reports whether there was
// one.
func (s *Server) Close(name string) bool {
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
	found.kick(mqtt.ReasonAdministrativeAction, "closed by an operator")
	return true
}

// retaining says whether retained messages are kept.
func (s *Server) retaining() bool { return s.Retained != nil }

// retainer is the server's retained messages, bound to its store.
func (s *Server) retained() *retainer {
	s.retain.store = s.Retained
	return &s.retain
}

// ForgetVHost drops what the server holds of a deleted vhost (its
// retained messages, whose records went with it).
func (s *Server) ForgetVHost(name string) { s.retain.forget(name) }
