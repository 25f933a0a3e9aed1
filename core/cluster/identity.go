package cluster

import "hash/fnv"

// A node's Raft id is per incarnation, as etcd's member ids are: its
// data directory's node id (storage makes a random one with the store),
// not its name. A node whose data is lost, or that is reset to join a
// cluster, is a new member under its old name; the package doc says how
// the cluster replaces the incarnation it was.

// IdentityStore keeps a data directory's node id (storage.Store).
type IdentityStore interface {
	// NodeID is the stored id; 0 when the data directory predates them.
	NodeID() uint64
	// SetNodeID records the id, durably.
	SetNodeID(id uint64) error
}

// Identity is the Raft id of the node named name on the data directory
// st: the id stored there. A data directory from before ids were stored
// keeps the id its node had, the hash of its name (LegacyID), recorded
// now, so that upgrading a cluster changes no member's id.
func Identity(st IdentityStore, name string) (uint64, error) {
	if id := st.NodeID(); id != 0 {
		return id, nil
	}
	id := LegacyID(name)
	return id, st.SetNodeID(id)
}

// LegacyID is the Raft id nodes had before ids were per incarnation: a
// hash of the name. A node on a data directory from then keeps it
// (Identity), and commands written then name members by it.
func LegacyID(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	if id := h.Sum64(); id != 0 {
		return id
	}
	return 1
}
