package streamproto

import (
	"errors"
	"sync/atomic"

	"github.com/warrenmq/warren/core/auth"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/queue"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	streams "github.com/warrenmq/warren/core/stream"
	"github.com/warrenmq/warren/protocol"
	"github.com/warrenmq/warren/protocol/stream"
)

// maxReference is the longest publisher or consumer reference, as
// RabbitMQ bounds it.
const maxReference = 256

// publisher is a declared publisher: its stream, and for deduplication
// its reference, which the stream tracks (stream.Writer).
type publisher struct {
	id        uint8
	stream    string
	reference string
	to        appender
	unwatch   func() // stops OnDelete's call
	// For listings; the confirms are counted from the stream's callbacks.
	published, confirmed, errored atomic.Uint64
}

// appender is a stream queue as a publisher appends to it
// (streamqueue.Queue).
type appender interface {
	AppendAll(as []streams.Append)
	Log() *streams.Stream
}

// lookupStream finds the named stream for a command: its code is
// CodeStreamDoesNotExist when there is no stream of that name, and
// CodeStreamNotAvailable when this node cannot serve it.
func (c *Conn) lookupStream(name string) (queuetype.Queue, stream.ResponseCode) {
	q, code := c.findStream(name)
	if code == stream.CodeOK && !q.Here() {
		return nil, stream.CodeStreamNotAvailable
	}
	return q, code
}

// findStream is the named stream of the connection's vhost, wherever its
// replicas are.
func (c *Conn) findStream(name string) (queuetype.Queue, stream.ResponseCode) {
	q, err := c.vh.Queue(name, nil)
	if err != nil {
		var re *reply.Error
		if errors.As(err, &re) && re.Code == protocol.NotFound {
			return nil, stream.CodeStreamDoesNotExist
		}
		return nil, stream.CodeStreamNotAvailable
	}
	if q.Type() != queue.Stream {
		return nil, stream.CodeStreamDoesNotExist
	}
	return q, stream.CodeOK
}

// permittedStream is lookupStream after a permission check (one of the
// Grant's methods): CodeAccessRefused when it refuses.
func (c *Conn) permittedStream(name string, check func(string) error) (queuetype.Queue, stream.ResponseCode) {
	if err := check(name); err != nil {
		return nil, refusal(err)
	}
	return c.lookupStream(name)
}

// readableLog is the named stream's log on this node for a reader with
// read permission: CodeStreamNotAvailable when this node has no replica.
func (c *Conn) readableLog(name string) (*streams.Stream, stream.ResponseCode) {
	q, code := c.permittedStream(name, c.grant.ReadQueue)
	if code != stream.CodeOK {
		return nil, code
	}
	if l, ok := q.(interface{ Log() *streams.Stream }); ok {
		if log := l.Log(); log != nil {
			return log, stream.CodeOK
		}
	}
	return nil, stream.CodeStreamNotAvailable
}

// refusal is the response code for a permission check's error.
func refusal(err error) stream.ResponseCode {
	var r *auth.Refusal
	if errors.As(err, &r) {
		return stream.CodeAccessRefused
	}
	return stream.CodeInternalError
}

func (c *Conn) declarePublisher(m *stream.DeclarePublisher) {
	answer := func(code stream.ResponseCode) {
		c.out.send(&stream.DeclarePublisherResponse{CorrelationID: m.CorrelationID, Code: code})
	}
	if _, dup := c.publishers[m.PublisherID]; dup || len(m.Reference) > maxReference {
		answer(stream.CodePreconditionFailed)
		return
	}
	q, code := c.permittedStream(m.Stream, c.grant.PublishToStream)
	if code != stream.CodeOK {
		answer(code)
		return
	}
	to, ok := q.(appender)
	if !ok {
		answer(stream.CodeStreamNotAvailable)
		return
	}
	log := to.Log()
	if log == nil {
		answer(stream.CodeStreamNotAvailable)
		return
	}
	p := &publisher{id: m.PublisherID, stream: m.Stream, reference: m.Reference, to: to}
	// A publisher learns of its stream's deletion, however it is
	// deleted, as RabbitMQ tells it: a MetadataUpdate.
	name := m.Stream
	p.unwatch = log.OnDelete(func() {
		c.out.send(&stream.MetadataUpdate{Code: stream.CodeStreamNotAvailable, Stream: name})
	})
	c.mu.Lock()
	c.publishers[m.PublisherID] = p
	c.mu.Unlock()
	answer(stream.CodeOK)
}

func (c *Conn) deletePublisher(m *stream.DeletePublisher) {
	code := stream.CodeOK
	if p, ok := c.publishers[m.PublisherID]; ok {
		p.unwatch()
		c.mu.Lock()
		delete(c.publishers, m.PublisherID)
		c.mu.Unlock()
	} else {
		code = stream.CodePublisherDoesNotExist
	}
	c.out.send(&stream.DeletePublisherResponse{CorrelationID: m.CorrelationID, Code: code})
}

func (c *Conn) queryPublisherSequence(m *stream.QueryPublisherSequence) {
	var seq uint64
	log, code := c.readableLog(m.Stream)
	if code == stream.CodeOK {
		seq, _ = log.Sequence(m.Reference)
	}
	c.out.send(&stream.QueryPublisherSequenceResponse{CorrelationID: m.CorrelationID, Code: code, Sequence: seq})
}

// publish appends a Publish's messages to the publisher's stream, all
// at once (a replicated stream's one log entry). A message is confirmed
// once synced; a resend of a deduplicating publisher is confirmed and
// dropped by the stream. The reader waits while the connection has
// MaxUnconfirmed messages unconfirmed, having handed over what it
// gathered.
func (c *Conn) publish(m *stream.Publish) error {
	p := c.publishers[m.PublisherID]
	if p == nil {
		for _, pm := range m.Messages {
			c.out.fail(m.PublisherID, pm.PublishingID, stream.CodePublisherDoesNotExist)
		}
		return nil
	}
	var as []streams.Append
	for i := range m.Messages {
		pm := &m.Messages[i]
		p.published.Add(1)
		c.srv.totals.published.Add(1)
		var msgs []*message.Message
		if pm.SubBatch == nil {
			// The frame's buffer is the reader's: the stream keeps a copy.
			msgs = []*message.Message{message.NewAMQP10(p.stream, pm.FilterValue, append([]byte(nil), pm.Message...))}
		} else {
			// A sub-batch's records are stored one per offset, all or
			// none, and confirmed under its one publishing id.
			records, err := subBatchRecords(pm.SubBatch, pm.Message)
			if err != nil {
				c.log.Info().Err(err).Str("stream", p.stream).Msg("a sub-batch refused")
				p.errored.Add(1)
				c.srv.totals.errored.Add(1)
				c.out.fail(p.id, pm.PublishingID, stream.CodePreconditionFailed)
				continue
			}
			for _, r := range records {
				msgs = append(msgs, message.NewAMQP10(p.stream, pm.FilterValue, r))
			}
		}
		if c.atUnconfirmedLimit() {
			p.to.AppendAll(as)
			as = nil
			if err := c.waitForConfirms(); err != nil {
				return err
			}
		}
		as = append(as, c.appendOf(p, pm.PublishingID, msgs))
	}
	if len(as) > 0 {
		p.to.AppendAll(as)
	}
	return nil
}

// appendOf is a publishing id's messages as the stream takes them, to
// confirm them, or report their failure, when it answers; it counts them
// unconfirmed.
func (c *Conn) appendOf(p *publisher, id uint64, msgs []*message.Message) streams.Append {
	c.unconfirmed.Add(1)
	var w streams.Writer
	if p.reference != "" {
		w = streams.Writer{Name: p.reference, Seq: id}
	}
	publisherID := p.id
	return streams.Append{Msgs: msgs, Writer: w, Done: func(err error) {
		if err != nil {
			p.errored.Add(1)
			c.srv.totals.errored.Add(1)
			c.out.fail(publisherID, id, stream.CodeInternalError)
		} else {
			p.confirmed.Add(1)
			c.srv.totals.confirmed.Add(1)
			c.out.confirm(publisherID, id)
		}
		if c.unconfirmed.Add(-1) < int64(c.srv.Settings.MaxUnconfirmed) {
			select {
			case c.confirmed <- struct{}{}:
			default:
			}
		}
	}}
}

// atUnconfirmedLimit reports whether MaxUnconfirmed messages wait for
// their confirm.
func (c *Conn) atUnconfirmedLimit() bool {
	limit := int64(c.srv.Settings.MaxUnconfirmed)
	return limit > 0 && c.unconfirmed.Load() >= limit
}

// waitForConfirms holds the reader while MaxUnconfirmed messages wait
// for their confirm; it fails when the connection is going.
func (c *Conn) waitForConfirms() error {
	for c.atUnconfirmedLimit() {
		select {
		case <-c.confirmed:
		case <-c.out.closed():
			return errClosed
		}
	}
	return nil
}
