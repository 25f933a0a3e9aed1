package tests

import (
	"testing"
)

// The memory watermark and the disk free limit change at run time, as
// rabbitmqctl set_vm_memory_high_watermark and set_disk_free_limit do, and
// the resource reading shows the new limits and alarms. A change is in
// force when the setter returns: the alarm is raised or cleared already,
// so a publish right after it is held or not as the limit implies
// (amqp091-go's memory alarm test publishes at once).
func TestLimitsChangeAtRunTime(t *testing.T) {
	s := startWarren(t)
	if err := s.b.SetMemoryWatermark(1, true); err != nil { // 1 byte: over at once
		t.Fatal(err)
	}
	r := s.b.Resources()
	if raised, _, _ := s.b.Alarm().State(); !r.MemoryAlarm || r.MemoryLimit != 1 || r.MemoryUsed == 0 || !raised {
		t.Fatalf("after a watermark of 1 byte: alarm raised %v, reading %+v", raised, r)
	}
	if err := s.b.SetMemoryWatermark(0, false); err != nil {
		t.Fatal(err)
	}
	if raised, _, _ := s.b.Alarm().State(); s.b.Resources().MemoryAlarm || raised {
		t.Fatalf("after the watermark was lifted: alarm raised %v, reading %+v", raised, s.b.Resources())
	}
	for _, bad := range []float64{-1, 1.5} {
		if err := s.b.SetMemoryWatermark(bad, false); err == nil {
			t.Errorf("watermark %v accepted", bad)
		}
	}

	s.b.SetDiskFreeLimit(1 << 62) // more than any disk has
	if r := s.b.Resources(); !r.DiskAlarm || r.DiskFree == 0 || r.DiskLimit != 1<<62 {
		t.Fatalf("after a disk limit above the disk: %+v", r)
	}
	// A lifted disk limit clears the alarm once the disk has had room for
	// a second, so that a disk freeing space in steps does not flap it.
	s.b.SetDiskFreeLimit(0)
	eventually(t, "the disk alarm cleared", func() bool {
		raised, _, _ := s.b.Alarm().State()
		return !s.b.Resources().DiskAlarm && !raised
	})
}
