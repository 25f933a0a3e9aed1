package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func fullProperties() Properties {
	return Properties{
		Flags: FlagContentType | FlagContentEncoding | FlagHeaders | FlagDeliveryMode |
			FlagPriority | FlagCorrelationID | FlagReplyTo | FlagExpiration | FlagMessageID |
			FlagTimestamp | FlagType | FlagUserID | FlagAppID | FlagClusterID,
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers:         Table{"x-delay": int32(5000), "nested": Table{"k": "v"}},
		DeliveryMode:    2,
		Priority:        9,
		CorrelationID:   "corr",
		ReplyTo:         "amq.rabbitmq.reply-to",
		Expiration:      "60000",
		MessageID:       "id-1",
		Timestamp:       1700000000,
		Type:            "order.created",
		UserID:          "guest",
		AppID:           "warren-test",
		ClusterID:       "c1",
	}
}

// TestPropertyKindsFollowSpec keeps the hand-written property table in step
// with the field list the generator reads from the spec.
func TestPropertyKindsFollowSpec(t *testing.T) {
	spec := map[string]byte{"headers": 'F', "delivery-mode": 'o', "priority": 'o', "timestamp": 'T'}
	if len(basicPropertyFields) != numProps {
		t.Fatalf("spec has %d basic properties, properties.go %d", len(basicPropertyFields), numProps)
	}
	for i, name := range basicPropertyFields {
		want, ok := spec[name]
		if !ok {
			want = 's'
		}
		if propKinds[i] != want {
			t.Errorf("property %d (%s): kind %q, want %q", i, name, propKinds[i], want)
		}
	}
}

func TestPropertiesRoundTripEveryFlag(t *testing.T) {
	full := fullProperties()
	// Each flag alone, then all of them.
	for bit := uint16(0x8000); bit >= FlagClusterID; bit >>= 1 {
		p := full
		p.Flags = bit
		checkPropertiesRoundTrip(t, p)
	}
	checkPropertiesRoundTrip(t, full)
}

// checkPropertiesRoundTrip encodes p and checks DecodeProperties and the
// PropertyView agree with it on every present property.
func checkPropertiesRoundTrip(t *testing.T, p Properties) {
	t.Helper()
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeProperties(p.Flags, raw)
	if err != nil {
		t.Fatalf("flags %04x: %v", p.Flags, err)
	}
	if !reflect.DeepEqual(got, onlyPresent(p)) {
		t.Fatalf("flags %04x:\n got %+v\nwant %+v", p.Flags, got, onlyPresent(p))
	}
	v, err := ScanProperties(p.Flags, raw)
	if err != nil {
		t.Fatal(err)
	}
	checkView(t, &v, &got)
	if h, ok := v.HeadersRaw(); ok {
		want, _ := AppendTable(nil, p.Headers)
		if !bytes.Equal(h, want) {
			t.Errorf("HeadersRaw = %x, want %x", h, want)
		}
	}
}

// onlyPresent clears the fields whose flag is not set, as decoding does.
func onlyPresent(p Properties) Properties {
	q := Properties{Flags: p.Flags}
	src, dst := p.strings(), q.strings()
	for i := range numProps {
		if p.Flags&(0x8000>>i) != 0 && src[i] != nil {
			*dst[i] = *src[i]
		}
	}
	if p.Flags&FlagHeaders != 0 {
		q.Headers = p.Headers
	}
	if p.Flags&FlagDeliveryMode != 0 {
		q.DeliveryMode = p.DeliveryMode
	}
	if p.Flags&FlagPriority != 0 {
		q.Priority = p.Priority
	}
	if p.Flags&FlagTimestamp != 0 {
		q.Timestamp = p.Timestamp
	}
	return q
}

func checkView(t *testing.T, v *PropertyView, p *Properties) {
	t.Helper()
	str := func(name string, got string, ok bool, want string, flag uint16) {
		if ok != (p.Flags&flag != 0) || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, ok, want)
		}
	}
	s, ok := v.Expiration()
	str("Expiration", s, ok, p.Expiration, FlagExpiration)
	s, ok = v.UserID()
	str("UserID", s, ok, p.UserID, FlagUserID)
	s, ok = v.MessageID()
	str("MessageID", s, ok, p.MessageID, FlagMessageID)
	s, ok = v.CorrelationID()
	str("CorrelationID", s, ok, p.CorrelationID, FlagCorrelationID)
	s, ok = v.String(FlagContentType)
	str("ContentType", s, ok, p.ContentType, FlagContentType)
	s, ok = v.String(FlagClusterID)
	str("ClusterID", s, ok, p.ClusterID, FlagClusterID)
	if v.DeliveryMode() != p.DeliveryMode || v.Priority() != p.Priority {
		t.Errorf("DeliveryMode, Priority = %d, %d", v.DeliveryMode(), v.Priority())
	}
	if ts, ok := v.Timestamp(); ts != p.Timestamp || ok != (p.Flags&FlagTimestamp != 0) {
		t.Errorf("Timestamp = %d, %v", ts, ok)
	}
	h, err := v.Headers()
	if err != nil || !equalValue(h, p.Headers) {
		t.Errorf("Headers = %v, %v", h, err)
	}
	if raw, ok := v.HeadersRaw(); ok {
		// Compared decoded: a peer's table need not have sorted keys.
		h, n, err := DecodeTable(raw)
		if err != nil || n != len(raw) || !equalValue(h, p.Headers) {
			t.Errorf("HeadersRaw = %x (%v)", raw, err)
		}
	} else if p.Flags&FlagHeaders != 0 {
		t.Error("HeadersRaw missing")
	}
	for bit := uint16(0x8000); bit >= FlagClusterID; bit >>= 1 {
		if v.Has(bit) != (p.Flags&bit != 0) {
			t.Errorf("Has(%04x) = %v", bit, v.Has(bit))
		}
	}
	if _, ok := v.String(FlagHeaders); ok {
		t.Error("String(FlagHeaders) reported a string")
	}
	if _, ok := v.Bytes(FlagContentType | FlagReplyTo); ok {
		t.Error("Bytes accepted two flags at once")
	}
}

// TestPropertiesEmptyStringsPresent checks that a present empty string
// survives and stays distinct from an absent one.
func TestPropertiesEmptyStringsPresent(t *testing.T) {
	p := Properties{Flags: FlagContentType | FlagMessageID | FlagHeaders}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustHex(`00 00 00000000`); !bytes.Equal(raw, want) {
		t.Fatalf("raw = %x, want %x", raw, want)
	}
	v, err := ScanProperties(p.Flags, raw)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := v.MessageID(); !ok || s != "" {
		t.Errorf("MessageID = %q, %v; want present and empty", s, ok)
	}
	if _, ok := v.CorrelationID(); ok {
		t.Error("CorrelationID present, want absent")
	}
	if !v.Has(FlagHeaders) {
		t.Error("empty headers table lost")
	}
	got, _ := DecodeProperties(p.Flags, raw)
	back, _ := got.Append(nil)
	if !bytes.Equal(back, raw) {
		t.Errorf("re-encoded %x, want %x", back, raw)
	}
}

func TestPropertiesBytes(t *testing.T) {
	p := Properties{
		Flags:        FlagContentType | FlagDeliveryMode | FlagTimestamp | FlagAppID,
		ContentType:  "text/plain",
		DeliveryMode: 2,
		Timestamp:    0x0102030405060708,
		AppID:        "a",
	}
	raw, err := p.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := mustHex(`0a 746578742f706c61696e  02  0102030405060708  01 61`)
	if !bytes.Equal(raw, want) {
		t.Fatalf("\n got %x\nwant %x", raw, want)
	}
	if p.Flags != 0x9048 {
		t.Fatalf("flags %04x", p.Flags)
	}
}

func TestPropertiesErrors(t *testing.T) {
	syntax := func(name string, flags uint16, raw string) {
		t.Helper()
		_, err := ScanProperties(flags, mustHex(raw))
		var se *BadSyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: ScanProperties err = %v", name, err)
		}
		if _, err := DecodeProperties(flags, mustHex(raw)); !errors.As(err, &se) {
			t.Errorf("%s: DecodeProperties err = %v", name, err)
		}
	}
	syntax("continuation bit", FlagContentType|1, `00`)
	syntax("unused bit 1", 2, ``)
	syntax("string past end", FlagContentType, `05 6161`)
	syntax("missing string", FlagContentType, ``)
	syntax("missing octet", FlagDeliveryMode, ``)
	syntax("short timestamp", FlagTimestamp, `00000000`)
	syntax("table past end", FlagHeaders, `00000009 01 61 56`)
	syntax("short table length", FlagHeaders, `0000`)
	syntax("trailing bytes", FlagPriority, `05 06`)
	syntax("trailing bytes, no flags", 0, `00`)

	// A table whose length fits but whose contents do not decode passes the
	// scan and fails when decoded.
	bad := mustHex(`00000003 01 61 5a`)
	v, err := ScanProperties(FlagHeaders, bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Headers(); err == nil || !strings.Contains(err.Error(), "property headers") {
		t.Errorf("Headers err = %v", err)
	}

	p := Properties{Flags: FlagReplyTo, ReplyTo: strings.Repeat("r", 256)}
	if _, err := p.Append(nil); err == nil || !strings.Contains(err.Error(), "reply-to") {
		t.Errorf("long reply-to: %v", err)
	}
	p = Properties{Flags: FlagHeaders, Headers: Table{"k": struct{}{}}}
	if _, err := p.Append(nil); err == nil || !strings.Contains(err.Error(), `table key "k"`) {
		t.Errorf("bad headers: %v", err)
	}
	p = Properties{Flags: 1}
	if _, err := p.Append(nil); err == nil {
		t.Error("continuation bit accepted by Append")
	}
}

func TestScanPropertiesAllocs(t *testing.T) {
	p := fullProperties()
	raw, _ := p.Append(nil)
	allocs := testing.AllocsPerRun(100, func() {
		v, err := ScanProperties(p.Flags, raw)
		if err != nil || v.DeliveryMode() != 2 {
			t.Fatal(err)
		}
		if _, ok := v.Bytes(FlagExpiration); !ok {
			t.Fatal("no expiration")
		}
	})
	if allocs != 0 {
		t.Errorf("ScanProperties: %v allocs, want 0", allocs)
	}
}
