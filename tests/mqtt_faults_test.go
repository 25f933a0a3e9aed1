package tests

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/warren/internal/poll"
)

// A persistent MQTT session's QoS 1 messages outlive the broker: every
// message Warren acknowledged with PUBACK while the subscriber was away
// is delivered to it after a kill -9 and a restart, and after a clean
// shutdown and a start.

// mqttProcessClient connects to a Warren process's MQTT listener at addr.
func mqttProcessClient(t *testing.T, addr, clientID string, clean bool, got chan<- string) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetUsername("guest").SetPassword("guest").
		SetCleanSession(clean).SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(true)
	if got != nil {
		o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) })
	}
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("MQTT connect %s: %v", clientID, tok.Error())
	}
	return c
}

// missing are the messages of want that never came in got.
func missing(want, got []string) []string {
	seen := map[string]bool{}
	for _, g := range got {
		seen[g] = true
	}
	var out []string
	for _, w := range want {
		if !seen[w] {
			out = append(out, w)
		}
	}
	return out
}

// mqttSessionThroughRestart runs the walk: subscribe persistently, go
// away, have n messages PUBACKed, stop the broker with sig, start it
// again, come back. steal, when set, takes one message off the session's
// queue over AMQP before the subscriber comes back (the self-check).
func mqttSessionThroughRestart(t *testing.T, sig syscall.Signal, n int, steal bool) (want, got []string, stolen string) {
	skipReference(t)
	dir, mqttAddr := t.TempDir(), freeAddr(t)
	p := startProcess(t, dir, "-mqtt", mqttAddr)
	sub := mqttProcessClient(t, mqttAddr, "keeper", false, nil)
	if tok := sub.Subscribe("fleet/+/status", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	sub.Disconnect(250)
	pub := mqttProcessClient(t, mqttAddr, "reporter", true, nil)
	for i := range n {
		body := fmt.Sprint("status-", i)
		if tok := pub.Publish(fmt.Sprintf("fleet/truck%d/status", i%7), 1, false, body); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
		want = append(want, body) // PUBACKed
	}
	pub.Disconnect(250)
	p.stop(sig)
	p = startProcess(t, dir, "-mqtt", mqttAddr)
	if steal {
		c, err := amqp.Dial(p.url())
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := c.Channel()
		d, ok, err := ch.Get("mqtt-subscription-keeperqos1", true)
		if err != nil || !ok {
			t.Fatalf("nothing to take from the session's queue: %v", err)
		}
		stolen = string(d.Body)
		c.Close()
	}
	ch := make(chan string, n+10)
	sub = mqttProcessClient(t, mqttAddr, "keeper", false, ch)
	defer sub.Disconnect(250)
	expect := n
	if steal {
		expect--
	}
	deadline := time.After(30 * time.Second)
	for len(got) < expect {
		select {
		case b := <-ch:
			got = append(got, b)
		case <-deadline:
			return want, got, stolen
		}
	}
	return want, got, stolen
}

func TestMqttSessionSurvivesKillAndRestart(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			want, got, _ := mqttSessionThroughRestart(t, sig, 300, false)
			if lost := missing(want, got); len(lost) > 0 {
				t.Fatalf("%d of %d PUBACKed messages lost: %v", len(lost), len(want), lost[:min(10, len(lost))])
			}
			if !slices.Equal(want, got) {
				t.Errorf("delivered out of order or twice: %d delivered for %d published", len(got), len(want))
			}
		})
	}
}

// The self-check: a message taken off the session's queue behind its
// back is reported missing, and only it.
func TestMqttSessionCheckSeesALoss(t *testing.T) {
	want, got, stolen := mqttSessionThroughRestart(t, syscall.SIGKILL, 50, true)
	if lost := missing(want, got); len(lost) != 1 || lost[0] != stolen {
		t.Fatalf("the check reported %v missing, want the stolen %s alone", lost, stolen)
	}
}

// A retained message PUBACKed before a kill -9 is sent to a subscription
// made after the restart.
func TestMqttRetainedSurvivesKill(t *testing.T) {
	skipReference(t)
	dir, mqttAddr := t.TempDir(), freeAddr(t)
	p := startProcess(t, dir, "-mqtt", mqttAddr)
	pub := mqttProcessClient(t, mqttAddr, "keeper-pub", true, nil)
	if tok := pub.Publish("site/gate", 1, true, "closed"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	pub.Disconnect(250)
	p.stop(syscall.SIGKILL)
	startProcess(t, dir, "-mqtt", mqttAddr)
	got := make(chan string, 4)
	sub := mqttProcessClient(t, mqttAddr, "keeper-sub", true, got)
	defer sub.Disconnect(250)
	if tok := sub.Subscribe("site/#", 1, nil); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if m := poll.Receive(t, 10*time.Second, "the retained message", got); m != "closed" {
		t.Fatalf("after the restart the retained message is %q", m)
	}
}
