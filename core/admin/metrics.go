package admin

import (
	"net/http"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/hold"
	"github.com/warrenmq/warren/core/stats"
)

// metricsHandler serves /metrics: Prometheus's exposition, written by
// client_golang (which also escapes every label value, so a queue named
// with quotes, backslashes or newlines cannot break a scrape). Besides the
// Go runtime's and the process's own collectors (memory, CPU, file
// descriptors), one collector reads the broker's state at scrape time:
// nothing is kept per metric between scrapes, so queues and vhosts that
// come and go need no registration.
//
// Counters are monotonic where they live: per vhost (a deleted vhost's
// series ends), per queue and per exchange. The per-vhost message counters
// follow RabbitMQ's global counters; the delivery counter carries two
// labels, as RabbitMQ splits it into four names.
func metricsHandler(b *broker.Broker) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&brokerCollector{b: b},
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// brokerCollector is an unchecked collector (its Describe sends nothing):
// the set of series changes with the broker's objects.
type brokerCollector struct{ b *broker.Broker }

func (c *brokerCollector) Describe(chan<- *prometheus.Desc) {}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	buildInfo = desc("warren_build_info", "Warren's version, the commit it was built from and the Go version, as labels; always 1.", "version", "commit", "go_version")
	uptime    = desc("warren_uptime_seconds", "Seconds since the broker started.")

	// The metadata Raft group, on a cluster member only.
	clusterMembers  = desc("warren_cluster_members", "Nodes in the cluster's configuration.")
	clusterMemberUp = desc("warren_cluster_member_up", "1 if this node has heard from the node lately (itself: always).", "node")
	clusterPeerRTT  = desc("warren_cluster_peer_rtt_seconds", "The last round trip this node measured to another node.", "node")
	clusterUnseen   = desc("warren_cluster_changes_unseen_total", "Definition changes this node answered before the node had applied them (it was heard from but did not apply within 5 s).", "node")
	raftLeader      = desc("warren_raft_is_leader", "1 if this node leads the metadata Raft group.")
	raftTerm        = desc("warren_raft_term", "The metadata Raft group's current term, as this node knows it.")
	raftCommit      = desc("warren_raft_commit_index", "The last metadata log index this node knows committed.")
	raftApplied     = desc("warren_raft_applied_index", "The last metadata log index this node applied.")
	raftLogBytes    = desc("warren_raft_log_bytes", "Bytes of metadata log entries kept since the last compaction.")
	raftLogEntries  = desc("warren_raft_log_entries", "Metadata log entries kept since the last compaction.")

	// Per vhost message counters.
	vhostCounters = map[stats.Kind]*prometheus.Desc{
		stats.Publish:          desc("warren_messages_published_total", "Messages published by clients.", "vhost"),
		stats.Routed:           desc("warren_messages_routed_total", "Published messages that reached a queue (or were held for delayed routing).", "vhost"),
		stats.Confirm:          desc("warren_messages_confirmed_total", "Publisher confirms (basic.ack) sent.", "vhost"),
		stats.ReturnUnroutable: desc("warren_messages_unroutable_returned_total", "Mandatory messages that reached no queue and were returned.", "vhost"),
		stats.DropUnroutable:   desc("warren_messages_unroutable_dropped_total", "Messages that reached no queue and were dropped.", "vhost"),
		stats.GetEmpty:         desc("warren_messages_get_empty_total", "basic.get on an empty queue.", "vhost"),
		stats.Redeliver:        desc("warren_messages_redelivered_total", "Deliveries flagged redelivered.", "vhost"),
		stats.Ack:              desc("warren_messages_acknowledged_total", "Deliveries acknowledged by clients.", "vhost"),
		stats.Reject:           desc("warren_messages_rejected_total", "Deliveries rejected or nacked by clients, requeued or not.", "vhost"),
	}
	delivered    = desc("warren_messages_delivered_total", "Messages handed to clients, by how (consume or get) and whether an ack was required (manual) or not (auto).", "vhost", "via", "ack")
	deadLettered = desc("warren_messages_dead_lettered_total", "Messages that left a queue for its dead-letter exchange, by reason.", "vhost", "reason")

	// Per queue.
	queueReady        = desc("warren_queue_messages_ready", "Messages ready for delivery.", "vhost", "queue")
	queueUnacked      = desc("warren_queue_messages_unacked", "Messages delivered and not yet acknowledged.", "vhost", "queue")
	queueReadyBytes   = desc("warren_queue_messages_ready_bytes", "Bytes of the ready messages' bodies and properties.", "vhost", "queue")
	queueConsumers    = desc("warren_queue_consumers", "Consumers.", "vhost", "queue")
	queuePublished    = desc("warren_queue_messages_published_total", "Messages enqueued.", "vhost", "queue")
	queueDelivered    = desc("warren_queue_messages_delivered_total", "Messages handed to consumers and basic.get.", "vhost", "queue")
	queueRedelivered  = desc("warren_queue_messages_redelivered_total", "Deliveries flagged redelivered.", "vhost", "queue")
	queueAcknowledged = desc("warren_queue_messages_acknowledged_total", "Deliveries acknowledged.", "vhost", "queue")
	queueDeadLettered = desc("warren_queue_messages_dead_lettered_total", "Messages dead-lettered, by reason.", "vhost", "queue", "reason")

	// Per exchange.
	exchangeIn  = desc("warren_exchange_messages_published_in_total", "Messages published to the exchange by clients.", "vhost", "exchange")
	exchangeOut = desc("warren_exchange_messages_published_out_total", "Of those, messages routed to a queue or held.", "vhost", "exchange")

	// Totals.
	vhostsTotal      = desc("warren_vhosts", "Virtual hosts.")
	queuesTotal      = desc("warren_queues", "Queues, per vhost.", "vhost")
	exchangesTotal   = desc("warren_exchanges", "Exchanges, the default and predeclared ones included, per vhost.", "vhost")
	connectionsTotal = desc("warren_connections", "Open client connections.")
	channelsTotal    = desc("warren_channels", "Open channels.")
	consumersTotal   = desc("warren_consumers", "Consumers.")
	heldTotal        = desc("warren_delayed_messages", "Messages held for delayed routing, per vhost.", "vhost")
	heldInMemory     = desc("warren_delayed_messages_in_memory", "Held messages in memory (the window over the store), per vhost.", "vhost")
	heldDropped      = desc("warren_delayed_messages_dropped_total", "Held messages dropped rather than routed, by reason: route_failed (routing failed when due; logged), unroutable (no queue when due), exchange_deleted, purged.", "vhost", "reason")
	exchangeHeld     = desc("warren_exchange_delayed_messages", "Messages an exchange holds for delayed routing (exchanges holding some).", "vhost", "exchange")

	connectionsOpened = desc("warren_connections_opened_total", "Client connections opened (past connection.open).")
	connectionsClosed = desc("warren_connections_closed_total", "Client connections closed.")
	channelsOpened    = desc("warren_channels_opened_total", "Channels opened.")
	channelsClosed    = desc("warren_channels_closed_total", "Channels closed.")

	// The stream protocol (core/streamproto), in RabbitMQ 3.10's terms
	// where it has them: rabbitmq_global_publishers, _consumers,
	// _messages_received_total, _messages_confirmed_total and
	// _messages_delivered_total with protocol="stream"; its connections are
	// in rabbitmq_connections, which warren_connections (AMQP) is not.
	streamConnections = desc("warren_stream_connections", "Open stream-protocol connections (past Open).")
	streamPublishers  = desc("warren_stream_publishers", "Stream-protocol publishers.")
	streamConsumers   = desc("warren_stream_consumers", "Stream-protocol subscriptions.")
	streamPublished   = desc("warren_stream_messages_published_total", "Messages stream-protocol publishers sent.")
	streamConfirmed   = desc("warren_stream_messages_confirmed_total", "Of those, messages confirmed to the publisher.")
	streamErrored     = desc("warren_stream_messages_errored_total", "Of those, messages refused with a publish error.")
	streamConsumed    = desc("warren_stream_messages_consumed_total", "Messages delivered to stream-protocol subscriptions.")
	// MQTT (core/mqtt): its connections past CONNECT, their sessions'
	// topic filters, and their QoS 1 deliveries waiting for PUBACK.
	mqttConnections   = desc("warren_mqtt_connections", "Open MQTT connections (past CONNECT).")
	mqttSubscriptions = desc("warren_mqtt_subscriptions", "Topic filters the MQTT connections' sessions subscribe to.")
	mqttUnacked       = desc("warren_mqtt_messages_unacknowledged", "QoS 1 deliveries to MQTT clients waiting for PUBACK.")

	// Resources.
	memoryUsed     = desc("warren_memory_used_bytes", "Memory as the memory alarm counts it: resident set less heap the Go runtime has freed.")
	memoryLimit    = desc("warren_memory_watermark_bytes", "The memory alarm's watermark; 0 when the alarm is off.")
	diskFree       = desc("warren_disk_free_bytes", "Free space in the data directory's file system.")
	diskFreeLimit  = desc("warren_disk_free_limit_bytes", "The disk alarm's limit; 0 when the alarm is off.")
	alarm          = desc("warren_alarm", "1 while the resource's alarm is raised (publishers blocked).", "resource")
	resourceAlarm  = desc("warren_resource_alarm", "1 while publishers are blocked by any resource alarm.")
	storeWriteFail = desc("warren_store_write_failing", "1 while the store cannot write.")

	// The store.
	storeCommits     = desc("warren_store_commits_total", "Commit batches written.")
	storeSyncs       = desc("warren_store_syncs_total", "fsyncs of the write-ahead log.")
	storeErrors      = desc("warren_store_commit_errors_total", "Commit batches that failed.")
	storeBytes       = desc("warren_store_committed_bytes_total", "Bytes committed.")
	storeWAL         = desc("warren_store_wal_bytes_written_total", "Bytes written to Pebble's write-ahead log.")
	storeDisk        = desc("warren_store_disk_usage_bytes", "Bytes of every file of the store.")
	storeDebt        = desc("warren_store_compaction_debt_bytes", "Bytes Pebble estimates compaction still has to rewrite.")
	storeReadAmp     = desc("warren_store_read_amplification", "Sublevels a read may consult.")
	storeFlushes     = desc("warren_store_flushes_total", "Memtable flushes.")
	storeCompactions = desc("warren_store_compactions_total", "Compactions.")
	storeCacheBytes  = desc("warren_store_block_cache_bytes", "Bytes in the block cache.")
	storeCacheHits   = desc("warren_store_block_cache_hits_total", "Block cache hits.")
	storeCacheMisses = desc("warren_store_block_cache_misses_total", "Block cache misses.")

	// Plugins (the route latency histogram is each plugin's own).
	pluginCalls    = desc("warren_plugin_route_calls_total", "Route calls made to the plugin.", "plugin")
	pluginFailures = desc("warren_plugin_route_failures_total", "Route calls that failed in the plugin (a trap, the deadline, a malformed answer).", "plugin")
)

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	constant := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		constant(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		constant(d, prometheus.CounterValue, float64(v), labels...)
	}
	flag := func(d *prometheus.Desc, on bool, labels ...string) {
		v := 0.0
		if on {
			v = 1
		}
		gauge(d, v, labels...)
	}

	gauge(buildInfo, 1, broker.Version, buildCommit(), runtime.Version())
	gauge(uptime, b.Uptime().Seconds())
	if n := b.Cluster(); n != nil {
		st := n.Status()
		gauge(clusterMembers, float64(len(st.Members)))
		for _, m := range st.Members {
			flag(clusterMemberUp, m.Alive, m.Name)
			if m.Latency > 0 {
				gauge(clusterPeerRTT, m.Latency.Seconds(), m.Name)
			}
			if m.ID != st.ID {
				counter(clusterUnseen, m.Unseen, m.Name)
			}
		}
		flag(raftLeader, st.Role == "leader")
		gauge(raftTerm, float64(st.Term))
		gauge(raftCommit, float64(st.Commit))
		gauge(raftApplied, float64(st.Applied))
		gauge(raftLogBytes, float64(st.LogBytes))
		gauge(raftLogEntries, float64(st.LogEntries))
	}

	names := b.VHosts()
	gauge(vhostsTotal, float64(len(names)))
	consumers := 0
	for _, name := range names {
		v, ok := b.VHost(name)
		if !ok {
			continue
		}
		values := v.Counters.Values()
		for k, d := range vhostCounters {
			counter(d, values[k], name)
		}
		counter(delivered, values[stats.Deliver], name, "consume", "manual")
		counter(delivered, values[stats.DeliverNoAck], name, "consume", "auto")
		counter(delivered, values[stats.Get], name, "get", "manual")
		counter(delivered, values[stats.GetNoAck], name, "get", "auto")
		for _, r := range deadLetterReasons {
			counter(deadLettered, values[r.kind], name, r.name)
		}

		queues := v.Queues()
		gauge(queuesTotal, float64(len(queues)), name)
		for _, q := range queues {
			consumers += q.Consumers
			gauge(queueReady, float64(q.Ready), name, q.Name)
			gauge(queueUnacked, float64(q.Unacked), name, q.Name)
			gauge(queueReadyBytes, float64(q.ReadyBytes), name, q.Name)
			gauge(queueConsumers, float64(q.Consumers), name, q.Name)
			counter(queuePublished, q.Counters[stats.Publish], name, q.Name)
			counter(queueDelivered, q.Counters.DeliverGet(), name, q.Name)
			counter(queueRedelivered, q.Counters[stats.Redeliver], name, q.Name)
			counter(queueAcknowledged, q.Counters[stats.Ack], name, q.Name)
			for _, r := range deadLetterReasons {
				counter(queueDeadLettered, q.Counters[r.kind], name, q.Name, r.name)
			}
		}
		exchanges := v.Exchanges()
		gauge(exchangesTotal, float64(len(exchanges)), name)
		for _, x := range exchanges {
			counter(exchangeIn, x.Counters[stats.PublishIn], name, x.Name)
			counter(exchangeOut, x.Counters[stats.PublishOut], name, x.Name)
		}
		gauge(heldTotal, float64(v.Held().Len()), name)
		gauge(heldInMemory, float64(v.Held().InMemory()), name)
		for reason, n := range v.Held().Dropped() {
			counter(heldDropped, n, name, hold.DropReasonNames[reason])
		}
		for x, n := range v.Held().Counts() {
			gauge(exchangeHeld, float64(n), name, x)
		}
	}
	gauge(consumersTotal, float64(consumers))

	srv := b.Server()
	gauge(connectionsTotal, float64(len(srv.Connections())))
	gauge(channelsTotal, float64(len(srv.Channels())))
	churn := srv.Churn()
	counter(connectionsOpened, churn.ConnectionsOpened)
	counter(connectionsClosed, churn.ConnectionsClosed)
	counter(channelsOpened, churn.ChannelsOpened)
	counter(channelsClosed, churn.ChannelsClosed)

	if streams := b.Streams(); streams != nil {
		gauge(streamConnections, float64(len(streams.Connections())))
		gauge(streamPublishers, float64(len(streams.Publishers())))
		gauge(streamConsumers, float64(len(streams.Consumers())))
		totals := streams.Totals()
		counter(streamPublished, totals.Published)
		counter(streamConfirmed, totals.Confirmed)
		counter(streamErrored, totals.Errored)
		counter(streamConsumed, totals.Delivered)
	}

	if m := b.MQTT(); m != nil {
		conns := m.Connections()
		var subs, unacked int
		for _, ci := range conns {
			subs, unacked = subs+ci.Subscriptions, unacked+ci.Unacked
		}
		gauge(mqttConnections, float64(len(conns)))
		gauge(mqttSubscriptions, float64(subs))
		gauge(mqttUnacked, float64(unacked))
	}

	r := b.Resources()
	gauge(memoryUsed, float64(r.MemoryUsed))
	gauge(memoryLimit, float64(r.MemoryLimit))
	gauge(diskFree, float64(r.DiskFree))
	gauge(diskFreeLimit, float64(r.DiskLimit))
	flag(alarm, r.MemoryAlarm, "memory")
	flag(alarm, r.DiskAlarm, "disk")
	raised, _, _ := b.Alarm().State()
	flag(resourceAlarm, raised)
	flag(storeWriteFail, r.StoreError != "")

	if f, ok := b.StoreFigures(); ok {
		counter(storeCommits, f.Commits)
		counter(storeSyncs, f.Syncs)
		counter(storeErrors, f.CommitErrors)
		counter(storeBytes, f.CommittedBytes)
		counter(storeWAL, f.WALBytesWritten)
		gauge(storeDisk, float64(f.DiskBytes))
		gauge(storeDebt, float64(f.CompactionDebt))
		gauge(storeReadAmp, float64(f.ReadAmp))
		counter(storeFlushes, uint64(f.Flushes))
		counter(storeCompactions, uint64(f.Compactions))
		gauge(storeCacheBytes, float64(f.CacheBytes))
		counter(storeCacheHits, uint64(f.CacheHits))
		counter(storeCacheMisses, uint64(f.CacheMisses))
	}

	for name, m := range b.PluginRouteMetrics() {
		m.Latency.Collect(ch)
		counter(pluginCalls, m.Calls, name)
		counter(pluginFailures, m.Failures, name)
	}
}

var deadLetterReasons = []struct {
	name string
	kind stats.Kind
}{
	{"expired", stats.DeadLetteredExpired},
	{"rejected", stats.DeadLetteredRejected},
	{"maxlen", stats.DeadLetteredMaxLen},
	{"delivery_limit", stats.DeadLetteredDeliveryLimit},
}

// buildCommit is the VCS revision the binary was built from, as the Go
// toolchain stamps it ("unknown" for test binaries and builds outside a
// checkout).
func buildCommit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}
