package losscheck

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// URLs returns the AMQP URLs to connect to now, in the order to try them.
type URLs func() []string

// NodeOf names the node behind an AMQP URL, as the report and faults
// name it: its host and port.
func NodeOf(url string) string {
	if i := strings.LastIndexByte(url, '@'); i >= 0 {
		url = url[i+1:]
	}
	return strings.TrimSuffix(url, "/")
}

// Pace makes publishers wait d after each publish: a broker broken on
// purpose that confirms at once (a self-check) holds no publisher back,
// and unpaced they would bury it.
func (c *Checker) Pace(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pace = d
}

// NameNodes makes the report and faults name the node behind a URL by
// name(url) rather than by its host and port (which a restarted process
// may not keep).
func (c *Checker) NameNodes(name func(url string) string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodeName = name
}

// dial connects to the first URL that answers, trying again until stop,
// and names the node it reached.
func (c *Checker) dial(urls URLs, stop <-chan struct{}) (*amqp.Connection, string, bool) {
	for {
		for _, u := range urls() {
			if conn, err := amqp.DialConfig(u, amqp.Config{Dial: amqp.DefaultDial(time.Second)}); err == nil {
				c.mu.Lock()
				name := c.nodeName
				c.mu.Unlock()
				if name == nil {
					name = NodeOf
				}
				return conn, name(u), true
			}
		}
		select {
		case <-stop:
			return nil, "", false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Publish publishes persistent messages to queue, named
// name-connection-N, with up to inflight confirms outstanding, until stop
// is closed; a failed connection is replaced by one to a URL that
// answers.
func (c *Checker) Publish(name, queue string, inflight int, urls URLs, stop <-chan struct{}) {
	for epoch := 1; ; epoch++ {
		conn, node, ok := c.dial(urls, stop)
		if !ok {
			return
		}
		c.publishOn(conn, node, name, epoch, queue, inflight, stop)
		conn.Close()
		select {
		case <-stop:
			return
		default:
		}
	}
}

func (c *Checker) publishOn(conn *amqp.Connection, node, name string, epoch int, queue string, inflight int, stop <-chan struct{}) {
	ch, err := conn.Channel()
	if err != nil || ch.Confirm(false) != nil {
		return
	}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, inflight))
	// A return comes before its message's confirm, on the same channel:
	// the client hands it over before the confirm.
	returns := ch.NotifyReturn(make(chan amqp.Return, inflight))
	var mu sync.Mutex
	sent := map[uint64]string{}
	slots := make(chan struct{}, inflight)
	done := make(chan struct{})
	go func() {
		defer close(done)
		returned := map[string]bool{}
		for conf := range confirms {
			for more := true; more; {
				select {
				case r, ok := <-returns:
					if ok {
						returned[string(r.Body)] = true
					} else {
						more = false
					}
				default:
					more = false
				}
			}
			mu.Lock()
			body := sent[conf.DeliveryTag]
			delete(sent, conf.DeliveryTag)
			mu.Unlock()
			c.answered(body, conf.Ack, returned[body])
			delete(returned, body)
			<-slots
		}
	}()
	// The confirms channel closes with the channel or its connection.
	defer func() {
		ch.Close()
		<-done
	}()
	for seq := 1; ; seq++ {
		select {
		case <-stop:
			return
		case <-done:
			return // the connection is gone: no more confirms free a slot
		case slots <- struct{}{}:
		}
		body := fmt.Sprintf("%s-%d-%d", name, epoch, seq)
		c.sent(body, name, epoch, seq, node)
		mu.Lock()
		sent[ch.GetNextPublishSeqNo()] = body
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ch.PublishWithContext(ctx, "", queue, true, false, amqp.Publishing{Body: []byte(body), DeliveryMode: amqp.Persistent})
		cancel()
		if err != nil {
			return
		}
		c.mu.Lock()
		pace := c.pace
		c.mu.Unlock()
		if pace > 0 {
			time.Sleep(pace)
		}
	}
}

// Consume consumes queue with manual acks and the given prefetch until
// stop is closed, recording and acking every delivery as consumer name;
// a failed connection is replaced by one to a URL that answers.
func (c *Checker) Consume(name, queue string, prefetch int, urls URLs, stop <-chan struct{}) {
	for {
		conn, node, ok := c.dial(urls, stop)
		if !ok {
			return
		}
		c.consumeOn(conn, node, name, queue, prefetch, stop)
		conn.Close()
		c.closed(name)
		select {
		case <-stop:
			return
		default:
		}
	}
}

func (c *Checker) consumeOn(conn *amqp.Connection, node, name, queue string, prefetch int, stop <-chan struct{}) {
	ch, err := conn.Channel()
	if err != nil || ch.Qos(prefetch, 0, false) != nil {
		return
	}
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return
	}
	for {
		select {
		case <-stop:
			return
		case d, ok := <-ds:
			if !ok {
				return
			}
			body := string(d.Body)
			c.delivered(name, node, body, d.Redelivered)
			if d.Ack(false) == nil {
				c.acked(name, node, body)
			}
		}
	}
}
