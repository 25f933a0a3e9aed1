package amqp10

import (
	"errors"
	"fmt"
)

// What is wrong with input that does not decode; a *DecodeError wraps one
// of these, so errors.Is tells them apart.
var (
	ErrTruncated     = errors.New("truncated")
	ErrUnknownCode   = errors.New("unknown format code")
	ErrCountTooLarge = errors.New("count larger than the bytes left can hold")
	ErrSizeMismatch  = errors.New("compound size does not match its elements")
	ErrTooDeep       = errors.New("nested too deeply")
	ErrBadValue      = errors.New("bad value")
	ErrBadSection    = errors.New("bad message section")
)

// DecodeError reports input that is not a valid AMQP 1.0 encoding, or not
// a valid message.
type DecodeError struct {
	Offset int    // where in the input the bad value starts
	Err    error  // one of the Err values above
	Detail string // what was wrong, e.g. "str32 of 9 bytes, 3 left"
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("amqp10: %v at byte %d: %s", e.Err, e.Offset, e.Detail)
}

func (e *DecodeError) Unwrap() error { return e.Err }

func errorf(off int, err error, format string, args ...any) *DecodeError {
	return &DecodeError{Offset: off, Err: err, Detail: fmt.Sprintf(format, args...)}
}
