package shovel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/amqpclient"
	"github.com/warrenmq/warren/core/paramcheck"
	"github.com/warrenmq/warren/internal/lockorder"
	"github.com/warrenmq/warren/protocol"
)

// The states of a shovel, as RabbitMQ names them.
const (
	Starting   = "starting"
	Running    = "running"
	Terminated = "terminated"
)

// Status is a shovel's state as /api/shovels shows it.
type Status struct {
	VHost, Name string
	Type        string // Dynamic or Static
	State       string // Starting, Running or Terminated
	Reason      string // why it terminated
	// Blocked is why the destination blocked the shovel's connection
	// (connection.blocked: a resource alarm) while it does; "" when not.
	Blocked string
	Since   time.Time
	// Where it moves messages from and to, once it runs: the URIs
	// without credentials, and its definition's endpoints.
	SrcURI, DestURI                       string
	SrcQueue, SrcExchange, SrcExchangeKey string
	DestQueue                             string
	DestExchange, DestExchangeKey         *string
}

// errCompleted ends a shovel that moved what its delete-after asked.
var errCompleted = errors.New("the transfer is complete")

// worker runs one shovel: it connects both ends, moves messages until an
// end fails, and starts again after the reconnect delay.
type worker struct {
	m           *Manager
	vhost, name string
	def         Definition
	value       protocol.Table // the parameter it runs, to tell a change
	typ         string         // Dynamic or Static
	log         zerolog.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu     lockorder.Mutex[lockorder.ShovelWorker]
	status Status
}

func (w *worker) set(f func(*Status)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.status)
	w.status.Since = time.Now()
}

func (w *worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	for {
		w.set(func(s *Status) { s.State, s.Reason, s.Blocked = Starting, "", "" })
		err := w.shovel(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errCompleted) {
			w.log.Info().Msg("shovel completed its transfer (delete-after) and deletes itself")
			// Clearing the parameter stops this worker (Sync waits for
			// done), so it is cleared once the worker has returned.
			go w.m.completed(w)
			return
		}
		w.log.Error().Err(err).Dur("retry_in", w.def.ReconnectDelay).Msg("shovel terminated")
		w.set(func(s *Status) { s.State, s.Reason, s.Blocked = Terminated, err.Error(), "" })
		if w.def.ReconnectDelay <= 0 {
			// RabbitMQ does not restart a shovel whose delay is 0.
			<-ctx.Done()
			return
		}
		t := time.NewTimer(w.def.ReconnectDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// end is one end of a running shovel.
type end struct {
	conn   *amqp.Connection
	ch     *amqp.Channel
	uri    amqpclient.URI
	closed chan *amqp.Error // the connection's
	chDone chan *amqp.Error // the channel's
	why    error            // why it stopped, once known
}

// closeTimeout bounds the wait for a closing broker's close-ok, so an
// unreachable end cannot hold up a restart or the broker's shutdown.
const closeTimeout = 5 * time.Second

func (e *end) close() {
	if e.conn != nil {
		e.conn.CloseDeadline(time.Now().Add(closeTimeout))
	}
}

// reason says why an end stopped, if it is known to have.
func (e *end) reason(which string) error {
	if e.why == nil {
		select {
		case err := <-e.closed:
			e.note(which, "connection", err)
		case err := <-e.chDone:
			e.note(which, "channel", err)
		default:
		}
	}
	return e.why
}

func (e *end) note(which, what string, err *amqp.Error) {
	if err != nil {
		e.why = fmt.Errorf("%s %s closed: %s", which, what, err.Reason)
	} else {
		e.why = fmt.Errorf("%s %s closed", which, what)
	}
}

// connect opens a connection and a channel to one of uris: one at random,
// then the others, as RabbitMQ's shovel tries them.
func (w *worker) connect(uris []string, which string) (*end, error) {
	order := rand.Perm(len(uris))
	var errs []error
	for _, i := range order {
		u, err := amqpclient.ParseURI(uris[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := w.m.dialer(w.name).Dial(u)
		if err != nil {
			w.log.Warn().Str("uri", u.Redacted()).Err(err).Msgf("shovel could not connect to its %s", which)
			errs = append(errs, fmt.Errorf("%s: %w", u.Redacted(), err))
			continue
		}
		ch, err := c.Channel()
		if err != nil {
			c.Close()
			errs = append(errs, fmt.Errorf("%s: %w", u.Redacted(), err))
			continue
		}
		e := &end{conn: c, ch: ch, uri: u, closed: c.NotifyClose(make(chan *amqp.Error, 1)), chDone: ch.NotifyClose(make(chan *amqp.Error, 1))}
		return e, nil
	}
	return nil, fmt.Errorf("could not connect to the %s: %w", which, errors.Join(errs...))
}

// ensureQueue declares queue durable with args unless it exists, on
// channels of its own (a passive declare of a missing queue closes its
// channel), as RabbitMQ's shovel does.
func ensureQueue(c *amqp.Connection, queue string, args protocol.Table) error {
	ch, err := c.Channel()
	if err != nil {
		return err
	}
	_, err = ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	var ae *amqp.Error
	if err == nil || !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		ch.Close()
		return err
	}
	ch, err = c.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	_, err = ch.QueueDeclare(queue, true, false, false, false, amqpclient.Table(args))
	return err
}

// inflight is a message published and not yet confirmed (on-confirm).
type inflight struct {
	confirm *amqp.DeferredConfirmation
	tag     uint64 // its delivery tag at the source
}

// shovel runs the shovel once, until an end fails, ctx ends it, or its
// transfer is complete (errCompleted).
func (w *worker) shovel(ctx context.Context) error {
	d := w.def
	src, err := w.connect(d.SrcURIs, "source")
	if err != nil {
		return err
	}
	defer src.close()
	dst, err := w.connect(d.DestURIs, "destination")
	if err != nil {
		return err
	}
	defer dst.close()

	if d.DestQueue != "" {
		if err := ensureQueue(dst.conn, d.DestQueue, d.DestQueueArgs); err != nil {
			return fmt.Errorf("destination queue '%s': %w", d.DestQueue, err)
		}
	}
	if d.AckMode == OnConfirm {
		if err := dst.ch.Confirm(false); err != nil {
			return fmt.Errorf("destination confirms: %w", err)
		}
	}
	queue := d.SrcQueue
	if queue != "" {
		if err := ensureQueue(src.conn, queue, d.SrcQueueArgs); err != nil {
			return fmt.Errorf("source queue '%s': %w", queue, err)
		}
	} else {
		q, err := src.ch.QueueDeclare("", false, false, true, false, nil)
		if err != nil {
			return fmt.Errorf("source queue: %w", err)
		}
		if err := src.ch.QueueBind(q.Name, d.SrcExchangeKey, d.SrcExchange, false, nil); err != nil {
			return fmt.Errorf("source exchange '%s': %w", d.SrcExchange, err)
		}
		queue = q.Name
	}
	if d.AckMode != NoAck {
		if err := src.ch.Qos(d.SrcPrefetch, 0, false); err != nil {
			return fmt.Errorf("source prefetch: %w", err)
		}
	}
	remaining := int64(-1) // messages left to move; -1: no end
	switch {
	case d.DeleteAfter == DeleteQueueLength:
		q, err := src.ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		if err != nil {
			return fmt.Errorf("source queue '%s': %w", queue, err)
		}
		remaining = int64(q.Messages)
	case d.DeleteAfter >= 0:
		remaining = d.DeleteAfter
	}
	if remaining == 0 {
		return errCompleted
	}
	cancelled := src.ch.NotifyCancel(make(chan string, 1))
	tag := "Shovel " + w.name
	deliveries, err := src.ch.Consume(queue, tag, d.AckMode == NoAck, false, false, false, amqpclient.Table(d.SrcConsumerArgs))
	if err != nil {
		return fmt.Errorf("consuming from the source queue '%s': %w", queue, err)
	}
	w.set(func(s *Status) {
		s.State, s.Reason = Running, ""
		s.SrcURI, s.DestURI = src.uri.Redacted(), dst.uri.Redacted()
		s.SrcQueue, s.SrcExchange, s.SrcExchangeKey = d.SrcQueue, d.SrcExchange, d.SrcExchangeKey
		s.DestQueue, s.DestExchange, s.DestExchangeKey = d.DestQueue, d.DestExchange, d.DestExchangeKey
	})
	w.log.Info().Str("src", src.uri.Redacted()).Str("dest", dst.uri.Redacted()).Msg("shovel running")

	// The destination's connection.blocked is followed on a goroutine of
	// its own: a blocked publish holds the loop below until unblocked.
	blocked := dst.conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	go func() {
		for b := range blocked { // closed with the connection
			w.set(func(s *Status) {
				s.Blocked = ""
				if b.Active {
					s.Blocked = "the destination blocked the shovel's connection: " + b.Reason
				}
			})
		}
	}()
	fwd := w.forwardHeaders(src.uri, dst.uri)
	unpublished := remaining // messages left to publish; -1: no end
	var pending []inflight
	for {
		var confirmed <-chan struct{}
		if len(pending) > 0 {
			confirmed = pending[0].confirm.Done()
		}
		select {
		case <-ctx.Done():
			w.drain(src, tag, pending)
			return ctx.Err()
		case m, ok := <-deliveries:
			if !ok {
				return w.stopped(src, dst, cancelled)
			}
			if unpublished == 0 {
				// All it is to move is published: what else comes is
				// left unacked, to be requeued when it closes.
				continue
			}
			exchange, key, msg := w.publishing(m, fwd)
			if d.AckMode == OnConfirm {
				c, err := dst.ch.PublishWithDeferredConfirm(exchange, key, false, false, msg)
				if err != nil {
					return w.failed(src, dst, "publishing", err)
				}
				pending = append(pending, inflight{c, m.DeliveryTag})
			} else {
				if err := dst.ch.Publish(exchange, key, false, false, msg); err != nil {
					return w.failed(src, dst, "publishing", err)
				}
				if d.AckMode == OnPublish {
					if err := src.ch.Ack(m.DeliveryTag, false); err != nil {
						return w.failed(src, dst, "acking", err)
					}
				}
				if remaining > 0 {
					remaining--
				}
			}
			if unpublished > 0 {
				unpublished--
			}
		case <-confirmed:
			n := settled(pending)
			refused, err := settle(src.ch, pending[:n])
			if err != nil {
				return w.failed(src, dst, "acking", err)
			}
			if refused > 0 {
				// A closing channel or connection nacks what it had not
				// confirmed, after it told its close: that is the reason.
				if e := dst.reason("destination"); e != nil {
					return e
				}
				if e := src.reason("source"); e != nil {
					return e
				}
				// Publishing them again at once would spin; the shovel
				// stops (settling what else was confirmed, so as not to
				// copy it) and tries again after its reconnect delay.
				w.drain(src, tag, pending[n:])
				return fmt.Errorf("the destination refused %d message(s) (basic.nack: a full queue that rejects publishes, or a failing queue); they are back in the source", refused)
			}
			pending = pending[n:]
			if remaining > 0 {
				remaining -= int64(min(int64(n), remaining))
			}
		}
		if remaining == 0 {
			return errCompleted
		}
	}
}

// settled counts the publishes at the head of pending whose confirms
// came.
func settled(pending []inflight) int {
	for n, p := range pending {
		select {
		case <-p.confirm.Done():
		default:
			return n
		}
	}
	return len(pending)
}

// settle acks (or nacks, requeueing) at the source what the destination
// confirmed (or refused), and counts the refused. A run of confirms is
// one ack with multiple set: the source's deliveries are published in the
// order of their tags and confirmed in publish order, so everything up to
// the last tag is confirmed, but for the deliveries a finished transfer
// left unpublished, which come after every published one.
func settle(src *amqp.Channel, done []inflight) (refused int, err error) {
	if len(done) == 0 {
		return 0, nil
	}
	for _, p := range done {
		if !p.confirm.Acked() {
			refused++
		}
	}
	if refused == 0 {
		return 0, src.Ack(done[len(done)-1].tag, true)
	}
	for _, p := range done {
		if p.confirm.Acked() {
			err = src.Ack(p.tag, false)
		} else {
			err = src.Nack(p.tag, false, true)
		}
		if err != nil {
			return refused, err
		}
	}
	return refused, nil
}

// drainFor bounds how long a stopping shovel waits for the confirms of
// what it published.
const drainFor = 2 * time.Second

// drain ends a shovel that is stopped (its parameter changed or cleared,
// a restart, the broker's shutdown) without duplicates: it stops the
// source's deliveries, then acks at the source what the destination
// confirms within drainFor. Only what stays unconfirmed is redelivered
// by the source, and published again by the shovel's next run.
func (w *worker) drain(src *end, tag string, pending []inflight) {
	if err := src.ch.Cancel(tag, false); err != nil || len(pending) == 0 {
		return
	}
	t := time.NewTimer(drainFor)
	defer t.Stop()
	for len(pending) > 0 {
		select {
		case <-pending[0].confirm.Done():
		case <-t.C:
			return
		}
		n := settled(pending)
		if _, err := settle(src.ch, pending[:n]); err != nil {
			return
		}
		pending = pending[n:]
	}
}

// stopped says why the source stopped delivering: a connection or
// channel closed (whose reason comes a moment after the deliveries end),
// or the broker cancelled the consumer (its queue was deleted).
func (w *worker) stopped(src, dst *end, cancelled <-chan string) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-cancelled:
		return errors.New("the source cancelled the shovel's consumer (its queue was deleted?)")
	case err := <-src.closed:
		src.note("source", "connection", err)
	case err := <-src.chDone:
		src.note("source", "channel", err)
	case <-t.C:
	}
	return w.failed(src, dst, "consuming", errors.New("the source stopped delivering"))
}

// failed names the end that failed, if one did, else err. A failed
// call learns that a channel or connection is closed before its close
// notification (with the broker's reason) comes, so it waits a moment
// for that.
func (w *worker) failed(src, dst *end, doing string, err error) error {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		if e := dst.reason("destination"); e != nil {
			return e
		}
		if e := src.reason("source"); e != nil {
			return e
		}
		select {
		case e := <-dst.closed:
			dst.note("destination", "connection", e)
		case e := <-dst.chDone:
			dst.note("destination", "channel", e)
		case e := <-src.closed:
			src.note("source", "connection", e)
		case e := <-src.chDone:
			src.note("source", "channel", e)
		case <-t.C:
			return fmt.Errorf("%s: %w", doing, err)
		}
	}
}

// publishing is what the shovel publishes for a delivery: its exchange
// and routing key unless the definition sets them, its properties with
// the definition's over them, and the forwarding headers it asks for.
func (w *worker) publishing(m amqp.Delivery, fwd amqp.Table) (exchange, key string, p amqp.Publishing) {
	d := &w.def
	exchange, key = m.Exchange, m.RoutingKey
	switch {
	case d.DestQueue != "":
		exchange, key = "", d.DestQueue
	default:
		if d.DestExchange != nil {
			exchange = *d.DestExchange
		}
		if d.DestExchangeKey != nil {
			key = *d.DestExchangeKey
		}
	}
	p = amqp.Publishing{
		Headers: m.Headers, ContentType: m.ContentType, ContentEncoding: m.ContentEncoding,
		DeliveryMode: m.DeliveryMode, Priority: m.Priority, CorrelationId: m.CorrelationId,
		ReplyTo: m.ReplyTo, Expiration: m.Expiration, MessageId: m.MessageId, Timestamp: m.Timestamp,
		Type: m.Type, UserId: m.UserId, AppId: m.AppId, Body: m.Body,
	}
	setProperties(&p, d.PublishProperties)
	if fwd != nil || d.AddTimestamp {
		h := amqp.Table{}
		for k, v := range p.Headers {
			h[k] = v
		}
		if fwd != nil {
			// Prepended to those of earlier shovels, as RabbitMQ's
			// prepend_table_header.
			prior, _ := h["x-shovelled"].([]any)
			h["x-shovelled"] = append([]any{fwd}, prior...)
		}
		if d.AddTimestamp {
			h["x-shovelled-timestamp"] = time.Now().Unix()
		}
		p.Headers = h
	}
	return exchange, key, p
}

// forwardHeaders is the x-shovelled entry a shovel that adds forwarding
// headers puts on each message, as RabbitMQ's: who shovelled it, and
// from where to where; nil when it adds none.
func (w *worker) forwardHeaders(src, dst amqpclient.URI) amqp.Table {
	d := &w.def
	if !d.AddForwardHeaders {
		return nil
	}
	t := amqp.Table{
		"shovelled-by": w.m.clusterName(), "shovel-type": w.typ, "shovel-name": w.name, "shovel-vhost": w.vhost,
		"src-uri": src.Redacted(), "dest-uri": dst.Redacted(),
	}
	if d.SrcQueue != "" {
		t["src-queue"] = d.SrcQueue
	} else {
		t["src-exchange"], t["src-exchange-key"] = d.SrcExchange, d.SrcExchangeKey
	}
	if d.DestQueue != "" {
		t["dest-queue"] = d.DestQueue
	}
	if d.DestExchange != nil {
		t["dest-exchange"] = *d.DestExchange
	}
	if d.DestExchangeKey != nil {
		t["dest-exchange-key"] = *d.DestExchangeKey
	}
	return t
}

// setProperties sets the definition's publish properties (checked by
// Parse: strings and numbers of the right keys).
func setProperties(p *amqp.Publishing, props protocol.Table) {
	for k, v := range props {
		s, _ := v.(string)
		n, _ := paramcheck.NumberOf(v)
		switch k {
		case "content_type":
			p.ContentType = s
		case "content_encoding":
			p.ContentEncoding = s
		case "delivery_mode":
			p.DeliveryMode = uint8(n)
		case "priority":
			p.Priority = uint8(n)
		case "correlation_id":
			p.CorrelationId = s
		case "reply_to":
			p.ReplyTo = s
		case "expiration":
			p.Expiration = s
		case "message_id":
			p.MessageId = s
		case "timestamp":
			p.Timestamp = time.Unix(int64(n), 0)
		case "type":
			p.Type = s
		case "user_id":
			p.UserId = s
		case "app_id":
			p.AppId = s
		}
	}
}
