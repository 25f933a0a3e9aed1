package streamproto

import (
	"time"

	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	streams "github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/amqp10"
	"github.com/warrenmq/warren/protocol/stream"
)

// maxChunkRecords bounds the records of one chunk Warren builds from
// messages read one by one (one credit's worth). The stream reads a
// stored chunk whole, which holds a write's messages, up to 4,096;
// clients count on a credit bringing a few hundred at most when nothing
// is busy (the Go client's "Manual Credit Strategy" spec drains one
// credit's chunk at 10 ms a message within 3 s). A formed chunk is sent
// as stored, as large as core/stream's formedLimit let it grow.
const maxChunkRecords = 256

// subscription is one Subscribe: a stream.Reader of the stream's log on
// this node. One credit is one chunk.
type subscription struct {
	c         *Conn
	id        uint8
	stream    string
	log       *streams.Stream
	mu        lockorder.Mutex[lockorder.StreamprotoSubscription]
	credit    int
	records   []record        // read in this round, not sent yet
	formed    *streams.Formed // or a chunk taken whole in this round, as stored (ReadFormed)
	formedN   uint64          // the messages of it from the reader's position
	refused   bool            // a Read was refused: the stream waits for a Kick
	cancelled bool
	next      uint64 // the offset after the last one read
	consumed  uint64
	props     map[string]string
	filter    *filter // nil: every chunk is sent

	// A single active consumer's (sac.go): group is nil for any other.
	// active is written under sacAgent.mu and mu both; the others are
	// sacAgent.mu's.
	group        *sacKey
	active       bool
	from         streams.Offset // the offset Subscribe asked for
	reading      bool           // a reader of its stream
	gone         bool           // unsubscribed
	steppingDown bool           // told to step down, not answered
	partition    int            // its stream's index in its super stream, -1 for none
	joined       uint64         // its place in the order the node's members joined
}

// info is the subscription as listings show it. The stream's bounds are
// read after s.mu is let go: the stream's lock comes before it.
func (s *subscription) info() ConsumerInfo {
	s.mu.Lock()
	info := ConsumerInfo{Conn: s.c.name, ID: s.id, Stream: s.stream, Credit: s.credit, Offset: s.next, Consumed: s.consumed, Properties: s.props,
		Active: s.group == nil || s.active, SingleActive: s.group != nil}
	s.mu.Unlock()
	if _, end, _ := s.log.Bounds(); end > info.Offset {
		info.Lag = end - info.Offset
	}
	return info
}

type record struct {
	offset uint64
	ts     int64
	m      *message.Message
}

// The stream calls these (stream.Reader).

func (s *subscription) Deliver(queue.Delivery) bool { return false }
func (s *subscription) NoAck() bool                 { return false }
func (s *subscription) Exclusive() bool             { return false }

// Cancelled: the stream was deleted. The client hears of it as RabbitMQ
// tells it, with a MetadataUpdate.
func (s *subscription) Cancelled() {
	s.mu.Lock()
	s.cancelled = true
	s.mu.Unlock()
	s.c.out.send(&stream.MetadataUpdate{Code: stream.CodeStreamNotAvailable, Stream: s.stream})
}

// Read takes a message into the round's chunk while there is credit.
func (s *subscription) Read(offset uint64, ts int64, m *message.Message) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.credit <= 0 || len(s.records) >= maxChunkRecords || s.formed != nil || s.cancelled || s.group != nil && !s.active {
		s.refused = true
		return false
	}
	s.records = append(s.records, record{offset: offset, ts: ts, m: m})
	s.next = offset + 1
	s.consumed++
	return true
}

// ReadFormed takes a chunk whole, in the form it was stored in, which is
// the chunk a Deliver carries (streamqueue's deliverForm), from its file:
// nothing is read, decoded or encoded, and the writer sends it with
// sendfile. A subscription that filters, that has records of this round
// already, or that was sent offsets of this chunk before (it starts
// inside it, having read the offsets before from an earlier Deliver)
// reads the messages one by one instead. One that starts inside it afresh
// is sent all of it, as RabbitMQ sends the chunk holding the
// subscription's offset: the client skips the entries before it.
func (s *subscription) ReadFormed(fc *streams.Formed, from uint64) streams.ChunkRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.filter != nil || len(s.records) > 0 || s.formed != nil || from > fc.First && s.consumed > 0 {
		return streams.ChunkDeclined
	}
	if s.credit <= 0 || s.cancelled || s.group != nil && !s.active {
		s.refused = true
		return streams.ChunkRefused
	}
	end := fc.First + uint64(fc.Count)
	s.formed, s.formedN = fc, end-from
	s.next = end
	s.consumed += s.formedN
	return streams.ChunkTaken
}

// RoundDone sends the round's records as one chunk, spending a credit,
// and has the stream go on when it refused a Read only because the
// chunk was full.
func (s *subscription) RoundDone() {
	s.mu.Lock()
	if fc := s.formed; fc != nil {
		n := s.formedN
		s.formed, s.formedN = nil, 0
		s.credit--
		kick := s.refused && s.credit > 0 && !s.cancelled
		if kick {
			s.refused = false
		}
		s.mu.Unlock()
		s.c.out.sendFile(stream.DeliverHead(s.deliverHead(), fc.Len), fc)
		s.c.srv.totals.delivered.Add(n)
		if kick {
			s.log.Kick()
		}
		return
	}
	records := s.records
	s.records = nil
	if len(records) > 0 && s.filter != nil && !s.filter.wants(records) {
		records = nil // skipped whole, spending no credit
	}
	if len(records) > 0 {
		s.credit--
	}
	kick := s.refused && s.credit > 0 && !s.cancelled
	if kick {
		s.refused = false
	}
	s.mu.Unlock()
	if len(records) > 0 {
		chunk := s.c.srv.chunkOf(records)
		s.send(chunk.parts, chunk.size, uint64(len(records)))
	}
	if kick {
		s.log.Kick()
	}
}

// send sends a chunk, in parts of size bytes in all, of n messages.
func (s *subscription) send(parts [][]byte, size int, n uint64) {
	s.c.out.sendFrame(stream.DeliverHead(s.deliverHead(), size), parts)
	s.c.srv.totals.delivered.Add(n)
}

// deliverHead is the head of a Deliver to s, in the version its client
// reads.
func (s *subscription) deliverHead() stream.Deliver {
	head := stream.Deliver{Version: uint16(s.c.deliverVersion.Load()), SubscriptionID: s.id}
	if head.Version >= 2 {
		_, _, head.CommittedChunkID = s.log.Bounds()
	}
	return head
}

// addCredit grants more chunks and, if the stream waited, has it go on:
// the chunks the credit brings are sent from this goroutine (Pull).
func (s *subscription) addCredit(n uint16) {
	s.mu.Lock()
	s.credit += int(n)
	pull := s.refused
	s.refused = false
	s.mu.Unlock()
	if pull {
		s.log.Pull(s)
	}
}

// cancel leaves the stream, and a single active consumer its group.
func (s *subscription) cancel() {
	if s.group != nil {
		s.c.srv.leave(s)
		return
	}
	s.log.Cancel(s)
}

// chunkOf is the chunk of records as Deliver carries it: each message as
// the stream protocol carries it, an AMQP 1.0 message (one published over
// AMQP 0-9-1 converted as RabbitMQ converts it), in parts that alias the
// messages (stream.ChunkParts). The chunk built last is kept for the next
// subscription that sends the same records: readers at the same place in
// a stream share their messages (core/stream), and an unchanging message
// with its offset names the records.
func (srv *Server) chunkOf(records []record) *builtChunk {
	n := len(records)
	if b := srv.lastChunk.Load(); b != nil && b.n == n && b.offset == records[0].offset && b.first == records[0].m && b.last == records[n-1].m {
		return b
	}
	bodies := make([][]byte, n)
	for i, r := range records {
		bodies[i] = amqp10Of(r.m)
	}
	b := &builtChunk{first: records[0].m, last: records[n-1].m, offset: records[0].offset, n: n}
	b.parts, b.size = stream.ChunkParts(stream.ChunkHeader{Type: stream.ChunkUser, Timestamp: records[0].ts, ChunkID: records[0].offset}, bodies)
	srv.lastChunk.Store(b)
	return b
}

// builtChunk is the chunk a subscription built last, and what names its
// records.
type builtChunk struct {
	first, last *message.Message
	offset      uint64
	n           int
	parts       [][]byte // written one after the other, never changed
	size        int
}

// amqp10Of is m as an AMQP 1.0 message.
func amqp10Of(m *message.Message) []byte {
	if m.IsAMQP10() {
		return m.Body
	}
	p, err := m.Properties()
	if err != nil {
		p = protocol.Properties{} // New checked them: not reached
	}
	am := amqp10.FromAMQP091(p, m.Body)
	am.SetRouting(m.Exchange, m.RoutingKey)
	return am.Append(nil)
}

// offsetOf is a Subscribe's offset specification as the stream takes it
// (the codec refuses a type it does not know).
func offsetOf(spec stream.OffsetSpec) streams.Offset {
	switch spec.Type {
	case stream.OffsetFirst:
		return streams.Offset{Kind: streams.First}
	case stream.OffsetLast:
		return streams.Offset{Kind: streams.Last}
	case stream.OffsetOffset:
		return streams.Offset{Kind: streams.At, N: spec.Offset}
	case stream.OffsetTimestamp:
		return streams.Offset{Kind: streams.Time, Time: time.UnixMilli(spec.Timestamp)}
	}
	return streams.Offset{Kind: streams.Next}
}

func (c *Conn) subscribe(m *stream.Subscribe) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.SubscribeResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	if _, dup := c.subs[m.SubscriptionID]; dup {
		answer(stream.CodeSubscriptionIDAlreadyExists)
		return
	}
	log, code := c.readableLog(m.Stream)
	if code != stream.CodeOK {
		answer(code)
		return
	}
	sac, name := m.Properties["single-active-consumer"] == "true", m.Properties["name"]
	if sac && name == "" {
		c.log.Info().Str("stream", m.Stream).Msg("a single active consumer without a name refused")
		answer(stream.CodePreconditionFailed)
		return
	}
	sub := &subscription{c: c, id: m.SubscriptionID, stream: m.Stream, log: log, credit: int(m.Credit), props: m.Properties, filter: filterOf(m.Properties)}
	if sac {
		// It reads nothing until its group makes it active and its
		// client answers with where to start (sac.go).
		sub.group = &sacKey{VHost: c.vh.Name, Stream: m.Stream, Name: name}
		sub.from = offsetOf(m.Offset)
		c.mu.Lock()
		c.subs[m.SubscriptionID] = sub
		c.mu.Unlock()
		answer(stream.CodeOK)
		c.srv.join(sub, c.partitionIndex(m.Properties["super-stream"], m.Stream))
		return
	}
	err := log.Consume(sub, offsetOf(m.Offset), func() {
		c.mu.Lock()
		c.subs[m.SubscriptionID] = sub
		c.mu.Unlock()
		answer(stream.CodeOK)
	})
	if err != nil {
		answer(stream.CodeStreamNotAvailable)
	}
}

func (c *Conn) credit(m *stream.Credit) {
	sub := c.subs[m.SubscriptionID]
	if sub == nil {
		c.out.send(&stream.CreditResponse{Code: stream.CodeSubscriptionIDDoesNotExist, SubscriptionID: m.SubscriptionID})
		return
	}
	sub.addCredit(m.Credit)
}

func (c *Conn) unsubscribe(m *stream.Unsubscribe) {
	code := stream.CodeOK
	if sub := c.subs[m.SubscriptionID]; sub != nil {
		sub.cancel()
		c.mu.Lock()
		delete(c.subs, m.SubscriptionID)
		c.mu.Unlock()
	} else {
		code = stream.CodeSubscriptionIDDoesNotExist
	}
	c.out.send(&stream.UnsubscribeResponse{CorrelationID: m.CorrelationID, Code: code})
}

func (c *Conn) storeOffset(m *stream.StoreOffset) {
	if len(m.Reference) == 0 || len(m.Reference) > maxReference {
		return // no response: a bad reference is dropped, as RabbitMQ does
	}
	if log, code := c.readableLog(m.Stream); code == stream.CodeOK {
		log.StoreOffset(m.Reference, m.Offset, nil)
	}
}

func (c *Conn) queryOffset(m *stream.QueryOffset) {
	answer := func(code stream.ResponseCode, offset uint64) {
		c.out.send(&stream.QueryOffsetResponse{CorrelationID: m.CorrelationID, Code: code, Offset: offset})
	}
	log, code := c.readableLog(m.Stream)
	if code != stream.CodeOK {
		answer(code, 0)
		return
	}
	offset, ok := log.Offset(m.Reference)
	if !ok {
		answer(stream.CodeNoOffset, 0)
		return
	}
	answer(stream.CodeOK, offset)
}
