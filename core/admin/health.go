package admin

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/warrenmq/warren/core/classicqueue"
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/core/topology"
	"github.com/warrenmq/warren/core/vhost"
)

// The health checks answer as RabbitMQ 3.10.8's do (checked against it):
// 200 {"status":"ok", ...} or 503 {"status":"failed","reason":...}, with
// the same extra fields. A node of one is never quorum- or
// mirror-sync-critical.
func (a *api) routeHealth(mux *router) {
	a.handle(mux, "GET /api/aliveness-test/{vhost}", management, a.aliveness)
	a.handle(mux, "GET /api/health/checks/alarms", management, a.alarms)
	a.handle(mux, "GET /api/health/checks/local-alarms", management, a.alarms)
	a.handle(mux, "GET /api/health/checks/port-listener/{port}", management, a.portListener)
	a.handle(mux, "GET /api/health/checks/protocol-listener/{protocol}", management, a.protocolListener)
	a.handle(mux, "GET /api/health/checks/virtual-hosts", management, a.virtualHosts)
	a.handle(mux, "GET /api/health/checks/certificate-expiration/{within}/{unit}", management, a.certificates)
	a.handle(mux, "GET /api/health/checks/node-is-quorum-critical", management, a.quorumCritical)
	a.handle(mux, "GET /api/health/checks/node-is-mirror-sync-critical", management, a.singleNode)
}

// health is a check's answer, its fields in RabbitMQ's order.
type health struct {
	Status    string           `json:"status"`
	Reason    string           `json:"reason,omitempty"`
	Port      int              `json:"port,omitempty"`
	Protocol  string           `json:"protocol,omitempty"`
	Missing   any              `json:"missing,omitempty"`
	Ports     []int            `json:"ports,omitempty"`
	Protocols []string         `json:"protocols,omitempty"`
	Alarms    []map[string]any `json:"alarms,omitempty"`
	Expired   []map[string]any `json:"expired,omitempty"`
}

var statusOK = health{Status: "ok"}

// failed is a health check's 503.
func failed(reason string, h health) *answer {
	h.Status, h.Reason = "failed", reason
	return &answer{status: http.StatusServiceUnavailable, body: h}
}

// aliveness declares the queue aliveness-test in the vhost, publishes a
// message to it through the default exchange and gets it back, as
// RabbitMQ's aliveness test does, and so needs the permissions those
// three need.
func (a *api) aliveness(c *call) (any, error) {
	v, err := c.vhost()
	if err != nil {
		return nil, err
	}
	const name = "aliveness-test"
	g := c.grant(v.Name)
	for _, check := range []error{g.DeclareQueue(name, nil, !v.HasQueue(name)), g.Publish(""), g.ReadQueue(name)} {
		if err := allow(g, check, refusedWithText); err != nil {
			return nil, err
		}
	}
	q, _, err := v.DeclareQueue(topology.QueueDef{Name: name}, false)
	if err != nil {
		return failed(err.Error(), health{}), nil
	}
	x, err := v.Exchange("")
	if err != nil {
		return failed(err.Error(), health{}), nil
	}
	m, err := message.NewFromClient("", name, 0, nil, []byte("test_message"))
	if err != nil {
		return failed(err.Error(), health{}), nil
	}
	if out, err := v.Publish(x, m, &vhost.RouteBuffers{}); err != nil || !out.Routed() {
		return failed("aliveness-test: the test message was not routed", health{}), nil
	}
	if cq, ok := classicqueue.Of(q); !ok {
		return failed("aliveness-test: not a classic queue", health{}), nil
	} else if _, _, ok := cq.Get(true); !ok {
		return failed("aliveness-test: the test message did not arrive", health{}), nil
	}
	return statusOK, nil
}

func (a *api) alarms(*call) (any, error) {
	raised, reason, _ := a.b.Alarm().State()
	if !raised {
		return statusOK, nil
	}
	return failed("resource alarm(s) in effect in the cluster", health{
		Alarms: []map[string]any{{"node": a.b.NodeName(), "resource": alarmResource(reason), "reason": reason}},
	}), nil
}

// alarmResource names the resource as RabbitMQ does: memory or disk.
func alarmResource(reason string) string {
	if len(reason) >= 6 && reason[:6] == "memory" {
		return "memory"
	}
	return "disk"
}

func (a *api) portListener(c *call) (any, error) {
	port, err := strconv.Atoi(c.path("port"))
	if err != nil {
		return nil, badRequest("Invalid port")
	}
	ports := []int{}
	for _, l := range a.b.Listeners() {
		if l.Port == port {
			return health{Status: "ok", Port: port}, nil
		}
		ports = append(ports, l.Port)
	}
	return failed("No active listener", health{Missing: port, Ports: ports}), nil
}

// protocolAliases are the names RabbitMQ accepts for a protocol.
var protocolAliases = map[string]string{
	"amqp": "amqp", "amqp091": "amqp", "amqp0.9.1": "amqp", "amqp0-9-1": "amqp",
	"amqps": "amqp/ssl", "amqp/ssl": "amqp/ssl", "http": "http", "management": "http",
}

func (a *api) protocolListener(c *call) (any, error) {
	asked := c.path("protocol")
	want, ok := protocolAliases[asked]
	if !ok {
		want = asked
	}
	protocols := []string{}
	for _, l := range a.b.Listeners() {
		if l.Protocol == want {
			return health{Status: "ok", Protocol: want}, nil
		}
		protocols = append(protocols, l.Protocol)
	}
	return failed("No active listener", health{Missing: asked, Protocols: protocols}), nil
}

// virtualHosts is ok while every vhost runs; a Warren vhost always does
// until it is deleted.
func (a *api) virtualHosts(*call) (any, error) { return statusOK, nil }

func (a *api) singleNode(*call) (any, error) {
	return health{Status: "ok", Reason: "single node cluster"}, nil
}

// quorumCritical fails when stopping this node would leave the metadata
// group without a majority of its nodes running (RabbitMQ asks it of
// quorum queues before a node is taken down for maintenance).
func (a *api) quorumCritical(c *call) (any, error) {
	n := a.b.Cluster()
	if n == nil {
		return a.singleNode(c)
	}
	st := n.Status()
	alive := 0
	for _, m := range st.Members {
		if m.Alive {
			alive++
		}
	}
	if majority := len(st.Members)/2 + 1; len(st.Members) > 1 && alive-1 < majority {
		return failed(fmt.Sprintf("stopping this node would leave %d of the cluster's %d nodes running, fewer than the %d a change needs",
			alive-1, len(st.Members), majority), health{}), nil
	}
	return health{Status: "ok"}, nil
}

// certificates fails when the AMQPS certificate expires within the given
// time; units are RabbitMQ's (days, weeks, months of 30 days, years of
// 365).
func (a *api) certificates(c *call) (any, error) {
	n, err := strconv.Atoi(c.path("within"))
	if err != nil || n < 0 {
		return nil, badRequest("Invalid expiration value.")
	}
	day := 24 * time.Hour
	unit, ok := map[string]time.Duration{"days": day, "weeks": 7 * day, "months": 30 * day, "years": 365 * day}[c.path("unit")]
	if !ok {
		return nil, badRequest("Time unit not recognised. Supported units: days, weeks, months, years.")
	}
	file := a.b.Config().AMQPS.CertFile
	if len(a.b.Config().AMQPS.Listen) == 0 || file == "" {
		return statusOK, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return failed("cannot read the certificate: "+err.Error(), health{}), nil
	}
	limit := time.Now().Add(time.Duration(n) * unit)
	var expired []map[string]any
	for block, rest := pem.Decode(raw); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			continue
		}
		if cert.NotAfter.Before(limit) {
			expired = append(expired, map[string]any{"node": a.b.NodeName(), "protocol": "amqp/ssl",
				"certfile": file, "expires": cert.NotAfter.UTC().Format(time.RFC3339)})
		}
	}
	if len(expired) > 0 {
		return failed("Certificates expiring", health{Expired: expired}), nil
	}
	return statusOK, nil
}
