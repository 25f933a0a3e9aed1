package federation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
)

// Spec is one link the broker wants: a federated exchange's or queue's,
// to one of its upstreams.
type Spec struct {
	Type   string // ExchangeLink or QueueLink
	VHost  string
	Name   string // the federated exchange or queue
	Policy string // the policy that federates it, for the connection's name
	Upstream
}

func (s Spec) key() linkKey { return linkKey{s.Type, s.VHost, s.Name, s.Upstream.Name} }

// linkKey names a link: one per federated exchange or queue and upstream.
type linkKey struct{ typ, vhost, name, upstream string }

// id is the link's identifier in the API, stable across restarts, as
// RabbitMQ's is a hash of what names the link.
func (k linkKey) id() string {
	h := sha256.Sum256([]byte(k.typ + "\x00" + k.vhost + "\x00" + k.name + "\x00" + k.upstream))
	return hex.EncodeToString(h[:4])
}

// Binding is a binding from a federated exchange as a link propagates it:
// its key and arguments (the destination does not matter upstream).
type Binding struct {
	Key  string
	Args protocol.Table
}

// QueueState is what a queue link reads of its federated queue.
type QueueState struct {
	Durable, AutoDelete bool
	Args                protocol.Table
	Ready, Consumers    int
	MaxPriority         int
}

// Downstream is this broker's topology as the links read it.
type Downstream interface {
	// Exchange is an exchange's declaration; false when there is none.
	Exchange(vhost, name string) (exchange.Definition, bool)
	// Bindings are the distinct keys and arguments of the bindings from
	// an exchange.
	Bindings(vhost, exchange string) []Binding
	// Queue is a queue's declaration and figures; false when there is none.
	Queue(vhost, name string) (QueueState, bool)
}

// Manager runs this node's federation links: Sync says which.
type Manager struct {
	Log zerolog.Logger
	// Local returns the client's end of a connection this broker serves
	// (conn.Server.DialLocal); the links publish to it as the broker.
	Local       func(asBroker bool) (net.Conn, error)
	ClusterName func() string
	Downstream  Downstream

	mu      lockorder.Mutex[lockorder.FederationManager]
	links   map[linkKey]*link
	stopped bool // Stop was called: Sync starts nothing more
	wg      sync.WaitGroup
}

// Sync makes the running links those of specs: a link no longer wanted
// stops (and removes what it declared upstream, unless its upstream says
// resource-cleanup-mode never), one whose upstream changed starts again,
// a new one starts. Every exchange link then looks at its exchange's
// bindings again.
func (m *Manager) Sync(specs []Spec) {
	want := make(map[linkKey]Spec, len(specs))
	for _, s := range specs {
		want[s.key()] = s
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	if m.links == nil {
		m.links = map[linkKey]*link{}
	}
	var stopping []*link
	for k, l := range m.links {
		if s, ok := want[k]; !ok || !reflect.DeepEqual(s, l.spec) {
			l.cleanup = !ok && !l.spec.KeepResources
			stopping = append(stopping, l)
			delete(m.links, k)
		}
	}
	for k, s := range want {
		if m.links[k] == nil {
			m.links[k] = m.start(s)
		}
	}
	running := make([]*link, 0, len(m.links))
	for _, l := range m.links {
		running = append(running, l)
	}
	m.mu.Unlock()
	for _, l := range stopping {
		l.stop()
	}
	for _, l := range running {
		l.poke()
	}
}

// start runs a link; mu is held.
func (m *Manager) start(s Spec) *link {
	ctx, cancel := context.WithCancel(context.Background())
	l := &link{m: m, spec: s, id: s.key().id(), cancel: cancel, done: make(chan struct{}), nudge: make(chan struct{}, 1),
		restart: make(chan struct{}, 1)}
	l.log = m.Log.With().Str("vhost", s.VHost).Str(s.Type, s.Name).Str("upstream", s.Upstream.Name).Logger()
	l.setState(Starting, "")
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(l.done)
		l.run(ctx)
	}()
	return l
}

// Statuses are the links' states.
func (m *Manager) Statuses() []Status {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	links := make([]*link, 0, len(m.links))
	for _, l := range m.links {
		links = append(links, l)
	}
	m.mu.Unlock()
	out := make([]Status, 0, len(links))
	for _, l := range links {
		out = append(out, l.status())
	}
	return out
}

// Restart restarts the link of that id in vhost, at once, whatever its
// reconnect-delay; false when there is none.
func (m *Manager) Restart(vhost, id string) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.links {
		if l.spec.VHost == vhost && l.id == id {
			select {
			case l.restart <- struct{}{}:
			default:
			}
			return true
		}
	}
	return false
}

// Stop stops every link, leaving what they declared upstream (the
// upstream queue keeps what is published while this broker is down),
// and waits for them; a Sync after it starts nothing (the broker's
// shutdown may race its last one).
func (m *Manager) Stop() {
	m.mu.Lock()
	links := m.links
	m.links, m.stopped = nil, true
	m.mu.Unlock()
	for _, l := range links {
		l.cancel()
	}
	waited := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(stopWait):
		m.Log.Warn().Msg("federation links still stopping; going on without them")
	}
}

func (m *Manager) dialer(name string) amqpclient.Dialer {
	return amqpclient.Dialer{Local: m.Local, Name: name}
}

func (m *Manager) clusterName() string {
	if m.ClusterName == nil {
		return ""
	}
	return m.ClusterName()
}
