package stream

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// decodeErr decodes frame (hex) and returns the error, failing if there
// is none.
func decodeErr(t *testing.T, frame []byte) error {
	t.Helper()
	c, err := Decode(frame)
	if err == nil {
		t.Fatalf("%x decoded to %#v, want an error", frame, c)
	}
	return err
}

// TestTruncatedAtEveryLength cuts frames of commands whose every field is
// required short at each length: the shorter frame must be an error, and
// so must the frame with a byte added.
func TestTruncatedAtEveryLength(t *testing.T) {
	for _, c := range []Command{
		&DeclarePublisher{CorrelationID: 7, PublisherID: 9, Reference: "ref", Stream: "orders"},
		&Publish{Version: 1, PublisherID: 9, Messages: []PublishedMessage{{PublishingID: 1, Message: []byte("one")},
			{PublishingID: 3, SubBatch: &SubBatch{Records: 3}, Message: []byte("zzz")}}},
		&Publish{Version: 2, PublisherID: 9, Messages: []PublishedMessage{{PublishingID: 1, FilterValue: "eu", Message: []byte("one")}}},
		&PublishConfirm{PublisherID: 9, PublishingIDs: []uint64{1, 2}},
		&PublishError{PublisherID: 9, Errors: []PublishingError{{4, CodePublisherDoesNotExist}}},
		&Create{CorrelationID: 15, Stream: "s", Arguments: map[string]string{"max-age": "1h"}},
		&CreateSuperStream{CorrelationID: 21, Name: "i", Partitions: []string{"i-0"}, BindingKeys: []string{"0"}},
		&MetadataResponse{CorrelationID: 17, Brokers: []Broker{{0, "a", 5552}},
			Streams: []StreamMetadata{{Stream: "a", Code: CodeOK, Replicas: []uint16{0}}}},
		&Credit{SubscriptionID: 1, Credit: 2},
		&CreditResponse{Code: CodeOK, SubscriptionID: 1},
		&StoreOffset{Reference: "r", Stream: "s", Offset: 1},
		&Close{CorrelationID: 1, Code: CodeOK, Reason: "bye"},
		&Tune{FrameMax: 1, Heartbeat: 2},
		&ConsumerUpdate{CorrelationID: 1, SubscriptionID: 1, Active: true},
	} {
		full := c.Append(nil)
		for n := range len(full) {
			err := decodeErr(t, full[:n])
			var de *DecodeError
			var ue *UnknownCommandError
			switch {
			case n < 4:
				if !errors.As(err, &ue) || !ue.Short {
					t.Errorf("%v cut to %d bytes: %v, want a short frame", c.Key(), n, err)
				}
			case !errors.As(err, &de):
				t.Errorf("%v cut to %d bytes: %T %v, want a *DecodeError", c.Key(), n, err, err)
			case !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCountTooLarge):
				t.Errorf("%v cut to %d bytes: %v, want truncated", c.Key(), n, err)
			}
		}
		if err := decodeErr(t, append(full, 0)); !errors.Is(err, ErrTrailingBytes) {
			t.Errorf("%v with a byte added: %v, want trailing bytes", c.Key(), err)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	for _, key := range []string{"0020", "0000", "7fff", "8017", "8002", "8008", "ffff"} {
		err := decodeErr(t, mustHex(key+"0001 00000001"))
		var ue *UnknownCommandError
		if !errors.As(err, &ue) || ue.Short || ue.Code() != CodeUnknownFrame {
			t.Errorf("key %s: %T %v", key, err, err)
		}
		if !strings.Contains(err.Error(), "0x"+key) {
			t.Errorf("key %s: %q does not name the key", key, err)
		}
	}
}

func TestUnsupportedVersion(t *testing.T) {
	for _, frame := range []string{
		"0002 0003 01 00000000",           // Publish v3
		"0002 0000 01 00000000",           // Publish v0
		"0008 0003 01",                    // Deliver v3
		"0001 0002 00000001 00 0000 0000", // DeclarePublisher v2
		"8007 0002 00000001 0001",         // SubscribeResponse v2
	} {
		err := decodeErr(t, mustHex(frame))
		var ve *UnsupportedVersionError
		if !errors.As(err, &ve) || ve.Code() != CodeUnknownFrame {
			t.Errorf("%s: %T %v", frame, err, err)
		}
	}
}

// TestBadValues checks negative lengths and counts, counts the frame
// cannot hold, and values out of range.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        error
	}{
		{"negative message count", "0002 0001 01 ffffffff", ErrNegativeLength},
		{"huge message count", "0002 0001 01 7fffffff 0000000000000001 00000000", ErrCountTooLarge},
		{"count one more than fits", "0003 0001 01 00000002 0000000000000001", ErrCountTooLarge},
		{"negative string length", "000e 0001 00000001 fffe", ErrNegativeLength},
		{"string past the end", "000e 0001 00000001 0005 6162", ErrTruncated},
		{"negative bytes length", "0013 0001 00000001 0000 fffffffe", ErrNegativeLength},
		{"bytes past the end", "0013 0001 00000001 0000 00000009 61", ErrTruncated},
		{"huge map count", "0011 0001 00000001 40000000", ErrCountTooLarge},
		{"negative map count", "0011 0001 00000001 80000000", ErrNegativeLength},
		{"huge metadata broker count", "800f 0001 00000001 00100000 00000000", ErrCountTooLarge},
		{"huge replica count", "800f 0001 00000001 00000000 00000001 0001 61 0001 0000 7fffffff", ErrCountTooLarge},
		{"message length past the end", "0002 0001 01 00000001 0000000000000001 7fffffff", ErrTruncated},
		{"sub-batch length past the end", "0002 0001 01 00000001 0000000000000001 80 0001 00000001 ffffffff", ErrTruncated},
		{"offset type 0 in Subscribe", "0007 0001 00000001 00 0001 73 0000 0001", ErrBadValue},
		{"offset type 6", "0007 0001 00000001 00 0001 73 0006 0001", ErrBadValue},
		{"offset type 6 in ConsumerUpdate response", "801a 0001 00000001 0001 0006", ErrBadValue},
		{"active neither 0 nor 1", "001a 0001 00000001 01 02", ErrBadValue},
		{"trailing bytes after a heartbeat", "0017 0001 00", ErrTrailingBytes},
		{"trailing bytes after Open's properties", "8015 0001 00000001 0001 00000000 00", ErrTrailingBytes},
	} {
		err := decodeErr(t, mustHex(tc.frame))
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %T %v, want %v", tc.name, err, err, tc.want)
			continue
		}
		if de.Code() != CodeUnknownFrame || de.Offset < 4 || de.Offset > len(mustHex(tc.frame)) {
			t.Errorf("%s: code %d, offset %d", tc.name, de.Code(), de.Offset)
		}
	}
}

// TestHugeCountAllocatesLittle checks that a count the frame cannot hold
// is refused before anything is allocated for it: decoding allocates no
// more than the error.
func TestHugeCountAllocatesLittle(t *testing.T) {
	for _, frame := range []string{
		"0003 0001 01 7fffffff 0000000000000001",
		"0002 0002 01 7fffffff 0000000000000001 ffff 00000000",
		"0011 0001 00000001 7fffffff 0000 0000",
		"800f 0001 00000001 7fffffff 0000 0000 00000000",
	} {
		b := mustHex(frame)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 100 {
			Decode(b)
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 1024 {
			t.Errorf("%s: %d bytes allocated per decode", frame, per)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	err := decodeErr(t, mustHex("0003 0001 01 00000002 0000000000000001"))
	want := "stream: PublishConfirm (0x0003) at byte 5: count larger than the bytes left can hold: 2 elements of at least 8 bytes, 8 bytes left"
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
	err = decodeErr(t, mustHex("0007 0002"))
	if want := "stream: Subscribe (0x0007) version 2 is not supported"; err.Error() != want {
		t.Errorf("got  %q\nwant %q", err, want)
	}
}
