package broker

// Definitions are RabbitMQ's JSON description of a broker's configuration
// and topology, the document its management API serves at
// /api/definitions and rabbitmqctl's export_definitions writes. Warren
// speaks the format of RabbitMQ 3.10.8 both ways, so a broker's users (with
// their password hashes), vhosts, permissions, policies, exchanges, queues
// and bindings move between the two.
//
// # Export
//
// Warren exports the sections and fields RabbitMQ 3.10.8's management API
// does, with the same names and JSON types (checked against a 3.10.8 node;
// tests/testdata holds its export): users carry password_hash,
// hashing_algorithm, tags as a list and limits; vhosts only a name, as
// 3.10.8's management export has them; queues, exchanges and bindings
// their flags and arguments. rabbit_version and rabbitmq_version say
// "3.10.8", the format's version, so that RabbitMQ reads the file as its
// own; product_name and product_version say Warren. global_parameters
// holds cluster_name once an operator has set it (and it is the one global
// parameter an import applies); topic_permissions each user's topic
// permissions; parameters each vhost's limits (component vhost-limits),
// operator policies and the parameters of the components registered
// (RegisterParameterComponent). Users carry their limits. Left out, as
// RabbitMQ leaves them out: the default exchange, the amq.* exchanges, exclusive queues (they
// cannot outlive their connection) and, unlike RabbitMQ, bindings to
// exclusive queues, which could not be imported without them. Lists are
// sorted (users, vhosts, and per vhost by name; bindings in the order they
// were made, which order-sensitive exchange types rely on), so two
// exports of the same broker are the same text.
//
// # Import
//
// An import validates the whole document before applying any of it. Every
// bad value is reported, naming the entity and the field (an *InvalidError,
// 400 in the admin API); then nothing has changed. Validation checks each
// entity against the broker as it is plus what the document itself
// creates: a permission's user and vhost, a binding's source and
// destination must exist in one or the other; a queue's or exchange's
// arguments are checked as a declare checks them; an existing queue or
// exchange must be equivalent to the document's. RabbitMQ 3.10.8 answers
// 204 to both an inequivalent queue or exchange (keeping the existing one)
// and a binding to a queue that does not exist (making nothing); Warren
// refuses them, naming them, since the topology would not be what the
// file says. It also reads rabbitmqctl export_definitions' form, whose
// vhosts carry metadata and limits (ignored, limits logged) and whose
// queues carry a type (classic, quorum or stream). A new vhost's, user's,
// queue's or exchange's name must pass core/names' check.
//
// Then it is applied in dependency order: vhosts, users, permissions,
// policies, exchanges, queues, bindings, components' parameters (a
// shovel finds its queues), vhost limits. What exists already and is the
// same is left alone (a no-op); a user's password hash and tags are
// replaced, as in RabbitMQ. Applying makes the same calls the admin API
// and clients do, each stored as it is made, so applying can still fail
// after validation passed, when the broker changed in between (a client
// declared an inequivalent queue) or the store failed. Then the import
// stops at that entity and reports it: what came before it stays applied,
// nothing after it is, and importing the same document again once the
// cause is gone completes it, since applied entities are no-ops the second
// time. Imports are serialized with each other, not with clients.
//
// Each binding is a stored record, and a synced write each made 100,000
// bindings take longer than the admin listener's write timeout; they are
// applied in runs of one vhost's with vhost.BindAll, which writes a run's
// records together and waits for the store once (BENCHMARKS.md). An
// import whose caller has gone (its context done) stops while it waits
// for another import or is being validated, with nothing applied; once
// applying has begun it finishes, so it is never left half applied for
// want of a reader.
//
// What Warren accepts from RabbitMQ's files beyond its own export:
// sections and fields it does not know are ignored; a user's tags as a
// comma-separated string or a list; a plain "password" instead of a hash;
// a missing hashing_algorithm meaning MD5 in files of RabbitMQ before 3.6
// and SHA-256 otherwise, as RabbitMQ reads them; operator policies both
// as the parameters (component operator_policy) RabbitMQ 3.10.8 exports
// and Warren exports, and as the operator_policies section earlier
// Warren exports had. Skipped with a log line each, never silently: as
// RabbitMQ does, queues and exchanges named amq.* and the default
// exchange; RabbitMQ's own internal_cluster_id. Refused, by name: a
// parameter of a component not registered (federation-upstream) or one
// its component's check refuses, a hashing algorithm other than
// RabbitMQ's three, a hash of the wrong length for its algorithm, an
// unknown queue type and a policy key Warren does not apply: they would
// import something that cannot work (RabbitMQ 3.10.8 stores an unknown
// algorithm, and its users then cannot log in).
//
// An import scoped to one vhost (POST /api/definitions/{vhost}) reads only
// policies, queues, exchanges, bindings and parameters, puts them all in
// that vhost whatever their own vhost field says, and ignores the other
// sections, as RabbitMQ does.

// DefinitionsFormat is the RabbitMQ version whose definitions format
// Warren reads and writes.
const DefinitionsFormat = "3.10.8"

// Definitions is a whole broker's export, field for field (and in the
// order) RabbitMQ 3.10.8's management API writes it.
type Definitions struct {
	RabbitVersion    string                 `json:"rabbit_version"`
	RabbitMQVersion  string                 `json:"rabbitmq_version"`
	ProductName      string                 `json:"product_name"`
	ProductVersion   string                 `json:"product_version"`
	Users            []UserDefinition       `json:"users"`
	VHosts           []VHostDefinition      `json:"vhosts"`
	Permissions      []PermissionDefinition `json:"permissions"`
	TopicPermissions []TopicPermission      `json:"topic_permissions"`
	Parameters       []ParameterDefinition  `json:"parameters"`
	GlobalParameters []GlobalParameter      `json:"global_parameters"`
	Policies         []PolicyDefinition     `json:"policies"`
	Queues           []QueueDefinition      `json:"queues"`
	Exchanges        []ExchangeDefinition   `json:"exchanges"`
	Bindings         []BindingDefinition    `json:"bindings"`
}

// VHostDefinitions is one vhost's export: RabbitMQ 3.10.8 writes no users,
// vhosts or permissions in it, and no vhost field in its queues, exchanges
// and bindings (policies and parameters keep theirs).
type VHostDefinitions struct {
	RabbitVersion string                `json:"rabbit_version"`
	Parameters    []ParameterDefinition `json:"parameters"`
	Policies      []PolicyDefinition    `json:"policies"`
	Queues        []QueueDefinition     `json:"queues"`
	Exchanges     []ExchangeDefinition  `json:"exchanges"`
	Bindings      []BindingDefinition   `json:"bindings"`
}

// UserDefinition is a user with the stored form of their password.
type UserDefinition struct {
	Name             string         `json:"name"`
	PasswordHash     string         `json:"password_hash"`
	HashingAlgorithm string         `json:"hashing_algorithm"`
	Tags             []string       `json:"tags"`
	Limits           map[string]any `json:"limits"`
}

// VHostDefinition is a vhost, by name only, as 3.10.8 exports it.
type VHostDefinition struct {
	Name string `json:"name"`
}

// PermissionDefinition is a user's rights in a vhost.
type PermissionDefinition struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// TopicPermission is a user's restriction of the routing keys of one
// topic exchange in a vhost (auth's topic.go).
type TopicPermission struct {
	User     string `json:"user"`
	VHost    string `json:"vhost"`
	Exchange string `json:"exchange"`
	Write    string `json:"write"`
	Read     string `json:"read"`
}

// operatorPolicyComponent is the component RabbitMQ 3.10.8 exports an
// operator policy under, a parameter whose value is the policy's pattern,
// definition, priority and apply-to.
const operatorPolicyComponent = "operator_policy"

// ParameterDefinition is a RabbitMQ runtime parameter: of Warren's, a
// vhost's limits (component vhost-limits, named limits), an operator
// policy (operatorPolicyComponent) and a parameter of a registered
// component (VHostParameter); a component not registered
// (federation-upstream) is not Warren's.
type ParameterDefinition struct {
	Value     any    `json:"value"`
	VHost     string `json:"vhost,omitempty"`
	Component string `json:"component"`
	Name      string `json:"name"`
}

// GlobalParameter is a RabbitMQ global runtime parameter: cluster_name,
// and any other an operator set (any JSON value).
type GlobalParameter struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// PolicyDefinition is a policy.
type PolicyDefinition struct {
	VHost      string         `json:"vhost"`
	Name       string         `json:"name"`
	Pattern    string         `json:"pattern"`
	ApplyTo    string         `json:"apply-to"`
	Definition map[string]any `json:"definition"`
	Priority   int            `json:"priority"`
}

// QueueDefinition is a queue; VHost is empty in a vhost's own export.
type QueueDefinition struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost,omitempty"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Arguments  map[string]any `json:"arguments"`
}

// ExchangeDefinition is an exchange; VHost is empty in a vhost's own
// export.
type ExchangeDefinition struct {
	Name       string         `json:"name"`
	VHost      string         `json:"vhost,omitempty"`
	Type       string         `json:"type"`
	Durable    bool           `json:"durable"`
	AutoDelete bool           `json:"auto_delete"`
	Internal   bool           `json:"internal"`
	Arguments  map[string]any `json:"arguments"`
}

// BindingDefinition is an explicit binding; VHost is empty in a vhost's
// own export.
type BindingDefinition struct {
	Source          string         `json:"source"`
	VHost           string         `json:"vhost,omitempty"`
	Destination     string         `json:"destination"`
	DestinationType string         `json:"destination_type"`
	RoutingKey      string         `json:"routing_key"`
	Arguments       map[string]any `json:"arguments"`
}
