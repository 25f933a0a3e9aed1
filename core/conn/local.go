package conn

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// DialLocal makes a connection to this server from inside the broker (a
// shovel's end on this broker): it returns the client's end of a socket
// pair whose other end the server serves. The connection counts as
// coming from loopback. Its client's address is "local:N", N counting
// the local connections, so that the connection's name in the listings
// ("local:N -> local") is its own and its client can tell which it is. asBroker lets it in without credentials and with
// every right in the vhost it opens, as RabbitMQ's direct connections
// made without a user; otherwise its client logs in as any other.
func (s *Server) DialLocal(asBroker bool) (net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair for a local connection: %w", err)
	}
	addr := &net.UnixAddr{Name: fmt.Sprintf("local:%d", s.locals.Add(1)), Net: "unix"}
	client, err := fileConn(fds[0], "client", addr, localAddr)
	if err != nil {
		syscall.Close(fds[1])
		return nil, err
	}
	server, err := fileConn(fds[1], "broker", localAddr, addr)
	if err != nil {
		client.Close()
		return nil, err
	}
	from := localAsUser
	if asBroker {
		from = localAsBroker
	}
	go s.serve(server, from)
	return client, nil
}

// fileConn makes a net.Conn of one end of a socket pair, whose addresses
// (unnamed, so nil) are named for the listings.
func fileConn(fd int, name string, local, remote net.Addr) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "local "+name)
	defer f.Close() // FileConn holds a dup of it
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("local connection: %w", err)
	}
	return localConn{c, local, remote}, nil
}

// localConn is a socket pair's end with addresses that say it is local.
type localConn struct {
	net.Conn
	local, remote net.Addr
}

var localAddr = &net.UnixAddr{Name: "local", Net: "unix"}

func (c localConn) LocalAddr() net.Addr  { return c.local }
func (c localConn) RemoteAddr() net.Addr { return c.remote }
