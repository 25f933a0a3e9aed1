package tablejson

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/warrenmq/warren/protocol"
)

func TestRenderEncodesEveryFieldType(t *testing.T) {
	table := protocol.Table{
		"bytes": []byte{1, 2, 3}, "time": time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC),
		"decimal": protocol.Decimal{Scale: 2, Value: 12345}, "nan": math.NaN(), "inf": float32(math.Inf(1)),
		"neginf": math.Inf(-1), "nested": protocol.Table{"list": []any{int8(1), "two", math.NaN()}},
		"plain": int64(7),
	}
	got, err := json.Marshal(Render(table))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bytes":"AQID","decimal":12345,"inf":"Infinity","nan":"NaN","neginf":"-Infinity","nested":{"list":[1,"two","NaN"]},"plain":7,"time":"2026-12-01T05:00:00Z"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got, _ := json.Marshal(Render(nil)); string(got) != "{}" {
		t.Fatalf("nil table: %s", got)
	}
}
