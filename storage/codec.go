package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// Message is a message as stored: inline in a queue entry, or once under its
// own key when several queues share it.
type Message struct {
	Exchange   string
	RoutingKey string
	Flags      uint16 // the content header's property flags
	Props      []byte // the encoded properties that follow the flags
	Body       []byte
	// Keep, when set, holds Body while the store still has to write it
	// (a logged body, written by the committer after PutEntry returns).
	Keep BodyHolder
}

// Entry is one message's place in one queue: the key is (queue id, priority,
// sequence number), the value is this.
type Entry struct {
	Persistent bool   // false: a transient message paged out of memory; Recover deletes it
	Delivered  bool   // delivered at least once (redelivered after a restart)
	Deliveries uint32 // delivery count (x-delivery-count of quorum-style queues)
	ExpiresAt  int64  // unix ms, 0 = never
	// MsgID, when non-zero, says the message is stored once under MsgID and
	// shared by several queues. Msg may then be nil on write; if set, only its
	// body length is recorded (so QueueLevels counts bytes without reading
	// the message). ScanQueue always fills Msg.
	MsgID uint64
	Msg   *Message // the message itself when MsgID == 0 (inline: the common single-queue case)
	// Spill, when set, is where the body of a transient inline entry is
	// kept instead (Spill); Msg.Body is then not stored, and ScanQueue
	// leaves it nil for the caller to read from the queue's Spill.
	Spill SpillRef
	// Logged, on an entry read back, is where the body log keeps its body
	// (bodylog.go); PutEntry logs the body of a persistent inline entry
	// of Options.BodyLogMin bytes or more itself, and fills it in.
	Logged BodyRef
	// Lent says Msg.Body is a buffer the caller's BodyLender returned
	// (ScanQueueInto), which the caller now owns.
	Lent bool
}

// A BodyLender lends ScanQueueInto the buffers it reads bodies into: a
// buffer of length n, or ok false for ScanQueue's own allocation. A
// caller with pooled buffers keeps large bodies out of the GC's way.
type BodyLender func(n int) (buf []byte, ok bool)

// Entry value flags (byte 0 of an entry value).
const (
	entryPersistent = 1 << 0
	entryDelivered  = 1 << 1
	entryShared     = 1 << 2 // msgID and body length follow instead of the message
	entryExpires    = 1 << 3 // ExpiresAt follows
	entrySpilled    = 1 << 4 // a spill reference follows; the message has no body
	entryLogged     = 1 << 5 // a body log reference follows; the message has no body
	entryKnownFlags = entryPersistent | entryDelivered | entryShared | entryExpires | entrySpilled | entryLogged
)

var errBadValue = errors.New("malformed value")

// UvarintLen is the length of x's uvarint encoding (binary.PutUvarint), by
// which the store's encodings, and the stream entries that carry them,
// are sized before they are written.
func UvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// messageLen is the encoded length of m.
func messageLen(m *Message) int {
	return UvarintLen(uint64(len(m.Exchange))) + len(m.Exchange) +
		UvarintLen(uint64(len(m.RoutingKey))) + len(m.RoutingKey) +
		2 + UvarintLen(uint64(len(m.Props))) + len(m.Props) + len(m.Body)
}

// putMessage encodes m into b, which is exactly messageLen(m) long:
//
//	uvarint len | exchange | uvarint len | routing key | flags (2, BE) | uvarint len | props | body
func putMessage(b []byte, m *Message) {
	n := binary.PutUvarint(b, uint64(len(m.Exchange)))
	n += copy(b[n:], m.Exchange)
	n += binary.PutUvarint(b[n:], uint64(len(m.RoutingKey)))
	n += copy(b[n:], m.RoutingKey)
	binary.BigEndian.PutUint16(b[n:], m.Flags)
	n += 2
	n += binary.PutUvarint(b[n:], uint64(len(m.Props)))
	n += copy(b[n:], m.Props)
	copy(b[n:], m.Body)
}

// loggedMessageLen is the encoded length of shared message m whose body is
// at r in the body log.
func loggedMessageLen(m *Message, r BodyRef) int {
	return UvarintLen(uint64(r.Seg)) + UvarintLen(uint64(r.Off)) + UvarintLen(uint64(r.Len)) + messageLen(m) - len(m.Body)
}

// putLoggedMessage encodes m, whose body is at r, into b, which is exactly
// loggedMessageLen long:
//
//	uvarint segment | uvarint offset | uvarint length | message without its body
func putLoggedMessage(b []byte, m *Message, r BodyRef) {
	n := binary.PutUvarint(b, uint64(r.Seg))
	n += binary.PutUvarint(b[n:], uint64(r.Off))
	n += binary.PutUvarint(b[n:], uint64(r.Len))
	bodiless := *m
	bodiless.Body = nil
	putMessage(b[n:], &bodiless)
}

// decodeLoggedMessage splits a logged message value into its body's place
// and the message without its body.
func decodeLoggedMessage(v []byte) (BodyRef, []byte, error) {
	r, rest, err := decodeSpillRef(v)
	return BodyRef(r), rest, err
}

// readLen reads a uvarint length and the bytes it counts from the front of b.
func readLen(b []byte) ([]byte, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, errBadValue
	}
	end := n + int(l)
	return b[n:end:end], b[end:], nil
}

// decodeMessage decodes b into m. m's strings and slices alias b, so b must
// be memory the caller owns and never modifies (see ScanQueue).
func decodeMessage(b []byte, m *Message) error {
	ex, b, err := readLen(b)
	if err != nil {
		return err
	}
	rk, b, err := readLen(b)
	if err != nil {
		return err
	}
	if len(b) < 2 {
		return errBadValue
	}
	m.Flags = binary.BigEndian.Uint16(b)
	props, body, err := readLen(b[2:])
	if err != nil {
		return err
	}
	m.Exchange = aliasString(ex)
	m.RoutingKey = aliasString(rk)
	m.Props = props
	m.Body = body[:len(body):len(body)]
	return nil
}

// aliasString returns b as a string without copying. The caller guarantees
// nothing ever writes to b again: it is a private copy no exposed slice can
// reach (the slices handed out are capped at their own length).
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// entryHeaderLen is the encoded length of e's header (all but the message).
func entryHeaderLen(e *Entry) int {
	n := 1 + UvarintLen(uint64(e.Deliveries))
	if e.ExpiresAt != 0 {
		n += 8
	}
	if e.MsgID != 0 {
		n += 8 + UvarintLen(uint64(sharedBodyLen(e)))
	} else if r := e.Spill; r.Spilled() {
		n += UvarintLen(uint64(r.Seg)) + UvarintLen(uint64(r.Off)) + UvarintLen(uint64(r.Len))
	} else if r := e.Logged; r.Logged() {
		n += UvarintLen(uint64(r.Seg)) + UvarintLen(uint64(r.Off)) + UvarintLen(uint64(r.Len))
	}
	return n
}

// bodyElsewhere reports whether an inline entry's body is kept outside its
// value (spilled or logged).
func (e *Entry) bodyElsewhere() bool {
	return e.MsgID == 0 && (e.Spill.Spilled() || e.Logged.Logged())
}

func sharedBodyLen(e *Entry) int {
	if e.Msg == nil {
		return 0
	}
	return len(e.Msg.Body)
}

// entryLen is the encoded length of e.
func entryLen(e *Entry) int {
	n := entryHeaderLen(e)
	if e.MsgID == 0 {
		n += messageLen(e.Msg)
		if e.bodyElsewhere() {
			n -= len(e.Msg.Body)
		}
	}
	return n
}

// putEntry encodes e into b, which is exactly entryLen(e) long:
//
//	flags (1) | uvarint deliveries | [expires-at (8, BE)] |
//	    shared: msgID (8, BE) | uvarint body length
//	    inline: message
//	    spilled: uvarint segment | uvarint offset | uvarint length | message without its body
//	    logged: uvarint segment | uvarint offset | uvarint length | message without its body
func putEntry(b []byte, e *Entry) {
	var f byte
	if e.Persistent {
		f |= entryPersistent
	}
	if e.Delivered {
		f |= entryDelivered
	}
	if e.MsgID != 0 {
		f |= entryShared
	}
	if e.ExpiresAt != 0 {
		f |= entryExpires
	}
	spilled := e.MsgID == 0 && e.Spill.Spilled()
	logged := e.MsgID == 0 && !spilled && e.Logged.Logged()
	if spilled {
		f |= entrySpilled
	}
	if logged {
		f |= entryLogged
	}
	b[0] = f
	n := 1 + binary.PutUvarint(b[1:], uint64(e.Deliveries))
	if e.ExpiresAt != 0 {
		binary.BigEndian.PutUint64(b[n:], uint64(e.ExpiresAt))
		n += 8
	}
	if e.MsgID != 0 {
		binary.BigEndian.PutUint64(b[n:], e.MsgID)
		n += 8
		binary.PutUvarint(b[n:], uint64(sharedBodyLen(e)))
		return
	}
	if spilled || logged {
		r := e.Spill
		if logged {
			r = SpillRef(e.Logged)
		}
		n += binary.PutUvarint(b[n:], uint64(r.Seg))
		n += binary.PutUvarint(b[n:], uint64(r.Off))
		n += binary.PutUvarint(b[n:], uint64(r.Len))
		m := *e.Msg
		m.Body = nil
		putMessage(b[n:], &m)
		return
	}
	putMessage(b[n:], e.Msg)
}

// entryHeader is an entry value decoded up to its message.
type entryHeader struct {
	flags      byte
	deliveries uint32
	expiresAt  int64
	msgID      uint64
	bodyLen    int      // shared entries: the recorded body length
	spill      SpillRef // spilled entries: where the body is
	logged     BodyRef  // logged entries: where the body is
	msg        []byte   // inline entries: the encoded message
}

func decodeEntryHeader(b []byte) (entryHeader, error) {
	var h entryHeader
	if len(b) < 2 || b[0]&^entryKnownFlags != 0 {
		return h, errBadValue
	}
	h.flags = b[0]
	d, n := binary.Uvarint(b[1:])
	if n <= 0 || d > math.MaxUint32 {
		return h, errBadValue
	}
	h.deliveries = uint32(d)
	b = b[1+n:]
	if h.flags&entryExpires != 0 {
		if len(b) < 8 {
			return h, errBadValue
		}
		h.expiresAt = int64(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	if h.flags&entryShared == 0 {
		switch h.flags & (entrySpilled | entryLogged) {
		case entrySpilled | entryLogged:
			return h, errBadValue
		case entrySpilled:
			var err error
			if h.spill, b, err = decodeSpillRef(b); err != nil {
				return h, err
			}
		case entryLogged:
			r, rest, err := decodeSpillRef(b)
			if err != nil {
				return h, err
			}
			h.logged, b = BodyRef(r), rest
		}
		h.msg = b
		return h, nil
	}
	if h.flags&(entrySpilled|entryLogged) != 0 {
		return h, errBadValue
	}
	if len(b) < 8 {
		return h, errBadValue
	}
	h.msgID = binary.BigEndian.Uint64(b)
	l, n := binary.Uvarint(b[8:])
	if n <= 0 || n != len(b)-8 || l > math.MaxInt32 {
		return h, errBadValue
	}
	h.bodyLen = int(l)
	return h, nil
}

// decodeSpillRef reads a spill reference from the front of b.
func decodeSpillRef(b []byte) (SpillRef, []byte, error) {
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return SpillRef{}, nil, errBadValue
		}
		v[i], b = x, b[n:]
	}
	if v[0] > math.MaxUint32 || v[1] > math.MaxInt64 || v[2] == 0 || v[2] > math.MaxInt32 {
		return SpillRef{}, nil, errBadValue
	}
	return SpillRef{Seg: uint32(v[0]), Off: int64(v[1]), Len: int(v[2])}, b, nil
}

// inlineBodyLen returns the body length of an inline entry's message
// without decoding the rest (a spilled body's recorded length).
func (h *entryHeader) inlineBodyLen() (int, error) {
	if h.spill.Spilled() {
		return h.spill.Len, nil
	}
	if h.logged.Logged() {
		return h.logged.Len, nil
	}
	_, b, err := readLen(h.msg)
	if err != nil {
		return 0, err
	}
	if _, b, err = readLen(b); err != nil {
		return 0, err
	}
	if len(b) < 2 {
		return 0, errBadValue
	}
	_, body, err := readLen(b[2:])
	return len(body), err
}

func (h *entryHeader) persistent() bool { return h.flags&entryPersistent != 0 }
func (h *entryHeader) shared() bool     { return h.flags&entryShared != 0 }

// scanned is what ScanQueue hands to its callback: one allocation holds the
// entry and its message.
type scanned struct {
	e Entry
	m Message
}

// decodeEntry decodes an entry value into a fresh Entry that owns its
// memory. For a shared entry, msg is the message's value (nil: Msg stays
// nil). With lend, the body goes into a buffer lend returns, if it does.
func decodeEntry(v, msg []byte, lend BodyLender) (*Entry, error) {
	h, err := decodeEntryHeader(v)
	if err != nil {
		return nil, err
	}
	sc := &scanned{e: Entry{
		Persistent: h.persistent(),
		Delivered:  h.flags&entryDelivered != 0,
		Deliveries: h.deliveries,
		ExpiresAt:  h.expiresAt,
		MsgID:      h.msgID,
		Spill:      h.spill,
		Logged:     h.logged,
	}}
	enc := h.msg
	if h.shared() {
		enc = msg
	}
	if enc != nil {
		lent, err := decodeLent(enc, &sc.m, lend)
		if err != nil {
			return nil, err
		}
		if !lent {
			if err := decodeMessage(append([]byte(nil), enc...), &sc.m); err != nil {
				return nil, err
			}
		}
		sc.e.Msg = &sc.m
		sc.e.Lent = lent
	}
	return &sc.e, nil
}

// decodeLent decodes enc into m with its body in a buffer from lend and
// the rest in a small copy of its own; lent is false (and m untouched)
// when there is no lend or it lends nothing.
func decodeLent(enc []byte, m *Message, lend BodyLender) (lent bool, err error) {
	if lend == nil {
		return false, nil
	}
	var view Message
	if err := decodeMessage(enc, &view); err != nil {
		return false, err
	}
	buf, ok := lend(len(view.Body))
	if !ok || len(buf) != len(view.Body) {
		return false, nil
	}
	copy(buf, view.Body)
	if err := decodeMessage(append([]byte(nil), enc[:len(enc)-len(view.Body)]...), m); err != nil {
		return false, err
	}
	m.Body = buf
	return true, nil
}
