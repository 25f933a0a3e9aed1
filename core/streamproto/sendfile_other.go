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

// writeNow leaves everything to the writer: it writes nothing here.
func writeNow(_ *net.TCPConn, segs net.Buffers, files []filePart) (int64, net.Buffers, []filePart, error) {
	return 0, segs, files, nil
}
