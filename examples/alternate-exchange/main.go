// Command alternate-exchange runs the seeds' alternate-exchange scenario
// against a broker: an exchange whose unroutable messages go to an
// alternate exchange, a mandatory publish that comes back when the chain
// of alternates loops, and the same publish routed once the alternate has a
// queue bound.
//
//	go run ./examples/alternate-exchange [-url amqp://guest:guest@127.0.0.1:5672/]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	url := flag.String("url", "amqp://guest:guest@127.0.0.1:5672/", "broker URL")
	flag.Parse()
	if err := run(*url); err != nil {
		log.Fatal(err)
	}
}

func run(url string) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		return err
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))

	// The Java example from seed 001: my-direct with alternate my-ae.
	steps := []func() error{
		func() error {
			return ch.ExchangeDeclare("my-ae", "fanout", false, true, false, false, nil)
		},
		func() error {
			return ch.ExchangeDeclare("my-direct", "direct", false, true, false, false, amqp.Table{"alternate-exchange": "my-ae"})
		},
		func() error { _, err := ch.QueueDeclare("routed", false, true, false, false, nil); return err },
		func() error { return ch.QueueBind("routed", "key1", "my-direct", false, nil) },
		func() error { _, err := ch.QueueDeclare("unrouted", false, true, false, false, nil); return err },
		func() error { return ch.QueueBind("unrouted", "", "my-ae", false, nil) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	publish := func(exchange, key string) (returned bool, err error) {
		if err := ch.PublishWithContext(context.Background(), exchange, key, true, false, amqp.Publishing{Body: []byte("Hello World!")}); err != nil {
			return false, err
		}
		select {
		case <-returns:
			returned = true
			<-confirms
		case c := <-confirms:
			if !c.Ack {
				return false, fmt.Errorf("publish nacked")
			}
		case <-time.After(5 * time.Second):
			return false, fmt.Errorf("no confirm")
		}
		return returned, nil
	}
	for _, key := range []string{"key1", "key2"} {
		returned, err := publish("my-direct", key)
		if err != nil {
			return err
		}
		fmt.Printf("my-direct %-5s returned=%v\n", key, returned)
	}
	for _, q := range []string{"routed", "unrouted"} {
		n, err := ch.QueueDeclarePassive(q, false, true, false, false, nil)
		if err != nil {
			return err
		}
		fmt.Printf("queue %-8s holds %d message(s)\n", q, n.Messages)
	}

	// The pika scenario from seed 001: ex's alternate is ae, and ae is
	// bound back to ex, so an unroutable message reaches ex twice and is
	// unroutable: mandatory returns it. Binding a queue to ae routes it.
	if err := ch.ExchangeDeclare("ae", "topic", false, true, false, false, nil); err != nil {
		return err
	}
	if err := ch.ExchangeDeclare("ex", "topic", false, true, false, false, amqp.Table{"alternate-exchange": "ae"}); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare("ex_queue", false, true, false, false, nil); err != nil {
		return err
	}
	if err := ch.QueueBind("ex_queue", "ex", "ex", false, nil); err != nil {
		return err
	}
	if err := ch.ExchangeBind("ex", "ae", "ae", false, nil); err != nil {
		return err
	}
	returned, err := publish("ex", "ae")
	if err != nil {
		return err
	}
	fmt.Printf("ex ae (ae loops back to ex) returned=%v\n", returned)
	if _, err := ch.QueueDeclare("ae_queue", false, true, false, false, nil); err != nil {
		return err
	}
	if err := ch.QueueBind("ae_queue", "ae", "ae", false, nil); err != nil {
		return err
	}
	returned, err = publish("ex", "ae")
	if err != nil {
		return err
	}
	fmt.Printf("ex ae (ae_queue bound to ae) returned=%v\n", returned)
	return nil
}
