package admin

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"time"

	"github.com/warrenmq/warren/core/broker"
)

func (a *api) routeOverview(mux *router) {
	a.handle(mux, "GET /api/overview", management, a.overview)
	a.handle(mux, "GET /api/cluster-name", management, a.clusterName)
	a.handle(mux, "PUT /api/cluster-name", administrator, a.putClusterName)
	a.handle(mux, "GET /api/nodes", monitoring, a.nodes)
	a.handle(mux, "GET /api/nodes/{node}", monitoring, a.node)
}

// exchangeTypeDescriptions are RabbitMQ's words for the built-in types.
var exchangeTypeDescriptions = map[string]string{
	"direct":  "AMQP direct exchange, as per the AMQP specification",
	"fanout":  "AMQP fanout exchange, as per the AMQP specification",
	"headers": "AMQP headers exchange, as per the AMQP specification",
	"topic":   "AMQP topic exchange, as per the AMQP specification",
}

type exchangeTypeJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
}

func (a *api) exchangeTypes() []exchangeTypeJSON {
	out := []exchangeTypeJSON{}
	for _, n := range a.b.Types().Names() {
		d, ok := exchangeTypeDescriptions[n]
		if !ok {
			d = "Exchange type provided by a Warren plugin"
		}
		out = append(out, exchangeTypeJSON{Name: n, Description: d, Enabled: true})
	}
	return out
}

type listenerJSON struct {
	Node      string `json:"node"`
	Protocol  string `json:"protocol"`
	IPAddress string `json:"ip_address"`
	Port      int    `json:"port"`
}

func (a *api) listeners() []listenerJSON {
	node := a.b.NodeName()
	out := []listenerJSON{}
	for _, l := range a.b.Listeners() {
		out = append(out, listenerJSON{Node: node, Protocol: l.Protocol, IPAddress: l.IP, Port: l.Port})
	}
	return out
}

// overview is RabbitMQ's /api/overview. With lengths_age/lengths_incr or
// msg_rates_age/msg_rates_incr the *_details objects carry samples from
// the broker's history (one point per admin.stats_interval, an hour of
// them at most), as RabbitMQ's do; the web UI's charts read them. A user
// who sees only some vhosts gets totals over those.
func (a *api) overview(c *call) (any, error) {
	h, err := historyOf(c)
	if err != nil {
		return nil, err
	}
	vs, err := c.vhosts()
	if err != nil {
		return nil, err
	}
	var queues, exchanges, consumers, channels, connections int
	for _, v := range vs {
		queues += len(v.QueueNames())
		exchanges += len(v.Exchanges())
	}
	// Every node's clients, as RabbitMQ counts them; a member that does
	// not answer within a second is left out of the totals.
	ctx, cancel := context.WithTimeout(c.r.Context(), time.Second)
	counts, _ := a.b.ClusterClientCounts(ctx)
	cancel()
	for _, n := range counts {
		if c.seesConnection(n.User, n.VHost) {
			connections, channels, consumers = connections+n.Connections, channels+n.Channels, consumers+n.Consumers
		}
	}
	values, rates, totals := a.b.Totals()
	now := time.Now()
	prev, last := latestTwo(a.b.History(3 * time.Duration(a.b.Config().Admin.StatsInterval)))
	qt := queueTotals(totals, prev.Queues, last.At.Sub(prev.At))
	if prev.At.IsZero() {
		qt = queueTotals(totals, totals, 0)
	}
	ms := orEmpty(messageStats(values, rates))
	if h.msgAge > 0 {
		ms = messageStatsHistory(values, rates, a.b.History(h.msgAge+h.msgIncr), now, h.msgAge, h.msgIncr)
	}
	if h.lenAge > 0 {
		qt = queueTotalsHistory(totals, qt, a.b.History(h.lenAge+h.lenIncr), now, h.lenAge, h.lenIncr)
	}
	raised, reason, _ := a.b.Alarm().State()
	return map[string]any{
		"management_version": broker.Version,
		"rabbitmq_version":   broker.Version,
		"product_name":       "Warren",
		"product_version":    broker.Version,
		"rates_mode":         "basic",
		"cluster_name":       a.b.ClusterName(),
		"node":               a.b.NodeName(),
		"exchange_types":     a.exchangeTypes(),
		"message_stats":      ms,
		"queue_totals":       qt,
		"object_totals": map[string]int{
			"connections": connections, "channels": channels, "exchanges": exchanges,
			"queues": queues, "consumers": consumers,
		},
		"listeners":                 a.listeners(),
		"statistics_db_event_queue": 0,
		"disable_stats":             false,
		"enable_queue_totals":       false,
		// Warren's own: the resource alarm and held (delayed) messages.
		"alarm": map[string]any{"raised": raised, "reason": reason},
	}, nil
}

// latestTwo returns the last two points of a history (zero values when
// there are fewer).
func latestTwo[T any](ps []T) (prev, last T) {
	if n := len(ps); n >= 2 {
		return ps[n-2], ps[n-1]
	} else if n == 1 {
		return prev, ps[0]
	}
	return prev, last
}

func (a *api) clusterName(*call) (any, error) {
	return map[string]string{"name": a.b.ClusterName()}, nil
}

func (a *api) putClusterName(c *call) (any, error) {
	var body struct {
		Name *string `json:"name"`
	}
	if err := decode(c.r, &body); err != nil {
		return nil, err
	}
	if body.Name == nil {
		return nil, badRequest("[{key_missing,name}]")
	}
	if *body.Name == "" {
		return nil, badRequest("field 'name' must not be empty")
	}
	return nil, a.b.SetClusterName(*body.Name)
}

// nodeJSON is the one node, with the figures RabbitMQ's /api/nodes has
// that Warren has too. proc_used counts goroutines (Erlang processes'
// counterpart), which have no limit: proc_total is RabbitMQ's default
// process limit (procTotal), so the ratio monitoring checks compute
// (Debian's check_rabbitmq_server) reads as on a RabbitMQ node.
// sockets_used counts AMQP connections.
type nodeJSON struct {
	Name                   string   `json:"name"`
	Type                   string   `json:"type"`
	Running                bool     `json:"running"`
	OSPid                  string   `json:"os_pid"`
	Uptime                 int64    `json:"uptime"`
	Processors             int      `json:"processors"`
	MemUsed                uint64   `json:"mem_used"`
	MemUsedDetails         details  `json:"mem_used_details"`
	MemLimit               uint64   `json:"mem_limit"`
	MemAlarm               bool     `json:"mem_alarm"`
	MemCalculationStrategy string   `json:"mem_calculation_strategy"`
	DiskFree               uint64   `json:"disk_free"`
	DiskFreeDetails        details  `json:"disk_free_details"`
	DiskFreeLimit          uint64   `json:"disk_free_limit"`
	DiskFreeAlarm          bool     `json:"disk_free_alarm"`
	FDUsed                 int      `json:"fd_used"`
	FDTotal                int      `json:"fd_total"`
	SocketsUsed            int      `json:"sockets_used"`
	SocketsTotal           int      `json:"sockets_total"`
	ProcUsed               int      `json:"proc_used"`
	ProcTotal              int      `json:"proc_total"`
	RunQueue               int      `json:"run_queue"`
	RatesMode              string   `json:"rates_mode"`
	Partitions             []string `json:"partitions"`
	EnabledPlugins         []string `json:"enabled_plugins"`
	ExchangeTypes          any      `json:"exchange_types"`
	GoVersion              string   `json:"go_version"`
	Memory                 any      `json:"memory,omitempty"` // ?memory=true
	*nodeProcess
}

// nodeProcess is what only this node reports of itself (another
// member's /api/nodes entry leaves it out): its process's counters, as
// RabbitMQ's node entry has them where Warren has the same thing.
type nodeProcess struct {
	AuthMechanisms []authMechanismJSON `json:"auth_mechanisms"`
	Applications   []applicationJSON   `json:"applications"`
	Contexts       []contextJSON       `json:"contexts"`
	LogFiles       []string            `json:"log_files"`
	DBDir          string              `json:"db_dir"`
	ClusterLinks   []any               `json:"cluster_links"`
	// The process's counters (broker.ProcessCounters), each with its
	// rate between the two latest statistics samples.
	ConnectionCreated        uint64  `json:"connection_created"`
	ConnectionCreatedDetails details `json:"connection_created_details"`
	ConnectionClosed         uint64  `json:"connection_closed"`
	ConnectionClosedDetails  details `json:"connection_closed_details"`
	ChannelCreated           uint64  `json:"channel_created"`
	ChannelCreatedDetails    details `json:"channel_created_details"`
	ChannelClosed            uint64  `json:"channel_closed"`
	ChannelClosedDetails     details `json:"channel_closed_details"`
	// GCNum counts garbage collections; GCBytesReclaimed is what they
	// freed.
	GCNum                   uint64  `json:"gc_num"`
	GCNumDetails            details `json:"gc_num_details"`
	GCBytesReclaimed        uint64  `json:"gc_bytes_reclaimed"`
	GCBytesReclaimedDetails details `json:"gc_bytes_reclaimed_details"`
	ContextSwitches         uint64  `json:"context_switches"`
	ContextSwitchesDetails  details `json:"context_switches_details"`
	// The io_ figures are the process's (/proc/self/io): its read and
	// write calls, and the bytes that reached the disk.
	IOReadCount         uint64  `json:"io_read_count"`
	IOReadCountDetails  details `json:"io_read_count_details"`
	IOReadBytes         uint64  `json:"io_read_bytes"`
	IOReadBytesDetails  details `json:"io_read_bytes_details"`
	IOWriteCount        uint64  `json:"io_write_count"`
	IOWriteCountDetails details `json:"io_write_count_details"`
	IOWriteBytes        uint64  `json:"io_write_bytes"`
	IOWriteBytesDetails details `json:"io_write_bytes_details"`
	// Store is Warren's own: its store's figures (absent once closed).
	Store *storeJSON `json:"store,omitempty"`
}

// storeJSON is the store's figures (storage.Figures).
type storeJSON struct {
	Commits         uint64 `json:"commits"`
	Syncs           uint64 `json:"syncs"`
	CommitErrors    uint64 `json:"commit_errors"`
	CommittedBytes  uint64 `json:"committed_bytes"`
	WALBytesWritten uint64 `json:"wal_bytes_written"`
	DiskBytes       uint64 `json:"disk_bytes"`
	CompactionDebt  uint64 `json:"compaction_debt_bytes"`
	ReadAmp         int    `json:"read_amplification"`
	Flushes         int64  `json:"flushes"`
	Compactions     int64  `json:"compactions"`
	CacheBytes      int64  `json:"cache_bytes"`
	CacheHits       int64  `json:"cache_hits"`
	CacheMisses     int64  `json:"cache_misses"`
}

type authMechanismJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
}

type applicationJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version"`
}

type contextJSON struct {
	Description string `json:"description"`
	Path        string `json:"path"`
	Port        string `json:"port"`
}

// processView is this node's nodeProcess.
func (a *api) processView() *nodeProcess {
	p := &nodeProcess{
		AuthMechanisms: []authMechanismJSON{{"PLAIN", "SASL PLAIN authentication mechanism", true},
			{"AMQPLAIN", "QPid AMQPLAIN mechanism", true}},
		Applications: []applicationJSON{{"warren", "Warren", broker.Version}, {"go", "The Go runtime", runtime.Version()}},
		Contexts:     []contextJSON{}, LogFiles: []string{"<stderr>"}, DBDir: a.b.Config().Storage.DataDir, ClusterLinks: []any{},
	}
	if _, port, err := net.SplitHostPort(a.b.AdminAddr()); err == nil {
		p.Contexts = []contextJSON{{"RabbitMQ Management", "/", port}}
	}
	c, r := a.b.ProcessCounters(), a.b.ProcessRates()
	for i, f := range []struct {
		n *uint64
		d *details
	}{
		broker.ConnectionsCreated: {&p.ConnectionCreated, &p.ConnectionCreatedDetails},
		broker.ConnectionsClosed:  {&p.ConnectionClosed, &p.ConnectionClosedDetails},
		broker.ChannelsCreated:    {&p.ChannelCreated, &p.ChannelCreatedDetails},
		broker.ChannelsClosed:     {&p.ChannelClosed, &p.ChannelClosedDetails},
		broker.GCNum:              {&p.GCNum, &p.GCNumDetails},
		broker.GCBytesReclaimed:   {&p.GCBytesReclaimed, &p.GCBytesReclaimedDetails},
		broker.ContextSwitches:    {&p.ContextSwitches, &p.ContextSwitchesDetails},
		broker.IOReadCount:        {&p.IOReadCount, &p.IOReadCountDetails},
		broker.IOReadBytes:        {&p.IOReadBytes, &p.IOReadBytesDetails},
		broker.IOWriteCount:       {&p.IOWriteCount, &p.IOWriteCountDetails},
		broker.IOWriteBytes:       {&p.IOWriteBytes, &p.IOWriteBytesDetails},
	} {
		*f.n, f.d.Rate = c[i], r[i]
	}
	if f, ok := a.b.StoreFigures(); ok {
		p.Store = &storeJSON{Commits: f.Commits, Syncs: f.Syncs, CommitErrors: f.CommitErrors, CommittedBytes: f.CommittedBytes,
			WALBytesWritten: f.WALBytesWritten, DiskBytes: f.DiskBytes, CompactionDebt: f.CompactionDebt, ReadAmp: f.ReadAmp,
			Flushes: f.Flushes, Compactions: f.Compactions, CacheBytes: f.CacheBytes, CacheHits: f.CacheHits, CacheMisses: f.CacheMisses}
	}
	return p
}

// procTotal is the Erlang VM's default process limit (+P), RabbitMQ's
// proc_total unless an operator raised it.
const procTotal = 1048576

func (a *api) nodeView() nodeJSON {
	n := a.nodeViewOf(a.b.NodeName(), a.b.Figures())
	n.nodeProcess = a.processView()
	return n
}

// nodeViewOf renders a node's figures, this node's or another member's.
func (a *api) nodeViewOf(name string, f broker.NodeFigures) nodeJSON {
	socketsTotal := a.b.Config().Limits.MaxConnections
	if socketsTotal == 0 {
		socketsTotal = f.FDTotal
	}
	return nodeJSON{
		Name: name, Type: "disc", Running: true, OSPid: itoa(f.OSPid), Uptime: f.UptimeMS,
		Processors: f.Processors, MemUsed: f.MemUsed, MemLimit: f.MemLimit, MemAlarm: f.MemAlarm,
		MemCalculationStrategy: "rss", DiskFree: f.DiskFree, DiskFreeLimit: f.DiskFreeLimit, DiskFreeAlarm: f.DiskAlarm,
		FDUsed: f.FDUsed, FDTotal: f.FDTotal, SocketsUsed: f.Sockets, SocketsTotal: socketsTotal,
		ProcUsed: f.Goroutines, ProcTotal: procTotal, RunQueue: 0, RatesMode: "basic",
		Partitions: []string{}, EnabledPlugins: f.EnabledPlugins, ExchangeTypes: a.exchangeTypes(), GoVersion: runtime.Version(),
	}
}

func (a *api) nodes(*call) (any, error) {
	return append([]nodeJSON{a.nodeView()}, a.clusterMembers()...), nil
}

// node is one node; ?memory=true adds its breakdown, as RabbitMQ's does.
func (a *api) node(c *call) (any, error) {
	n, err := a.nodeNamed(c.path("node"))
	if err != nil || c.query("memory") != "true" {
		return n, err
	}
	if n.Memory, err = a.memoryOf(n.Name); err != nil {
		return nil, err
	}
	return n, nil
}

func (a *api) nodeNamed(name string) (nodeJSON, error) {
	if name == a.b.NodeName() {
		return a.nodeView(), nil
	}
	for _, m := range a.clusterMembers() {
		if m.Name == name {
			return m, nil
		}
	}
	return nodeJSON{}, errNotFound
}

func itoa(n int) string { return strconv.Itoa(n) }
