package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// The reply codes FrameError (501) and SyntaxError (502) are spec constants,
// so the error types that carry them are named BadFrameError and
// BadSyntaxError. Each error type has a Code method giving the reply code a
// broker closes the connection with, and its Text starts with that code's
// symbolic name, ready to be sent as the reply text.

// BadFrameError reports a malformed frame: an unknown frame type, a size
// over the negotiated frame_max, a missing frame-end octet, or, as
// RabbitMQ has it, a short string of a method without content that is not
// UTF-8 ("FRAME_ERROR - Malformed UTF-8 in shortstr"). The stream cannot
// be resynchronised after one; close the connection with Code().
type BadFrameError struct {
	Text string // e.g. "FRAME_ERROR - frame size 200000 exceeds frame_max 131072"
}

func (e *BadFrameError) Error() string { return e.Text }

// Code returns FrameError (501).
func (e *BadFrameError) Code() uint16 { return FrameError }

// BadSyntaxError reports a method, field table, content header or property
// list that does not decode: truncated, a length past the end, bytes left
// over, an unknown field type octet, nesting too deep. UTF-8 is checked
// only in the short strings of methods without content (BadFrameError).
type BadSyntaxError struct {
	Text string // e.g. "SYNTAX_ERROR - basic.publish routing-key: 9 bytes needed, 3 left"
}

func (e *BadSyntaxError) Error() string { return e.Text }

// Code returns SyntaxError (502).
func (e *BadSyntaxError) Code() uint16 { return SyntaxError }

// UnknownMethodError reports a method frame whose class/method pair the
// spec does not define.
type UnknownMethodError struct {
	ClassID, MethodID uint16
}

func (e *UnknownMethodError) Error() string {
	return "COMMAND_INVALID - unknown method: class " + strconv.Itoa(int(e.ClassID)) +
		", method " + strconv.Itoa(int(e.MethodID))
}

// Code returns CommandInvalid (503), as RabbitMQ does for a method it does
// not implement.
func (e *UnknownMethodError) Code() uint16 { return CommandInvalid }

func frameErrorf(format string, args ...any) *BadFrameError {
	return &BadFrameError{Text: "FRAME_ERROR - " + fmt.Sprintf(format, args...)}
}

const syntaxPrefix = "SYNTAX_ERROR - "

func syntaxErrorf(format string, args ...any) *BadSyntaxError {
	return &BadSyntaxError{Text: syntaxPrefix + fmt.Sprintf(format, args...)}
}

// inContext prefixes the detail of a syntax error with where it happened,
// e.g. `basic.consume arguments: ` or `table key "x-match": `.
func inContext(context string, err error) error {
	if e, ok := err.(*BadSyntaxError); ok {
		return &BadSyntaxError{Text: syntaxPrefix + context + ": " + strings.TrimPrefix(e.Text, syntaxPrefix)}
	}
	return err
}
