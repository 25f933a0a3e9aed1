package conn

import (
	"crypto/tls"
	"io"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/warrenmq/warren/internal/lockorder"

	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/core/stats"
	"github.com/warrenmq/warren/protocol"
)

// This file is what the admin API sees of connections, channels and
// consumers, and the admin's one action on them: closing a connection.
// Everything here runs on goroutines other than the connection's reader,
// so it reads only what is shared: the opened info, the live channel map
// under liveMu, each channel's delivery state under its mu, and atomics.

// ConnInfo describes a connection for the admin API.
type ConnInfo struct {
	ID          uint64
	Name        string
	User        string
	VHost       string
	Channels    int
	ClientProp  protocol.Table
	Since       time.Time
	Peer, Local string // addresses, host:port
	TLS         bool
	Heartbeat   time.Duration
	FrameMax    uint32
	ChannelMax  uint16
	Blocked     bool // held by a resource alarm right now
	Flow        bool // held until its publishes are answered (flow.go)
	Stats       stats.Values
	Rates       stats.Rates
	// Socket traffic: bytes and reads received, bytes and writes sent,
	// and their rates per second.
	RecvOct, RecvCnt, SendOct, SendCnt                 uint64
	RecvOctRate, RecvCntRate, SendOctRate, SendCntRate float64
	// SendPend is the bytes waiting for the socket: at most the
	// congestion mark and one more delivery, however slow the client.
	SendPend int
}

// ChannelInfo describes a channel for the admin API.
type ChannelInfo struct {
	Conn           ConnInfo
	Number         uint16
	Confirm        bool
	Transactional  bool
	Prefetch       uint16 // basic.qos global=false, for consumers made after it
	GlobalPrefetch uint16
	Unacked        int
	Consumers      []ConsumerInfo
	Stats          stats.Values
	Rates          stats.Rates
}

// Name is the channel's name as RabbitMQ shows it: the connection's name
// and the channel number.
func (ci ChannelInfo) Name() string { return ci.Conn.Name + " (" + strconv.Itoa(int(ci.Number)) + ")" }

// ConsumerInfo describes a consumer for the admin API.
type ConsumerInfo struct {
	Tag       string
	Queue     string
	VHost     string
	NoAck     bool
	Exclusive bool
	Prefetch  uint16
	Args      protocol.Table
}

// retire forgets a closed channel for the admin API, keeping its
// statistics in the connection's totals.
func (c *Conn) retire(ch *channel) {
	c.liveMu.Lock()
	live := c.live[ch.id] == ch
	if live {
		delete(c.live, ch.id)
	}
	c.liveMu.Unlock()
	if live {
		c.srv.closeChannel(c.user.Name)
		c.srv.churn.channelsClosed.Add(1)
		c.retired.AddValues(ch.stats.Values())
	}
}

// dropChannels tears down and retires every channel: the connection is
// ending.
func (c *Conn) dropChannels() {
	for id, ch := range c.channels {
		ch.teardown()
		delete(c.channels, id)
		c.retire(ch)
	}
}

// count adds n events of kind k to the channel's statistics and its
// vhost's (none in unit tests that build a channel without one).
func (ch *channel) count(k stats.Kind, n uint64) {
	ch.stats.Add(k, n)
	if vh := ch.c.vh; vh != nil {
		vh.Counters.Add(k, n)
	}
}

func (c *Conn) liveChannels() []*channel {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	out := make([]*channel, 0, len(c.live))
	for _, ch := range c.live {
		out = append(out, ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (c *Conn) info() ConnInfo {
	var ci ConnInfo
	c.fill(&ci)
	return ci
}

// fill writes the connection's figures into ci, a zero ConnInfo: a
// listing of thousands fills its slice in place rather than copy each.
func (c *Conn) fill(ci *ConnInfo) {
	ci.ID, ci.Name, ci.Channels, ci.Since = c.id, c.name, int(c.nchan.Load()), c.since
	ci.Peer, ci.Local, ci.Blocked, ci.Flow = c.peer, c.local, c.blocked.Load(), c.flowing.Load()
	_, ci.TLS = c.nc.(*tls.Conn)
	if o := c.opened.Load(); o != nil {
		ci.User, ci.VHost, ci.ClientProp = o.user, o.vhost, o.props
		ci.Heartbeat, ci.FrameMax, ci.ChannelMax = o.heartbeat, o.frameMax, o.channelMax
	}
	n, r := c.io.values(), c.io.rates()
	ci.RecvOct, ci.RecvCnt, ci.SendOct, ci.SendCnt = n[recvOct], n[recvCnt], n[sendOct], n[sendCnt]
	ci.RecvOctRate, ci.RecvCntRate, ci.SendOctRate, ci.SendCntRate = r[recvOct], r[recvCnt], r[sendOct], r[sendCnt]
	ci.SendPend = c.out.pendingBytes()
	ci.Stats = c.retired.Values()
	for _, ch := range c.liveChannels() {
		ci.Stats.Add(ch.stats.Values())
		ci.Rates.Add(ch.stats.Rates())
	}
}

func (ch *channel) info(conn ConnInfo) ChannelInfo {
	ci := ChannelInfo{
		Conn: conn, Number: ch.id, Confirm: ch.confirmMode.Load(), Transactional: ch.txMode.Load(),
		Stats: ch.stats.Values(), Rates: ch.stats.Rates(),
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ci.Prefetch, ci.GlobalPrefetch = ch.prefetch, ch.globalPrefetch
	ci.Unacked = ch.unacked.len()
	for _, k := range ch.consumers {
		ci.Consumers = append(ci.Consumers, ConsumerInfo{
			Tag: k.tag, Queue: k.queueName, VHost: ch.c.vh.Name, NoAck: k.noAck,
			Exclusive: k.exclusive, Prefetch: k.prefetch, Args: k.args,
		})
	}
	sort.Slice(ci.Consumers, func(i, j int) bool { return ci.Consumers[i].Tag < ci.Consumers[j].Tag })
	return ci
}

// Connections lists the open connections, oldest first.
func (s *Server) Connections() []ConnInfo {
	conns := s.snapshot()
	out := make([]ConnInfo, len(conns))
	for i, c := range conns {
		c.fill(&out[i])
	}
	return out
}

// Channels lists every open channel, by connection (oldest first) then
// number.
func (s *Server) Channels() []ChannelInfo {
	var out []ChannelInfo
	for _, c := range s.snapshot() {
		ci := c.info()
		for _, ch := range c.liveChannels() {
			out = append(out, ch.info(ci))
		}
	}
	return out
}

// SampleRates samples every connection's channels for rates; the broker's
// statistics sampler calls it.
func (s *Server) SampleRates(now time.Time) {
	for _, c := range s.snapshot() {
		c.io.sample(now)
		for _, ch := range c.liveChannels() {
			ch.stats.Sample(now)
		}
	}
}

// CloseConnection closes the open connection called name, as an
// operator's request (the admin API): the client gets 320
// CONNECTION_FORCED with reason as the text, RabbitMQ's words, and has
// closeTimeout to answer. It reports whether such a connection was open.
func (s *Server) CloseConnection(name, reason string) bool {
	for _, c := range s.snapshot() {
		if c.name != name || c.opened.Load() == nil {
			continue
		}
		c.log.Info().Str("reason", reason).Msg("connection closed by an operator")
		c.sendClose(reply.New(protocol.ConnectionForced, "%s", reason), 0, 0) // New writes "CONNECTION_FORCED - "
		c.stopOnce.Do(func() { close(c.stop) })
		_ = c.nc.SetDeadline(time.Now().Add(closeTimeout))
		return true
	}
	return false
}

// snapshot returns the served connections, oldest first.
func (s *Server) snapshot() []*Conn {
	s.mu.Lock()
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	sort.Slice(conns, func(i, j int) bool { return conns[i].id < conns[j].id })
	return conns
}

// ioCounts are a connection's socket traffic as RabbitMQ reports it:
// bytes and reads received (recv_oct, recv_cnt), bytes and writes sent
// (send_oct, send_cnt), with rates between the two latest samples.
type ioCounts struct {
	n [4]atomic.Uint64 // recvOct, recvCnt, sendOct, sendCnt

	mu      lockorder.Mutex[lockorder.ConnIOCounts] // guards samples
	samples stats.Pair[[4]uint64]
}

const (
	recvOct = iota
	recvCnt
	sendOct
	sendCnt
)

func (ic *ioCounts) received(n int) {
	ic.n[recvOct].Add(uint64(n))
	ic.n[recvCnt].Add(1)
}

func (ic *ioCounts) sent(n int) {
	ic.n[sendOct].Add(uint64(n))
	ic.n[sendCnt].Add(1)
}

func (ic *ioCounts) values() [4]uint64 {
	var v [4]uint64
	for i := range v {
		v[i] = ic.n[i].Load()
	}
	return v
}

func (ic *ioCounts) sample(now time.Time) {
	v := ic.values()
	ic.mu.Lock()
	ic.samples.Push(v, now)
	ic.mu.Unlock()
}

func (ic *ioCounts) rates() [4]float64 {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	var r [4]float64
	s := &ic.samples
	if dt := s.Seconds(); dt > 0 {
		for i := range r {
			r[i] = float64(s.Last[i]-s.Prev[i]) / dt
		}
	}
	return r
}

// countingReader counts what the frame reader takes from the socket; the
// reader buffers, so this is one add per socket read, not per frame.
type countingReader struct {
	r      io.Reader
	counts *ioCounts
}

func (cr countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	if n > 0 {
		cr.counts.received(n)
	}
	return n, err
}

// ClientCount is how many connections, channels and consumers one user
// has open in one vhost.
type ClientCount struct {
	User, VHost                      string
	Connections, Channels, Consumers int
}

// ClientCounts counts the open connections (past connection.open), their
// channels and consumers, by user and vhost, without building each
// connection's figures: the overview asks it on every refresh, and with
// 10,000 connections Connections would cost it tens of milliseconds.
func (s *Server) ClientCounts() []ClientCount {
	type key struct{ user, vhost string }
	counts := map[key]*ClientCount{}
	for _, c := range s.snapshot() {
		o := c.opened.Load()
		if o == nil {
			continue
		}
		k := key{o.user, o.vhost}
		n := counts[k]
		if n == nil {
			n = &ClientCount{User: o.user, VHost: o.vhost}
			counts[k] = n
		}
		n.Connections++
		for _, ch := range c.liveChannels() { // liveMu is a leaf: released before ch.mu
			n.Channels++
			ch.mu.Lock()
			n.Consumers += len(ch.consumers)
			ch.mu.Unlock()
		}
	}
	out := make([]ClientCount, 0, len(counts))
	for _, n := range counts {
		out = append(out, *n)
	}
	return out
}
