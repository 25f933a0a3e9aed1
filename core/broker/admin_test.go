package broker

import (
	"errors"
	"net"
	"testing"
)

// acceptOne runs Accept in the background.
func acceptOne(ln net.Listener) <-chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(got)
			return
		}
		got <- c
	}()
	return got
}

func TestConnLimitListenerHoldsOneSlotPerOpenConnection(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newConnLimitListener(inner, 2)
	defer ln.Close()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	second, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if len(ln.slots) != 2 {
		t.Fatalf("%d slots taken by two connections", len(ln.slots))
	}
	third := acceptOne(ln)
	// Closing twice gives back one slot, which lets the third in.
	first.Close()
	first.Close()
	c := <-third
	if c == nil {
		t.Fatal("Accept failed after a slot was given back")
	}
	if len(ln.slots) != 2 {
		t.Fatalf("%d slots taken by two open connections", len(ln.slots))
	}
	second.Close()
	c.Close()
	if len(ln.slots) != 0 {
		t.Fatalf("%d slots still taken with every connection closed", len(ln.slots))
	}
}

func TestConnLimitListenerCloseWakesAWaitingAccept(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newConnLimitListener(inner, 1)
	ln.slots <- struct{}{} // the one slot is taken
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		done <- err
	}()
	ln.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
