// Package config reads broker.toml.
//
// Every setting has a default (Default), so an empty file, or none, gives a
// working broker: AMQP on 127.0.0.1:5672, vhost "/", user guest/guest
// allowed from loopback only, data in ./data. A key the broker does not
// know is an error naming the key and its line, so a typo never passes for
// a setting; a value whose sign, zero or range is wrong (NaN, a negative
// duration, a size whose unit overflows, a count past what the protocol
// carries) is an error naming the key as section.key and what it may be
// (Validate). Command-line flags override the file after it is read.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/warrenmq/warren/core/names"
)

// Config is the whole broker configuration.
type Config struct {
	// NodeName is this node's name as listings show it and monitoring
	// asks for it; "" is warren@HOST. In a cluster, cluster.node_name
	// names the node, and the two must not differ.
	NodeName    string      `toml:"node_name"`
	Log         Log         `toml:"log"`
	AMQP        AMQP        `toml:"amqp"`
	AMQPS       AMQPS       `toml:"amqps"`
	Admin       Admin       `toml:"admin"`
	Stream      Stream      `toml:"stream"`
	MQTT        MQTT        `toml:"mqtt"`
	Storage     Storage     `toml:"storage"`
	Defaults    Defaults    `toml:"defaults"`
	Limits      Limits      `toml:"limits"`
	Resources   Resources   `toml:"resources"`
	Plugins     Plugins     `toml:"plugins"`
	Definitions Definitions `toml:"definitions"`
	Cluster     Cluster     `toml:"cluster"`
	// Shovels are static shovels ([[shovels]]), RabbitMQ's shovels of
	// its advanced.config: started with the node, not stored.
	Shovels []Shovel `toml:"shovels"`
}

// Shovel is a static shovel: a name, the vhost it is listed in, and its
// definition with the keys of a dynamic shovel's parameter (src-uri,
// src-queue, dest-uri, ack-mode ...), checked when the broker starts.
type Shovel struct {
	Name       string         `toml:"name"`
	VHost      string         `toml:"vhost"` // "" is "/"
	Definition map[string]any `toml:"definition"`
}

type Log struct {
	Level  string `toml:"level"`  // trace, debug, info, warn, error
	Format string `toml:"format"` // auto (console on a terminal, else JSON), console, json
}

type AMQP struct {
	// Listen is one address or several (RabbitMQ listens on IPv4 and
	// IPv6): "127.0.0.1:5672" or ["0.0.0.0:5672", "[::]:5672"]. Empty
	// disables plain AMQP.
	Listen Addrs `toml:"listen"`
}

type AMQPS struct {
	Listen   Addrs  `toml:"listen"` // none disables TLS
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// Stream is RabbitMQ's stream protocol (core/streamproto), on by default
// as RabbitMQ's rabbitmq_stream plugin listens when enabled.
type Stream struct {
	// Listen is where plain stream connections are taken (RabbitMQ's
	// 5552); none disables them.
	Listen Addrs `toml:"listen"`
	// TLSListen takes stream connections over TLS (RabbitMQ's 5551),
	// with amqps.cert_file and amqps.key_file; none disables it.
	TLSListen Addrs `toml:"tls_listen"`
	// AdvertisedHost and AdvertisedPort are the host and port metadata
	// gives clients for this node; "" and 0 derive them from the first
	// listener (a loopback address advertises "localhost", an unspecified
	// one the machine's host name).
	AdvertisedHost string `toml:"advertised_host"`
	AdvertisedPort int    `toml:"advertised_port"`
	// FrameMax is the largest frame taken and offered (RabbitMQ's
	// stream.frame_max).
	FrameMax Size `toml:"frame_max"`
	// Heartbeat is offered at the handshake; 0 turns heartbeats off.
	Heartbeat Duration `toml:"heartbeat"`
	// MaxUnconfirmed is how many published messages one connection may
	// have waiting for their confirm before the broker stops reading it.
	MaxUnconfirmed int `toml:"max_unconfirmed"`
}

func (s Stream) validate() error {
	for _, l := range []struct {
		key   string
		addrs Addrs
	}{{"stream.listen", s.Listen}, {"stream.tls_listen", s.TLSListen}} {
		for _, a := range l.addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("%s: %q is not host:port (%v)", l.key, a, err)
			}
		}
	}
	if s.AdvertisedPort < 0 || s.AdvertisedPort > math.MaxUint16 {
		return fmt.Errorf("stream.advertised_port: %d must be between 0 (the listener's) and %d", s.AdvertisedPort, math.MaxUint16)
	}
	if s.FrameMax < 8192 || s.FrameMax > math.MaxUint32 {
		return fmt.Errorf("stream.frame_max: %d must be between 8192 and %d", uint64(s.FrameMax), uint32(math.MaxUint32))
	}
	if hb := time.Duration(s.Heartbeat); hb < 0 || hb%time.Second != 0 || hb > time.Duration(math.MaxUint32)*time.Second {
		return fmt.Errorf("stream.heartbeat: %v must be whole seconds, 0s for none", hb)
	}
	if s.MaxUnconfirmed < 1 {
		return fmt.Errorf("stream.max_unconfirmed: %d must be at least 1", s.MaxUnconfirmed)
	}
	return nil
}

// MQTT is MQTT 3.1, 3.1.1 and 5.0 (core/mqtt), on by default, mapped
// onto a vhost's topic exchange as RabbitMQ's rabbitmq_mqtt plugin maps
// it; its keys are that plugin's (mqtt.vhost, mqtt.exchange, ...).
type MQTT struct {
	// Listen is where MQTT connections are taken (1883); none disables
	// MQTT.
	Listen Addrs `toml:"listen"`
	// VHost is the vhost of a client whose user name names none
	// ("vhost:user" names one).
	VHost string `toml:"vhost"`
	// Exchange is the topic exchange MQTT topics are routing keys of.
	Exchange string `toml:"exchange"`
	// AllowAnonymous lets a client without a user name in as
	// defaults.user (RabbitMQ's mqtt.allow_anonymous with its
	// default_user and default_pass); that user's loopback-only rule
	// still applies.
	AllowAnonymous bool `toml:"allow_anonymous"`
	// Prefetch bounds a connection's QoS 1 deliveries not acknowledged.
	Prefetch int `toml:"prefetch"`
	// MaxPacketSize is the largest packet taken once a client is in
	// (RabbitMQ's max_packet_size_authenticated); before, 64 KiB.
	MaxPacketSize Size `toml:"max_packet_size"`
	// SubscriptionTTL is how long a persistent session's queues outlive
	// their last connection (x-expires; RabbitMQ's subscription_ttl), and
	// the most an MQTT 5 Session Expiry Interval is granted; 0 keeps
	// them for ever.
	SubscriptionTTL Duration `toml:"subscription_ttl"`
}

func (m MQTT) validate() error {
	for _, a := range m.Listen {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("mqtt.listen: %q is not host:port (%v)", a, err)
		}
	}
	if m.Exchange == "" {
		return errors.New("mqtt.exchange: must name an exchange (the default exchange routes by queue name)")
	}
	if m.Prefetch < 1 || m.Prefetch > math.MaxUint16 {
		return fmt.Errorf("mqtt.prefetch: %d must be between 1 and %d", m.Prefetch, math.MaxUint16)
	}
	if m.MaxPacketSize < 64<<10 || m.MaxPacketSize > 1<<28-1+5 {
		return fmt.Errorf("mqtt.max_packet_size: %d must be between 64KiB and 256MiB", uint64(m.MaxPacketSize))
	}
	if ttl := time.Duration(m.SubscriptionTTL); ttl < 0 || ttl%time.Millisecond != 0 || ttl > 10*365*24*time.Hour {
		return fmt.Errorf("mqtt.subscription_ttl: %v must be whole milliseconds, up to ten years, 0s for none", ttl)
	}
	return nil
}

type Admin struct {
	Listen string `toml:"listen"` // "" disables the admin API
	// MaxConnections bounds the admin connections open at once, so idle
	// or slow HTTP clients cannot use up the file descriptors the AMQP
	// listener needs; 0 means no bound.
	MaxConnections int `toml:"max_connections"`
	// StatsInterval is how often message rates are sampled, as RabbitMQ's
	// collect_statistics_interval: a rate is the change between the two
	// latest samples.
	StatsInterval Duration `toml:"stats_interval"`
	// Realm is the HTTP basic-auth realm the API names when it asks for
	// credentials; RabbitMQ's is "RabbitMQ Management", which tools and
	// browsers' saved passwords may expect.
	Realm string `toml:"realm"`
	// MaxBodySize bounds a request's body, as RabbitMQ's
	// management.http.max_body_size: a larger one is refused with its
	// 400 before it is read. The default is RabbitMQ's, 10,000,000
	// bytes, which holds some 80,000 bindings of a definitions import.
	MaxBodySize Size `toml:"max_body_size"`
	// Profiling serves the Go runtime's CPU, heap, mutex, block and
	// goroutine profiles to administrators (core/admin's pprof.go), and
	// has the runtime sample mutex contention and blocking while the
	// broker runs, which costs a little on every contended lock and wait.
	Profiling bool `toml:"profiling"`
}

type Storage struct {
	DataDir string `toml:"data_dir"`
	// Sync is "always" (a publisher confirm or declare-ok for durable data
	// waits for fsync) or "never" (every write goes to the OS, which syncs
	// when it likes; a machine crash can lose confirmed messages, a process
	// crash cannot).
	Sync string `toml:"sync"`
	// SyncInterval bounds, under sync "always", how long writes nobody
	// waits for (acks, delivery marks) go without an fsync.
	SyncInterval Duration `toml:"sync_interval"`
	// WALDamage is what start-up does when the newest write-ahead log is
	// damaged with records after the damage: "refuse" (stop with an error
	// saying where and what) or "truncate" (log the same at error level,
	// keep the damaged file, start without those records).
	WALDamage string `toml:"wal_damage"`
	// QueueMemoryMessages and QueueMemoryBytes bound the ready messages one
	// queue keeps in memory; past either, the rest wait in the store. None
	// by default: what all queues keep is bounded by
	// resources.memory_paging_ratio.
	QueueMemoryMessages int  `toml:"queue_memory_messages"`
	QueueMemoryBytes    Size `toml:"queue_memory_bytes"`
	// QueueMemoryStoredMessages and QueueMemoryStoredBytes bound, per
	// queue, the messages kept in memory that are in the store already
	// (persistent messages of durable queues): paging those out writes
	// nothing.
	QueueMemoryStoredMessages int  `toml:"queue_memory_stored_messages"`
	QueueMemoryStoredBytes    Size `toml:"queue_memory_stored_bytes"`
	// CacheSize is the store's block cache.
	CacheSize Size `toml:"cache_size"`
	// BodyLogMin is the smallest body of a persistent message the store
	// writes once to its body log rather than to Pebble; 0 turns the body
	// log off.
	BodyLogMin Size `toml:"body_log_min"`
}

type Defaults struct {
	VHost         string   `toml:"vhost"`
	User          string   `toml:"user"`
	Password      string   `toml:"password"`
	LoopbackUsers []string `toml:"loopback_users"`
}

type Limits struct {
	// FrameMax and ChannelMax are what connection.tune offers: a long and
	// a short on the wire, held as ints so that Validate, not the TOML
	// decoder, says what range they take.
	FrameMax         int      `toml:"frame_max"`
	ChannelMax       int      `toml:"channel_max"`
	Heartbeat        Duration `toml:"heartbeat"`
	MaxConnections   int      `toml:"max_connections"` // past connection.open
	MaxHandshakes    int      `toml:"max_handshakes"`  // sockets not yet past connection.open
	MaxMessageSize   Size     `toml:"max_message_size"`
	HandshakeTimeout Duration `toml:"handshake_timeout"`
	ShutdownTimeout  Duration `toml:"shutdown_timeout"` // the most a shutdown may take
}

type Resources struct {
	// MemoryHighWatermark is the fraction of system memory above which
	// publishers are blocked; 0 disables the alarm.
	MemoryHighWatermark float64 `toml:"memory_high_watermark"`
	// MemoryPagingRatio is the fraction of the memory watermark the
	// queues' bodies may take in memory, all queues together, before they
	// page new messages out to the store (RabbitMQ's
	// vm_memory_high_watermark_paging_ratio); 0 turns it off.
	MemoryPagingRatio float64 `toml:"memory_paging_ratio"`
	// DiskFreeLimit blocks publishers when the data directory's disk has
	// less free space; 0 disables the alarm.
	DiskFreeLimit Size `toml:"disk_free_limit"`
}

// Definitions is RabbitMQ's load_definitions: a definitions file (RabbitMQ's
// JSON format) applied at every start, after the data directory is
// restored.
type Definitions struct {
	// LoadFile is the file; "" loads none. A missing or bad file stops
	// start-up with an error naming it.
	LoadFile string `toml:"load_file"`
}

// Cluster makes this node one of several that are one broker (package
// core/cluster). Without node_name the node is a broker of its own, as
// before, with no Raft at all.
type Cluster struct {
	// NodeName names this node in the cluster; every node's must differ.
	NodeName string `toml:"node_name"`
	// Listen is the address other nodes reach this one at (host:port):
	// also the address it gives them, so not 0.0.0.0.
	Listen string `toml:"listen"`
	// Advertise is the address the other nodes are told to reach this one
	// at, when it is not listen (NAT, a proxy, a container's port
	// mapping); "" means listen.
	Advertise string `toml:"advertise"`
	// Seeds are other nodes' listen addresses. A node with none starts a
	// new cluster the first time; a node with seeds joins through them.
	// A node that has been a member restarts from its own log either way.
	Seeds []string `toml:"seeds"`
	// Secret is shared by every node; nodes prove they know it to each
	// other before anything else. At least 16 characters.
	Secret string `toml:"secret"`
	// ChangeTimeout bounds how long a definition change waits to be
	// committed by a majority before it is refused.
	ChangeTimeout Duration `toml:"change_timeout"`
	// TLS makes the nodes talk over TLS 1.3 with amqps.cert_file and
	// amqps.key_file; every node must agree.
	TLS bool `toml:"tls"`
}

// Enabled reports whether the node is configured as a cluster member.
func (c Cluster) Enabled() bool { return c.NodeName != "" }

type Plugins struct {
	// Dir holds plugin modules (NAME.wasm); "" means the plugins folder of
	// the data directory.
	Dir string `toml:"dir"`
	// CacheDir keeps compiled plugins between runs; "" means the
	// "wasm-cache" folder in the data directory.
	CacheDir string                    `toml:"cache_dir"`
	Enabled  []string                  `toml:"enabled"`
	Settings map[string]map[string]any `toml:"settings"`
}

// Default returns the configuration used for every setting the file omits.
func Default() Config {
	return Config{
		Log:  Log{Level: "info", Format: "auto"},
		AMQP: AMQP{Listen: Addrs{"127.0.0.1:5672"}},
		Admin: Admin{Listen: "127.0.0.1:15672", MaxConnections: 128, StatsInterval: Duration(5 * time.Second), Realm: "RabbitMQ Management",
			MaxBodySize: defaultMaxBodySize},
		Stream: Stream{Listen: Addrs{"127.0.0.1:5552"}, FrameMax: 1 << 20, Heartbeat: Duration(60 * time.Second),
			MaxUnconfirmed: 10_000},
		MQTT: MQTT{Listen: Addrs{"127.0.0.1:1883"}, VHost: "/", Exchange: "amq.topic", AllowAnonymous: true, Prefetch: 10,
			MaxPacketSize: 16 << 20, SubscriptionTTL: Duration(24 * time.Hour)},
		Storage: Storage{DataDir: "./data", Sync: "always", SyncInterval: Duration(time.Second), WALDamage: "refuse",
			QueueMemoryStoredMessages: 65536, QueueMemoryStoredBytes: 64 << 20, CacheSize: 64 << 20,
			BodyLogMin: 256 << 10},
		Defaults: Defaults{VHost: "/", User: "guest", Password: "guest", LoopbackUsers: []string{"guest"}},
		Limits: Limits{
			FrameMax: 131072, ChannelMax: 2047, Heartbeat: Duration(60 * time.Second),
			MaxHandshakes: 1024, MaxMessageSize: 128 << 20, HandshakeTimeout: Duration(10 * time.Second),
			ShutdownTimeout: Duration(10 * time.Second),
		},
		Resources: Resources{MemoryHighWatermark: 0.4, MemoryPagingRatio: 0.5, DiskFreeLimit: 50_000_000},
		Plugins:   Plugins{},
		Cluster:   Cluster{ChangeTimeout: Duration(10 * time.Second)},
	}
}

// Load reads a config file on top of the defaults.
func Load(path string) (Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(path, src)
}

// Parse reads config text; name is used in error messages.
func Parse(name string, src []byte) (Config, error) {
	c := Default()
	md, err := toml.Decode(string(src), &c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			if perr.LastKey != "" {
				// A value the decoder or its type refused: name its key.
				return Config{}, fmt.Errorf("%s:%d: %s: %s", name, perr.Position.Line, perr.LastKey, perr.Message)
			}
			return Config{}, fmt.Errorf("%s:%d: %s", name, perr.Position.Line, perr.Message)
		}
		return Config{}, fmt.Errorf("%s: %v", name, err)
	}
	for _, key := range md.Undecoded() {
		if len(key) >= 3 && key[0] == "plugins" && key[1] == "settings" {
			continue // free-form, handed to the plugin
		}
		return Config{}, fmt.Errorf("%s:%d: unknown setting %q", name, lineOf(src, key), key.String())
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// lineOf finds the line that sets key: the key's last part, assigned inside
// the table its other parts name. TOML's decoder does not report positions
// of keys, only of syntax errors.
func lineOf(src []byte, key toml.Key) int {
	table := strings.Join(key[:len(key)-1], ".")
	leaf := key[len(key)-1]
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			current = strings.Trim(line, "[] \t")
			if current == strings.Join(key, ".") {
				return n
			}
			continue
		}
		name, _, found := strings.Cut(line, "=")
		if found && current == table && strings.Trim(strings.TrimSpace(name), `"'`) == leaf {
			return n
		}
	}
	return 0
}

// PluginDir is where plugin modules are looked for.
func (c *Config) PluginDir() string {
	if c.Plugins.Dir != "" {
		return c.Plugins.Dir
	}
	return filepath.Join(c.Storage.DataDir, "plugins")
}

// PluginCacheDir is where compiled plugins are cached.
func (c *Config) PluginCacheDir() string {
	if c.Plugins.CacheDir != "" {
		return c.Plugins.CacheDir
	}
	return filepath.Join(c.Storage.DataDir, "wasm-cache")
}

// The bounds Validate holds settings to, where the protocol or RabbitMQ
// sets them.
const (
	// maxMessageSize is RabbitMQ's cap on max_message_size (its schema's
	// validator: more than 0, at most 512 MiB).
	maxMessageSize = 512 << 20
	// maxHeartbeat is the largest interval connection.tune can carry: a
	// short, in seconds.
	maxHeartbeat = math.MaxUint16 * time.Second
	// maxStatsInterval keeps a rate a rate: the history of 720 samples
	// then spans a month, and three intervals (what the overview looks
	// back) stay far from a Duration's range.
	maxStatsInterval = time.Hour
	// minSyncInterval and maxSyncInterval bound the deferred fsync: under a
	// millisecond the committer would fsync without pause, over an hour a
	// machine crash could bring back an hour of acked messages.
	minSyncInterval = time.Millisecond
	maxSyncInterval = time.Hour
	// minCacheSize is a few of Pebble's blocks; a cache smaller holds
	// nothing worth having.
	minCacheSize = 1 << 20
	// minBodyLogMin and maxBodyLogMin bound storage.body_log_min: below
	// 8 KiB a body costs less in Pebble's batches than a write of its own,
	// and no frame carries more than 1 GiB.
	minBodyLogMin = 8 << 10
	maxBodyLogMin = 1 << 30
	// defaultMaxBodySize is RabbitMQ's management.http.max_body_size when
	// rabbitmq.conf does not set it (its schema, since 3.11.24 and
	// 3.12.7); minBodySize lets the API's small requests through (a
	// user, a policy) and maxBodySize keeps a body, which is held whole
	// in memory while it is decoded, below a gigabyte.
	defaultMaxBodySize = 10_000_000
	minBodySize        = 1 << 10
	maxBodySize        = 1 << 30
)

// Validate checks values the types alone do not: every setting's sign,
// zero and range. The first bad one is named, with what it may be.
func (c *Config) Validate() error {
	seen := map[string]bool{}
	for i, sh := range c.Shovels {
		switch {
		case sh.Name == "":
			return fmt.Errorf("shovels[%d]: a shovel needs a name", i)
		case seen[sh.VHost+"\x00"+sh.Name]:
			return fmt.Errorf("shovels[%d]: a second shovel named %q", i, sh.Name)
		case len(sh.Definition) == 0:
			return fmt.Errorf("shovels[%d] (%s): a shovel needs a definition ([shovels.definition], with src-uri, dest-uri ...)", i, sh.Name)
		}
		seen[sh.VHost+"\x00"+sh.Name] = true
	}
	if n, cn := c.NodeName, c.Cluster.NodeName; n != "" && cn != "" && n != cn {
		return fmt.Errorf("node_name: %q differs from cluster.node_name %q; a node has one name", n, cn)
	}
	if strings.ContainsFunc(c.NodeName, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("node_name: %q holds a space or a control character", c.NodeName)
	}
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of trace, debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "auto", "console", "json":
	default:
		return fmt.Errorf("log.format: %q is not one of auto, console, json", c.Log.Format)
	}
	if len(c.AMQP.Listen) == 0 && len(c.AMQPS.Listen) == 0 {
		return errors.New("amqp.listen: at least one of amqp.listen and amqps.listen is needed")
	}
	for _, l := range []struct {
		key   string
		addrs Addrs
	}{{"amqp.listen", c.AMQP.Listen}, {"amqps.listen", c.AMQPS.Listen}} {
		for _, a := range l.addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("%s: %q is not host:port (%v)", l.key, a, err)
			}
		}
	}
	if len(c.AMQPS.Listen) > 0 && (c.AMQPS.CertFile == "" || c.AMQPS.KeyFile == "") {
		return errors.New("amqps: cert_file and key_file are required with amqps.listen")
	}
	if err := c.Stream.validate(); err != nil {
		return err
	}
	if len(c.Stream.TLSListen) > 0 && (c.AMQPS.CertFile == "" || c.AMQPS.KeyFile == "") {
		return errors.New("stream.tls_listen: needs amqps.cert_file and amqps.key_file")
	}
	if err := c.MQTT.validate(); err != nil {
		return err
	}
	if err := c.Admin.validate(); err != nil {
		return err
	}
	if err := c.Storage.validate(); err != nil {
		return err
	}
	if err := c.Defaults.validate(); err != nil {
		return err
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if err := c.Resources.validate(); err != nil {
		return err
	}
	if c.Cluster.TLS && (c.AMQPS.CertFile == "" || c.AMQPS.KeyFile == "") {
		return errors.New("cluster.tls: needs amqps.cert_file and amqps.key_file (the node's certificate)")
	}
	return c.Cluster.validate()
}

func (a Admin) validate() error {
	if _, _, err := net.SplitHostPort(a.Listen); a.Listen != "" && err != nil {
		return fmt.Errorf("admin.listen: %q is not host:port (%v)", a.Listen, err)
	}
	if a.MaxConnections < 0 {
		return fmt.Errorf("admin.max_connections: %d must not be negative (0 means no limit)", a.MaxConnections)
	}
	if err := between("admin.stats_interval", a.StatsInterval, 10*time.Millisecond, maxStatsInterval); err != nil {
		return err
	}
	if a.MaxBodySize < minBodySize || a.MaxBodySize > maxBodySize {
		return fmt.Errorf("admin.max_body_size: %d must be between %d (1KiB) and %d (1GiB)", uint64(a.MaxBodySize), minBodySize, maxBodySize)
	}
	if strings.ContainsAny(a.Realm, "\"\\\r\n") {
		return fmt.Errorf("admin.realm: %q may not hold a quote, a backslash or a line break (it is sent in a WWW-Authenticate header)", a.Realm)
	}
	return nil
}

func (s Storage) validate() error {
	if s.DataDir == "" {
		return errors.New("storage.data_dir: must not be empty")
	}
	if s.Sync != "always" && s.Sync != "never" {
		return fmt.Errorf("storage.sync: %q is not one of always, never", s.Sync)
	}
	if err := between("storage.sync_interval", s.SyncInterval, minSyncInterval, maxSyncInterval); err != nil {
		return err
	}
	if s.WALDamage != "refuse" && s.WALDamage != "truncate" {
		return fmt.Errorf("storage.wal_damage: %q is not one of refuse, truncate", s.WALDamage)
	}
	if s.QueueMemoryMessages < 0 {
		return fmt.Errorf("storage.queue_memory_messages: %d must not be negative (0 means no bound)", s.QueueMemoryMessages)
	}
	if s.QueueMemoryStoredMessages < 0 {
		return fmt.Errorf("storage.queue_memory_stored_messages: %d must not be negative (0 means no bound)", s.QueueMemoryStoredMessages)
	}
	// Both sizes are handed on as int64.
	if s.QueueMemoryBytes > math.MaxInt64 {
		return fmt.Errorf("storage.queue_memory_bytes: %d is more than the most, %d (0 means no bound)", uint64(s.QueueMemoryBytes), int64(math.MaxInt64))
	}
	if s.QueueMemoryStoredBytes > math.MaxInt64 {
		return fmt.Errorf("storage.queue_memory_stored_bytes: %d is more than the most, %d (0 means no bound)", uint64(s.QueueMemoryStoredBytes), int64(math.MaxInt64))
	}
	if s.CacheSize < minCacheSize || s.CacheSize > math.MaxInt64 {
		return fmt.Errorf("storage.cache_size: %d must be between %d (1MiB) and %d", uint64(s.CacheSize), minCacheSize, int64(math.MaxInt64))
	}
	if s.BodyLogMin != 0 && (s.BodyLogMin < minBodyLogMin || s.BodyLogMin > maxBodyLogMin) {
		return fmt.Errorf("storage.body_log_min: %d must be 0 (off) or between %d (8KiB) and %d (1GiB)", uint64(s.BodyLogMin), minBodyLogMin, maxBodyLogMin)
	}
	return nil
}

func (d Defaults) validate() error {
	if d.VHost == "" {
		return errors.New("defaults.vhost: must not be empty")
	}
	if err := names.Check("vhost", d.VHost); err != nil {
		return fmt.Errorf("defaults.vhost: %w", err)
	}
	if d.User == "" {
		return errors.New("defaults.user: must not be empty (the first start creates this administrator)")
	}
	if err := names.Check("user", d.User); err != nil {
		return fmt.Errorf("defaults.user: %w", err)
	}
	if d.Password == "" {
		return errors.New("defaults.password: must not be empty (a user without a password cannot log in)")
	}
	return nil
}

func (l Limits) validate() error {
	if l.FrameMax < 4096 || l.FrameMax > math.MaxUint32 {
		return fmt.Errorf("limits.frame_max: %d must be between the protocol's minimum 4096 and %d", l.FrameMax, uint32(math.MaxUint32))
	}
	if l.ChannelMax < 1 || l.ChannelMax > math.MaxUint16 {
		return fmt.Errorf("limits.channel_max: %d must be between 1 and %d (the most the protocol numbers)", l.ChannelMax, math.MaxUint16)
	}
	if hb := time.Duration(l.Heartbeat); hb < 0 || hb > maxHeartbeat || hb%time.Second != 0 {
		return fmt.Errorf("limits.heartbeat: %v must be whole seconds between 0s (no heartbeats) and %v (connection.tune carries seconds in a short)", hb, maxHeartbeat)
	}
	if l.MaxConnections < 0 {
		return fmt.Errorf("limits.max_connections: %d must not be negative (0 means no limit)", l.MaxConnections)
	}
	if l.MaxHandshakes < 0 {
		return fmt.Errorf("limits.max_handshakes: %d must not be negative (0 means no limit)", l.MaxHandshakes)
	}
	if l.MaxMessageSize < 1 || l.MaxMessageSize > maxMessageSize {
		return fmt.Errorf("limits.max_message_size: %d must be between 1 and %d (512MiB, RabbitMQ's cap)", uint64(l.MaxMessageSize), maxMessageSize)
	}
	if err := positive("limits.handshake_timeout", l.HandshakeTimeout); err != nil {
		return err
	}
	return positive("limits.shutdown_timeout", l.ShutdownTimeout)
}

func (r Resources) validate() error {
	// Written so that NaN fails too: every comparison with NaN is false.
	if w := r.MemoryHighWatermark; !(w >= 0 && w < 1) {
		return fmt.Errorf("resources.memory_high_watermark: %v must be a fraction in [0, 1) (0 disables the alarm)", w)
	}
	if p := r.MemoryPagingRatio; !(p >= 0 && p <= 1) {
		return fmt.Errorf("resources.memory_paging_ratio: %v must be a fraction in [0, 1] (0 turns paging by the node's memory off)", p)
	}
	return nil
}

// positive refuses a duration of zero or less.
func positive(key string, d Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s: %v must be positive", key, time.Duration(d))
	}
	return nil
}

// between refuses a duration outside [lo, hi].
func between(key string, d Duration, lo, hi time.Duration) error {
	if v := time.Duration(d); v < lo || v > hi {
		return fmt.Errorf("%s: %v must be between %v and %v", key, v, lo, hi)
	}
	return nil
}

func (c Cluster) validate() error {
	if err := positive("cluster.change_timeout", c.ChangeTimeout); err != nil {
		return err
	}
	if !c.Enabled() {
		if c.Listen != "" || len(c.Seeds) > 0 || c.Secret != "" {
			return errors.New("cluster.node_name: required with cluster.listen, cluster.seeds or cluster.secret")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("cluster.listen: %q is not host:port (%v)", c.Listen, err)
	}
	if _, _, err := net.SplitHostPort(c.Advertise); c.Advertise != "" && err != nil {
		return fmt.Errorf("cluster.advertise: %q is not host:port (%v)", c.Advertise, err)
	}
	for _, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("cluster.seeds: %q is not host:port (%v)", s, err)
		}
	}
	if len(c.Secret) < 16 {
		return errors.New("cluster.secret: at least 16 characters are required (every node needs the same)")
	}
	return nil
}

// Duration is a time.Duration written as "60s" or "1m30s".
type Duration time.Duration

// Addrs are listen addresses. In broker.toml they are one string ("" for
// none) or an array of strings.
type Addrs []string

// UnmarshalTOML takes a string or an array of strings.
func (a *Addrs) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*a = nil
		if v != "" {
			*a = Addrs{v}
		}
		return nil
	case []any:
		out := make(Addrs, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok || s == "" {
				return fmt.Errorf("%v is not an address: want \"host:port\" strings", e)
			}
			out = append(out, s)
		}
		*a = out
		return nil
	}
	return fmt.Errorf("%v is not an address: want \"host:port\" or a list of them", v)
}

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q: use a number with a unit, like 60s", b)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Size is a byte count written as a number or with a unit: "128MiB", "50MB".
type Size uint64

var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (s *Size) UnmarshalText(b []byte) error {
	text := strings.TrimSpace(string(b))
	mult := uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(text, u.suffix) {
			text, mult = strings.TrimSpace(strings.TrimSuffix(text, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil && errors.Is(err, strconv.ErrRange) || err == nil && n > math.MaxUint64/mult {
		return fmt.Errorf("size %q is too large: at most %d bytes", b, uint64(math.MaxUint64))
	}
	if err != nil || text != strconv.FormatUint(n, 10) {
		return fmt.Errorf("bad size %q: use a whole number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", b)
	}
	*s = Size(n * mult)
	return nil
}

func (s Size) MarshalText() ([]byte, error) { return []byte(fmt.Sprintf("%dB", uint64(s))), nil }
