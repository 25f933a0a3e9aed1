package conn

import (
	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// publishing is a channel's content assembly: basic.publish, then one
// header frame, then body frames until the declared size is reached.
type publishing struct {
	state      publishState
	x          *vhost.Exchange
	routingKey string
	mandatory  bool
	flags      uint16
	buf        []byte // properties then body, one allocation per message
	propsLen   int
	bodySize   uint64
	// pooled is set once buf is a pooled buffer (message.Bodies) holding
	// the body alone; props then holds the properties, and propsLen is 0.
	pooled bool
	props  []byte
}

// grow makes room in buf for n more bytes of body: the whole body once a
// sixteenth of it arrived (in a pooled buffer when bodies lends one), else
// four times what arrived. A 16 MiB body is copied once on the way (at 1
// MiB) rather than four times, and a client pins at most sixteen times
// what it sent.
func (p *publishing) grow(bodies *message.Bodies, n int) {
	need := len(p.buf) + n
	if need <= cap(p.buf) {
		return
	}
	total := p.propsLen + int(p.bodySize)
	grow := max(4*len(p.buf), need)
	if 16*len(p.buf) >= total {
		grow = total
		if body, ok := bodies.Get(int(p.bodySize)); ok {
			p.toPooled(body)
			return
		}
	}
	grown := make([]byte, len(p.buf), min(total, grow))
	copy(grown, p.buf)
	p.buf = grown
}

// toPooled moves what arrived of the body into body, a pooled buffer with
// room for all of it, and the properties out beside it.
func (p *publishing) toPooled(body []byte) {
	p.props = append([]byte(nil), p.buf[:p.propsLen]...)
	p.buf = append(body, p.buf[p.propsLen:]...)
	p.propsLen, p.pooled = 0, true
}

// preallocLimit is the most body memory reserved before frames arrive.
const preallocLimit = 1 << 20

type publishState uint8

const (
	idle publishState = iota
	wantHeader
	wantBody
)

// publish starts a message: the exchange must exist, be writable by the
// user and not be internal.
func (ch *channel) publish(m *protocol.BasicPublish) error {
	if m.Immediate {
		return reply.NotImplemented("immediate=true")
	}
	// Permission before existence, as RabbitMQ: a user learns nothing of
	// exchanges it may not write to.
	if err := refused(ch.c.grant.Publish(m.Exchange)); err != nil {
		return err
	}
	x, err := ch.c.vh.FindExchange(m.Exchange)
	if err != nil {
		return err
	}
	if x.Internal {
		return reply.AccessRefused("cannot publish to internal exchange '%s' in vhost '%s'", m.Exchange, ch.c.vh.Name)
	}
	if x.Type == exchange.TypeTopic {
		if err := refused(ch.c.grant.PublishTopic(m.Exchange, m.RoutingKey)); err != nil {
			return err
		}
	}
	ch.pub = publishing{state: wantHeader, x: x, routingKey: m.RoutingKey, mandatory: m.Mandatory}
	return nil
}

// refused is a grant's refusal (auth.Grant's checks return nothing else)
// as AMQP's 403, in RabbitMQ's words.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return reply.AccessRefused("%s", err.Error())
}

// content takes a header or body frame.
func (ch *channel) content(f protocol.Frame) error {
	if ch.closing {
		return nil
	}
	p := &ch.pub
	switch {
	case f.Type == protocol.FrameHeader && p.state == wantHeader:
		h, err := protocol.ParseContentHeader(f.Payload)
		if err != nil {
			return asReply(err)
		}
		if h.ClassID != protocol.ClassBasic {
			return reply.New(protocol.UnexpectedFrame, "content header for class %d, expected class 60", h.ClassID)
		}
		if max := ch.c.srv.Limits.MaxMessageSize; max > 0 && h.BodySize > max {
			ch.pub = publishing{}
			return reply.PreconditionFailed("message size %d is larger than configured max size %d", h.BodySize, max)
		}
		p.flags, p.bodySize, p.propsLen = h.Flags, h.BodySize, len(h.Raw)
		// The declared size is only a promise: allocate up to
		// preallocLimit now and grow as frames really arrive, so a client
		// cannot pin memory by announcing big bodies it never sends.
		var body []byte
		pooled := false
		if h.BodySize <= preallocLimit {
			body, pooled = ch.c.srv.Bodies.Get(int(h.BodySize))
		}
		if pooled {
			p.buf = h.Raw // copied out at once
			p.toPooled(body)
		} else {
			p.buf = make([]byte, len(h.Raw), len(h.Raw)+int(min(h.BodySize, preallocLimit)))
			copy(p.buf, h.Raw)
		}
		p.state = wantBody
		if h.BodySize == 0 {
			return ch.published()
		}
		return nil
	case f.Type == protocol.FrameBody && p.state == wantBody:
		if uint64(len(p.buf)-p.propsLen+len(f.Payload)) > p.bodySize {
			return reply.New(protocol.FrameError, "body frames exceed the declared body size %d", p.bodySize)
		}
		p.grow(ch.c.srv.Bodies, len(f.Payload))
		p.buf = append(p.buf, f.Payload...)
		if uint64(len(p.buf)-p.propsLen) == p.bodySize {
			return ch.published()
		}
		return nil
	case f.Type == protocol.FrameHeader:
		return reply.New(protocol.UnexpectedFrame, "content header on channel %d without basic.publish", ch.id)
	}
	return reply.New(protocol.UnexpectedFrame, "content body on channel %d without a content header", ch.id)
}

// published runs once a message's content is complete.
func (ch *channel) published() error {
	p := ch.pub
	ch.pub = publishing{}
	props := p.buf[:p.propsLen]
	if p.pooled {
		props = p.props
	}
	m, err := message.NewFromClient(p.x.Name, p.routingKey, p.flags, props, p.buf[p.propsLen:])
	if err != nil {
		return err
	}
	if p.pooled {
		// The channel holds the body until routing is done
		// (routeAndConfirm); a message that fails before is the GC's.
		m.Lend(ch.c.srv.Bodies)
	}
	if err := ch.checkUserID(m); err != nil {
		return err
	}
	if m, err = ch.withReplyToken(m); err != nil {
		return err
	}
	if ch.tx != nil {
		ch.tx.publish(p.x, m, p.mandatory)
		return nil
	}
	_, err = ch.routeAndConfirm(p.x, m, p.mandatory, ch.confirm.enabled)
	return err
}

// checkUserID enforces RabbitMQ's rule: a user-id property must name the
// connection's user.
func (ch *channel) checkUserID(m *message.Message) error {
	if m.Flags&protocol.FlagUserID == 0 {
		return nil
	}
	v, _ := m.View()
	uid, _ := v.UserID()
	if uid != ch.c.user.Name && !ch.c.user.HasTag("impersonator") {
		return reply.PreconditionFailed("user_id property set to '%s' but authenticated user was '%s'", uid, ch.c.user.Name)
	}
	return nil
}

// routeAndConfirm routes and enqueues a complete message, returns it if it
// was mandatory and went nowhere, and records its confirm: at once, or,
// for a persistent message a durable queue stored, once the store has
// synced it, and for one forwarded to queues on other nodes, once they
// have it. The outcome says which.
func (ch *channel) routeAndConfirm(x *vhost.Exchange, m *message.Message, mandatory, confirm bool) (vhost.Outcome, error) {
	if err := ch.waitForAlarm(); err != nil {
		return vhost.Outcome{}, err
	}
	out, err := ch.c.vh.Publish(x, m, &ch.router)
	if err != nil {
		return vhost.Outcome{}, err
	}
	ch.count(stats.Publish, 1)
	switch {
	case out.Routed():
		ch.count(stats.Routed, 1)
	case mandatory:
		ch.basicReturn(m, protocol.NoRoute, "NO_ROUTE")
		ch.count(stats.ReturnUnroutable, 1)
	default:
		ch.count(stats.DropUnroutable, 1)
	}
	if out.Forwarded != nil {
		ch.holdFlow(int64(m.Size()), out.Forwarded)
	}
	// Every queue that kept the message, and every write of it, holds it
	// now: the publisher's hold ends.
	m.Release()
	if confirm {
		seq := ch.confirm.add()
		switch {
		case out.Rejected:
			ch.confirm.settle(seq, false)
		case !out.Routed() && out.HomesDown > 0 && !mandatory:
			// Its queues exist, on nodes that are down: a failure the
			// publisher can retry, not an unroutable message to drop.
			ch.confirm.settle(seq, false)
		case out.Forwarded != nil && out.Stored:
			out.Forwarded.Then(func(err error) {
				if err != nil {
					ch.Durable(seq, err)
					return
				}
				ch.c.vh.AfterSync(func(err error) { ch.Durable(seq, err) })
			})
		case out.Forwarded != nil:
			out.Forwarded.Then(func(err error) { ch.Durable(seq, err) })
		case out.Stored:
			ch.awaitSync(seq)
		default:
			ch.confirm.settle(seq, true)
		}
	}
	return out, ch.waitForFlow()
}

// basicReturn sends an unroutable message back to its publisher.
func (ch *channel) basicReturn(m *message.Message, code uint16, text string) {
	ret := protocol.BasicReturn{ReplyCode: code, ReplyText: text, Exchange: m.Exchange, RoutingKey: m.RoutingKey}
	b := ch.c.out.begin()
	if b != nil {
		b = protocol.AppendMethodFrame(b, ch.id, &ret)
		b = ch.c.out.appendContent(b, ch.id, m, ch.c.frameMax)
	}
	ch.c.out.end(b)
}

// waitForAlarm holds a publisher while a resource alarm is raised, telling
// the client when it announced connection.blocked.
func (ch *channel) waitForAlarm() error {
	c := ch.c
	raised, reason, cleared := c.srv.Alarm.State()
	if !raised {
		return nil
	}
	if c.caps.connectionBlocked {
		c.send(0, &protocol.ConnectionBlocked{Reason: reason})
	}
	c.endRun() // nothing is held back while the reader waits
	c.log.Info().Str("reason", reason).Msg("publisher blocked by resource alarm")
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	select {
	case <-cleared:
	case <-c.stop:
		// Shutdown does not wait for an alarm to clear.
		return errForced
	}
	if c.caps.connectionBlocked {
		c.send(0, &protocol.ConnectionUnblocked{})
	}
	return nil
}

func (ch *channel) confirmSelect(noWait bool) error {
	if ch.tx != nil {
		return reply.PreconditionFailed("cannot switch from tx to confirm mode")
	}
	ch.confirm.enable()
	ch.confirmMode.Store(true)
	if !noWait {
		ch.c.send(ch.id, &protocol.ConfirmSelectOk{})
	}
	return nil
}

// transaction buffers a tx channel's publishes and settlements until commit.
type transaction struct {
	publishes []txPublish
	settles   []txSettle
}

type txPublish struct {
	x         *vhost.Exchange
	m         *message.Message
	mandatory bool
}

type txSettle struct {
	tag      uint64
	multiple bool
	ack      bool
	requeue  bool
}

func (t *transaction) publish(x *vhost.Exchange, m *message.Message, mandatory bool) {
	t.publishes = append(t.publishes, txPublish{x: x, m: m, mandatory: mandatory})
}

func (ch *channel) txSelect() error {
	if ch.confirm.enabled {
		return reply.PreconditionFailed("cannot switch from confirm to tx mode")
	}
	if ch.tx == nil {
		ch.tx = &transaction{}
		ch.txMode.Store(true)
	}
	ch.c.send(ch.id, &protocol.TxSelectOk{})
	return nil
}

func (ch *channel) txCommit() error {
	if ch.tx == nil {
		return reply.PreconditionFailed("channel is not transactional")
	}
	t := ch.tx
	ch.tx = &transaction{}
	for _, s := range t.settles {
		if err := ch.settle(s.tag, s.multiple, s.ack, s.requeue); err != nil {
			return err
		}
	}
	anyStored := false
	var forwarded []*vhost.Forwarding
	for _, p := range t.publishes {
		out, err := ch.routeAndConfirm(p.x, p.m, p.mandatory, false)
		if err != nil {
			return err
		}
		anyStored = anyStored || out.Stored
		if out.Forwarded != nil {
			forwarded = append(forwarded, out.Forwarded)
		}
	}
	for _, f := range forwarded {
		// commit-ok promises the other nodes' queues have the messages too.
		done := make(chan error, 1)
		f.Then(func(err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				return reply.Internal("forwarding the transaction's messages: %v", err)
			}
		case <-ch.c.stop:
			return errForced
		}
	}
	if anyStored {
		// commit-ok promises the persistent messages are on disk.
		synced := make(chan error, 1)
		ch.c.vh.AfterSync(func(err error) { synced <- err })
		select {
		case err := <-synced:
			if err != nil {
				return reply.Internal("storing the transaction's messages: %v", err)
			}
		case <-ch.c.stop:
			return errForced
		}
	}
	ch.c.send(ch.id, &protocol.TxCommitOk{})
	return nil
}

func (ch *channel) txRollback() error {
	if ch.tx == nil {
		return reply.PreconditionFailed("channel is not transactional")
	}
	ch.tx = &transaction{}
	ch.c.send(ch.id, &protocol.TxRollbackOk{})
	return nil
}
