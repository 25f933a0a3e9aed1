package streamqueue

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/queuetype"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
	"github.com/warrenmq/warren/protocol"
)

// TestRetentionArguments: a stream's retention is read from its
// arguments without checks; what cannot be read is no limit.
func TestRetentionArguments(t *testing.T) {
	v := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop()})
	t.Cleanup(v.Close)
	for _, c := range []struct {
		args           protocol.Table
		bytes, segment int64
		age            time.Duration
	}{
		{protocol.Table{}, 0, 0, 0},
		{protocol.Table{"x-max-length-bytes": int64(1000), "x-stream-max-segment-size-bytes": int32(100), "x-max-age": "2h"}, 1000, 100, 2 * time.Hour},
		{protocol.Table{"x-max-length-bytes": int64(-1), "x-max-age": "0s"}, 0, 0, 0},
		{protocol.Table{"x-max-age": "soon"}, 0, 0, 0},
	} {
		cfg := config(v.Host(), topology.QueueDef{Name: "s", Args: c.args})
		if cfg.MaxBytes != c.bytes || cfg.SegmentBytes != c.segment || cfg.MaxAge != c.age || cfg.Name != "s" || cfg.VHost != "/" {
			t.Errorf("%v: %+v", c.args, cfg)
		}
	}
}

// TestRefusals: what a stream refuses a channel, read here or through a
// member elsewhere, with RabbitMQ 3.10's 540 and its words.
func TestRefusals(t *testing.T) {
	v := vhost.New(vhost.Config{Name: "/", Types: exchange.NewRegistry(), Logger: zerolog.Nop()})
	t.Cleanup(v.Close)
	s := &Queue{h: v.Host(), name: "s"}
	for _, src := range []queuetype.Source{local{s}, elsewhere{s: s}} {
		for a, want := range map[queuetype.Asked]string{
			queuetype.AskGet:            "basic.get not supported by stream queues queue 's' in vhost '/'",
			queuetype.AskNackOrReject:   "basic.nack and basic.reject not supported by stream queues queue 's' in vhost '/'",
			queuetype.AskGlobalPrefetch: "",
		} {
			err := queuetype.Refused(src, a)
			switch e := reply.As(err); {
			case want == "" && err != nil:
				t.Errorf("%T refuses %v: %v", src, a, err)
			case want != "" && (e == nil || e.Code != protocol.NotImplemented || e.Text != "NOT_IMPLEMENTED - "+want):
				t.Errorf("%T, %v: %v; want 540 %q", src, a, err, want)
			}
		}
	}
	if _, err := s.Purge(); reply.As(err) == nil || reply.As(err).Code != protocol.NotImplemented {
		t.Errorf("purge: %v", err)
	}
}
