package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	samqp "github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
)

// The stream protocol (-stream-url): producers and consumers of the
// official Go stream client on one stream, -queue, declared afresh. Each
// producer sends its messages one by one (the client batches them, up to
// -stream-batch a frame) and counts confirms; consumers read from
// -stream-offset (default next) and measure latency from the send time in
// each body, as over AMQP. The client's sockets get 1 MiB buffers: with its
// default of 8 KiB a run measures the client's receive window, not the
// broker (BENCHMARKS.md, "streams in chunk files of their own").

const streamSocketBuffer = 1 << 20

func streamEnv(o options) (*stream.Environment, error) {
	return stream.NewEnvironment(stream.NewEnvironmentOptions().SetUri(o.streamURL).
		SetReadBuffer(streamSocketBuffer).SetWriteBuffer(streamSocketBuffer))
}

// declareStream deletes -queue if it exists and declares it again.
func declareStream(o options) error {
	env, err := streamEnv(o)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.DeleteStream(o.queue); err != nil && err != stream.StreamDoesNotExist {
		return fmt.Errorf("deleting stream %s: %w", o.queue, err)
	}
	return env.DeclareStream(o.queue, nil)
}

func (o options) streamOffset() stream.OffsetSpecification {
	switch o.offset {
	case "first":
		return stream.OffsetSpecification{}.First()
	case "last":
		return stream.OffsetSpecification{}.Last()
	}
	return stream.OffsetSpecification{}.Next()
}

// consumeStream runs one consumer connection until ctx ends.
func consumeStream(ctx context.Context, o options, st *stats, ready chan<- error) {
	env, err := streamEnv(o)
	if err != nil {
		ready <- err
		return
	}
	defer env.Close()
	var sample []time.Duration
	n := 0
	handle := func(_ stream.ConsumerContext, m *samqp.Message) {
		n++
		if body := m.GetData(); len(body) >= 8 && n%sampleEvery == 0 {
			sample = append(sample, time.Duration(time.Now().UnixNano()-int64(binary.BigEndian.Uint64(body))))
		}
		st.consumed.Add(1)
	}
	c, err := env.NewConsumer(o.queue, handle, stream.NewConsumerOptions().SetOffset(o.streamOffset()))
	if err != nil {
		ready <- err
		return
	}
	ready <- nil
	<-ctx.Done()
	_ = c.Close() // the handler has returned for good
	st.mu.Lock()
	st.latencies = append(st.latencies, sample...)
	st.mu.Unlock()
}

// produceStream runs one producer connection until ctx ends, then waits
// (10 s at most) for the confirms still due.
func produceStream(ctx context.Context, o options, st *stats) error {
	env, err := streamEnv(o)
	if err != nil {
		return err
	}
	defer env.Close()
	p, err := env.NewProducer(o.queue, stream.NewProducerOptions().SetBatchSize(o.streamBatch))
	if err != nil {
		return err
	}
	confirmsDone := make(chan struct{})
	var sample []time.Duration
	confirms := p.NotifyPublishConfirmation()
	go func() {
		defer close(confirmsDone)
		for batch := range confirms {
			for _, c := range batch {
				if c.IsConfirmed() {
					st.confirmed.Add(1)
				} else {
					st.nacked.Add(1)
				}
				if c.GetPublishingId()%sampleEvery == 0 {
					if data := c.GetMessage().GetData(); len(data) > 0 && len(data[0]) >= 8 {
						sample = append(sample, time.Duration(time.Now().UnixNano()-int64(binary.BigEndian.Uint64(data[0]))))
					}
				}
			}
		}
	}()
	g := newGate(o.rate)
	defer g.stop()
sending:
	for n := 0; o.pmessages == 0 || n < o.pmessages; n++ {
		if ctx.Err() != nil {
			break
		}
		if !g.wait(ctx) {
			break sending
		}
		body := o.messageBody()
		if o.size >= 8 {
			binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
		}
		if err := p.Send(samqp.NewMessage(body)); err != nil {
			return err
		}
		st.published.Add(1)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st.confirmed.Load()+st.nacked.Load() < st.published.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_ = p.Close() // ends the confirmation channel
	<-confirmsDone
	st.mu.Lock()
	st.confirms = append(st.confirms, sample...)
	st.mu.Unlock()
	return nil
}
