package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/warrenmq/warren/core/config"
	wire "github.com/warrenmq/warren/protocol/stream"
)

// writeSelfSigned writes a throwaway certificate for 127.0.0.1.
func writeSelfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warren-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestAMQPS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	s := startWarren(t, func(c *config.Config) {
		c.AMQP.Listen = nil
		c.AMQPS = config.AMQPS{Listen: config.Addrs{"127.0.0.1:0"}, CertFile: certFile, KeyFile: keyFile}
	})
	c, err := amqp.DialTLS("amqps://guest:guest@"+s.b.Addr().String()+"/", &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, ch, "", q.Name, body("over TLS"))
	if got := get(t, ch, q.Name); string(got.Body) != "over TLS" {
		t.Fatalf("got %q", got.Body)
	}
}

// The stream protocol over TLS (stream.tls_listen, RabbitMQ's 5551) with
// the amqps certificate: the Go stream client publishes and reads back,
// and metadata sends it to the TLS listener it came in by.
func TestStreamProtocolOverTLS(t *testing.T) {
	certFile, keyFile, pool := writeSelfSigned(t)
	s := startWarren(t, func(c *config.Config) {
		c.AMQPS = config.AMQPS{CertFile: certFile, KeyFile: keyFile}
		c.Stream.Listen = nil
		c.MQTT.Listen = nil
		c.Stream.TLSListen = config.Addrs{"127.0.0.1:0"}
		c.Stream.AdvertisedHost = "127.0.0.1" // the certificate's name
	})
	var addr string
	for _, l := range s.b.Listeners() {
		if l.Protocol == "stream/ssl" {
			addr = net.JoinHostPort(l.IP, strconv.Itoa(l.Port))
		}
	}
	if addr == "" {
		t.Fatalf("no stream/ssl listener: %+v", s.b.Listeners())
	}
	env, err := stream.NewEnvironment(stream.NewEnvironmentOptions().
		SetUri("rabbitmq-stream+tls://guest:guest@" + addr + "/").IsTLS(true).
		SetTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	name := uniq(t, "tls")
	p := declaredProducer(t, env, name)
	defer p.Close()
	sendConfirmed(t, p, "tls", 10)
	got := readStreamBodies(t, env, name, 10)
	if got[9] != "tls-9" {
		t.Fatalf("read back %q", got)
	}
	// A plain client on the TLS port gets no stream session.
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, _ = raw.Write(wire.AppendFrame(nil, &wire.PeerProperties{CorrelationID: 1}))
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 16)
	if n, _ := raw.Read(b); n >= 8 && b[4] == 0x80 && b[5] == 0x11 {
		t.Fatal("a plain-text client was answered on the TLS listener")
	}
}
