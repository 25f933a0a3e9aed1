//go:build !linux

package streamproto

import (
	"errors"
	"net"
)

// sendfile is Linux's; elsewhere a formed chunk is read and written.
func sendfile(*net.TCPConn, uintptr, int64, int) (int, error) {
	return 0, errors.ErrUnsupported
}
