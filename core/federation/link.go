package federation

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/internal/lockorder"
)

// cleanupTimeout bounds what a link that stops for good does upstream
// (deleting its queue and exchange).
const cleanupTimeout = 5 * time.Second

// stopWait bounds how long a stop waits for a link: its cleanup, and a
// session blocked on an upstream that stopped answering, whose
// connections are closed under it (session).
const stopWait = cleanupTimeout + 2*time.Second

// link is one running link: a goroutine that runs sessions (a
// connection to each broker, moving messages until one fails), reports
// each failure in its status and starts the next after the upstream's
// reconnect-delay.
type link struct {
	m    *Manager
	spec Spec
	id   string
	log  zerolog.Logger
	// cleanup, set before cancel, asks the stopping link to delete what it
	// declared upstream.
	cleanup bool
	cancel  context.CancelFunc
	done    chan struct{}
	// nudge asks an exchange link to look at its bindings again, and a
	// queue link at its queue; restart ends the session (or the wait
	// before the next) at once.
	nudge   chan struct{}
	restart chan struct{}

	mu lockorder.Mutex[lockorder.FederationLink]
	st Status
}

// stop stops the link and waits for it, for at most stopWait (a link
// stuck dialing an upstream that does not answer finishes on its own).
func (l *link) stop() {
	l.cancel()
	select {
	case <-l.done:
	case <-time.After(stopWait):
		l.log.Warn().Msg("federation link still stopping; going on without it")
	}
}

func (l *link) poke() {
	select {
	case l.nudge <- struct{}{}:
	default:
	}
}

func (l *link) status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}

func (l *link) setState(state, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.st
	if s.ID == "" {
		s.ID, s.Type, s.VHost, s.Upstream = l.id, l.spec.Type, l.spec.VHost, l.spec.Upstream.Name
		if l.spec.Type == ExchangeLink {
			s.Exchange, s.UpstreamExchange = l.spec.Name, or(l.spec.Exchange, l.spec.Name)
		} else {
			s.Queue, s.UpstreamQueue, s.ConsumerTag = l.spec.Name, or(l.spec.Queue, l.spec.Name), l.spec.ConsumerTag
		}
	}
	s.State, s.Error, s.Since = state, why, time.Now()
	if state != Running {
		s.LocalConnection = ""
	}
}

// setRunning reports the link running on its connection to this broker,
// named as the broker lists it (conn.Server.DialLocal).
func (l *link) setRunning(e *ends) {
	l.setState(Running, "")
	l.mu.Lock()
	l.st.LocalConnection = e.down.LocalAddr().String() + " -> local"
	l.mu.Unlock()
}

func or(s, otherwise string) string {
	if s != "" {
		return s
	}
	return otherwise
}

// connectionName is the name of the link's connections, as RabbitMQ
// names them.
func (l *link) connectionName() string {
	if l.spec.Policy == "" {
		return "Federation link"
	}
	return fmt.Sprintf("Federation link (upstream: %s, policy: %s)", l.spec.Upstream.Name, l.spec.Policy)
}

// errRestart ends a session that was asked to restart (Manager.Restart).
var errRestart = errors.New("restarted")

// run runs sessions until ctx ends.
func (l *link) run(ctx context.Context) {
	for {
		var err error
		if l.spec.Type == ExchangeLink {
			err = l.exchangeSession(ctx)
		} else {
			err = l.queueSession(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errRestart) {
			l.setState(Starting, "")
			continue
		}
		l.log.Warn().Err(err).Msg("federation link failed")
		l.setState(Error, err.Error())
		if !l.wait(ctx) {
			return
		}
		l.setState(Starting, "")
	}
}

// wait waits for the next session: the reconnect-delay (forever when it
// is 0, as RabbitMQ), or a restart; false when ctx ended.
func (l *link) wait(ctx context.Context) bool {
	var retry <-chan time.Time
	if d := l.spec.ReconnectDelay; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		retry = t.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.restart:
	case <-retry:
	}
	return true
}

// ends are a session's connections and channels: down to this broker,
// up to the upstream.
type ends struct {
	down   *amqp.Connection
	dch    *amqp.Channel
	up     *amqp.Connection
	ch     *amqp.Channel
	uri    amqpclient.URI
	cname  string           // the upstream's cluster name ("" when it gives none)
	closed chan *amqp.Error // the first close of a connection or channel (watch)
	// confirms are the downstream's publisher confirms (on-confirm).
	confirms chan amqp.Confirmation
}

// watch passes on the first close a notify channel tells of (amqp091-go
// closes each channel it was given, so each needs its own) to closed.
func (e *ends) watch(c chan *amqp.Error) {
	go func() {
		if err, ok := <-c; ok {
			select {
			case e.closed <- err:
			default:
			}
		} else {
			select {
			case e.closed <- nil:
			default:
			}
		}
	}()
}

func (e *ends) close() {
	if e.up != nil {
		e.up.Close()
	}
	if e.down != nil {
		e.down.Close()
	}
}

// session runs f with both ends open, and closes them when f returns or
// when ctx ends and f has not returned within cleanupTimeout (f is
// blocked on a broker that does not answer).
func (l *link) session(ctx context.Context, f func(e *ends) error) error {
	e, err := l.connect()
	if err != nil {
		return err
	}
	defer e.close()
	done := make(chan struct{})
	defer close(done)
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-done:
		case <-time.After(cleanupTimeout):
			e.close()
		}
	})
	defer stop()
	return f(e)
}

// connect opens both ends. The downstream connection acts as the broker
// in the link's vhost, as RabbitMQ's direct connection does.
func (l *link) connect() (*ends, error) {
	e := &ends{closed: make(chan *amqp.Error, 4)}
	d := l.m.dialer(l.connectionName())
	var err error
	e.down, err = d.Dial(localURI(l.spec.VHost))
	if err != nil {
		return nil, fmt.Errorf("could not connect to this broker: %w", err)
	}
	if e.dch, err = e.down.Channel(); err != nil {
		e.close()
		return nil, err
	}
	if l.spec.AckMode == OnConfirm {
		if err := e.dch.Confirm(false); err != nil {
			e.close()
			return nil, err
		}
		e.confirms = e.dch.NotifyPublish(make(chan amqp.Confirmation, max(l.spec.Prefetch, 1)+1))
	}
	e.up, e.uri, err = amqpclient.ConnectIn(d, l.spec.URIs, l.spec.VHost)
	l.mu.Lock()
	l.st.URI = e.uri.Redacted()
	l.mu.Unlock()
	if err != nil {
		e.close()
		return nil, fmt.Errorf("could not connect to the upstream: %w", err)
	}
	e.cname, _ = e.up.Properties["cluster_name"].(string)
	if e.ch, err = e.up.Channel(); err != nil {
		e.close()
		return nil, err
	}
	e.watch(e.down.NotifyClose(make(chan *amqp.Error, 1)))
	e.watch(e.up.NotifyClose(make(chan *amqp.Error, 1)))
	e.watch(e.dch.NotifyClose(make(chan *amqp.Error, 1)))
	e.watch(e.ch.NotifyClose(make(chan *amqp.Error, 1)))
	if l.spec.AckMode != NoAck {
		if err := e.ch.Qos(l.spec.Prefetch, 0, false); err != nil {
			e.close()
			return nil, err
		}
	}
	return e, nil
}

// localURI is this broker's vhost as a URI with no host.
func localURI(vhost string) amqpclient.URI {
	u, _ := amqpclient.ParseURI("amqp:///" + url.PathEscape(vhost))
	return u
}

// onChannel runs f on a channel of its own, closed afterwards: an
// operation that may fail (a passive declare) closes only that channel.
func onChannel(c *amqp.Connection, f func(*amqp.Channel) error) error {
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	return f(ch)
}

// code is an AMQP error's reply code, 0 for another error.
func code(err error) int {
	var e *amqp.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// forward publishes a delivery downstream with its properties, its
// headers as given, and acks it upstream as the ack mode says; pending
// maps the downstream's publish sequence numbers to upstream delivery
// tags for on-confirm.
func (l *link) forward(ctx context.Context, e *ends, d amqp.Delivery, exchange, key string, headers amqp.Table, pending map[uint64]uint64) error {
	p := amqp.Publishing{Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo,
		Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId,
		AppId: d.AppId, Body: d.Body}
	if !l.spec.TrustUserID {
		p.UserId = ""
	}
	var seq uint64
	if l.spec.AckMode == OnConfirm {
		seq = e.dch.GetNextPublishSeqNo()
	}
	if err := e.dch.PublishWithContext(ctx, exchange, key, false, false, p); err != nil {
		return fmt.Errorf("could not publish to this broker: %w", err)
	}
	switch l.spec.AckMode {
	case OnConfirm:
		pending[seq] = d.DeliveryTag
	case OnPublish:
		return d.Ack(false)
	}
	return nil
}

// errRefused ends a session whose downstream refused a message.
var errRefused = errors.New("this broker refused a message the link forwarded (nack): the queue is full or rejects publishes")

// confirmed settles upstream what the downstream answered: c and every
// answer already waiting. Confirms come in publish order and deliveries
// were published in theirs, so a run of acks is one multiple ack; a nack
// puts its message back upstream. On a nack the link then stops taking
// messages, waits for the answers still due (refused), and ends the
// session with errRefused, so that a downstream that refuses (a full
// queue) makes the link wait its reconnect-delay rather than spin, and
// nothing is lost or copied.
func (l *link) confirmed(e *ends, c amqp.Confirmation, pending map[uint64]uint64, stop func(), deliveries <-chan amqp.Delivery) error {
	refused, err := l.settle(e, c, pending)
	if err != nil || !refused {
		return err
	}
	stop()
	deadline := time.NewTimer(cleanupTimeout)
	defer deadline.Stop()
	for len(pending) > 0 {
		select {
		case c, open := <-e.confirms:
			if !open {
				return errRefused
			}
			if _, err := l.settle(e, c, pending); err != nil {
				return err
			}
		case d, open := <-deliveries:
			if !open {
				deliveries = nil
				continue
			}
			if l.spec.AckMode != NoAck {
				_ = d.Nack(false, true)
			}
		case <-e.closed:
			return errRefused
		case <-deadline.C:
			return errRefused
		}
	}
	return errRefused
}

// settle settles c and the answers already waiting; refused says one was
// a nack.
func (l *link) settle(e *ends, c amqp.Confirmation, pending map[uint64]uint64) (refused bool, err error) {
	var acked uint64 // the last acked delivery of the run, not yet acked upstream
	for {
		tag, ok := pending[c.DeliveryTag]
		if !ok {
			return refused, fmt.Errorf("a confirm for publish %d, which is not pending", c.DeliveryTag)
		}
		delete(pending, c.DeliveryTag)
		if c.Ack {
			acked = tag
		} else {
			if acked != 0 {
				if err := e.ch.Ack(acked, true); err != nil {
					return refused, err
				}
				acked = 0
			}
			if err := e.ch.Nack(tag, false, true); err != nil {
				return refused, err
			}
			refused = true
		}
		select {
		case next, open := <-e.confirms:
			if open {
				c = next
				continue
			}
		default:
		}
		if acked != 0 {
			return refused, e.ch.Ack(acked, true)
		}
		return refused, nil
	}
}

// closedReason is why a session ended on a closed connection or channel.
func closedReason(err *amqp.Error) error {
	if err == nil {
		return errors.New("connection closed")
	}
	return fmt.Errorf("closed: %d %s", err.Code, err.Reason)
}
