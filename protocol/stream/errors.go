package stream

import (
	"errors"
	"fmt"
)

// What is wrong with a frame that does not decode; a *DecodeError wraps
// one of these, so errors.Is tells them apart.
var (
	ErrTruncated      = errors.New("truncated")
	ErrNegativeLength = errors.New("negative length")
	ErrCountTooLarge  = errors.New("count larger than the bytes left can hold")
	ErrTrailingBytes  = errors.New("bytes left over")
	ErrBadValue       = errors.New("value out of range")
)

// DecodeError reports a frame of a known command and version whose fields
// do not decode. RabbitMQ answers one by closing the connection with
// CodeUnknownFrame.
type DecodeError struct {
	Key    Key    // the frame's key, response bit included; 0 for chunk data
	Offset int    // where in the frame (counted from the key) decoding stopped
	Err    error  // ErrTruncated, ErrNegativeLength, ErrCountTooLarge, ErrTrailingBytes or ErrBadValue
	Detail string // e.g. "8 bytes needed, 3 left"
}

func (e *DecodeError) Error() string {
	if e.Key == 0 {
		return fmt.Sprintf("stream: chunk at byte %d: %v: %s", e.Offset, e.Err, e.Detail)
	}
	return fmt.Sprintf("stream: %v at byte %d: %v: %s", e.Key, e.Offset, e.Err, e.Detail)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Code returns CodeUnknownFrame.
func (e *DecodeError) Code() ResponseCode { return CodeUnknownFrame }

// UnknownCommandError reports a frame whose key (response bit included)
// names no command this package knows, or a frame too short to hold a key
// and version (then Short is set).
type UnknownCommandError struct {
	Key   Key
	Short bool
}

func (e *UnknownCommandError) Error() string {
	if e.Short {
		return "stream: frame shorter than its key and version"
	}
	return fmt.Sprintf("stream: unknown command %v", e.Key)
}

// Code returns CodeUnknownFrame.
func (e *UnknownCommandError) Code() ResponseCode { return CodeUnknownFrame }

// UnsupportedVersionError reports a known command in a version this
// package does not decode.
type UnsupportedVersionError struct {
	Key     Key
	Version uint16
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("stream: %v version %d is not supported", e.Key, e.Version)
}

// Code returns CodeUnknownFrame.
func (e *UnsupportedVersionError) Code() ResponseCode { return CodeUnknownFrame }

// FrameTooLargeError reports a frame whose size prefix exceeds the
// FrameReader's limit. The frame is not read, so the stream cannot go on;
// RabbitMQ closes the connection with CodeFrameTooLarge.
type FrameTooLargeError struct {
	Size, Max uint32 // sizes without the 4-byte size prefix, as frame_max counts them
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("stream: frame size %d exceeds frame_max %d", e.Size, e.Max)
}

// Code returns CodeFrameTooLarge.
func (e *FrameTooLargeError) Code() ResponseCode { return CodeFrameTooLarge }
