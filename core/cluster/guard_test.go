package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"

	"github.com/warrenmq/warren/internal/poll"
)

// lockedBuffer is a log destination several goroutines write.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A member that lost its log while its group's leader still counts it
// (its data restored from an old backup: the same incarnation, an
// earlier log) gets a heartbeat whose commit index is past the end of
// its log, and Raft panics. Only that member stops, with a log line that
// names the group and the peer; the node's other group and the metadata
// group go on.
func TestBrokenInvariantStopsOnlyThatMember(t *testing.T) {
	var logs lockedBuffer
	nodes := threeNodes(t, func(c *Config) {
		if c.Name == "b" {
			c.Logger = zerolog.New(&logs).Level(zerolog.WarnLevel)
		}
	})
	a, b := nodes[0], nodes[1]
	ids := []uint64{a.ID(), b.ID(), nodes[2].ID()}
	const broken, healthy = 31, 32
	members := map[uint64][]*Group{}
	for _, gid := range []uint64{broken, healthy} {
		for ni, n := range nodes {
			g, err := n.Groups().Start(GroupConfig{ID: gid, Members: ids, Campaign: ni == 0,
				Log: memLog{raft.NewMemoryStorage()}, Machine: &groupJournal{}})
			if err != nil {
				t.Fatal(err)
			}
			members[gid] = append(members[gid], g)
		}
		for i := range 5 {
			if _, err := proposeTo(members[gid][0], fmt.Sprint("before-", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	poll.Until(t, 10*time.Second, "b's member of the group to be broken to apply what was proposed", func() bool {
		return members[broken][1].Status().Applied >= members[broken][0].Status().Commit
	})

	// b's member of the broken group comes back with an empty log, as the
	// same incarnation: the leader's next heartbeat names a commit past it.
	members[broken][1].Stop()
	restarted, err := b.Groups().Start(GroupConfig{ID: broken, Join: true, Log: memLog{raft.NewMemoryStorage()}, Machine: &groupJournal{}})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "b's restarted member to stop", func() bool { return restarted.Status().Role == "failed" })
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "broke an invariant") {
			line = l
		}
	}
	if !strings.Contains(line, fmt.Sprintf(`"group":%d`, broken)) || !strings.Contains(line, fmt.Sprintf(`"peer":"%x"`, a.ID())) ||
		!strings.Contains(line, `"peer_name":"a"`) || !strings.Contains(line, "tocommit") {
		t.Fatalf("the log line does not name the group, the peer and Raft's panic: %q", line)
	}
	if _, err := proposeTo(restarted, "to a stopped member"); !errors.Is(err, ErrGroupStopped) {
		t.Fatalf("a proposal to the stopped member: %v", err)
	}

	// The node and its other groups go on.
	if _, err := proposeTo(members[healthy][1], "after, through b"); err != nil {
		t.Fatal(err)
	}
	if _, err := proposeTo(members[broken][0], "after, without b"); err != nil {
		t.Fatal(err)
	}
	if err := propose(t, b, "metadata after"); err != nil {
		t.Fatal(err)
	}
}
