package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/broker"
	"github.com/warrenmq/warren/core/config"
)

// TestRunJSON runs a small load against an in-process broker: two
// producer channels on one connection, two queues, confirms, and the
// summary as JSON with both latencies sampled.
func TestRunJSON(t *testing.T) {
	b := startBroker(t, nil)

	var out bytes.Buffer
	output, progress = &out, io.Discard
	defer func() { output, progress = os.Stdout, os.Stdout }()
	o := options{
		url: "amqp://guest:guest@" + b.Addr().String() + "/", producers: 1, consumers: 2, channels: 2, queues: 2,
		size: 16, duration: 30e9, queue: "perf", autoAck: true, confirm: 8, pmessages: 400, multiAck: 1, json: true,
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	var sum Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if sum.Published != 800 || sum.Confirmed != 800 || sum.Consumed != 800 || sum.Channels != 2 || sum.Queues != 2 {
		t.Fatalf("summary %+v", sum)
	}
	if sum.Latency == nil || sum.ConfirmLatency == nil || sum.ConfirmLatency.Samples == 0 || sum.Latency.P99 < sum.Latency.P50 {
		t.Fatalf("latencies %+v %+v", sum.Latency, sum.ConfirmLatency)
	}
	if sum.ClientCPU == nil || *sum.ClientCPU <= 0 {
		t.Fatalf("client CPU %v", sum.ClientCPU)
	}
}

func TestMessageBody(t *testing.T) {
	zeros := options{size: 4096, body: "zeros"}.messageBody()
	if len(zeros) != 4096 || bytes.Count(zeros, []byte{0}) != 4096 {
		t.Fatal("-body zeros did not send zeros")
	}
	random := options{size: 4096, body: "random"}.messageBody()
	if len(random) != 4096 || bytes.Count(random, []byte{0}) > 100 {
		t.Fatalf("-body random: %d bytes, %d of them zero", len(random), bytes.Count(random, []byte{0}))
	}
}

// TestRunStreamJSON runs the stream protocol (-stream-url) against an
// in-process broker: two producers, two consumers from first that each
// read every message, both latencies sampled.
func TestRunStreamJSON(t *testing.T) {
	b := startBroker(t, config.Addrs{"127.0.0.1:0"})

	var out bytes.Buffer
	output, progress = &out, io.Discard
	defer func() { output, progress = os.Stdout, os.Stdout }()
	o := options{
		streamURL: "rabbitmq-stream://guest:guest@" + b.StreamAddr() + "/", streamBatch: 50, offset: "first",
		producers: 2, consumers: 2, channels: 1, queues: 1, size: 16, duration: 30e9, queue: "perf-stream",
		pmessages: 300, json: true,
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	var sum Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	if sum.Published != 600 || sum.Confirmed != 600 || sum.Consumed != 1200 {
		t.Fatalf("summary %+v", sum)
	}
	if sum.Latency == nil || sum.ConfirmLatency == nil || sum.ConfirmLatency.Samples == 0 {
		t.Fatalf("latencies %+v %+v", sum.Latency, sum.ConfirmLatency)
	}
}

// startBroker starts an in-process broker on loopback, its stream
// listener on stream (nil: none), stopped with the test.
func startBroker(t *testing.T, stream config.Addrs) *broker.Broker {
	t.Helper()
	cfg := config.Default()
	cfg.AMQP.Listen = config.Addrs{"127.0.0.1:0"}
	cfg.Stream.Listen = stream
	cfg.MQTT.Listen = nil
	cfg.Admin.Listen = ""
	cfg.Storage.DataDir = t.TempDir()
	b, err := broker.New(cfg, zerolog.New(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return b
}
