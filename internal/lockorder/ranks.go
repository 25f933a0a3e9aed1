package lockorder

// rankID is a lock's place in the order: a goroutine takes locks in
// increasing rankID. The constants follow LOCKS.md's tree, outermost first;
// a lock LOCKS.md names under several others comes after all of them.
type rankID int

const (
	brokerJoin rankID = iota
	brokerApply
	brokerPlugins
	brokerVHosts
	vhostDef
	vhostExchange
	vhostExchangeVia
	exchangeTopicCache
	pluginRef
	pluginMutations
	pluginState
	pluginPool
	pluginFailures
	pluginLog
	pluginVia
	pluginMemory
	vhostMaps
	exchangeRegistry
	authStore
	queueQueue
	quorumQueue
	streamprotoSAC
	streamStream
	streamprotoSubscription
	streamprotoOutbound
	remoteSource
	connChannel
	mqttDeliver
	connConfirms
	mqttConfirms
	connOutbound
	mqttOutbound
	mqttRetained
	remoteConsumer
	clusterConf
	storageRaftLogs
	storageRaftLogWriters
	storageRaftLog
	holdQueue
	storageClose
	storageCommitter
	storageIDs
	storageBodyLog
	storageStreamLogs
	messageBodies
	connServer
	streamprotoServer
	mqttServer
	streamprotoConn
	streamprotoSACCoordinator
	streamprotoSACOutboxes
	streamprotoSACOutbox
	connConsumers
	connLive
	connIOCounts
	statsMeter
	statsHistory
	connAlarm
	pluginHost
	pluginInstances
	clusterNode
	clusterTransport
	clusterCallWrites
	clusterCalls
	clusterServeWrites
	clusterGroups
	quorumSettle
	brokerForwarders
	brokerForwarder
	vhostForwarding
	remoteConsuming
	replyToTokens
	storageCallbacks
	shovelManager
	shovelWorker
	federationManager
	federationLink
	numRanks
)

// rank is what the checker knows of a lock: its name in LOCKS.md, and
// whether one goroutine may hold two locks of it at once.
type rank struct {
	name  string
	nests bool
}

var ranks = [numRanks]rank{
	brokerJoin:                {name: "broker.Broker.joinMu"},
	brokerApply:               {name: "broker.Broker.applyMu"},
	brokerPlugins:             {name: "broker.pluginManager.mu"},
	brokerVHosts:              {name: "broker.Broker.mu"},
	vhostDef:                  {name: "vhost.VHost.defMu"},
	vhostExchange:             {name: "vhost.Exchange.mu"},
	vhostExchangeVia:          {name: "vhost.Exchange.viaMu"},
	exchangeTopicCache:        {name: "exchange.topicRouter.mu"},
	pluginRef:                 {name: "wasmhost.pluginRef.mu"},
	pluginMutations:           {name: "wasmhost.Plugin.mutMu"},
	pluginState:               {name: "wasmhost.Plugin.stateMu", nests: true}, // an upgrade's old version's, then the new one's
	pluginPool:                {name: "wasmhost.pool.mu"},
	pluginFailures:            {name: "wasmhost.Plugin.failMu"},
	pluginLog:                 {name: "wasmhost.Plugin.logMu"},
	pluginVia:                 {name: "wasmhost.Plugin.viaMu"},
	pluginMemory:              {name: "wasmhost.mmapMemory.mu"},
	vhostMaps:                 {name: "vhost.VHost.mu"},
	exchangeRegistry:          {name: "exchange.Registry.mu"},
	authStore:                 {name: "auth.Store.mu"},
	queueQueue:                {name: "queue.Queue.mu", nests: true},
	quorumQueue:               {name: "quorum.Queue.mu"},
	streamprotoSAC:            {name: "streamproto.sacAgent.mu"},
	streamStream:              {name: "stream.Stream.mu"},
	streamprotoSubscription:   {name: "streamproto.subscription.mu"},
	streamprotoOutbound:       {name: "streamproto.outbound.mu"},
	remoteSource:              {name: "remote.Source.mu"},
	connChannel:               {name: "conn.channel.mu"},
	mqttDeliver:               {name: "mqtt.Conn.deliverMu"},
	connConfirms:              {name: "conn.confirms.mu"},
	mqttConfirms:              {name: "mqtt.confirms.mu"},
	connOutbound:              {name: "conn.outbound.mu"},
	mqttOutbound:              {name: "mqtt.outbound.mu"},
	mqttRetained:              {name: "mqtt.retainer.mu"},
	remoteConsumer:            {name: "remote.consumer.mu"},
	clusterConf:               {name: "cluster.Node.confMu"},
	storageRaftLogs:           {name: "storage.Store.raftLogs.mu"},
	storageRaftLogWriters:     {name: "storage.RaftLog.wmu"},
	storageRaftLog:            {name: "storage.RaftLog.mu"},
	holdQueue:                 {name: "hold.Queue.mu"},
	storageCommitter:          {name: "storage.committer.mu"},
	storageIDs:                {name: "storage.Store.ids.mu"},
	storageBodyLog:            {name: "storage.bodyLog.mu"},
	storageStreamLogs:         {name: "storage.streamLogs.mu"},
	storageClose:              {name: "storage.Store.closeMu"},
	messageBodies:             {name: "message.Bodies.mu"},
	connServer:                {name: "conn.Server.mu"},
	streamprotoServer:         {name: "streamproto.Server.mu"},
	mqttServer:                {name: "mqtt.Server.mu"},
	streamprotoConn:           {name: "streamproto.Conn.mu"},
	streamprotoSACCoordinator: {name: "streamproto.sacCoordinator.mu"},
	streamprotoSACOutboxes:    {name: "streamproto.Server.outboxMu"},
	streamprotoSACOutbox:      {name: "streamproto.sacOutbox.mu"},
	connConsumers:             {name: "conn.Conn.consumersMu"},
	connLive:                  {name: "conn.Conn.liveMu"},
	connIOCounts:              {name: "conn.ioCounts.mu"},
	statsMeter:                {name: "stats.Meter.mu"},
	statsHistory:              {name: "stats.History.mu"},
	connAlarm:                 {name: "conn.Alarm.mu"},
	pluginHost:                {name: "wasmhost.Host.mu"},
	pluginInstances:           {name: "wasmhost.Host.instMu"},
	clusterNode:               {name: "cluster.Node.mu"},
	clusterTransport:          {name: "cluster.Transport.mu"},
	clusterCallWrites:         {name: "cluster.callLink.wmu"},
	clusterCalls:              {name: "cluster.callLink.mu"},
	clusterServeWrites:        {name: "cluster.serveCall.wmu"},
	clusterGroups:             {name: "cluster.Groups.mu"},
	quorumSettle:              {name: "quorum.Queue.setMu"},
	brokerForwarders:          {name: "broker.Broker.forwardMu"},
	brokerForwarder:           {name: "broker.forwarder.mu"},
	vhostForwarding:           {name: "vhost.Forwarding.mu"},
	remoteConsuming:           {name: "remote.Consuming.mu"},
	replyToTokens:             {name: "replyto.Tokens.mu"},
	storageCallbacks:          {name: "storage.committer.cb.mu"},
	shovelManager:             {name: "shovel.Manager.mu"},
	shovelWorker:              {name: "shovel.worker.mu"},
	federationManager:         {name: "federation.Manager.mu"},
	federationLink:            {name: "federation.link.mu"},
}

// Ranked is a lock's rank as a type: the type argument of Mutex and
// RWMutex. Its types are the ones below, one per lock.
type Ranked interface{ rankID() rankID }

// The ranks, one type per lock of LOCKS.md, named for the lock.
type (
	BrokerJoin                struct{}
	BrokerApply               struct{}
	BrokerPlugins             struct{}
	BrokerVHosts              struct{}
	VHostDef                  struct{}
	VHostExchange             struct{}
	VHostExchangeVia          struct{}
	ExchangeTopicCache        struct{}
	PluginRef                 struct{}
	PluginMutations           struct{}
	PluginState               struct{}
	PluginPool                struct{}
	PluginFailures            struct{}
	PluginLog                 struct{}
	PluginVia                 struct{}
	PluginMemory              struct{}
	VHostMaps                 struct{}
	ExchangeRegistry          struct{}
	AuthStore                 struct{}
	QueueQueue                struct{}
	QuorumQueue               struct{}
	StreamprotoSAC            struct{}
	StreamStream              struct{}
	StreamprotoSubscription   struct{}
	StreamprotoOutbound       struct{}
	StreamprotoServer         struct{}
	StreamprotoConn           struct{}
	StreamprotoSACCoordinator struct{}
	StreamprotoSACOutboxes    struct{}
	StreamprotoSACOutbox      struct{}
	RemoteSource              struct{}
	ConnChannel               struct{}
	ConnConfirms              struct{}
	ConnOutbound              struct{}
	RemoteConsumer            struct{}
	ClusterConf               struct{}
	StorageRaftLogs           struct{}
	StorageRaftLogWriters     struct{}
	StorageRaftLog            struct{}
	HoldQueue                 struct{}
	StorageCommitter          struct{}
	StorageIDs                struct{}
	StorageBodyLog            struct{}
	StorageStreamLogs         struct{}
	StorageClose              struct{}
	MessageBodies             struct{}
	ShovelManager             struct{}
	ShovelWorker              struct{}
	FederationManager         struct{}
	FederationLink            struct{}
	MQTTDeliver               struct{}
	MQTTConfirms              struct{}
	MQTTOutbound              struct{}
	MQTTRetained              struct{}
	MQTTServer                struct{}
	ConnServer                struct{}
	ConnConsumers             struct{}
	ConnLive                  struct{}
	ConnIOCounts              struct{}
	StatsMeter                struct{}
	StatsHistory              struct{}
	ConnAlarm                 struct{}
	PluginHost                struct{}
	PluginInstances           struct{}
	ClusterNode               struct{}
	ClusterTransport          struct{}
	ClusterCallWrites         struct{}
	ClusterCalls              struct{}
	ClusterServeWrites        struct{}
	ClusterGroups             struct{}
	QuorumSettle              struct{}
	BrokerForwarders          struct{}
	BrokerForwarder           struct{}
	VHostForwarding           struct{}
	RemoteConsuming           struct{}
	ReplyToTokens             struct{}
	StorageCallbacks          struct{}
)

func (BrokerJoin) rankID() rankID                { return brokerJoin }
func (BrokerApply) rankID() rankID               { return brokerApply }
func (BrokerPlugins) rankID() rankID             { return brokerPlugins }
func (BrokerVHosts) rankID() rankID              { return brokerVHosts }
func (VHostDef) rankID() rankID                  { return vhostDef }
func (VHostExchange) rankID() rankID             { return vhostExchange }
func (VHostExchangeVia) rankID() rankID          { return vhostExchangeVia }
func (ExchangeTopicCache) rankID() rankID        { return exchangeTopicCache }
func (PluginRef) rankID() rankID                 { return pluginRef }
func (PluginMutations) rankID() rankID           { return pluginMutations }
func (PluginState) rankID() rankID               { return pluginState }
func (PluginPool) rankID() rankID                { return pluginPool }
func (PluginFailures) rankID() rankID            { return pluginFailures }
func (PluginLog) rankID() rankID                 { return pluginLog }
func (PluginVia) rankID() rankID                 { return pluginVia }
func (PluginMemory) rankID() rankID              { return pluginMemory }
func (VHostMaps) rankID() rankID                 { return vhostMaps }
func (ExchangeRegistry) rankID() rankID          { return exchangeRegistry }
func (AuthStore) rankID() rankID                 { return authStore }
func (QueueQueue) rankID() rankID                { return queueQueue }
func (QuorumQueue) rankID() rankID               { return quorumQueue }
func (StreamprotoSAC) rankID() rankID            { return streamprotoSAC }
func (StreamStream) rankID() rankID              { return streamStream }
func (StreamprotoSubscription) rankID() rankID   { return streamprotoSubscription }
func (StreamprotoOutbound) rankID() rankID       { return streamprotoOutbound }
func (StreamprotoServer) rankID() rankID         { return streamprotoServer }
func (StreamprotoConn) rankID() rankID           { return streamprotoConn }
func (StreamprotoSACCoordinator) rankID() rankID { return streamprotoSACCoordinator }
func (StreamprotoSACOutboxes) rankID() rankID    { return streamprotoSACOutboxes }
func (StreamprotoSACOutbox) rankID() rankID      { return streamprotoSACOutbox }
func (RemoteSource) rankID() rankID              { return remoteSource }
func (ConnChannel) rankID() rankID               { return connChannel }
func (ConnConfirms) rankID() rankID              { return connConfirms }
func (ConnOutbound) rankID() rankID              { return connOutbound }
func (RemoteConsumer) rankID() rankID            { return remoteConsumer }
func (ClusterConf) rankID() rankID               { return clusterConf }
func (StorageRaftLogs) rankID() rankID           { return storageRaftLogs }
func (StorageRaftLogWriters) rankID() rankID     { return storageRaftLogWriters }
func (StorageRaftLog) rankID() rankID            { return storageRaftLog }
func (HoldQueue) rankID() rankID                 { return holdQueue }
func (StorageCommitter) rankID() rankID          { return storageCommitter }
func (StorageIDs) rankID() rankID                { return storageIDs }
func (StorageBodyLog) rankID() rankID            { return storageBodyLog }
func (StorageStreamLogs) rankID() rankID         { return storageStreamLogs }
func (StorageClose) rankID() rankID              { return storageClose }
func (MessageBodies) rankID() rankID             { return messageBodies }
func (ConnServer) rankID() rankID                { return connServer }
func (ConnConsumers) rankID() rankID             { return connConsumers }
func (ConnLive) rankID() rankID                  { return connLive }
func (ConnIOCounts) rankID() rankID              { return connIOCounts }
func (StatsMeter) rankID() rankID                { return statsMeter }
func (StatsHistory) rankID() rankID              { return statsHistory }
func (ConnAlarm) rankID() rankID                 { return connAlarm }
func (PluginHost) rankID() rankID                { return pluginHost }
func (PluginInstances) rankID() rankID           { return pluginInstances }
func (ClusterNode) rankID() rankID               { return clusterNode }
func (ClusterTransport) rankID() rankID          { return clusterTransport }
func (ClusterCallWrites) rankID() rankID         { return clusterCallWrites }
func (ClusterCalls) rankID() rankID              { return clusterCalls }
func (ClusterServeWrites) rankID() rankID        { return clusterServeWrites }
func (ClusterGroups) rankID() rankID             { return clusterGroups }
func (QuorumSettle) rankID() rankID              { return quorumSettle }
func (BrokerForwarders) rankID() rankID          { return brokerForwarders }
func (BrokerForwarder) rankID() rankID           { return brokerForwarder }
func (VHostForwarding) rankID() rankID           { return vhostForwarding }
func (RemoteConsuming) rankID() rankID           { return remoteConsuming }
func (ReplyToTokens) rankID() rankID             { return replyToTokens }
func (StorageCallbacks) rankID() rankID          { return storageCallbacks }
func (ShovelManager) rankID() rankID             { return shovelManager }
func (ShovelWorker) rankID() rankID              { return shovelWorker }
func (FederationManager) rankID() rankID         { return federationManager }
func (FederationLink) rankID() rankID            { return federationLink }
func (MQTTDeliver) rankID() rankID               { return mqttDeliver }
func (MQTTConfirms) rankID() rankID              { return mqttConfirms }
func (MQTTRetained) rankID() rankID              { return mqttRetained }
func (MQTTOutbound) rankID() rankID              { return mqttOutbound }
func (MQTTServer) rankID() rankID                { return mqttServer }
