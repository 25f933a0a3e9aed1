package shovel

import (
	"context"
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
)

// Manager runs a node's dynamic shovels: Sync is told which shovel
// parameters exist and whether this node is the one to run them, and
// starts, restarts and stops workers to match.
type Manager struct {
	Log zerolog.Logger
	// Local connects to this broker (conn.Server.DialLocal), for the
	// URIs without a host.
	Local func(asBroker bool) (net.Conn, error)
	// ClusterName names the cluster in forwarding headers.
	ClusterName func() string
	// Clear deletes a shovel's parameter, when its delete-after is met;
	// Lookup reads one as it is now.
	Clear  func(vhost, name string) error
	Lookup func(vhost, name string) (protocol.Table, bool)
	// MayUseVHost says whether a user may open a vhost, for a
	// definition's local URIs (Check).
	MayUseVHost func(user, vhost string) bool

	mu      lockorder.Mutex[lockorder.ShovelManager]
	workers map[key2]*worker // the dynamic shovels, which Sync keeps
	static  map[key2]*worker // broker.toml's, which it leaves alone
	stopped bool
}

type key2 struct{ vhost, name string }

// Param is one shovel parameter.
type Param struct {
	VHost, Name string
	Value       protocol.Table
}

// Check checks a shovel parameter before it is set, as RabbitMQ's
// rabbit_shovel_parameters:validate: the definition, and that the user
// setting it may use the vhosts its local URIs name.
func (m *Manager) Check(vhost, name string, value any, user string) error {
	t, ok := value.(protocol.Table)
	if !ok {
		return fmt.Errorf("the value of a %s parameter must be an object", Component)
	}
	d, err := Parse(t)
	if err != nil {
		return err
	}
	if user == "" || m.MayUseVHost == nil {
		return nil
	}
	for _, s := range slices.Concat(d.SrcURIs, d.DestURIs) {
		u, _ := amqpclient.ParseURI(s)
		if u.Local() && !u.HasUser() && !m.MayUseVHost(user, u.VHost()) {
			return fmt.Errorf("user %q may not connect to vhost %q", user, u.VHost())
		}
	}
	return nil
}

// Sync makes the running shovels those of params when run is set (this
// node runs the shovels), none otherwise. A shovel whose definition
// changed is stopped, then started again; one that cannot be read (a
// parameter set by a node that reads it differently) is shown
// terminated. A stopping shovel is listed until it has stopped, so that
// one no longer listed moves nothing.
func (m *Manager) Sync(params []Param, run bool) {
	want := map[key2]Param{}
	if run {
		for _, p := range params {
			want[key2{p.VHost, p.Name}] = p
		}
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	var stop []*worker
	for k, w := range m.workers {
		if p, ok := want[k]; !ok || !reflect.DeepEqual(p.Value, w.value) {
			stop = append(stop, w)
		}
	}
	m.mu.Unlock()
	for _, w := range stop {
		w.cancel()
		<-w.done
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range stop {
		if k := (key2{w.vhost, w.name}); m.workers[k] == w {
			delete(m.workers, k)
		}
	}
	if m.stopped {
		return
	}
	for k, p := range want {
		if _, ok := m.workers[k]; !ok {
			m.start(p)
		}
	}
}

// StartStatic starts the node's static shovels (broker.toml's), which
// run on this node whatever Sync is told; a definition Parse refuses is
// an error naming the shovel, and none is started.
func (m *Manager) StartStatic(params []Param) error {
	for _, p := range params {
		if _, err := Parse(p.Value); err != nil {
			return fmt.Errorf("static shovel %q: %s", p.Name, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range params {
		m.startIn(&m.static, Static, p)
	}
	return nil
}

// start starts p's worker as a dynamic shovel; m.mu is held.
func (m *Manager) start(p Param) { m.startIn(&m.workers, Dynamic, p) }

// The types of shovel, as RabbitMQ names them.
const (
	Dynamic = "dynamic"
	Static  = "static"
)

func (m *Manager) startIn(into *map[key2]*worker, typ string, p Param) {
	if *into == nil {
		*into = map[key2]*worker{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{m: m, vhost: p.VHost, name: p.Name, value: p.Value, typ: typ, cancel: cancel, done: make(chan struct{}),
		log: m.Log.With().Str("shovel", p.Name).Str("vhost", p.VHost).Str("type", typ).Logger()}
	w.status = Status{VHost: p.VHost, Name: p.Name, Type: typ, State: Starting}
	(*into)[key2{p.VHost, p.Name}] = w
	d, err := Parse(p.Value)
	if err != nil {
		w.status.State, w.status.Reason = Terminated, "its definition cannot be read: "+strings.ReplaceAll(err.Error(), "\n", "; ")
		close(w.done)
		return
	}
	w.def = d
	go w.run(ctx)
}

// Restart stops a running shovel and starts it again with its
// parameter as it is now, as RabbitMQ's restart_shovel; false when this
// node runs no such shovel or its parameter is gone (a deleted shovel
// still stopping).
func (m *Manager) Restart(vhost, name string) bool {
	k := key2{vhost, name}
	m.mu.Lock()
	if w, ok := m.static[k]; ok {
		m.mu.Unlock()
		w.cancel()
		<-w.done
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.static[k] == w && !m.stopped {
			m.startIn(&m.static, Static, Param{VHost: vhost, Name: name, Value: w.value})
		}
		return true
	}
	w, ok := m.workers[k]
	m.mu.Unlock()
	if !ok {
		return false
	}
	value, exists := m.Lookup(vhost, name)
	if !exists {
		return false
	}
	w.cancel()
	<-w.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers[k] == w {
		delete(m.workers, k)
	}
	if _, again := m.workers[k]; !again && !m.stopped {
		m.start(Param{VHost: vhost, Name: name, Value: value})
	}
	return true
}

// completed ends a worker whose transfer is done: its parameter is
// cleared, and the Sync that follows finds it gone.
func (m *Manager) completed(w *worker) {
	if w.typ == Static {
		m.mu.Lock()
		defer m.mu.Unlock()
		if k := (key2{w.vhost, w.name}); m.static[k] == w {
			delete(m.static, k)
		}
		return
	}
	if err := m.Clear(w.vhost, w.name); err != nil {
		w.log.Error().Err(err).Msg("could not delete the completed shovel's parameter")
		w.set(func(s *Status) {
			s.State, s.Reason = Terminated, "completed, but its parameter could not be deleted: "+err.Error()
		})
	}
}

// Statuses are the shovels this node runs, by vhost and name.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	ws := make([]*worker, 0, len(m.workers)+len(m.static))
	for _, w := range m.workers {
		ws = append(ws, w)
	}
	for _, w := range m.static {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	out := make([]Status, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Status())
	}
	slices.SortFunc(out, func(a, b Status) int {
		return strings.Compare(a.VHost+"\x00"+a.Name, b.VHost+"\x00"+b.Name)
	})
	return out
}

// Stop stops every shovel, for the broker's shutdown; Sync does nothing
// after it.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	ws := slices.Collect(maps.Values(m.workers))
	ws = append(ws, slices.Collect(maps.Values(m.static))...)
	m.workers, m.static = nil, nil
	m.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		<-w.done
	}
}

func (m *Manager) dialer(name string) amqpclient.Dialer {
	return amqpclient.Dialer{Local: m.Local, Name: "Shovel " + name}
}

func (m *Manager) clusterName() string {
	if m.ClusterName == nil {
		return ""
	}
	return m.ClusterName()
}
