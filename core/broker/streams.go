package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/streamproto"
)

// newStreamServer builds the stream-protocol server from [stream]; its
// listeners open in Start.
func newStreamServer(cfg config.Config, log zerolog.Logger, b *Broker) *streamproto.Server {
	return &streamproto.Server{
		Settings: streamproto.Settings{
			FrameMax:         uint32(cfg.Stream.FrameMax), // in range: Validate
			Heartbeat:        time.Duration(cfg.Stream.Heartbeat),
			HandshakeTimeout: time.Duration(cfg.Limits.HandshakeTimeout),
			MaxUnconfirmed:   cfg.Stream.MaxUnconfirmed,
		},
		Users:    b.users,
		VHosts:   b,
		Log:      log,
		Version:  Version,
		Admit:    b.srv.AdmitOther,
		Endpoint: b.streamEndpoint,
		Node:     b.NodeName(),
		Call:     b.callSAC,
		NodeUp:   b.nodeUp,
	}
}

// nodeUp says whether the node named is up, as the cluster sees it.
func (b *Broker) nodeUp(node string) bool {
	n := b.cluster.Load()
	return n != nil && n.Alive(node)
}

// callSAC sends a single-active-consumer message to the node named.
func (b *Broker) callSAC(ctx context.Context, node string, payload []byte) error {
	n := b.cluster.Load()
	if n == nil {
		return fmt.Errorf("no node %q: this node is in no cluster", node)
	}
	_, err := n.Call(ctx, node, append([]byte{callSAC}, payload...))
	return err
}

// streamEndpoint is what a node advertises to stream clients, as the
// stream protocol's metadata names it.
type streamEndpoint struct {
	Host string
	Port uint32 // 0: it serves no stream protocol
}

// streamEndpointHere is this node's.
func (b *Broker) streamEndpointHere() streamEndpoint {
	return streamEndpoint{Host: b.streams.Settings.AdvertisedHost, Port: b.streams.Settings.AdvertisedPort}
}

// streamEndpoint is the stream host and port the node named node
// advertises: this node's own, or a member's, asked of it (callStream)
// each time, since a member restarted may listen elsewhere and metadata
// is asked rarely (a client's new publisher or consumer). ok is false
// for a member that is down, does not answer, or serves no stream
// protocol.
func (b *Broker) streamEndpoint(node string) (host string, port uint32, ok bool) {
	if node == b.NodeName() {
		e := b.streamEndpointHere()
		return e.Host, e.Port, e.Port != 0
	}
	n := b.cluster.Load()
	if n == nil || !n.Alive(node) {
		return "", 0, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	e, err := askMember[streamEndpoint](ctx, b, node, callStream, "stream endpoint")
	if err != nil {
		b.log.Debug().Err(err).Str("node", node).Msg("a member's stream endpoint not learned")
		return "", 0, false
	}
	return e.Host, e.Port, e.Port != 0
}

// Streams is the stream-protocol server, for the admin API's listings.
func (b *Broker) Streams() *streamproto.Server { return b.streams }

// startStreamListeners opens stream.listen and stream.tls_listen, and
// sets what metadata advertises from the first of them.
func (b *Broker) startStreamListeners() error {
	cfg := b.cfg.Stream
	var first net.Addr
	for _, addr := range cfg.Listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("stream listener %s: %w", addr, err)
		}
		if first == nil {
			first = ln.Addr()
		}
		b.serve(ln, "stream", b.streams.Serve)
	}
	if len(cfg.TLSListen) > 0 {
		cert, err := tls.LoadX509KeyPair(b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile)
		if err != nil {
			return fmt.Errorf("stream.tls_listen: loading %s and %s: %w", b.cfg.AMQPS.CertFile, b.cfg.AMQPS.KeyFile, err)
		}
		for _, addr := range cfg.TLSListen {
			ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
			if err != nil {
				return fmt.Errorf("stream tls listener %s: %w", addr, err)
			}
			if first == nil {
				first = ln.Addr()
			}
			b.serve(ln, "stream/ssl", b.streams.Serve)
		}
	}
	host, port := advertised(cfg.AdvertisedHost, cfg.AdvertisedPort, first)
	b.streams.Settings.AdvertisedHost, b.streams.Settings.AdvertisedPort = host, port
	return nil
}

// advertised is the host and port metadata names this node by: the
// settings', or else the listener's (a loopback address as "localhost",
// as RabbitMQ's node on localhost advertises it; an unspecified one as
// the host name).
func advertised(host string, port int, ln net.Addr) (string, uint32) {
	tcp, _ := ln.(*net.TCPAddr)
	if port == 0 && tcp != nil {
		port = tcp.Port
	}
	if host == "" && tcp != nil {
		switch {
		case tcp.IP.IsLoopback():
			host = "localhost"
		case tcp.IP.IsUnspecified():
			host, _ = os.Hostname()
			host, _, _ = strings.Cut(host, ".")
		default:
			host = tcp.IP.String()
		}
	}
	if host == "" {
		host = "localhost"
	}
	return host, uint32(port)
}

// StreamAddr is the address of the first plain stream listener, "" when
// there is none.
func (b *Broker) StreamAddr() string {
	for _, l := range b.Listeners() {
		if l.Protocol == "stream" {
			return net.JoinHostPort(l.IP, strconv.Itoa(l.Port))
		}
	}
	return ""
}
