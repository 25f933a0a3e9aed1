package wasmhost

import (
	"bytes"
	"os"
	"testing"

	"github.com/warrenmq/warren/protocol"
)

// TestSDKPropertiesFixture checks that the property list the SDK's own
// tests read (sdk/testdata/properties.bin, in the SDK's module, which
// cannot import the broker) is what the broker's codec writes for those
// properties, so the SDK is tested against the real wire format.
func TestSDKPropertiesFixture(t *testing.T) {
	p := protocol.Properties{
		Flags: protocol.FlagContentType | protocol.FlagHeaders | protocol.FlagDeliveryMode | protocol.FlagPriority |
			protocol.FlagCorrelationID | protocol.FlagMessageID | protocol.FlagTimestamp | protocol.FlagAppID,
		ContentType: "application/json",
		Headers: protocol.Table{"s": "str", "i": int32(-7), "l": int64(1 << 40), "d": 2.5, "b": true, "v": nil,
			"n": protocol.Table{"k": "v"}, "a": []any{int64(1), "two"}, "x": []byte{1, 2}},
		DeliveryMode:  2,
		Priority:      5,
		CorrelationID: "corr",
		MessageID:     "mid",
		Timestamp:     1700000000,
		AppID:         "app",
	}
	if p.Flags != 0xbcc8 {
		t.Fatalf("flags %#x, the SDK's test expects 0xbcc8", p.Flags)
	}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := os.ReadFile("../../sdk/testdata/properties.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, fixture) {
		t.Fatalf("the broker encodes\n%x\nthe SDK's fixture is\n%x", raw, fixture)
	}
}
