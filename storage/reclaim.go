package storage

import "time"

// Pebble picks compactions when something happens: a flush, a finished
// compaction, an open. A blob file becomes worth rewriting by growing old
// (blobRewriteAge) while a few live values keep its garbage on disk, and
// growing old is no event. So a store that goes idle after a burst of large
// messages kept every blob file that a few lingering messages pinned, for
// as long as it stayed idle: hundreds of MiB for a few live MiB.
//
// nudgeCompactions makes Pebble pick again every nudgeInterval while its
// blob files hold more garbage than the rewrite policy allows. Closing the
// only snapshot is the public call that does it (Pebble re-picks then, as
// the snapshot may have kept obsolete values alive). Once a rewrite runs,
// its completion is an event and Pebble goes on by itself, one file at a
// time, until the garbage is down to the policy's ratio.

const (
	defaultBlobRewriteAge = 5 * time.Minute
	defaultNudgeInterval  = time.Minute
	// blobGarbageRatio is the share of blob bytes no key refers to above
	// which Pebble rewrites old blob files.
	blobGarbageRatio = 0.2
)

// nudgeLoop runs nudgeCompactions every interval until the store closes.
func (s *Store) nudgeLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.nudgeCompactions()
		}
	}
}

// nudgeCompactions has Pebble pick compactions afresh if its blob files
// hold garbage worth a rewrite; it reports whether it did.
func (s *Store) nudgeCompactions() bool {
	done, err := s.read()
	if err != nil {
		return false
	}
	defer done()
	m := s.db.Metrics()
	garbage := m.BlobFiles.ValueSize - min(m.BlobFiles.ReferencedValueSize, m.BlobFiles.ValueSize)
	if float64(garbage) <= blobGarbageRatio*float64(m.BlobFiles.ValueSize) {
		return false
	}
	s.db.NewSnapshot().Close()
	return true
}
