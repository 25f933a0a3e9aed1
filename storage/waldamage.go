package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// Damage in the newest write-ahead log. Pebble replays the newest log up to
// the first record it cannot read. If nothing valid follows, that is the
// torn tail of a crash and nothing is lost that was not already lost. But
// when valid records of the same log follow the damage (bit rot, a bad
// disk, a machine crash that lost a page in the middle of unsynced data),
// Pebble either refuses to open (when a later chunk proves the damaged one
// had been synced) or, silently as far as its error-level log goes, drops
// everything after the damage. Before Pebble opens the store, Open reads
// the newest log itself the way Pebble will and looks past the first bad
// record for valid chunks of the same log: if it finds any, the log is
// damaged, and WALDamage says whether Open refuses or truncates the log at
// the damage (keeping the original file) and starts without those records.
// Either way the file, the offset, and what lies after it are reported.
//
// Older logs (those whose memtables were not yet flushed at the crash)
// are replayed strictly: Pebble refuses to open when one of them does not
// end cleanly, even when it only lost its tail. That is what a disk that
// filled up leaves behind: the write that failed tore the log it went to,
// Pebble moved on to a new log (walFS writes nothing after a failed
// write, so the new one holds no record), and the memtable could not be
// flushed. When Pebble refuses for that reason, Open looks at the older
// logs itself (repairOlderWALs). A torn log followed by logs that hold no
// record is a torn tail like the newest log's: it is written again up to
// the tear (the original is kept) and the store opens, losing nothing
// that was acknowledged (the failed write was never confirmed). Damage
// followed by records, in the same log or in later ones, is damage in the
// middle of the history: WALDamage refuses, naming the file, the offset
// and the records that follow, or truncates the damaged log and sets the
// later ones aside (damaged-NAME-UNIXTIME), so that the store opens on a
// prefix of its history, never on one with a hole in it.

// WALDamage says what Open does when the newest write-ahead log holds
// valid records after a damaged one.
type WALDamage int

const (
	// WALDamageRefuse: Open fails with ErrWALDamaged, saying where the
	// damage is and what follows it. Nothing is changed on disk.
	WALDamageRefuse WALDamage = iota
	// WALDamageTruncate: Open renames the damaged log to
	// damaged-NNNNNN.log-UNIXTIME in the data directory, writes the log
	// again up to the damage, logs at error level what was dropped, and
	// opens the store without the records after the damage.
	WALDamageTruncate
)

func (d WALDamage) String() string {
	switch d {
	case WALDamageRefuse:
		return "refuse"
	case WALDamageTruncate:
		return "truncate"
	}
	return fmt.Sprintf("WALDamage(%d)", int(d))
}

// ErrWALDamaged is Open's error for a damaged newest write-ahead log under
// WALDamageRefuse.
var ErrWALDamaged = errors.New("write-ahead log damaged")

// walDamageReport describes records that Pebble's replay would drop.
type walDamageReport struct {
	path    string
	offset  int64 // where replay stops: the start of the first bad record
	damage  int64 // the first invalid chunk at or after offset
	cause   error // what the reader said there
	records int64 // records (first or only chunks) from offset on
	bytes   int64 // payload bytes of the valid chunks from offset on
	after   int64 // valid chunks after the damage: 0 means a torn tail
	size    int64 // the file's size
}

func (r *walDamageReport) String() string {
	return fmt.Sprintf("write-ahead log %s is damaged at offset %d of %d (%v): the %d records (%d bytes) from offset %d on cannot be replayed",
		r.path, r.damage, r.size, r.cause, r.records, r.bytes, r.offset)
}

// scanNewestWAL reads the newest write-ahead log in dir as Pebble's replay
// will. It returns the bytes that replay reads, and a report of valid
// records after the first unreadable one (nil when there are none).
func scanNewestWAL(fs vfs.FS, dir string) (int64, *walDamageReport, error) {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil || len(logs) == 0 {
		return 0, nil, err
	}
	newest := logs[len(logs)-1]
	if newest.NumSegments() != 1 {
		return 0, nil, nil // WAL failover is not used; nothing to judge
	}
	r := newest.OpenForRead()
	var off wal.Offset
	for {
		_, off, err = r.NextRecord()
		if err != nil {
			break
		}
	}
	_ = r.Close()
	if errors.Is(err, io.EOF) {
		return off.Physical, nil, nil
	}
	logFS, path := newest.SegmentLocation(0)
	rep := &walDamageReport{path: path, offset: off.Physical, cause: err}
	if err := countChunksAfter(logFS, path, uint32(newest.Num), rep); err != nil {
		return 0, nil, err
	}
	if rep.after == 0 {
		return off.Physical, nil, nil // a torn tail: nothing valid follows the damage
	}
	return off.Physical, rep, nil
}

// The WAL's chunk format (pebble/v2 record package): 32 KiB blocks; a chunk
// never straddles a block and the first chunk of a block starts at its
// beginning. A chunk header is
//
//	checksum (4, little-endian) | length (2) | encoding (1) |
//	log number (4, recyclable and sync formats) | synced offset (8, sync format)
//
// and the checksum is Castagnoli CRC-32 over the header from the encoding
// byte to the end of the payload, masked as in LevelDB.
const (
	walBlockSize         = 32 << 10
	walLegacyHeader      = 7
	walRecyclableHeader  = walLegacyHeader + 4
	walSyncHeader        = walRecyclableHeader + 8
	walEncodingFirstFull = 5 // recyclable full; 5-8 recyclable, 9-12 sync chunks
	walEncodingLast      = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func walChecksum(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// countChunksAfter finds, in rep, the first invalid chunk at or after
// rep.offset and counts the valid chunks of log logNum from rep.offset on,
// and those after the damage. Within a block it walks chunk by chunk and
// gives up on the rest of the block at the first invalid chunk (its length
// cannot be trusted); the next block starts afresh.
func countChunksAfter(fs vfs.FS, path string, logNum uint32, rep *walDamageReport) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rep.size = st.Size()
	rep.damage = -1
	block := make([]byte, walBlockSize)
	for start := rep.offset - rep.offset%walBlockSize; start < rep.size; start += walBlockSize {
		n, err := f.ReadAt(block, start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		b := block[:n]
		i := 0
		for i+walRecyclableHeader <= len(b) {
			enc := b[i+6]
			if enc < walEncodingFirstFull || enc > walEncodingLast {
				break
			}
			hdr := walRecyclableHeader
			if enc >= 9 {
				hdr = walSyncHeader
			}
			length := int(binary.LittleEndian.Uint16(b[i+4:]))
			end := i + hdr + length
			if end > len(b) || binary.LittleEndian.Uint32(b[i+7:]) != logNum ||
				binary.LittleEndian.Uint32(b[i:]) != walChecksum(b[i+6:end]) {
				break
			}
			if start+int64(i) >= rep.offset {
				if pos := (enc - walEncodingFirstFull) % 4; pos == 0 || pos == 1 { // full or first
					rep.records++
				}
				rep.bytes += int64(length)
				if rep.damage >= 0 {
					rep.after++
				}
			}
			i = end
		}
		// The walk stopped at an invalid chunk, or at the end of the block
		// (fewer bytes left than a header, zero-filled by the writer).
		if rep.damage < 0 && start+int64(i) >= rep.offset && i+walRecyclableHeader <= len(b) {
			rep.damage = start + int64(i)
		}
	}
	if rep.damage < 0 {
		rep.damage = rep.offset
	}
	return nil
}

// truncateWAL keeps the damaged log as damaged-NAME-UNIXTIME in its
// directory and writes the log again up to the damage.
func truncateWAL(fs vfs.FS, dir string, rep *walDamageReport) (keptAs string, err error) {
	keptAs = fs.PathJoin(dir, fmt.Sprintf("damaged-%s-%d", fs.PathBase(rep.path), time.Now().Unix()))
	if err := fs.Rename(rep.path, keptAs); err != nil {
		return "", err
	}
	src, err := fs.Open(keptAs)
	if err != nil {
		return "", err
	}
	defer src.Close()
	dst, err := fs.Create(rep.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, rep.offset)); err != nil {
		dst.Close()
		return "", err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return "", err
	}
	if err := dst.Close(); err != nil {
		return "", err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return keptAs, d.Sync()
}

// checkWAL applies o.WALDamage to the newest log of dir before Pebble
// replays it, then checks that the disk can take the replay.
func (s *Store) checkWAL(dir string) error {
	walBytes, rep, err := scanNewestWAL(s.opts.FS, dir)
	if err != nil {
		return fmt.Errorf("data directory %s: reading the write-ahead log: %w", dir, err)
	}
	if rep == nil {
		return s.checkStartSpace(dir, walBytes)
	}
	if s.opts.WALDamage != WALDamageTruncate {
		s.log.Error().Str("file", rep.path).Int64("offset", rep.damage).Int64("records_lost", rep.records).
			Int64("bytes_lost", rep.bytes).Str("cause", rep.cause.Error()).Msg("write-ahead log damaged: not starting")
		return &dirError{fmt.Sprintf("data directory %s: %s; Warren did not start. To start without them, set storage.wal_damage = \"truncate\" (the damaged log is kept)", dir, rep), ErrWALDamaged, rep.cause}
	}
	keptAs, err := truncateWAL(s.opts.FS, dir, rep)
	if err != nil {
		return &dirError{fmt.Sprintf("data directory %s: %s; truncating it failed: %v", dir, rep, err), ErrWALDamaged, err}
	}
	s.log.Error().Str("file", rep.path).Int64("offset", rep.damage).Int64("records_dropped", rep.records).
		Int64("bytes_dropped", rep.bytes).Str("cause", rep.cause.Error()).Str("kept_as", keptAs).
		Msg("write-ahead log damaged: starting without the records after the damage")
	return s.checkStartSpace(dir, walBytes)
}

// isStrictReplayError reports whether Pebble's Open failed because a log
// it replays strictly (one that is not the newest) did not read cleanly.
func isStrictReplayError(err error) bool {
	return errors.Is(err, record.ErrUnexpectedEOF) || errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk)
}

// readLog reads a log as Pebble's replay does: the offset where reading
// stopped, the records read, and why it stopped (io.EOF: a clean end).
func readLog(l wal.LogicalLog) (off int64, records int64, err error) {
	r := l.OpenForRead()
	defer r.Close()
	for {
		var at wal.Offset
		_, at, err = r.NextRecord()
		if err != nil {
			return at.Physical, records, err
		}
		records++
	}
}

// repairOlderWALs handles the first log older than the newest that does
// not read cleanly, after Pebble refused to open because of it (see the
// package's "Damage" note above): it reports whether it changed anything,
// so that Open may try again.
func (s *Store) repairOlderWALs(dir string) (bool, error) {
	fs := s.opts.FS
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return false, err
	}
	for i := 0; i < len(logs)-1; i++ {
		if logs[i].NumSegments() != 1 {
			return false, nil // WAL failover is not used; nothing to judge
		}
		off, _, err := readLog(logs[i])
		if errors.Is(err, io.EOF) {
			continue
		}
		logFS, path := logs[i].SegmentLocation(0)
		rep := &walDamageReport{path: path, offset: off, cause: err}
		if err := countChunksAfter(logFS, path, uint32(logs[i].Num), rep); err != nil {
			return false, err
		}
		// What later logs hold would be replayed after a hole.
		var later []string
		var laterRecords int64
		for _, l := range logs[i+1:] {
			_, n, _ := readLog(l)
			laterRecords += n
			_, p := l.SegmentLocation(0)
			later = append(later, p)
		}
		if rep.after == 0 && laterRecords == 0 {
			keptAs, err := truncateWAL(fs, dir, rep)
			if err != nil {
				return false, fmt.Errorf("data directory %s: write-ahead log %s was torn at offset %d and could not be written again: %w", dir, path, rep.damage, err)
			}
			s.log.Warn().Str("file", path).Int64("offset", rep.damage).Int64("records_dropped", rep.records).Str("kept_as", keptAs).
				Msg("an older write-ahead log was torn by a write that failed and no later log holds a record: starting without its torn tail, which was never acknowledged")
			return true, nil
		}
		lost := rep.records + laterRecords
		if s.opts.WALDamage != WALDamageTruncate {
			s.log.Error().Str("file", path).Int64("offset", rep.damage).Int64("records_lost", lost).
				Int64("later_logs", int64(len(later))).Str("cause", rep.cause.Error()).Msg("write-ahead log damaged: not starting")
			return false, &dirError{fmt.Sprintf("data directory %s: %s, and %d later logs hold %d records; Warren did not start. To start without them all, set storage.wal_damage = \"truncate\" (the logs are kept)",
				dir, rep, len(later), laterRecords), ErrWALDamaged, rep.cause}
		}
		keptAs, err := truncateWAL(fs, dir, rep)
		if err != nil {
			return false, &dirError{fmt.Sprintf("data directory %s: %s; truncating it failed: %v", dir, rep, err), ErrWALDamaged, err}
		}
		for _, p := range later {
			aside := fs.PathJoin(dir, fmt.Sprintf("damaged-%s-%d", fs.PathBase(p), time.Now().Unix()))
			if err := fs.Rename(p, aside); err != nil {
				return false, &dirError{fmt.Sprintf("data directory %s: setting aside %s after the damage in %s: %v", dir, p, path, err), ErrWALDamaged, err}
			}
		}
		s.log.Error().Str("file", path).Int64("offset", rep.damage).Int64("records_dropped", lost).Int64("later_logs_set_aside", int64(len(later))).
			Str("cause", rep.cause.Error()).Str("kept_as", keptAs).Msg("write-ahead log damaged: starting without the records after the damage")
		return true, nil
	}
	return false, nil
}
