package tests

import (
	"context"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublishConsume is issue 2's throughput figure in go test form:
// one producer and one consumer connection, transient 16-byte bodies,
// auto-ack, through an in-process broker (or WARREN_REFERENCE_URL's). The
// msg/s metric counts messages consumed.
func BenchmarkPublishConsume(b *testing.B) {
	s := start(b)
	_, pub := channel(b, s)
	_, sub := channel(b, s)
	q, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	d, err := sub.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := amqp.Publishing{Body: make([]byte, 16)}
	done := make(chan struct{})
	go func() {
		for i := 0; i < b.N; i++ {
			<-d
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := pub.PublishWithContext(context.Background(), "", q.Name, false, false, msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkTopicPublishConsume10k routes through a topic exchange holding
// 10,000 bindings (one of which matches) on the way.
func BenchmarkTopicPublishConsume10k(b *testing.B) {
	s := start(b)
	_, pub := channel(b, s)
	_, sub := channel(b, s)
	x := fmt.Sprintf("bench.topic.%d", b.N)
	if err := sub.ExchangeDeclare(x, "topic", false, true, false, false, nil); err != nil {
		b.Fatal(err)
	}
	sink, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 9999; i++ {
		var pattern string
		switch i % 4 {
		case 0:
			pattern = fmt.Sprintf("other.%d.*", i)
		case 1:
			pattern = fmt.Sprintf("#.%d", i)
		case 2:
			pattern = fmt.Sprintf("*.x%d.#", i)
		default:
			pattern = fmt.Sprintf("region.%d.orders", i)
		}
		if err := sub.QueueBind(sink.Name, pattern, x, true, nil); err != nil {
			b.Fatal(err)
		}
	}
	q, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.QueueBind(q.Name, "stock.*.nyse", x, false, nil); err != nil {
		b.Fatal(err)
	}
	d, err := sub.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := amqp.Publishing{Body: make([]byte, 16)}
	done := make(chan struct{})
	go func() {
		for i := 0; i < b.N; i++ {
			<-d
		}
		close(done)
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := pub.PublishWithContext(context.Background(), x, "stock.ibm.nyse", false, false, msg); err != nil {
			b.Fatal(err)
		}
	}
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
}

// BenchmarkDirectReplyToRPC is a request/reply round trip with direct
// reply-to: the client publishes a request with reply_to
// amq.rabbitmq.reply-to and waits for the reply, which a server on
// another connection publishes to the token it got. One call in flight;
// the calls/s metric is round trips per second. Against RabbitMQ with
// WARREN_REFERENCE_URL.
//
//	go test ./tests -run - -bench DirectReplyToRPC -benchtime 5s
func BenchmarkDirectReplyToRPC(b *testing.B) {
	s := start(b)
	_, server := channel(b, s)
	_, client := channel(b, s)
	q, err := server.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	requests, err := server.Consume(q.Name, "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for req := range requests {
			_ = server.PublishWithContext(context.Background(), "", req.ReplyTo, false, false,
				amqp.Publishing{CorrelationId: req.CorrelationId, Body: req.Body})
		}
	}()
	replies, err := client.Consume("amq.rabbitmq.reply-to", "", true, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	request := amqp.Publishing{ReplyTo: "amq.rabbitmq.reply-to", Body: make([]byte, 16)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		request.CorrelationId = fmt.Sprint(i)
		if err := client.PublishWithContext(context.Background(), "", q.Name, false, false, request); err != nil {
			b.Fatal(err)
		}
		if d := <-replies; d.CorrelationId != request.CorrelationId {
			b.Fatalf("reply %q to request %q", d.CorrelationId, request.CorrelationId)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
