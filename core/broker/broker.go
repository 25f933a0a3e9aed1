// Package broker assembles Warren: it owns the vhosts, users, exchange
// types and listeners, and starts and stops them in order.
//
// Start-up: the data directory is restored (on first start, the default
// vhost and user come from the configuration), plugins are enabled, the
// definitions file of definitions.load_file is applied, then the listeners
// open. Shutdown: listeners close first (no new clients),
// connections get 320 CONNECTION_FORCED, then vhosts stop their timers and
// the store closes, all within limits.shutdown_timeout.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/cluster"
	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/conn"
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/federation"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/mqtt"
	"github.com/warrenmq/warren/core/names"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/quorumqueue"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/shovel"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/streamproto"
	"github.com/warrenmq/warren/core/streamqueue"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/storage"
)

// Version is Warren's version, reported to clients in connection.start.
const Version = "0.1.0"

// pooledBodies is the most memory the broker keeps in free buffers for
// large message bodies (message.Bodies): enough for a few dozen 1 MiB
// bodies, or a few of 16 MiB, in flight between publishers and consumers.
const pooledBodies = 64 << 20

// Broker is a running Warren.
type Broker struct {
	cfg   config.Config
	log   zerolog.Logger
	types *exchange.Registry
	// queueTypes are the queue types beside classic: quorum queues and
	// streams.
	queueTypes *queuetype.Types
	users      *auth.Store
	alarm      conn.Alarm
	srv        *conn.Server
	store      *storage.Store
	plugins    *pluginManager

	mu     lockorder.RWMutex[lockorder.BrokerVHosts]
	vhosts map[string]*vhost.VHost

	// defsMu serializes definitions imports, so one validates and applies
	// without another's changes in between (see definitions.go). It is a
	// lock of one slot, so that an import whose client has gone can stop
	// waiting for it.
	defsMu chan struct{}

	// history is the broker-wide statistics, sampled every
	// admin.stats_interval; retired holds the counters of deleted vhosts.
	history *stats.History
	retired stats.Meter
	// processSamples are the process counters' two latest samples
	// (process.go), replaced whole by the sampler.
	processSamples atomic.Pointer[stats.Pair[ProcessCounters]]

	// The resource alarms' limits in bytes (0: none), changeable at run
	// time, and the watcher's latest reading.
	memLimit, diskLimit atomic.Uint64
	// paging bounds the bodies all queues keep in memory: a fraction of
	// memLimit (setPagingLimit).
	paging    *queue.Paging
	resources atomic.Pointer[ResourceState]
	// watching is set once the watcher runs (Start); resample asks it to
	// sample now, and it closes the channel sent once the alarm agrees
	// (inForce).
	watching atomic.Bool
	resample chan chan struct{}
	started  time.Time

	// streams serves RabbitMQ's stream protocol (streams.go).
	streams *streamproto.Server
	// mqtt serves MQTT 3.1.1 and 5.0 (mqtt.go).
	mqtt    *mqtt.Server
	shovels *shovel.Manager
	// federation runs the federation links of this node (federation.go);
	// federationNudge wakes the goroutine that decides which.
	federation      *federation.Manager
	federationNudge chan struct{}

	listeners []net.Listener
	// listenerInfo records each listener's protocol ("amqp", "amqp/ssl",
	// "http") and bound address, for the admin API and its health checks.
	listenerInfo atomic.Pointer[[]Listener] // copied on write
	clusterName  atomic.Pointer[string]
	globals      atomic.Pointer[map[string]any] // global parameters beside cluster_name (node.go)
	vparams      vhostParams                    // vhost parameters of registered components (vhostparams.go)
	// cluster is this node's member of the metadata Raft group; nil on a
	// node of its own (replicated.go).
	cluster atomic.Pointer[cluster.Node]
	joinMu  lockorder.Mutex[lockorder.BrokerJoin] // serializes JoinCluster
	// groups runs the Raft groups of quorum queues and streams: on a node
	// without [cluster] each has this node as its only member; a cluster
	// member's is made with the node's identity once the store is open,
	// and again when join_cluster gives the node a new one.
	groups atomic.Pointer[cluster.Groups]
	// forwarders send messages to queues homed on other nodes, one per
	// node (topology.go).
	forwardMu  lockorder.Mutex[lockorder.BrokerForwarders]
	forwarders map[string]*forwarder
	// applyMu orders the metadata group's applies against the shutdown:
	// once applyClosed is set (before the vhosts close), an apply does
	// nothing and records nothing, so the change is applied again at the
	// next start rather than refused by a closed vhost and lost.
	applyMu     lockorder.Mutex[lockorder.BrokerApply]
	applyClosed bool
	stopOnce    sync.Once
	admin       *http.Server
	stop        chan struct{}
	wg          sync.WaitGroup
}

// closeVHosts closes every vhost once the metadata group can no longer
// apply a change to them (applyClosed).
func (b *Broker) closeVHosts() {
	b.applyMu.Lock()
	b.applyClosed = true
	b.applyMu.Unlock()
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, v := range b.vhosts {
		v.Close()
	}
}

// New builds a broker from a configuration; Start opens its listeners.
func New(cfg config.Config, log zerolog.Logger) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := staticShovels(cfg); err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:        cfg,
		log:        log,
		types:      exchange.NewRegistry(),
		queueTypes: queuetype.NewTypes(queue.Quorum, classicqueue.Type{}, quorumqueue.Type{}, streamqueue.Type{}),
		users:      auth.NewStore(cfg.Defaults.LoopbackUsers),
		vhosts:     make(map[string]*vhost.VHost),
		stop:       make(chan struct{}),
		defsMu:     make(chan struct{}, 1),
		resample:   make(chan chan struct{}),
		history:    stats.NewHistory(historyLength),
		started:    time.Now(),
	}
	b.vparams.changed = make(chan struct{}, 1)
	if !cfg.Cluster.Enabled() {
		b.groups.Store(cluster.NewGroups(log))
	}
	b.memLimit.Store(memoryLimitFor(cfg.Resources.MemoryHighWatermark))
	b.paging = queue.NewPaging(0)
	b.setPagingLimit()
	b.diskLimit.Store(uint64(cfg.Resources.DiskFreeLimit))
	b.srv = &conn.Server{
		Limits: conn.Limits{
			FrameMax:         uint32(cfg.Limits.FrameMax), // in range: Validate
			ChannelMax:       uint16(cfg.Limits.ChannelMax),
			Heartbeat:        time.Duration(cfg.Limits.Heartbeat),
			MaxMessageSize:   uint64(cfg.Limits.MaxMessageSize),
			HandshakeTimeout: time.Duration(cfg.Limits.HandshakeTimeout),
			MaxConnections:   cfg.Limits.MaxConnections,
			MaxHandshakes:    cfg.Limits.MaxHandshakes,
		},
		Users:   b.users,
		VHosts:  b,
		Alarm:   &b.alarm,
		Log:     log,
		Version: Version,
		Bodies:  message.NewBodies(pooledBodies),
		// b.ClusterName reads an atomic: no lock of the broker's.
		ClusterName: b.ClusterName,
	}
	b.streams = newStreamServer(cfg, log, b)
	b.mqtt = newMQTTServer(cfg, log, b)
	b.newShovels()
	if err := b.newFederation(); err != nil {
		return nil, err
	}
	if err := b.openStore(); err != nil {
		return nil, err
	}
	if err := b.startPlugins(shippedModules()); err != nil {
		b.stopGroups()
		b.store.Close()
		return nil, err
	}
	if err := b.startCluster(cfg.Cluster.Seeds); err != nil {
		b.plugins.close()
		b.stopGroups()
		b.store.Close()
		return nil, err
	}
	// After the plugins, whose exchange types the file may use.
	if path := cfg.Definitions.LoadFile; path != "" {
		if err := b.LoadDefinitionsFile(path); err != nil {
			b.stopCluster()
			b.plugins.close()
			b.stopGroups()
			b.store.Close()
			return nil, err
		}
	}
	return b, nil
}

// stopGroups stops the quorum queues' groups (their logs stay), before
// the store they write to closes.
func (b *Broker) stopGroups() {
	if g := b.groups.Load(); g != nil {
		g.Stop()
	}
}

// Types is the exchange type registry, for the plugin host.
func (b *Broker) Types() *exchange.Registry { return b.types }

// Users is the user store.
func (b *Broker) Users() *auth.Store { return b.users }

// Server is the AMQP connection server.
func (b *Broker) Server() *conn.Server { return b.srv }

// Alarm is the resource alarm that blocks publishers.
func (b *Broker) Alarm() *conn.Alarm { return &b.alarm }

// VHost returns a vhost by name.
func (b *Broker) VHost(name string) (*vhost.VHost, bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v, ok := b.vhosts[name]
	return v, ok
}

// VHosts lists vhost names, sorted.
func (b *Broker) VHosts() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.vhosts))
	for n := range b.vhosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AddVHost creates and stores a vhost; an existing one is returned as it is.
func (b *Broker) AddVHost(name string) (*vhost.VHost, error) {
	if name == "" {
		return nil, reply.PreconditionFailed("vhost name must not be empty")
	}
	if v, ok := b.VHost(name); ok {
		return v, nil
	}
	if err := names.Check("vhost", name); err != nil {
		return nil, reply.PreconditionFailed("%v", err)
	}
	if err := b.change(addVHost{Name: name}); err != nil {
		return nil, err
	}
	v, ok := b.VHost(name)
	if !ok { // deleted meanwhile, by another node
		return nil, reply.NotFound("no vhost '%s'", name)
	}
	return v, nil
}

func (b *Broker) applyAddVHost(name string) (*vhost.VHost, error) {
	if v, ok := b.VHost(name); ok {
		return v, nil
	}
	if err := b.store.PutMeta(storage.KindVHost, "", name, vhostRecord{}.Table()); err != nil {
		return nil, reply.Internal("could not store vhost '%s': %v", name, err)
	}
	return b.newVHost(name), nil
}

// newVHost creates a vhost in memory, or returns the existing one.
func (b *Broker) newVHost(name string) *vhost.VHost {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.vhosts[name]; ok {
		return v
	}
	c := vhost.Config{Name: name, Types: b.types, QueueTypes: b.queueTypes, Logger: b.log, Store: b.store, Bodies: b.srv.Bodies,
		Changed: b.topologyChanged,
		Memory: queue.MemoryLimit{Messages: b.cfg.Storage.QueueMemoryMessages, Bytes: int64(b.cfg.Storage.QueueMemoryBytes),
			StoredMessages: b.cfg.Storage.QueueMemoryStoredMessages, StoredBytes: int64(b.cfg.Storage.QueueMemoryStoredBytes), Node: b.paging}}
	if b.cfg.Cluster.Enabled() {
		c.Cluster = topologyLink{b: b}
	}
	c.Groups = b.groups.Load()
	v := vhost.New(c)
	b.vhosts[name] = v
	return v
}

// DeleteVHost removes a vhost and everything in it, from memory and store.
func (b *Broker) DeleteVHost(name string) error {
	return b.change(deleteVHost{Name: name})
}

func (b *Broker) applyDeleteVHost(name string) error {
	b.mu.Lock()
	v, ok := b.vhosts[name]
	delete(b.vhosts, name)
	b.mu.Unlock()
	if !ok {
		return reply.NotFound("no vhost '%s'", name)
	}
	ids := v.QueueIDs()
	v.Close()
	b.retired.AddValues(v.Counters.Values())
	b.users.ClearVHost(name)
	hadParams := b.dropVHostParameters(name)
	err := b.store.DeleteVHost(name, ids)
	b.mqtt.ForgetVHost(name) // its retained messages went with it
	if hadParams {
		b.vhostParametersChanged()
	}
	if err != nil {
		return reply.Internal("could not delete vhost '%s' from the store: %v", name, err)
	}
	return nil
}

// Start opens the AMQP (and AMQPS) listeners and starts serving.
func (b *Broker) Start() error {
	for _, addr := range b.cfg.AMQP.Listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("amqp listener %s: %w", addr, err)
		}
		b.serve(ln, "amqp", b.srv.Serve)
	}
	if len(b.cfg.AMQPS.Listen) > 0 {
		cert, err := tls.LoadX509KeyPair(b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile)
		if err != nil {
			b.closeListeners()
			return fmt.Errorf("amqps: loading %s and %s: %w", b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile, err)
		}
		for _, addr := range b.cfg.AMQPS.Listen {
			ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
			if err != nil {
				b.closeListeners()
				return fmt.Errorf("amqps listener %s: %w", addr, err)
			}
			b.serve(ln, "amqps", b.srv.Serve)
		}
	}
	if err := b.startStreamListeners(); err != nil {
		b.closeListeners()
		return err
	}
	if err := b.startMQTTListeners(); err != nil {
		b.closeListeners()
		return err
	}
	b.wg.Add(2)
	b.watching.Store(true)
	go b.watchResources()
	go b.sampleStats()
	b.startProfiling()
	b.startShovels()
	b.startFederation()
	return nil
}

func (b *Broker) serve(ln net.Listener, proto string, handle func(net.Conn)) {
	b.listeners = append(b.listeners, ln)
	b.recordListener(proto, ln.Addr())
	b.log.Info().Str("listener", proto).Str("addr", ln.Addr().String()).Msg("accepting connections")
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				b.log.Warn().Err(err).Msg("accept failed")
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if tcp, ok := nc.(*net.TCPConn); ok {
				_ = tcp.SetNoDelay(true)
			}
			go handle(nc)
		}
	}()
}

// ServeAdmin serves the admin API on admin.listen (nothing when it is "").
// The handler comes from package admin, which depends on this one. At most
// admin.max_connections are open at once and each has timeouts (see
// adminHeaderTimeout), so HTTP clients cannot take the descriptors AMQP
// clients need.
func (b *Broker) ServeAdmin(h http.Handler) error {
	if b.cfg.Admin.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", b.cfg.Admin.Listen)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	if n := b.cfg.Admin.MaxConnections; n > 0 {
		ln = newConnLimitListener(ln, n)
	}
	b.admin = &http.Server{
		Addr:              ln.Addr().String(), // the bound address, for AdminAddr; Serve does not read it
		Handler:           untilAnswerDue(h),
		ReadHeaderTimeout: adminHeaderTimeout,
		ReadTimeout:       adminReadTimeout,
		WriteTimeout:      adminWriteTimeout,
		IdleTimeout:       adminIdleTimeout,
		MaxHeaderBytes:    adminMaxHeaderBytes,
	}
	b.recordListener("http", ln.Addr())
	b.log.Info().Str("listener", "admin").Str("addr", ln.Addr().String()).Msg("admin API listening")
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := b.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error().Err(err).Msg("admin API stopped")
		}
	}()
	return nil
}

// Addr returns the address of the first listener (AMQP if enabled).
func (b *Broker) Addr() net.Addr {
	if len(b.listeners) == 0 {
		return nil
	}
	return b.listeners[0].Addr()
}

func (b *Broker) closeListeners() {
	for _, ln := range b.listeners {
		ln.Close()
	}
}

// ErrShutdownTimeout is Shutdown's error when its time ran out before the
// vhosts, plugins and store were stopped.
var ErrShutdownTimeout = errors.New("shutdown did not finish in time")

// Shutdown stops accepting, closes every connection with 320
// CONNECTION_FORCED and stops the vhosts, plugins and store. It returns
// within limits.shutdown_timeout, or by ctx's deadline if that is sooner,
// whatever state clients are in; it never waits for a resource alarm to
// clear. Connections get the first half of the time to close politely, then
// their sockets are closed; stopping the rest gets what remains. When time
// runs out it returns ErrShutdownTimeout (or ctx's error) and what is left
// finishes in the background; the store is built to survive being cut off.
func (b *Broker) Shutdown(ctx context.Context) error {
	stopped := true
	b.stopOnce.Do(func() { stopped = false })
	if stopped {
		return nil
	}
	start := time.Now()
	deadline := start.Add(time.Duration(b.cfg.Limits.ShutdownTimeout))
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	budget := deadline.Sub(start)
	b.closeListeners()
	if b.admin != nil {
		_ = b.admin.Close()
	}
	b.stopProfiling()
	close(b.stop)
	b.shovels.Stop() // before the connections it makes are closed under it
	b.federation.Stop()
	streamsClosed := make(chan bool, 1)
	go func() { streamsClosed <- b.streams.CloseAll("broker shutdown", start.Add(budget/2)) }()
	mqttClosed := make(chan bool, 1)
	go func() { mqttClosed <- b.mqtt.CloseAll(start.Add(budget / 2)) }()
	if !b.srv.CloseAll("shutdown", start.Add(budget/2), start.Add(budget*3/4)) {
		b.log.Warn().Msg("shutdown: some connections are still busy in the broker; stopping without them")
	}
	if !<-streamsClosed {
		b.log.Warn().Msg("shutdown: some stream connections did not close in time; their sockets were closed")
	}
	if !<-mqttClosed {
		b.log.Warn().Msg("shutdown: some MQTT connections did not close in time; their sockets were closed")
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		b.wg.Wait()
		b.closeVHosts()
		b.stopCluster()
		b.stopGroups()
		b.plugins.close()
		if err := b.store.Close(); err != nil {
			b.log.Error().Err(err).Msg("closing the store")
		}
	}()
	left := time.NewTimer(time.Until(deadline))
	defer left.Stop()
	select {
	case <-done:
		b.log.Info().Msg("broker stopped")
		return ctx.Err()
	case <-ctx.Done():
		b.log.Error().Msg("shutdown cut short; stopping the store is left unfinished")
		return ctx.Err()
	case <-left.C:
		b.log.Error().Dur("timeout", budget).Msg("shutdown did not finish in time; stopping the store is left unfinished")
		return ErrShutdownTimeout
	}
}
