// Package reply holds the AMQP error value that every part of the broker
// returns when an operation must fail the way the protocol says: a reply code
// and a text, delivered to the client in channel.close or connection.close.
//
// Whether a code closes the channel or the whole connection is the spec's
// decision (protocol.IsHardError), not the raiser's: a package returns
// reply.Error and the connection layer picks the method.
package reply

import (
	"errors"
	"fmt"

	"github.com/warrenmq/warren/protocol"
)

// Error is an AMQP reply: a code from the spec and a human-readable text.
// Text carries RabbitMQ's style, "NOT_FOUND - no queue 'q' in vhost '/'",
// because clients log it verbatim and operators grep for it.
type Error struct {
	Code uint16
	Text string
}

func (e *Error) Error() string { return e.Text }

// Hard reports whether the error closes the connection rather than the channel.
func (e *Error) Hard() bool { return protocol.IsHardError(e.Code) }

// New returns an Error whose text is the code's symbolic name followed by the
// formatted message, the way RabbitMQ words its replies.
func New(code uint16, format string, args ...any) *Error {
	return &Error{Code: code, Text: protocol.ReplyText(code) + " - " + fmt.Sprintf(format, args...)}
}

// As returns err as an *Error. An error that is not one becomes 541
// INTERNAL_ERROR carrying its message, so nothing reaches a client without a code.
func As(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return New(protocol.InternalError, "%s", err.Error())
}

// Shorthands for the codes the broker raises most; each formats like New.

func NotFound(format string, args ...any) *Error {
	return New(protocol.NotFound, format, args...)
}

func AccessRefused(format string, args ...any) *Error {
	return New(protocol.AccessRefused, format, args...)
}

func PreconditionFailed(format string, args ...any) *Error {
	return New(protocol.PreconditionFailed, format, args...)
}

func ResourceLocked(format string, args ...any) *Error {
	return New(protocol.ResourceLocked, format, args...)
}

func CommandInvalid(format string, args ...any) *Error {
	return New(protocol.CommandInvalid, format, args...)
}

func NotImplemented(format string, args ...any) *Error {
	return New(protocol.NotImplemented, format, args...)
}

func Internal(format string, args ...any) *Error {
	return New(protocol.InternalError, format, args...)
}
