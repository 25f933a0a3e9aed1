package tests

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/admin"
	"github.com/warrenmq/warren/core/config"
)

// Debian's nagios-plugins-rabbitmq (check_rabbitmq_*, Perl scripts over
// the management API) against Warren: every check that is OK on RabbitMQ
// 3.10.8 is OK here. Their node-level checks ask for /api/nodes/rabbit@NODE,
// so Warren runs with node_name rabbit@nagios-node. check_rabbitmq_shovels
// is left out: RabbitMQ without its shovel plugin fails it too.
func TestNagiosChecks(t *testing.T) {
	if _, err := exec.LookPath("check_rabbitmq_server"); err != nil {
		skipFor(t, "nagios", "check_rabbitmq_server not found (Debian's nagios-plugins-rabbitmq; .ci/run installs it)")
	}
	s := startWarren(t, func(c *config.Config) {
		c.Admin.Listen = "127.0.0.1:0"
		c.NodeName = "rabbit@nagios-node"
	})
	if err := s.b.ServeAdmin(admin.Handler(s.b)); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(s.b.AdminAddr())
	_, ch := channel(t, s)
	if _, err := ch.QueueDeclare("nagios-q", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	s.ownQueue("nagios-q")
	for _, c := range []struct {
		check string
		args  []string
		ok    string
	}{
		{"check_rabbitmq_aliveness", nil, "RABBITMQ_ALIVENESS OK"},
		{"check_rabbitmq_connections", nil, "RABBITMQ_CONNECTIONS OK"},
		{"check_rabbitmq_objects", nil, "RABBITMQ_OBJECTS OK"},
		{"check_rabbitmq_overview", nil, "RABBITMQ_OVERVIEW OK"},
		{"check_rabbitmq_queue", []string{"--queue", "nagios-q"}, "RABBITMQ_QUEUE OK"},
		{"check_rabbitmq_server", []string{"--node", "nagios-node"}, "RABBITMQ_SERVER OK"},
		{"check_rabbitmq_watermark", []string{"--node", "nagios-node"}, "RABBITMQ_WATERMARK OK"},
		{"check_rabbitmq_partition", []string{"--node", "nagios-node"}, "RABBITMQ_PARTITION OK"},
	} {
		args := append([]string{"-H", host, "--port", port, "-u", "guest", "-p", "guest"}, c.args...)
		out, err := exec.Command(c.check, args...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), c.ok) {
			t.Errorf("%s: %v\n%s", c.check, err, out)
		}
	}
}
