// Package chash is the x-consistent-hash exchange type: each message goes
// to exactly one binding, chosen by hashing a value of the message, and a
// binding's share of the hash space is proportional to its weight. The
// plugin's main package registers it; it is a package of its own so its
// logic runs natively in tests.
//
// An exchange places messages one of two ways, chosen at declare by the
// hash-algorithm argument: "rendezvous", Warren's own and the default,
// described here, or "rabbitmq", RabbitMQ's placement reproduced exactly
// (rabbitmq.go).
//
// # What is hashed
//
// The routing key, unless the exchange was declared with `hash-header`
// (the value of that header) or `hash-property` (message_id,
// correlation_id or timestamp; not both). A message without the header or
// property hashes as the empty value, so all such messages go to one
// destination, as in RabbitMQ, where they all hash as `undefined`. Header
// values hash by their text: strings and byte arrays by their bytes,
// integers of any width and timestamps by their decimal digits (the
// header 42 and the header "42" go to the same place), booleans as "true"
// or "false", floats and decimals by their shortest decimal form, void as
// empty, tables and arrays by their AMQP encoding. (The rabbitmq
// placement hashes typed values instead, as RabbitMQ does.)
//
// # The algorithm: rendezvous hashing over 65,536 slots
//
// The value is hashed once (64-bit FNV-1a, then the MurmurHash3
// finalizer) and its top 16 bits pick one of 65,536 slots. Each slot
// belongs to one binding, chosen by weighted rendezvous hashing between
// the slot and the active bindings: a binding's key is its weight W, it
// has a seed (the same hash of its destination, kind and name), and the
// slot's number, hashed, is mixed with each seed into u, uniform in
// (0, 1); the binding with the least -ln(u)/W wins the slot, which
// happens with probability W / (sum of the weights). Ties go to the
// greater draw, then the lesser seed, so the winner never depends on the
// order of the bindings. Between equal weights the comparison is on the
// draws themselves, in integers, which orders them the same way; between
// different weights bounds on the logarithm settle most comparisons
// without computing it (slots.go).
//
// Properties that follow, and that the tests check:
//   - Distribution: a binding's share of the keys is its share of the
//     slots. Its number of slots is binomial around W/ΣW of 65,536, so
//     a share p lands within about 2·sqrt(p(1-p)/65536) of the weights'
//     ratio (±0.4 points at p = 1/2, ±0.3 at 1/4; 1,000 equal bindings
//     get 0.1% ± 0.025% each), and a binding with a share well under
//     1/65,536 may get no slot at all.
//   - Stability: adding a binding takes slots, so keys, only for itself;
//     removing one moves only the slots it had. Nothing else changes hands.
//   - Determinism: which binding owns a slot depends only on the set of
//     active bindings (destination and weight), not on the order they
//     were added nor on anything that happened before, so every instance
//     of the module, and a broker after a restart, routes alike.
//
// With few bindings Route computes the slot's winner directly (a hash mix
// and a comparison per binding). From 16 active
// bindings the exchange keeps the winners of slots in a table (256 KiB)
// and Route reads one entry, so a message costs the same whatever the
// number of bindings. The table fills lazily: a slot's winner is computed
// (O(bindings)) by the first route that reaches it. A binding change keeps
// the known entries right: an addition compares the new binding with each
// known slot's winner (at most 65,536 comparisons); a removal forgets the
// removed binding's slots. So a replay (a restart, a new instance) costs
// O(bindings), and the first routes after it pay for the slots they reach.
// Read directly or from the table, the winner is the same, so the table is
// only a cache. It is dropped below 8 active bindings.
//
// Version 1 of the plugin ran rendezvous on the hashed value itself, with
// no slots: O(bindings) per message. Version 2 routes keys elsewhere than
// version 1 did, once, on upgrade.
//
// # Duplicates
//
// Only the first binding to a destination (queue or exchange) counts; a
// later binding to the same destination, whatever its weight, is kept but
// inactive, and becomes the active one when the first is removed (the
// state is a function of the current bindings in the order added, which
// is what a restart replays).
package chash

import (
	"math"
	"strconv"
	"strings"

	"github.com/warrenmq/warren/sdk"
)

// Version is the plugin's version. 2: the default placement goes through
// slots (see the package documentation), and hash-algorithm exists.
const Version = "2.0.0"

// TypeName is the exchange type the plugin provides.
const TypeName = "x-consistent-hash"

// The exchange arguments.
const (
	ArgHashHeader    = "hash-header"
	ArgHashProperty  = "hash-property"
	ArgHashAlgorithm = "hash-algorithm"
)

// The values of hash-algorithm.
const (
	AlgorithmRendezvous = "rendezvous"
	AlgorithmRabbitMQ   = "rabbitmq"
)

// MaxWeight is the largest weight a binding key may give.
const MaxWeight = math.MaxUint32

// Type is the x-consistent-hash exchange type.
type Type struct{}

var (
	_ sdk.ExchangeType = Type{}
	_ sdk.Exchange     = (*Exchange)(nil)
	_ sdk.Informer     = (*Exchange)(nil)
)

func (Type) Name() string { return TypeName }

func (Type) ValidateDeclare(d *sdk.Declaration) error { return ValidateArgs(d.Args) }

func (Type) Create(d *sdk.Declaration) (sdk.Exchange, error) {
	src, err := parseArgs(d.Args)
	if err != nil {
		return nil, err
	}
	return &Exchange{src: src, dests: make(map[string]int)}, nil
}

// source is what a message is hashed on, and how it is placed.
type source struct {
	header   string // with hashHeader
	property int    // sdk.Prop* with hashProperty
	kind     uint8
	rabbitmq bool // hash-algorithm: rabbitmq
}

const (
	hashRoutingKey = iota
	hashHeader
	hashProperty
)

// properties maps hash-property's values to the message properties.
var properties = map[string]int{
	"message_id":     sdk.PropMessageID,
	"correlation_id": sdk.PropCorrelationID,
	"timestamp":      sdk.PropTimestamp,
}

// ValidateArgs checks an exchange's declare arguments: hash-header or
// hash-property, not both, and hash-algorithm. Other arguments are ignored
// (they may belong to the broker, or to x-delayed-message routing through
// this type).
func ValidateArgs(args sdk.Table) error {
	_, err := parseArgs(args)
	return err
}

func parseArgs(args sdk.Table) (source, error) {
	src := source{kind: hashRoutingKey}
	hv, hasHeader := args.Get(ArgHashHeader)
	pv, hasProp := args.Get(ArgHashProperty)
	if hasHeader && hasProp {
		return src, sdk.Errorf(sdk.PreconditionFailed, "hash-header and hash-property are mutually exclusive")
	}
	if hasHeader {
		name, ok := hv.AsString()
		if !ok || name == "" {
			return src, sdk.Errorf(sdk.PreconditionFailed, "hash-header must be a string naming a header, not %s", describe(hv))
		}
		src.kind, src.header = hashHeader, strings.Clone(name)
	}
	if hasProp {
		name, _ := pv.AsString()
		p, ok := properties[name]
		if !ok {
			return src, sdk.Errorf(sdk.PreconditionFailed, "Unsupported property: %s (hash-property must be message_id, correlation_id or timestamp)", describe(pv))
		}
		src.kind, src.property = hashProperty, p
	}
	if av, ok := args.Get(ArgHashAlgorithm); ok {
		switch name, _ := av.AsString(); name {
		case AlgorithmRendezvous:
		case AlgorithmRabbitMQ:
			src.rabbitmq = true
		default:
			return src, sdk.Errorf(sdk.PreconditionFailed, "Unsupported hash-algorithm: %s (it must be rendezvous or rabbitmq)", describe(av))
		}
	}
	return src, nil
}

func describe(v sdk.Value) string {
	if s, ok := v.AsString(); ok {
		return "'" + s + "'"
	}
	if v.IsVoid() {
		return "a void value"
	}
	return "a value of type '" + string(v.Kind()) + "'"
}

// ParseWeight reads a binding key as a weight: a decimal integer from 1 to
// MaxWeight, with an optional leading '+' (RabbitMQ reads the key with
// Erlang's list_to_integer, which takes one). Anything else is refused
// with a 406 naming the key.
func ParseWeight(key string) (uint32, error) {
	digits := strings.TrimPrefix(key, "+")
	valid := digits != ""
	for i := 0; i < len(digits) && valid; i++ {
		valid = digits[i] >= '0' && digits[i] <= '9'
	}
	if !valid {
		if len(key) > 1 && key[0] == '-' && strings.Trim(key[1:], "0123456789") == "" {
			return 0, sdk.Errorf(sdk.PreconditionFailed, "binding key '%s' is not a valid weight: it must be greater than 0", key)
		}
		return 0, sdk.Errorf(sdk.PreconditionFailed, "binding key '%s' is not a valid weight: an x-consistent-hash binding key must be a positive integer, e.g. '1'", key)
	}
	w, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || w > MaxWeight {
		return 0, sdk.Errorf(sdk.PreconditionFailed, "binding key '%s' is not a valid weight: at most %d", key, uint64(MaxWeight))
	}
	if w == 0 {
		return 0, sdk.Errorf(sdk.PreconditionFailed, "binding key '%s' is not a valid weight: it must be greater than 0", key)
	}
	return uint32(w), nil
}

// ValidateBinding checks a binding the way the exchange does: its key
// must be a weight.
func ValidateBinding(b *sdk.Binding) error {
	_, err := ParseWeight(b.Key)
	return err
}

// member is one binding, active or not.
type member struct {
	id     sdk.BindingID
	dest   string // destination kind, then name
	weight uint32
	seed   uint64
}

// candidate is an active binding, as Route reads it.
type candidate struct {
	id        sdk.BindingID
	seed      uint64
	weight    uint32
	invWeight float64
}

// Exchange is one x-consistent-hash exchange.
type Exchange struct {
	src     source
	members []member       // every binding, in the order added
	dests   map[string]int // bindings per destination
	active  []candidate    // the first binding to each destination, in the order added
	total   uint64         // the active weights' sum

	// slots[s] is the index in active of slot s's winner (rendezvous, from
	// tableFrom active bindings); nil when Route computes winners itself.
	slots []uint32
	known int // slots whose winner the table holds
	// ends[i] is the bucket after active[i]'s last (rabbitmq).
	ends []uint64
}

func destKey(b *sdk.Binding) string {
	return string(rune('0'+b.Kind)) + b.Destination
}

func (x *Exchange) ValidateBinding(b *sdk.Binding) error { return ValidateBinding(b) }

func (x *Exchange) AddBinding(b *sdk.Binding) error {
	w, err := ParseWeight(b.Key)
	if err != nil {
		return err
	}
	d := destKey(b)
	m := member{id: b.ID, dest: d, weight: w, seed: hashString(d)}
	x.members = append(x.members, m)
	x.dests[d]++
	if x.dests[d] == 1 {
		x.activate(m)
		x.placed(len(x.active) - 1)
	}
	return nil
}

func (x *Exchange) activate(m member) {
	x.active = append(x.active, candidate{id: m.id, seed: m.seed, weight: m.weight, invWeight: 1 / float64(m.weight)})
	x.total += uint64(m.weight)
	if x.src.rabbitmq {
		x.ends = append(x.ends, x.total)
	}
}

// placed brings the placement up to date after active[first:] joined.
func (x *Exchange) placed(first int) {
	if x.src.rabbitmq {
		return
	}
	switch {
	case x.slots == nil && len(x.active) >= tableFrom:
		x.startTable()
	case x.slots != nil:
		for j := first; j < len(x.active); j++ {
			x.addToTable(j)
		}
	}
}

func (x *Exchange) RemoveBindings(ids []sdk.BindingID) error {
	kept := x.members[:0]
	for _, m := range x.members {
		gone := false
		for _, id := range ids {
			if m.id == id {
				gone = true
				break
			}
		}
		if gone {
			if x.dests[m.dest]--; x.dests[m.dest] == 0 {
				delete(x.dests, m.dest)
			}
			continue
		}
		kept = append(kept, m)
	}
	clear(x.members[len(kept):])
	x.members = kept
	// The first remaining binding to each destination is the active one.
	old := make(map[sdk.BindingID]int, len(x.active))
	for i, c := range x.active {
		old[c.id] = i
	}
	x.active, x.total, x.ends = x.active[:0], 0, x.ends[:0]
	seen := make(map[string]bool, len(x.dests))
	for _, m := range x.members {
		if !seen[m.dest] {
			seen[m.dest] = true
			x.activate(m)
		}
	}
	if x.slots != nil {
		if len(x.active) < tableUntil {
			x.slots = nil
		} else {
			x.removeFromTable(old)
		}
	}
	return nil
}

// Route picks one binding for the message.
func (x *Exchange) Route(m *sdk.Message, r *sdk.Result) error {
	switch len(x.active) {
	case 0:
		return nil
	case 1:
		r.Add(x.active[0].id)
		return nil
	}
	if x.src.rabbitmq {
		r.Add(x.active[x.rabbitPick(m)].id)
		return nil
	}
	s := slotOf(x.hashMessage(m))
	if x.slots != nil {
		r.Add(x.active[x.slotWinner(s)].id)
		return nil
	}
	r.Add(x.active[x.winner(s)].id)
	return nil
}

// hashMessage hashes what the exchange routes on.
func (x *Exchange) hashMessage(m *sdk.Message) uint64 {
	switch x.src.kind {
	case hashHeader:
		v, ok := m.Header(x.src.header)
		if !ok {
			return hashString("")
		}
		return hashValue(v)
	case hashProperty:
		v, ok := m.Property(x.src.property)
		if !ok {
			return hashString("")
		}
		return hashValue(v)
	}
	return hashString(m.RoutingKey())
}

// Info reports the exchange's figures for the admin API.
func (x *Exchange) Info() map[string]any {
	on := "routing key"
	switch x.src.kind {
	case hashHeader:
		on = "header " + x.src.header
	case hashProperty:
		for name, p := range properties {
			if p == x.src.property {
				on = "property " + name
			}
		}
	}
	algorithm := AlgorithmRendezvous
	if x.src.rabbitmq {
		algorithm = AlgorithmRabbitMQ
	}
	return map[string]any{
		"bindings":       len(x.members),
		"destinations":   len(x.active),
		"total_weight":   int64(x.total),
		"hash_on":        on,
		"hash_algorithm": algorithm,
	}
}

// Hashing: FNV-1a over the bytes, then the MurmurHash3 finalizer, which
// spreads FNV's weak high bits. Written out rather than taken from
// hash/fnv so nothing allocates and the calls stay few in WebAssembly.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashString(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return mix(h)
}

func hashBytes(b []byte) uint64 {
	h := uint64(fnvOffset)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return mix(h)
}

// mix is MurmurHash3's 64-bit finalizer: a bijection in which every input
// bit affects every output bit.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// hashValue hashes a header or property value by its text (see the
// package documentation).
func hashValue(v sdk.Value) uint64 {
	var buf [32]byte
	switch v.Kind() {
	case 'S', 'x':
		b, _ := v.AsBytes()
		return hashBytes(b)
	case 'b', 'B', 's', 'u', 'I', 'i', 'l', 'T':
		if n, ok := v.AsInt(); ok {
			return hashBytes(strconv.AppendInt(buf[:0], n, 10))
		}
		return hashBytes(strconv.AppendUint(buf[:0], uint64FromRaw(v.Raw()), 10))
	case 't':
		if b, _ := v.AsBool(); b {
			return hashString("true")
		}
		return hashString("false")
	case 'f', 'd', 'D':
		f, _ := v.AsFloat()
		return hashBytes(strconv.AppendFloat(buf[:0], f, 'g', -1, 64))
	case 'V':
		return hashString("")
	}
	// Tables and arrays: their type and encoding.
	h := uint64(fnvOffset)
	h = (h ^ uint64(v.Kind())) * fnvPrime
	for _, c := range v.Raw() {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return mix(h)
}

// uint64FromRaw reads a big-endian timestamp too large for an int64.
func uint64FromRaw(b []byte) uint64 {
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	return u
}
