package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCalls: many concurrent calls, small and large, between the nodes,
// each answered by its own handler's result; a handler's error reaches the
// caller as an error.
func TestCalls(t *testing.T) {
	nodes := threeNodes(t, nil)
	for _, n := range nodes {
		name := n.cfg.Name
		n.SetCallHandler(func(from uint64, payload []byte) ([]byte, error) {
			if bytes.HasPrefix(payload, []byte("fail")) {
				return nil, fmt.Errorf("%s refuses %q", name, payload[:4])
			}
			return append([]byte(name+":"), bytes.ToUpper(payload)...), nil
		})
	}
	// The deadline guards against a hang, not a slow machine. The calls
	// carry some 25 MiB in all: with 100 MiB, under the race detector on
	// two busy cores, the transport's own write deadline cut them.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := nodes[i%3], nodes[(i+1)%3]
			payload := bytes.Repeat([]byte("ab"), 1+i*i*13%(1<<17)) // up to 256 KiB
			got, err := from.Call(ctx, to.cfg.Name, payload)
			want := append([]byte(to.cfg.Name+":"), bytes.ToUpper(payload)...)
			if err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("call %d from %s to %s: %d bytes, %v", i, from.cfg.Name, to.cfg.Name, len(got), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := nodes[0].Call(ctx, "b", []byte("fail please")); err == nil || !strings.Contains(err.Error(), `b refuses "fail"`) {
		t.Fatalf("a handler's error: %v", err)
	}
	if _, err := nodes[0].Call(ctx, "nobody", nil); err == nil {
		t.Fatal("a call to a node that is not a member")
	}
}

// TestCallBrokenByACut: a call in progress when the link is cut fails
// with ErrCallBroken; after healing, calls go through again.
func TestCallBrokenByACut(t *testing.T) {
	nodes := threeNodes(t, nil)
	a, b := nodes[0], nodes[1]
	release, arrived := make(chan struct{}), make(chan struct{})
	b.SetCallHandler(func(from uint64, payload []byte) ([]byte, error) {
		if string(payload) == "slow" {
			close(arrived)
			<-release
		}
		return payload, nil
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got, err := a.Call(ctx, "b", []byte("first")); err != nil || string(got) != "first" {
		t.Fatalf("first call: %q %v", got, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Call(ctx, "b", []byte("slow"))
		done <- err
	}()
	<-arrived
	a.Block("b", true)
	if err := <-done; !errors.Is(err, ErrCallBroken) {
		t.Fatalf("a call across a cut: %v, want ErrCallBroken", err)
	}
	a.Block("b", false)
	if got, err := a.Call(ctx, "b", []byte("after")); err != nil || string(got) != "after" {
		t.Fatalf("after healing: %q %v", got, err)
	}
}

// BenchmarkCall times calls of 1 KiB between two nodes on loopback, one
// at a time and many at once (they share one connection).
//
//	go test ./core/cluster -run '^$' -bench Call
func BenchmarkCall(b *testing.B) {
	nodes := threeNodes(b, nil)
	nodes[1].SetCallHandler(func(from uint64, payload []byte) ([]byte, error) { return payload[:8], nil })
	payload := make([]byte, 1024)
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := nodes[0].Call(ctx, "b", payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := nodes[0].Call(ctx, "b", payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
