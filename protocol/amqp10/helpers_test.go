package amqp10

import (
	"encoding/hex"
	"strings"
	"testing"
)

// mustHex decodes hex with spaces and newlines ignored.
func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// checkDecodeError fails t unless err is a *DecodeError with an offset in
// the input and a known cause.
func checkDecodeError(t *testing.T, err error, n int) {
	t.Helper()
	de, ok := err.(*DecodeError)
	if !ok {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if de.Offset < 0 || de.Offset > n {
		t.Fatalf("error %v: offset %d outside the %d-byte input", err, de.Offset, n)
	}
	switch de.Err {
	case ErrTruncated, ErrUnknownCode, ErrCountTooLarge, ErrSizeMismatch, ErrTooDeep, ErrBadValue, ErrBadSection:
	default:
		t.Fatalf("error %v: unknown cause %v", err, de.Err)
	}
}
