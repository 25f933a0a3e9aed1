package tests

import (
	"strings"
	"testing"
)

// The connections page lists MQTT connections beside AMQP's, with their
// protocol (issue 35).
func TestWebUIMqttConnection(t *testing.T) {
	br := startBrowser(t)
	m := startWarrenMgmt(t)
	mqttConnect(t, mqttOpts(t, m.s, "ui-sensor", true))
	login(t, br, m.base)
	br.goTo(t, "connections")
	br.do(t, "the connections page", waitVisible(`#connections[data-state="loaded"]`))
	if rows := br.text(t, `#connections tbody`); !strings.Contains(rows, "MQTT 3.1.1") {
		t.Errorf("the connections table %q lacks the MQTT connection", rows)
	}
}
