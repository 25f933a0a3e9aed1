package tests

import (
	"testing"
)

// The memory watermark and the disk free limit change at run time, as
// rabbitmqctl set_vm_memory_high_watermark and set_disk_free_limit do, and
// the resource reading shows the new limits and alarms.
func TestLimitsChangeAtRunTime(t *testing.T) {
	s := startWarren(t)
	if err := s.b.SetMemoryWatermark(1, true); err != nil { // 1 byte: over at once
		t.Fatal(err)
	}
	eventually(t, "the memory alarm", func() bool {
		r := s.b.Resources()
		raised, _, _ := s.b.Alarm().State()
		return r.MemoryAlarm && r.MemoryLimit == 1 && r.MemoryUsed > 0 && raised
	})
	if err := s.b.SetMemoryWatermark(0, false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the memory alarm cleared", func() bool {
		raised, _, _ := s.b.Alarm().State()
		return !s.b.Resources().MemoryAlarm && !raised
	})
	for _, bad := range []float64{-1, 1.5} {
		if err := s.b.SetMemoryWatermark(bad, false); err == nil {
			t.Errorf("watermark %v accepted", bad)
		}
	}

	s.b.SetDiskFreeLimit(1 << 62) // more than any disk has
	eventually(t, "the disk alarm", func() bool {
		r := s.b.Resources()
		return r.DiskAlarm && r.DiskFree > 0 && r.DiskLimit == 1<<62
	})
	s.b.SetDiskFreeLimit(0)
	eventually(t, "the disk alarm cleared", func() bool {
		raised, _, _ := s.b.Alarm().State()
		return !s.b.Resources().DiskAlarm && !raised
	})
}
