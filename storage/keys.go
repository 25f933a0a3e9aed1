package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Key prefixes: the first byte of every key names its keyspace. See the
// package doc for the layout of each.
const (
	prefixSystem  byte = 0x01 // 0x01 name            -> system value
	prefixMeta    byte = 0x02 // 0x02 kind components -> protocol field table
	prefixMessage byte = 0x03 // 0x03 msgID           -> message (shared by several queues)
	prefixEntry   byte = 0x04 // 0x04 qid prio seq    -> entry; with a 0x01 suffix, its delivery mark
	prefixRef     byte = 0x05 // 0x05 qid prio seq    -> msgID (entries of shared messages only)
	prefixHeld    byte = 0x06 // 0x06 due seq         -> held record (the delay store)
	prefixRaft    byte = 0x07 // 0x07 group kind ...   -> a Raft group's log entry, hard state or snapshot
	// 0x08 is streams (stream.go), 0x09 the delay store (held.go).
	prefixLoggedMessage byte = 0x0A // 0x0A msgID -> a shared message whose body is in the body log
)

// System keys.
var (
	keyFormatVersion = []byte("\x01format-version") // uint32 big-endian
	keyNextID        = []byte("\x01next-id")        // uint64 big-endian: ids below it may be in use
	keyNodeID        = []byte("\x01node-id")        // uint64 big-endian: the data directory's node id (nodeid.go)
)

// Kind is the kind of a metadata record. Its value is the second byte of the
// record's key, so it must never change once released.
type Kind uint8

// The metadata kinds. KindVHost, KindUser, KindPlugin and KindParameter are
// global (keyed by name); the others live inside a vhost.
const (
	KindVHost      Kind = 1
	KindUser       Kind = 2
	KindPermission Kind = 3 // per vhost, keyed by user name
	KindExchange   Kind = 4
	KindQueue      Kind = 5
	KindBinding    Kind = 6 // per vhost, keyed by sequence number
	KindPolicy     Kind = 7
	KindPlugin     Kind = 8
	KindParameter  Kind = 9 // global parameters, such as cluster_name
	// KindTopicPermission is per vhost, keyed by user name: all of the
	// user's topic permissions in the vhost, one record.
	KindTopicPermission Kind = 10
	// KindOperatorPolicy is per vhost, keyed by name: the operator
	// policies, whose names are apart from the policies'.
	KindOperatorPolicy Kind = 11
	// KindVHostParameter is per vhost, keyed by component + "/" + name:
	// a runtime parameter of a component (shovel), whose names never
	// hold "/".
	KindVHostParameter Kind = 12
	// KindMQTTRetained is per vhost, keyed by topic: the MQTT message
	// retained for it (core/mqtt), this node's own.
	KindMQTTRetained Kind = 13
)

var kindNames = [...]string{
	KindVHost: "vhost", KindUser: "user", KindPermission: "permission", KindExchange: "exchange",
	KindQueue: "queue", KindBinding: "binding", KindPolicy: "policy", KindPlugin: "plugin",
	KindParameter: "parameter", KindTopicPermission: "topic permission", KindOperatorPolicy: "operator policy",
	KindVHostParameter: "vhost parameter", KindMQTTRetained: "mqtt retained message",
}

func (k Kind) String() string {
	if k.valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindVHost && k <= KindMQTTRetained }

// global reports whether records of kind k are keyed by name alone.
func (k Kind) global() bool {
	return k == KindVHost || k == KindUser || k == KindPlugin || k == KindParameter
}

// perVHostKinds are the kinds DeleteVHost removes.
var perVHostKinds = [...]Kind{KindPermission, KindExchange, KindQueue, KindBinding, KindPolicy, KindTopicPermission, KindOperatorPolicy, KindVHostParameter, KindMQTTRetained}

// Name components in metadata keys are escaped so that no name can collide
// with another and key order is the names' byte order: a 0x00 byte becomes
// 0x00 0xFF and the component ends with 0x00 0x01. The escaped form of a name
// is never a prefix of another name's escaped form.
const (
	escByte   = 0x00
	escEscape = 0xFF
	escEnd    = 0x01
)

func appendEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == escByte {
			b = append(b, escByte, escEscape)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, escByte, escEnd)
}

var errBadKey = errors.New("malformed key")

// readEscaped decodes one escaped component from the front of b and returns
// it with the rest of b.
func readEscaped(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != escByte {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errBadKey
		}
		switch b[i+1] {
		case escEscape:
			out = append(out, escByte)
			i++
		case escEnd:
			return string(out), b[i+2:], nil
		default:
			return "", nil, errBadKey
		}
	}
	return "", nil, errBadKey
}

// metaPrefix is 0x02 kind, the prefix of every record of a kind.
func metaPrefix(kind Kind) []byte { return []byte{prefixMeta, byte(kind)} }

// metaVHostPrefix is the prefix of every record of a per-vhost kind in vhost.
func metaVHostPrefix(kind Kind, vhost string) []byte {
	return appendEscaped(metaPrefix(kind), vhost)
}

// metaKey is the key of a metadata record other than a binding.
func metaKey(kind Kind, vhost, name string) ([]byte, error) {
	switch {
	case !kind.valid():
		return nil, fmt.Errorf("storage: unknown metadata kind %d", uint8(kind))
	case kind == KindBinding:
		return nil, errors.New("storage: bindings are keyed by sequence number: use PutBinding and DeleteBinding")
	case kind == KindVHost:
		// The vhost's name may be given as either argument.
		if name == "" {
			name = vhost
		} else if vhost != "" && vhost != name {
			return nil, fmt.Errorf("storage: vhost record named both %q and %q", vhost, name)
		}
		return appendEscaped(metaPrefix(kind), name), nil
	case kind.global():
		if vhost != "" {
			return nil, fmt.Errorf("storage: %s records are not per vhost (got vhost %q)", kind, vhost)
		}
		return appendEscaped(metaPrefix(kind), name), nil
	}
	return appendEscaped(metaVHostPrefix(kind, vhost), name), nil
}

func bindingKey(vhost string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(metaVHostPrefix(KindBinding, vhost), seq)
}

// parseMetaKey splits a metadata key of kind into its vhost, name and seq.
func parseMetaKey(kind Kind, key []byte) (vhost, name string, seq uint64, err error) {
	if len(key) < 2 || key[0] != prefixMeta || Kind(key[1]) != kind {
		return "", "", 0, errBadKey
	}
	rest := key[2:]
	if kind.global() {
		name, rest, err = readEscaped(rest)
		if kind == KindVHost {
			vhost = name
		}
	} else if vhost, rest, err = readEscaped(rest); err == nil {
		if kind == KindBinding {
			if len(rest) != 8 {
				return "", "", 0, errBadKey
			}
			return vhost, "", binary.BigEndian.Uint64(rest), nil
		}
		name, rest, err = readEscaped(rest)
	}
	if err == nil && len(rest) != 0 {
		err = errBadKey
	}
	return vhost, name, 0, err
}

// Fixed-width keys. The backing arrays let hot paths build keys on the stack.

const (
	messageKeyLen = 1 + 8
	entryKeyLen   = 1 + 8 + 1 + 8
	markKeyLen    = entryKeyLen + 1 // an entry's key and markSuffix: it sorts right after the entry
	heldKeyLen    = 1 + 8 + 8
)

// markSuffix ends a delivery mark's key.
const markSuffix = 0x01

// putMarkKey writes the key of the delivery mark of entry (qid, prio, seq).
func putMarkKey(k []byte, qid uint64, prio uint8, seq uint64) {
	putEntryKey(k, prefixEntry, qid, prio, seq)
	k[entryKeyLen] = markSuffix
}

// isMarkKey reports whether k, in the entry keyspace, is a delivery mark.
func isMarkKey(k []byte) bool { return len(k) == markKeyLen && k[entryKeyLen] == markSuffix }

// markOf reports whether k is the delivery mark of the entry at seq of the
// same queue and level as entry key ek.
func markOf(k, ek []byte) bool {
	return isMarkKey(k) && string(k[:entryKeyLen]) == string(ek)
}

func putMessageKey(k []byte, id uint64) {
	k[0] = prefixMessage
	binary.BigEndian.PutUint64(k[1:], id)
}

// putLoggedMessageKey writes the key of shared message id whose body is
// in the body log: the same as its putMessageKey but for the prefix.
func putLoggedMessageKey(k []byte, id uint64) {
	putMessageKey(k, id)
	k[0] = prefixLoggedMessage
}

func messageKey(id uint64) []byte {
	k := make([]byte, messageKeyLen)
	putMessageKey(k, id)
	return k
}

// putEntryKey writes prefix qid prio seq: prefix is prefixEntry or prefixRef.
func putEntryKey(k []byte, prefix byte, qid uint64, prio uint8, seq uint64) {
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], qid)
	k[9] = prio
	binary.BigEndian.PutUint64(k[10:], seq)
}

func entryKey(prefix byte, qid uint64, prio uint8, seq uint64) []byte {
	k := make([]byte, entryKeyLen)
	putEntryKey(k, prefix, qid, prio, seq)
	return k
}

// parseEntryKey returns the qid, prio and seq of an entry, mark or ref
// key.
func parseEntryKey(k []byte) (qid uint64, prio uint8, seq uint64, ok bool) {
	if len(k) != entryKeyLen && !isMarkKey(k) {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), k[9], binary.BigEndian.Uint64(k[10:]), true
}

// queueSpan returns the bounds [start, end) of every key of queue qid in the
// entry or ref keyspace.
func queueSpan(prefix byte, qid uint64) (start, end []byte) {
	start = make([]byte, 9)
	start[0] = prefix
	binary.BigEndian.PutUint64(start[1:], qid)
	return start, prefixEnd(start)
}

// levelSpan returns the bounds of one priority level of queue qid, starting
// at seq from.
func levelSpan(qid uint64, prio uint8, from uint64) (start, end []byte) {
	start = entryKey(prefixEntry, qid, prio, from)
	return start, prefixEnd(start[:10])
}

// heldKey is 0x06 due seq; due is stored with its sign bit flipped so that
// negative times (which should not occur) still sort before positive ones.
func putHeldKey(k []byte, due int64, seq uint64) {
	k[0] = prefixHeld
	binary.BigEndian.PutUint64(k[1:], uint64(due)^(1<<63))
	binary.BigEndian.PutUint64(k[9:], seq)
}

func parseHeldKey(k []byte) (due int64, seq uint64, ok bool) {
	if len(k) != heldKeyLen || k[0] != prefixHeld {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(k[1:]) ^ (1 << 63)), binary.BigEndian.Uint64(k[9:]), true
}

// The keys of a Raft group: 0x07 group(8) then one of these.
const (
	raftEntries   byte = 0x01 // followed by index(8): a log entry
	raftHardState byte = 0x02
	raftSnapshot  byte = 0x03
	raftApplied   byte = 0x04 // uint64: the state machine's applied index

	raftGroupLen    = 1 + 8
	raftEntryKeyLen = raftGroupLen + 1 + 8
)

// raftKey is 0x07 group kind: the hard state or snapshot key of group, or
// the prefix of its entries.
func raftKey(group uint64, kind byte) []byte {
	k := make([]byte, raftGroupLen+1, raftEntryKeyLen)
	k[0] = prefixRaft
	binary.BigEndian.PutUint64(k[1:], group)
	k[raftGroupLen] = kind
	return k
}

func raftEntryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(raftKey(group, raftEntries), index)
}

// raftGroupSpan returns the bounds [start, end) of every key of group.
func raftGroupSpan(group uint64) (start, end []byte) {
	start = raftKey(group, 0)[:raftGroupLen]
	return start, prefixEnd(start)
}

// parseRaftKey returns the group, kind and (for an entry) index of a raft key.
func parseRaftKey(k []byte) (group uint64, kind byte, index uint64, ok bool) {
	if len(k) < raftGroupLen+1 || k[0] != prefixRaft {
		return 0, 0, 0, false
	}
	group, kind = binary.BigEndian.Uint64(k[1:]), k[raftGroupLen]
	switch {
	case kind == raftEntries && len(k) == raftEntryKeyLen:
		return group, kind, binary.BigEndian.Uint64(k[raftGroupLen+1:]), true
	case (kind == raftHardState || kind == raftSnapshot) && len(k) == raftGroupLen+1:
		return group, kind, 0, true
	}
	return 0, 0, 0, false
}

// prefixEnd returns the smallest key greater than every key starting with p
// (nil if there is none: p is all 0xFF). It does not modify p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
