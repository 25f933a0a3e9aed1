package topology

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

// Every record a vhost stores and every topology command it proposes is
// one of the types below, encoded (Table) and decoded (Read...) here and
// nowhere else. They are AMQP field tables, so arguments keep their exact
// types, and carry a version (internal/tablerec): a node refuses a record
// or a command of a version it does not know, naming it, rather than
// misread it, and a field of the wrong type is an error naming the field,
// not a zero value.
//
// Version 1 is the format of the releases before versions, which wrote no
// version field: stores and logs they wrote read as version 1. A field
// added to a record later is optional in it, read as absent from what
// came before; a change that an earlier release would misread takes a new
// version.
const recordVersion = 1

// ExchangeRecord is a stored exchange (storage.KindExchange, keyed by its
// name) and an exchange of a topology snapshot (which names it).
type ExchangeRecord struct {
	Name                          string // in a snapshot; the store keys the record by it
	Type                          string
	Durable, AutoDelete, Internal bool
	Args                          protocol.Table
}

// ExchangeRecordOf is def's record; the store keys it by name, so the
// record names none.
func ExchangeRecordOf(def exchange.Definition) ExchangeRecord {
	return ExchangeRecord{Type: def.Type, Durable: def.Durable, AutoDelete: def.AutoDelete, Internal: def.Internal, Args: def.Args}
}

// Definition is the exchange the record describes, in vhost; name is the
// store's key (or "" for the record's own).
func (r ExchangeRecord) Definition(vhost, name string) exchange.Definition {
	if name == "" {
		name = r.Name
	}
	return exchange.Definition{VHost: vhost, Name: name, Type: r.Type, Durable: r.Durable, AutoDelete: r.AutoDelete,
		Internal: r.Internal, Args: r.Args}
}

func (r ExchangeRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion), "type": r.Type, "durable": r.Durable,
		"auto_delete": r.AutoDelete, "internal": r.Internal, "arguments": args(r.Args)}
	putName(t, r.Name)
	return t
}

// ReadExchangeRecord reads what ExchangeRecord.Table wrote. A record
// without "durable" is from before transient exchanges were kept: durable.
func ReadExchangeRecord(t protocol.Table) (ExchangeRecord, error) {
	return tablerec.Read("exchange record", t, recordVersion, readExchange)
}

func readExchange(r *tablerec.Reader) ExchangeRecord {
	return ExchangeRecord{Name: r.StringOr("name", ""), Type: r.String("type"), Durable: r.BoolOr("durable", true),
		AutoDelete: r.BoolOr("auto_delete", false), Internal: r.BoolOr("internal", false), Args: r.Table("arguments")}
}

// QueueRecord is a stored queue (storage.KindQueue, keyed by its name) and
// a queue of a topology snapshot (which names it): a classic queue homed
// here, a queue homed on another node, a quorum queue or a stream.
type QueueRecord struct {
	Name                           string // in a snapshot; the store keys the record by it
	Durable, AutoDelete, Exclusive bool
	Args                           protocol.Table
	// StoreID ("id") is where the store keeps its messages on this node;
	// 0 for a queue homed elsewhere.
	StoreID uint64
	// Home and Incarnation ("cluster_id") are a replicated queue's (see
	// cluster.go); Members are a quorum queue's or a replicated stream's
	// nodes. All are empty on a node of its own.
	Home        string
	Incarnation uint64
	Members     []string
}

// Def is the declaration the record stands for; name is the store's key
// (or "" for the record's own).
func (r QueueRecord) Def(name string) QueueDef {
	if name == "" {
		name = r.Name
	}
	return QueueDef{Name: name, Durable: r.Durable, AutoDelete: r.AutoDelete, Exclusive: r.Exclusive, Args: r.Args,
		Home: r.Home, ID: r.Incarnation, Members: r.Members}
}

func (r QueueRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion), "durable": r.Durable, "auto_delete": r.AutoDelete,
		"arguments": args(r.Args)}
	putName(t, r.Name)
	if r.Exclusive {
		t["exclusive"] = true
	}
	if r.StoreID != 0 {
		t["id"] = int64(r.StoreID)
	}
	if r.Home != "" {
		t["home"] = r.Home
	}
	if r.Incarnation != 0 {
		t["cluster_id"] = int64(r.Incarnation)
	}
	if r.Members != nil {
		t["members"] = tablerec.StringList(r.Members)
	}
	return t
}

// ReadQueueRecord reads what QueueRecord.Table wrote. A record without
// "durable" is from before clusters, which stored durable queues only.
func ReadQueueRecord(t protocol.Table) (QueueRecord, error) {
	r := tablerec.Open("queue record", t, recordVersion)
	rec := QueueRecord{Name: r.StringOr("name", ""), Durable: r.BoolOr("durable", true), AutoDelete: r.BoolOr("auto_delete", false),
		Exclusive: r.BoolOr("exclusive", false), Args: r.Table("arguments"), StoreID: uint64(r.IntOr("id", 0)),
		Home: r.StringOr("home", ""), Incarnation: uint64(r.IntOr("cluster_id", 0)), Members: r.Strings("members")}
	return rec, r.Err()
}

// BindingRecord is a stored binding (storage's bindings, keyed by the
// binding's sequence number), a binding of a topology snapshot, and what a
// bind or an unbind names.
type BindingRecord struct {
	Source      string
	Destination exchange.Destination
	Key         string
	Args        protocol.Table
}

// BindingRecordOf is b's record.
func BindingRecordOf(b *exchange.Binding) BindingRecord {
	return BindingRecord{Source: b.Source, Destination: b.Destination, Key: b.Key, Args: b.Args}
}

func (r BindingRecord) Table() protocol.Table {
	t := protocol.Table{tablerec.VersionKey: int64(recordVersion)}
	r.put(t)
	return t
}

// put writes the binding's fields into t (a record's, or a command's).
func (r BindingRecord) put(t protocol.Table) {
	t["source"], t["destination"], t["destination_type"] = r.Source, r.Destination.Name, r.Destination.Kind.String()
	t["routing_key"], t["arguments"] = r.Key, args(r.Args)
}

// ReadBindingRecord reads what BindingRecord.Table wrote.
func ReadBindingRecord(t protocol.Table) (BindingRecord, error) {
	return tablerec.Read("binding record", t, recordVersion, readBinding)
}

func readBinding(r *tablerec.Reader) BindingRecord {
	rec := BindingRecord{Source: r.String("source"), Key: r.String("routing_key"), Args: r.Table("arguments")}
	rec.Destination.Name = r.String("destination")
	switch kind := r.StringOr("destination_type", "queue"); kind {
	case exchange.ToQueue.String():
		rec.Destination.Kind = exchange.ToQueue
	case exchange.ToExchange.String():
		rec.Destination.Kind = exchange.ToExchange
	default:
		r.Fail("destination_type", `"queue" or "exchange"`, kind)
	}
	return rec
}

// PolicyRecord is a stored policy (storage.KindPolicy, keyed by its name).
type PolicyRecord struct {
	Pattern    string
	ApplyTo    policy.ApplyTo
	Priority   int64
	Definition protocol.Table
}

// PolicyRecordOf is p's record; the store keys it by name.
func PolicyRecordOf(p *policy.Policy) PolicyRecord {
	return PolicyRecord{Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: int64(p.Priority), Definition: p.Definition}
}

func (r PolicyRecord) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "pattern": r.Pattern, "apply-to": string(r.ApplyTo),
		"priority": r.Priority, "definition": args(r.Definition)}
}

// ReadPolicyRecord reads what PolicyRecord.Table wrote.
func ReadPolicyRecord(t protocol.Table) (PolicyRecord, error) {
	r := tablerec.Open("policy record", t, recordVersion)
	rec := PolicyRecord{Pattern: r.String("pattern"), ApplyTo: policy.ApplyTo(r.StringOr("apply-to", "")),
		Priority: r.IntOr("priority", 0), Definition: r.Table("definition")}
	return rec, r.Err()
}

// Policy is the policy the record stands for, named name.
func (r PolicyRecord) Policy(name string) (*policy.Policy, error) {
	return policy.Restore(name, r.Pattern, r.ApplyTo, int(r.Priority), r.Definition)
}

// args is a record's arguments: an empty table for none.
func args(t protocol.Table) protocol.Table {
	if t == nil {
		return protocol.Table{}
	}
	return t
}

func putName(t protocol.Table, name string) {
	if name != "" {
		t["name"] = name
	}
}

// ---- topology commands (core/vhost's cluster.go)

// The ops the commands are carried under.
const (
	OpDeclareExchange = "declare_exchange"
	OpDeleteExchange  = "delete_exchange"
	OpBind            = "bind"
	OpUnbind          = "unbind"
	OpDeclareQueue    = "declare_queue"
	OpDeleteQueue     = "delete_queue"
	OpQuorumMembers   = "quorum_members"
)

// IsCommand reports whether op is a vhost's topology command.
func IsCommand(op string) bool {
	switch op {
	case OpDeclareExchange, OpDeleteExchange, OpBind, OpUnbind, OpDeclareQueue, OpDeleteQueue, OpQuorumMembers:
		return true
	}
	return false
}

// A Command is a topology change the cluster's metadata group carries.
type Command interface{ op() string }

// DeclareExchange declares an exchange (the record names it).
type DeclareExchange struct{ Exchange ExchangeRecord }

// DeleteExchange deletes an exchange, if unused when IfUnused is set.
type DeleteExchange struct {
	Name     string
	IfUnused bool
}

// Bind binds; an exclusive queue bound names its home and incarnation,
// which makes it known to the other nodes (cluster.go).
type Bind struct {
	Binding   BindingRecord
	QueueHome string
	QueueID   uint64
}

// Unbind removes a binding.
type Unbind struct{ Binding BindingRecord }

// DeclareQueue declares a replicated queue: its home and incarnation
// (Def.Home, Def.ID), and for a quorum queue or a replicated stream its
// members and their Raft ids.
type DeclareQueue struct{ Def QueueDef }

// DeleteQueue deletes the incarnation of a queue.
type DeleteQueue struct {
	Name        string
	Incarnation uint64
}

// QuorumMembers records the members of the incarnation of a quorum queue
// or a replicated stream (replicated.go).
type QuorumMembers struct {
	Name        string
	Incarnation uint64
	Members     []string
}

func (DeclareExchange) op() string { return OpDeclareExchange }
func (DeleteExchange) op() string  { return OpDeleteExchange }
func (Bind) op() string            { return OpBind }
func (Unbind) op() string          { return OpUnbind }
func (DeclareQueue) op() string    { return OpDeclareQueue }
func (DeleteQueue) op() string     { return OpDeleteQueue }
func (QuorumMembers) op() string   { return OpQuorumMembers }

// Op is the op c is carried under.
func Op(c Command) string { return c.op() }

// CommandTable encodes c as a command for the vhost named vhost.
func CommandTable(vhost string, c Command) protocol.Table {
	t := protocol.Table{"op": c.op(), "vhost": vhost, tablerec.VersionKey: int64(recordVersion)}
	switch c := c.(type) {
	case DeclareExchange:
		for k, x := range c.Exchange.Table() {
			t[k] = x
		}
	case DeleteExchange:
		t["name"], t["if_unused"] = c.Name, c.IfUnused
	case Bind:
		c.Binding.put(t)
		if c.QueueHome != "" {
			t["queue_home"], t["queue_id"] = c.QueueHome, int64(c.QueueID)
		}
	case Unbind:
		c.Binding.put(t)
	case DeclareQueue:
		d := c.Def
		t["name"], t["durable"], t["auto_delete"], t["exclusive"] = d.Name, d.Durable, d.AutoDelete, d.Exclusive
		t["arguments"], t["home"], t["id"] = args(d.Args), d.Home, int64(d.ID)
		if d.Members != nil {
			t["members"] = tablerec.StringList(d.Members)
		}
		if d.MemberIDs != nil {
			t["member_ids"] = tablerec.UintList(d.MemberIDs)
		}
	case DeleteQueue:
		t["name"], t["id"] = c.Name, int64(c.Incarnation)
	case QuorumMembers:
		t["name"], t["id"], t["members"] = c.Name, int64(c.Incarnation), tablerec.StringList(c.Members)
	}
	return t
}

// ReadCommand reads what CommandTable wrote: the vhost it is for and the
// command. An op this node does not know, or a version, is refused by
// name, as a field of the wrong type is.
func ReadCommand(t protocol.Table) (string, Command, error) {
	op, _ := t["op"].(string)
	r := tablerec.Open(op+" command", t, recordVersion)
	vh := r.String("vhost")
	var c Command
	switch op {
	case OpDeclareExchange:
		x := readExchange(r)
		x.Name = r.String("name")
		c = DeclareExchange{Exchange: x}
	case OpDeleteExchange:
		c = DeleteExchange{Name: r.String("name"), IfUnused: r.BoolOr("if_unused", false)}
	case OpBind:
		c = Bind{Binding: readBinding(r), QueueHome: r.StringOr("queue_home", ""), QueueID: uint64(r.IntOr("queue_id", 0))}
	case OpUnbind:
		c = Unbind{Binding: readBinding(r)}
	case OpDeclareQueue:
		c = DeclareQueue{Def: QueueDef{Name: r.String("name"), Durable: r.Bool("durable"), AutoDelete: r.BoolOr("auto_delete", false),
			Exclusive: r.BoolOr("exclusive", false), Args: r.Table("arguments"), Home: r.StringOr("home", ""),
			ID: uint64(r.IntOr("id", 0)), Members: r.Strings("members"), MemberIDs: r.Uints("member_ids")}}
	case OpDeleteQueue:
		c = DeleteQueue{Name: r.String("name"), Incarnation: uint64(r.IntOr("id", 0))}
	case OpQuorumMembers:
		c = QuorumMembers{Name: r.String("name"), Incarnation: uint64(r.IntOr("id", 0)), Members: r.Strings("members")}
	default:
		return vh, nil, reply.Internal("unknown topology change %q (a node of a later release?)", op)
	}
	if err := r.Err(); err != nil {
		return vh, nil, reply.Internal("%v", err)
	}
	return vh, c, nil
}

// ---- a vhost's share of a snapshot of the metadata group

// Snapshot is a vhost's topology as a snapshot of the metadata group
// carries it: its exchanges (those of clients), the queues the cluster
// shares, with their homes, and its bindings in creation order.
type Snapshot struct {
	Exchanges []ExchangeRecord
	Queues    []QueueRecord
	Bindings  []BindingRecord
}

func (s Snapshot) Table() protocol.Table {
	var exchanges, queues, bindings []any
	for _, r := range s.Exchanges {
		exchanges = append(exchanges, r.Table())
	}
	for _, r := range s.Queues {
		queues = append(queues, r.Table())
	}
	for _, r := range s.Bindings {
		bindings = append(bindings, r.Table())
	}
	return protocol.Table{"exchanges": exchanges, "queues": queues, "bindings": bindings}
}

// ReadSnapshot reads what Snapshot.Table wrote for the vhost named vhost.
// A record it cannot read fails it whole.
func ReadSnapshot(vhost string, t protocol.Table) (Snapshot, error) {
	r := tablerec.Open("topology of vhost "+vhost, t, recordVersion)
	var s Snapshot
	for _, x := range r.Tables("exchanges") {
		rec, err := ReadExchangeRecord(x)
		if err != nil {
			return Snapshot{}, err
		}
		s.Exchanges = append(s.Exchanges, rec)
	}
	for _, q := range r.Tables("queues") {
		rec, err := ReadQueueRecord(q)
		if err != nil {
			return Snapshot{}, err
		}
		s.Queues = append(s.Queues, rec)
	}
	for _, b := range r.Tables("bindings") {
		rec, err := ReadBindingRecord(b)
		if err != nil {
			return Snapshot{}, err
		}
		s.Bindings = append(s.Bindings, rec)
	}
	return s, r.Err()
}
