package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Debian's mosquitto clients, as a user tries Warren first (issue 35):
// mosquitto_sub and mosquitto_pub in MQTT 3.1.1 and 5.0, QoS 0 and 1,
// with a wildcard subscription.
func TestMqttMosquittoClients(t *testing.T) {
	for _, tool := range []string{"mosquitto_pub", "mosquitto_sub"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipFor(t, "mosquitto", "%s is not installed (Debian's mosquitto-clients)", tool)
		}
	}
	s := startWarren(t)
	host, port, _ := strings.Cut(s.b.MQTTAddr(), ":")
	for _, version := range []string{"mqttv311", "mqttv5"} {
		t.Run(version, func(t *testing.T) {
			common := []string{"-V", version, "-h", host, "-p", port, "-u", "guest", "-P", "guest"}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id := "sub-" + version
			sub := exec.CommandContext(ctx, "mosquitto_sub", append(common, "-i", id, "-t", "sensors/#", "-q", "1", "-C", "3", "-v")...)
			var out strings.Builder
			sub.Stdout, sub.Stderr = &out, &out
			if err := sub.Start(); err != nil {
				t.Fatal(err)
			}
			v, _ := s.b.VHost("/")
			waitFor(t, "mosquitto_sub subscribed", func() bool {
				for _, b := range v.BindingsFrom("amq.topic") {
					if b.Destination.Name == "mqtt-subscription-"+id+"qos1" {
						return true
					}
				}
				return false
			})
			for _, m := range [][]string{{"-t", "sensors/t1", "-m", "21.5"}, {"-t", "sensors/t2", "-m", "22", "-q", "1"}, {"-t", "sensors/a/b", "-m", "x", "-q", "1"}} {
				if b, err := exec.CommandContext(ctx, "mosquitto_pub", append(common, m...)...).CombinedOutput(); err != nil {
					t.Fatalf("mosquitto_pub %v: %v %s", m, err, b)
				}
			}
			if err := sub.Wait(); err != nil {
				t.Fatalf("mosquitto_sub: %v %s", err, out.String())
			}
			if got, want := out.String(), "sensors/t1 21.5\nsensors/t2 22\nsensors/a/b x\n"; got != want {
				t.Fatalf("mosquitto_sub printed %q, want %q", got, want)
			}
		})
	}
}
