package amqpclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// URI is one end's address as RabbitMQ's AMQP URIs give it. With no host
// ("amqp://", "amqp:///vhost", "amqp://user:pass@/vhost") it is this
// broker, reached without a socket: as the broker itself when it names
// no user (RabbitMQ's direct connection as "none"), else as that user.
type URI struct {
	raw      string
	local    bool
	hasUser  bool
	vhost    string
	named    bool // the URI names its vhost (it has a path)
	insecure bool // verify=verify_none
}

// ParseURI reads an AMQP URI as RabbitMQ's amqp_uri does.
func ParseURI(s string) (URI, error) {
	u, err := url.Parse(s)
	if err != nil {
		return URI{}, err
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return URI{}, fmt.Errorf("unexpected URI scheme %q", u.Scheme)
	}
	out := URI{raw: s, local: u.Hostname() == "", hasUser: u.User != nil, vhost: "/"}
	if out.local && u.Port() != "" {
		return URI{}, errors.New("a port needs a host")
	}
	// A path names the vhost; "/" alone is the vhost "/" (RabbitMQ reads
	// it as ""), and no path leaves the caller's default (OrVHost).
	if rest, ok := strings.CutPrefix(u.EscapedPath(), "/"); ok {
		out.named = true
		if rest != "" {
			if strings.Contains(rest, "/") {
				return URI{}, fmt.Errorf("invalid vhost %q (a '/' in it is written %%2F)", rest)
			}
			if out.vhost, err = url.PathUnescape(rest); err != nil {
				return URI{}, err
			}
		}
	}
	switch v := u.Query().Get("verify"); v {
	case "", "verify_peer":
	case "verify_none":
		out.insecure = true
	default:
		return URI{}, fmt.Errorf("verify should be verify_peer or verify_none, not %q", v)
	}
	if !out.local {
		if _, err := amqp.ParseURI(out.clientForm()); err != nil {
			return URI{}, err
		}
	}
	return out, nil
}

// clientForm is the URI as amqp091-go reads it: RabbitMQ's own query
// keys that it does not know taken out.
func (u URI) clientForm() string {
	p, err := url.Parse(u.raw)
	if err != nil {
		return u.raw
	}
	q := p.Query()
	q.Del("verify")
	q.Del("fail_if_no_peer_cert")
	q.Del("depth")
	q.Del("password")
	p.RawQuery = q.Encode()
	return p.String()
}

// Local says the URI is this broker's (no host); HasUser that it
// names a user; VHost is the vhost it names ("/" when none).
func (u URI) Local() bool   { return u.local }
func (u URI) HasUser() bool { return u.hasUser }
func (u URI) VHost() string { return u.vhost }

// OrVHost is u in vhost when u names none ("amqp://host"), as a
// federation upstream's URI without a path is in the federated
// exchange's or queue's vhost.
func (u URI) OrVHost(vhost string) URI {
	if !u.named {
		u.vhost = vhost
	}
	return u
}

// Redacted is the URI without its credentials, as RabbitMQ shows it
// (amqp_uri:remove_credentials): scheme, host, port and path.
func (u URI) Redacted() string {
	p, err := url.Parse(u.raw)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host + p.EscapedPath()
}

// Dialer makes a connection to a URI: Local serves this broker's end of
// a local one.
type Dialer struct {
	// Local returns the client's end of a connection this broker serves
	// (conn.Server.ServeLocal); asBroker as there.
	Local func(asBroker bool) (net.Conn, error)
	Name  string // the connection's name, as its client properties carry it
}

// Dial connects to u.
func (d Dialer) Dial(u URI) (*amqp.Connection, error) {
	cfg := amqp.Config{Properties: amqp.NewConnectionProperties()}
	cfg.Properties["connection_name"] = d.Name
	if !u.local {
		if u.insecure {
			tc, err := insecureTLS(u)
			if err != nil {
				return nil, err
			}
			cfg.TLSClientConfig = tc
		}
		if !u.named {
			cfg.Vhost = u.vhost
		}
		return amqp.DialConfig(u.clientForm(), cfg)
	}
	if d.Local == nil {
		return nil, errors.New("this broker cannot be reached locally")
	}
	cfg.Vhost = u.vhost
	cfg.Dial = func(string, string) (net.Conn, error) { return d.Local(!u.hasUser) }
	// The local end has no host: the client is given one it never dials.
	p, _ := url.Parse(u.raw)
	p.Host = "localhost"
	p.Scheme = "amqp"
	p.RawQuery = ""
	return amqp.DialConfig(p.String(), cfg)
}

// insecureTLS is the TLS configuration of verify=verify_none: the
// client's certificate if the URI names one, the server's unchecked.
func insecureTLS(u URI) (*tls.Config, error) {
	p, err := amqp.ParseURI(u.clientForm())
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{InsecureSkipVerify: true, ServerName: p.ServerName}
	if p.CACertFile != "" {
		pem, err := os.ReadFile(p.CACertFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AppendCertsFromPEM(pem)
	}
	if p.CertFile != "" && p.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
