package streamproto

import (
	"io"
	"net"
	"syscall"
)

// sendfile sends n bytes of the file fd from off to tc with sendfile(2),
// waiting for the socket as a write does (its deadline holds).
func sendfile(tc *net.TCPConn, fd uintptr, off int64, n int) (int, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	sent := 0
	var serr error
	werr := raw.Write(func(s uintptr) bool {
		for sent < n {
			k, e := syscall.Sendfile(int(s), int(fd), &off, n-sent)
			if k > 0 {
				sent += k
			}
			switch {
			case e == syscall.EAGAIN:
				return false // wait until the socket takes more
			case e == syscall.EINTR:
			case e != nil:
				serr = e
				return true
			case k == 0:
				serr = io.ErrUnexpectedEOF // the file is shorter than its index says
				return true
			}
		}
		return true
	})
	if werr != nil {
		return sent, werr
	}
	return sent, serr
}
