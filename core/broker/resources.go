package broker

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"
)

// watchResources raises the publisher alarm when the process uses more
// memory than memory_high_watermark of the machine's, or the data
// directory's disk has less than disk_free_limit free, and clears it when
// both are fine again. It samples once a second.
func (b *Broker) watchResources() {
	defer b.wg.Done()
	limit := uint64(0)
	if total := systemMemory(); total > 0 && b.cfg.Resources.MemoryHighWatermark > 0 {
		limit = uint64(float64(total) * b.cfg.Resources.MemoryHighWatermark)
	}
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		var reasons []string
		if limit > 0 {
			metrics.Read(samples)
			used := samples[0].Value.Uint64() - samples[1].Value.Uint64()
			if used > limit {
				reasons = append(reasons, fmt.Sprintf("memory: %d bytes used, watermark %d", used, limit))
			}
		}
		if min := uint64(b.cfg.Resources.DiskFreeLimit); min > 0 {
			if free, ok := diskFree(b.cfg.Storage.DataDir); ok && free < min {
				reasons = append(reasons, fmt.Sprintf("disk: %d bytes free, limit %d", free, min))
			}
		}
		raised, _, _ := b.alarm.State()
		if len(reasons) > 0 && !raised {
			b.log.Warn().Strs("reasons", reasons).Msg("resource alarm raised: publishers blocked")
		} else if len(reasons) == 0 && raised {
			b.log.Info().Msg("resource alarm cleared")
		}
		b.alarm.Set(len(reasons) > 0, strings.Join(reasons, "; "))
	}
}

// systemMemory reads MemTotal from /proc/meminfo; 0 when unknown.
func systemMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb uint64
		if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
			return kb << 10
		}
	}
	return 0
}

// diskFree reports the bytes available to the broker on dir's filesystem.
func diskFree(dir string) (uint64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
