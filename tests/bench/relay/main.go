// Command relay measures the floor under any broker's CPU per large
// message on loopback TCP: what it costs to read a message from one
// connection and write it to another, through one reused buffer, with
// nothing else done (BENCHMARKS.md, "the floor of a loopback copy").
//
//	relay -size 1048576 &                                    # the relay
//	relay -client -size 1048576 -rate 150 -pid $(pgrep -n relay)
//
// The client publishes at the rate on one connection, reads the messages
// back on another, and prints the relay's CPU time per message, read
// from /proc as warrenperf reads a broker's.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	client := flag.Bool("client", false, "run the client rather than the relay")
	addr := flag.String("addr", "127.0.0.1:5680", "the relay's address")
	size := flag.Int("size", 1<<20, "message size in bytes")
	rate := flag.Int("rate", 150, "messages a second (client)")
	duration := flag.Duration("duration", 15*time.Second, "how long to send (client)")
	pid := flag.Int("pid", 0, "the relay's pid (client)")
	flag.Parse()
	if *client {
		if err := runClient(*addr, *size, *rate, *duration, *pid); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := relay(*addr, *size); err != nil {
		log.Fatal(err)
	}
}

// relay accepts the client's two connections, the first to read from and
// the second to write to, and copies whole messages until the first ends.
func relay(addr string, size int) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	in, err := ln.Accept()
	if err != nil {
		return err
	}
	out, err := ln.Accept()
	if err != nil {
		return err
	}
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(in, buf); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
}

func runClient(addr string, size, rate int, duration time.Duration, pid int) error {
	in, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond) // accepted first: the relay's input
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	n := int(duration.Seconds() * float64(rate))
	received := make(chan error, 1)
	go func() {
		buf := make([]byte, size)
		for range n {
			if _, err := io.ReadFull(out, buf); err != nil {
				received <- err
				return
			}
		}
		received <- nil
	}()
	before, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	msg := make([]byte, size)
	start := time.Now()
	for i := range n {
		time.Sleep(time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))))
		if _, err := in.Write(msg); err != nil {
			return err
		}
	}
	if err := <-received; err != nil {
		return err
	}
	after, err := cpuTicks(pid)
	if err != nil {
		return err
	}
	in.Close()
	// /proc counts in clock ticks of 10 ms.
	fmt.Printf("%d messages of %d bytes: relay CPU %.1f µs per message\n", n, size, float64(after-before)*1e4/float64(n))
	return nil
}

// cpuTicks is pid's user and system time in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return user + sys, nil
}
