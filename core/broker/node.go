package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"

	"github.com/warrenmq/warren/core/config"
	"github.com/warrenmq/warren/core/reply"
	"github.com/warrenmq/warren/storage"
)

// This file is what the admin API reports about the node itself: its
// name, listeners, uptime and resource figures (RabbitMQ's /api/nodes),
// and the cluster name an operator may set.

// Listener is one open listener.
type Listener struct {
	Protocol string // RabbitMQ's names: "amqp", "amqp/ssl", "http"
	IP       string
	Port     int
}

// recordListener adds a listener to Listeners; it is called while the
// broker starts its listeners, and the list is replaced, never changed in
// place, so readers need no lock.
func (b *Broker) recordListener(proto string, addr net.Addr) {
	if proto == "amqps" {
		proto = "amqp/ssl"
	}
	l := Listener{Protocol: proto}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		l.IP, l.Port = tcp.IP.String(), tcp.Port
		if tcp.IP.IsUnspecified() {
			l.IP = "::"
		}
	}
	for {
		old := b.listenerInfo.Load()
		var next []Listener
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, l)
		if b.listenerInfo.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Listeners lists the open listeners in the order they were opened.
func (b *Broker) Listeners() []Listener {
	if l := b.listenerInfo.Load(); l != nil {
		return append([]Listener(nil), *l...)
	}
	return nil
}

// Config returns the configuration the broker was started with.
func (b *Broker) Config() config.Config { return b.cfg }

// NodeName is the node's name: cluster.node_name in a cluster, else
// node_name, else as RabbitMQ would write it, warren@host.
func (b *Broker) NodeName() string {
	if n := b.cfg.Cluster.NodeName; n != "" {
		return n
	}
	if n := b.cfg.NodeName; n != "" {
		return n
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	return "warren@" + host
}

// ClusterName is the name an operator gave the cluster, the node's name
// until one is set.
func (b *Broker) ClusterName() string {
	if n := b.clusterName.Load(); n != nil {
		return *n
	}
	return b.NodeName()
}

// ParamClusterName is the global parameter that holds the cluster's name,
// as in RabbitMQ's definitions.
const ParamClusterName = "cluster_name"

// SetClusterName renames the cluster, durably: the name is stored before
// it is answered.
func (b *Broker) SetClusterName(name string) error {
	if name == "" {
		return errors.New("a cluster name must not be empty")
	}
	return b.change(setClusterName{Name: name})
}

func (b *Broker) applySetClusterName(name string) error {
	if err := b.store.PutMeta(storage.KindParameter, "", ParamClusterName, clusterNameRecord{Value: name}.Table()); err != nil {
		return err
	}
	b.clusterName.Store(&name)
	return nil
}

// restoreGlobalParameters reads the stored cluster name, if one was set,
// and the other global parameters.
func (b *Broker) restoreGlobalParameters() error {
	params, err := b.store.Meta(storage.KindParameter, "")
	if err != nil {
		return err
	}
	globals := map[string]any{}
	for _, p := range params {
		if strings.HasPrefix(p.Name, pluginSettingsPrefix) {
			continue // plugin_settings.go's
		}
		if p.Name != ParamClusterName {
			rec, err := readGlobalParameterRecord(p.Rec)
			if err != nil {
				return fmt.Errorf("global parameter '%s': %w", p.Name, err)
			}
			globals[p.Name] = rec.Value
			continue
		}
		rec, err := readClusterNameRecord(p.Rec)
		if err != nil {
			return err
		}
		if rec.Value != "" {
			b.clusterName.Store(&rec.Value)
		}
	}
	b.globals.Store(&globals)
	return nil
}

// GlobalParameters are the global parameters beside cluster_name, by
// name; the map is not to be changed.
func (b *Broker) GlobalParameters() map[string]any {
	if p := b.globals.Load(); p != nil {
		return *p
	}
	return nil
}

// SetGlobalParameter sets a global parameter (RabbitMQ's: any JSON value
// as a field value); cluster_name, a name, renames the cluster.
func (b *Broker) SetGlobalParameter(name string, value any) error {
	if name == ParamClusterName {
		s, ok := value.(string)
		if !ok || s == "" {
			return reply.PreconditionFailed("global parameter '%s' must be a name, not %v", name, value)
		}
		return b.SetClusterName(s)
	}
	if name == "" || strings.HasPrefix(name, pluginSettingsPrefix) {
		return reply.PreconditionFailed("'%s' cannot name a global parameter (empty, or the prefix %s Warren keeps plugins' settings under)", name, pluginSettingsPrefix)
	}
	return b.change(setGlobalParameter{Name: name, Value: value})
}

// ClearGlobalParameter removes a global parameter; cluster_name's goes
// back to the node's name.
func (b *Broker) ClearGlobalParameter(name string) error {
	return b.change(clearGlobalParameter{Name: name})
}

func (b *Broker) applySetGlobalParameter(name string, value any) error {
	if err := b.store.PutMeta(storage.KindParameter, "", name, globalParameterRecord{Value: value}.Table()); err != nil {
		return err
	}
	b.updateGlobals(func(m map[string]any) { m[name] = value })
	return nil
}

func (b *Broker) applyClearGlobalParameter(name string) error {
	if err := b.store.DeleteMeta(storage.KindParameter, "", name); err != nil {
		return err
	}
	if name == ParamClusterName {
		b.clusterName.Store(nil)
		return nil
	}
	b.updateGlobals(func(m map[string]any) { delete(m, name) })
	return nil
}

// updateGlobals replaces the global parameters with a changed copy.
func (b *Broker) updateGlobals(change func(map[string]any)) {
	for {
		old := b.globals.Load()
		next := map[string]any{}
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		change(next)
		if b.globals.CompareAndSwap(old, &next) {
			return
		}
	}
}

// NodeStatus is the node's resource figures at one moment.
type NodeStatus struct {
	MemUsed, MemLimit       uint64 // bytes; MemLimit 0 when there is no watermark
	MemAlarm                bool
	DiskFree, DiskFreeLimit uint64 // bytes; DiskFree 0 when unknown
	DiskAlarm               bool
	FDUsed, FDTotal         int // open file descriptors and their limit; -1 when unknown
	Goroutines              int
	Processors              int
	OSPid                   int
}

// Status is the node's figures now: memory and disk as the resource
// watcher last read them (Resources), open file descriptors, and which
// alarms are raised, including one raised by hand (an operator's or a
// test's), told apart by its reason. It reads /proc, so it is for the
// admin API, not for a hot path.
func (b *Broker) Status() NodeStatus {
	r := b.Resources()
	s := NodeStatus{Goroutines: runtime.NumGoroutine(), Processors: runtime.NumCPU(), OSPid: os.Getpid(), FDUsed: -1, FDTotal: -1,
		MemUsed: r.MemoryUsed, MemLimit: r.MemoryLimit, MemAlarm: r.MemoryAlarm,
		DiskFree: r.DiskFree, DiskFreeLimit: r.DiskLimit, DiskAlarm: r.DiskAlarm || r.StoreError != ""}
	if raised, reason, _ := b.alarm.State(); raised {
		mem := strings.Contains(reason, "memory")
		s.MemAlarm = s.MemAlarm || mem
		s.DiskAlarm = s.DiskAlarm || !mem || strings.Contains(reason, "disk")
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		s.FDUsed = len(fds)
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		s.FDTotal = int(lim.Cur)
	}
	return s
}
