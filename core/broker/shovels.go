package broker

import (
	"time"

	"github.com/warrenmq/warren/core/shovel"
)

// Dynamic shovels (core/shovel) are parameters of component shovel. One
// node runs them all: a node of its own, or the metadata group's leader
// in a cluster, so that a shovel moves to another node when its node
// goes (the group elects another leader, whose next look starts them).
// A node that stops leading stops its shovels at its next look; for that
// second two nodes may both run a shovel, which under on-confirm can
// reorder messages but not lose them (each message is delivered to one
// of the two consumers, and acked at the source only once confirmed).

// leaderLook is how often a cluster member asks whether it leads.
const leaderLook = time.Second

func (b *Broker) newShovels() {
	b.shovels = &shovel.Manager{
		Log:         b.log.With().Str("component", "shovel").Logger(),
		Local:       b.srv.DialLocal,
		ClusterName: b.ClusterName,
		Clear: func(vhost, name string) error {
			return b.ClearVHostParameter(vhost, shovel.Component, name)
		},
		MayUseVHost: func(user, vhost string) bool {
			_, ok := b.users.Permission(vhost, user)
			return ok
		},
	}
	b.RegisterParameterComponent(shovel.Component, b.shovels)
}

// Shovels is the node's shovel manager.
func (b *Broker) Shovels() *shovel.Manager { return b.shovels }

// startShovels runs the shovels once the broker serves, from one
// goroutine (so that one Sync at a time decides): on every change of the
// parameters, and in a cluster every leaderLook.
func (b *Broker) startShovels() {
	nudge := make(chan struct{}, 1)
	b.WatchVHostParameters(func() {
		select {
		case nudge <- struct{}{}:
		default:
		}
	})
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.shovels.Stop()
		var look <-chan time.Time
		if b.cluster.Load() != nil {
			t := time.NewTicker(leaderLook)
			defer t.Stop()
			look = t.C
		}
		for {
			select {
			case <-b.stop:
				return
			case <-nudge:
			case <-look:
			}
			b.syncShovels()
		}
	}()
}

func (b *Broker) syncShovels() {
	var params []shovel.Param
	for _, p := range b.VHostParameters("", shovel.Component) {
		params = append(params, shovel.Param{VHost: p.VHost, Name: p.Name, Value: p.Value})
	}
	n := b.cluster.Load()
	b.shovels.Sync(params, n == nil || n.IsLeader())
}
