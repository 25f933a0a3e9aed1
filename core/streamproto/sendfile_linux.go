package streamproto

import (
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
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

// writeNow writes segs, with files among them where they go, as far as
// tc takes them without waiting; rest and restFiles are what it did not
// write (restFiles' places counted in rest; a file's done what of it
// went). Files sent whole are let go of. A file with no descriptor stops
// it there: the writer reads and writes that.
func writeNow(tc *net.TCPConn, segs net.Buffers, files []filePart) (int64, net.Buffers, []filePart, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, segs, files, err
	}
	var n int64
	k, off, j := 0, 0, 0 // segs[k][off:], segs[k+1:] and files[j:] are left
	var werr error
	err = raw.Write(func(s uintptr) bool {
		for werr == nil {
			for k < len(segs) && off == len(segs[k]) && (j == len(files) || files[j].at > k) {
				k, off = k+1, 0
			}
			if j < len(files) && files[j].at == k {
				f := &files[j]
				fd, foff, ok := f.fc.Fd()
				if !ok {
					return true
				}
				at := foff + int64(f.done)
				w, e := syscall.Sendfile(int(s), int(fd), &at, f.fc.Len-f.done)
				if w > 0 {
					n += int64(w)
					f.done += w
				}
				switch {
				case f.done == f.fc.Len:
					f.fc.Release()
					f.fc = nil
					j++
				case e == syscall.EAGAIN:
					return true
				case e == syscall.EINTR:
				case e != nil:
					werr = e
				case w == 0:
					werr = io.ErrUnexpectedEOF
				}
				continue
			}
			if k == len(segs) {
				return true
			}
			end := len(segs)
			if j < len(files) {
				end = files[j].at
			}
			end = min(end, k+maxIOV)
			iov := make([][]byte, 0, end-k)
			iov = append(append(iov, segs[k][off:]), segs[k+1:end]...)
			w, e := unix.Writev(int(s), iov)
			for w > 0 {
				if left := len(segs[k]) - off; w >= left {
					n += int64(left)
					w -= left
					k, off = k+1, 0
				} else {
					n += int64(w)
					off += w
					w = 0
				}
			}
			switch {
			case e == syscall.EAGAIN:
				return true
			case e == syscall.EINTR:
			case e != nil:
				werr = e
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	var rest net.Buffers
	if k < len(segs) {
		rest = append(append(rest, segs[k][off:]), segs[k+1:]...)
	}
	restFiles := files[j:]
	for i := range restFiles {
		restFiles[i].at -= k
	}
	return n, rest, restFiles, err
}

// maxIOV bounds the buffers of one writev (Linux's IOV_MAX).
const maxIOV = 1024
