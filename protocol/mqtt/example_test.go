package mqtt_test

import (
	"bytes"
	"fmt"

	"github.com/warrenmq/warren/protocol/mqtt"
)

// A server's side of a session: the CONNECT gives the version the rest
// is read in, and a refusal carries the reason code to answer with.
func Example() {
	// What a 5.0 client sends: CONNECT, a QoS 1 PUBLISH, then a
	// SUBSCRIBE whose filter puts '#' mid-way.
	var in []byte
	in = (&mqtt.Connect{Version: mqtt.V5, CleanStart: true, KeepAlive: 30, ClientID: "sensor-1"}).Append(in, 0)
	in = (&mqtt.Publish{QoS: mqtt.QoS1, PacketID: 1, Topic: "sensors/1/temp", Payload: []byte("21.5")}).Append(in, mqtt.V5)
	in = (&mqtt.Subscribe{PacketID: 2, Subscriptions: []mqtt.Subscription{{Filter: "sensors/#/temp"}}}).Append(in, mqtt.V5)

	r := mqtt.NewPacketReader(bytes.NewReader(in), mqtt.InitialMaxPacketSize)
	var version mqtt.Version // none until CONNECT
	var out []byte
	for {
		b, err := r.ReadPacket()
		if err != nil {
			break
		}
		p, err := mqtt.Decode(version, b)
		if err != nil {
			code, _ := mqtt.CodeOf(err)
			out = (&mqtt.Disconnect{ReasonCode: code}).Append(out, version)
			fmt.Println("refused:", err)
			break
		}
		switch p := p.(type) {
		case *mqtt.Connect:
			version = p.Version
			r.SetMaxPacketSize(mqtt.DefaultMaxPacketSize)
			out = (&mqtt.Connack{}).Append(out, version)
			fmt.Printf("CONNECT from %s in MQTT %v\n", p.ClientID, version)
		case *mqtt.Publish:
			out = (&mqtt.Puback{PacketID: p.PacketID}).Append(out, version)
			fmt.Printf("PUBLISH %s %q\n", p.Topic, p.Payload)
		}
	}
	fmt.Printf("answered % x\n", out)
	// Output:
	// CONNECT from sensor-1 in MQTT 5.0
	// PUBLISH sensors/1/temp "21.5"
	// refused: mqtt: SUBSCRIBE at byte 5: bad topic filter: "sensors/#/temp": '#' at byte 8 is not the last character (Topic Filter invalid (0x8f))
	// answered 20 03 00 00 00 40 02 00 01 e0 01 8f
}
