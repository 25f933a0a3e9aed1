package stream

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// An OSIRIS chunk is what a stream stores and what Deliver carries: a
// 48-byte header, then on disk a bloom filter, the data entries and a
// trailer. Deliver sends the header and the data only: the bloom filter
// and the trailer are skipped, though the header still gives their sizes.
// The layout is osiris_log.erl's.

// ChunkHeaderSize is the size of a chunk header.
const ChunkHeaderSize = 48

// ChunkMagic is the high nibble of a chunk's first byte; the low nibble is
// the chunk format version, ChunkFormatVersion in what OSIRIS writes.
const (
	ChunkMagic         = 5
	ChunkFormatVersion = 0
)

// ChunkType says what a chunk's entries are.
type ChunkType uint8

const (
	ChunkUser             ChunkType = 0 // messages
	ChunkTrackingDelta    ChunkType = 1 // publisher sequence and consumer offset updates
	ChunkTrackingSnapshot ChunkType = 2 // all tracking state
)

// ChunkHeader is a chunk's header.
type ChunkHeader struct {
	Version       uint8 // chunk format version, the first byte's low nibble
	Type          ChunkType
	NumEntries    uint16 // data entries: messages and sub-batches
	NumRecords    uint32 // records (messages), sub-batches counted by their records
	Timestamp     int64  // milliseconds since the epoch
	Epoch         uint64
	ChunkID       uint64 // the offset of the chunk's first record
	CRC           uint32 // CRC-32 (IEEE) of the data entries
	DataLength    uint32
	TrailerLength uint32
	BloomSize     uint8  // bytes of bloom filter after the header on disk; not sent in Deliver
	Reserved      uint32 // 24 bits, zero
}

// Append appends the 48-byte header.
func (h *ChunkHeader) Append(dst []byte) []byte {
	dst = append(dst, ChunkMagic<<4|h.Version&0x0f, uint8(h.Type))
	dst = appendU16(dst, h.NumEntries)
	dst = appendU32(dst, h.NumRecords)
	dst = appendU64(dst, uint64(h.Timestamp))
	dst = appendU64(dst, h.Epoch)
	dst = appendU64(dst, h.ChunkID)
	dst = appendU32(dst, h.CRC)
	dst = appendU32(dst, h.DataLength)
	dst = appendU32(dst, h.TrailerLength)
	return appendU32(dst, uint32(h.BloomSize)<<24|h.Reserved&0xffffff)
}

// DecodeChunkHeader decodes the header at the start of b.
func DecodeChunkHeader(b []byte) (ChunkHeader, error) {
	if len(b) < ChunkHeaderSize {
		return ChunkHeader{}, chunkError(0, ErrTruncated, "chunk header needs %d bytes, %d left", ChunkHeaderSize, len(b))
	}
	if magic := b[0] >> 4; magic != ChunkMagic {
		return ChunkHeader{}, chunkError(0, ErrBadValue, "chunk magic %d, expected %d", magic, ChunkMagic)
	}
	last := binary.BigEndian.Uint32(b[44:])
	return ChunkHeader{
		Version:       b[0] & 0x0f,
		Type:          ChunkType(b[1]),
		NumEntries:    binary.BigEndian.Uint16(b[2:]),
		NumRecords:    binary.BigEndian.Uint32(b[4:]),
		Timestamp:     int64(binary.BigEndian.Uint64(b[8:])),
		Epoch:         binary.BigEndian.Uint64(b[16:]),
		ChunkID:       binary.BigEndian.Uint64(b[24:]),
		CRC:           binary.BigEndian.Uint32(b[32:]),
		DataLength:    binary.BigEndian.Uint32(b[36:]),
		TrailerLength: binary.BigEndian.Uint32(b[40:]),
		BloomSize:     uint8(last >> 24),
		Reserved:      last & 0xffffff,
	}, nil
}

// AppendChunk appends a chunk as Deliver carries it: h, with DataLength
// and CRC set from data, then data, the chunk's entries (see
// AppendEntry). The caller sets the counts, times and ids.
func AppendChunk(dst []byte, h ChunkHeader, data []byte) []byte {
	h.DataLength = uint32(len(data))
	h.CRC = crc32.ChecksumIEEE(data)
	return append(h.Append(dst), data...)
}

// ParseChunk reads a chunk as Deliver carries it: the header, then
// DataLength bytes of entries, whose CRC it checks. data aliases chunk;
// bytes after it (a trailer, when a reader asks for all of the chunk) are
// not looked at.
func ParseChunk(chunk []byte) (h ChunkHeader, data []byte, err error) {
	h, err = DecodeChunkHeader(chunk)
	if err != nil {
		return ChunkHeader{}, nil, err
	}
	rest := chunk[ChunkHeaderSize:]
	if uint64(h.DataLength) > uint64(len(rest)) {
		return ChunkHeader{}, nil, chunkError(ChunkHeaderSize, ErrTruncated, "chunk data length %d, %d bytes left", h.DataLength, len(rest))
	}
	data = rest[:h.DataLength:h.DataLength]
	if crc := crc32.ChecksumIEEE(data); crc != h.CRC {
		return ChunkHeader{}, nil, chunkError(ChunkHeaderSize, ErrBadValue, "chunk data CRC 0x%08x, header says 0x%08x", crc, h.CRC)
	}
	return h, data, nil
}

// Compression is a sub-batch's compression, as the stream clients number
// it; the broker stores sub-batches without looking inside.
type Compression uint8

const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// SubBatch is the header of a sub-batch entry: Records messages in one
// body, compressed to the body's length from UncompressedSize bytes.
type SubBatch struct {
	Compression      Compression // 3 bits
	Records          uint16
	UncompressedSize uint32
}

// Entry is one data entry of a chunk, and one message of a Publish, where
// the layout is the same: a simple entry, one record, is a uint32 length
// with the high bit clear and the body; a sub-batch entry starts with a
// byte holding the high bit, the compression (3 bits) and 4 reserved
// bits, then the record count (uint16), the uncompressed size (uint32),
// the body's length (uint32) and the body.
type Entry struct {
	SubBatch *SubBatch // nil for a simple entry
	Body     []byte
}

// AppendEntry appends e. A simple entry's body longer than 2^31-1 bytes
// cannot be sent and is a bug in the caller.
func AppendEntry(dst []byte, e Entry) []byte {
	if e.SubBatch == nil {
		if len(e.Body) > math.MaxInt32 {
			panic(fmt.Sprintf("stream: entry of %d bytes exceeds 2^31-1", len(e.Body)))
		}
		return append(appendU32(dst, uint32(len(e.Body))), e.Body...)
	}
	sb := e.SubBatch
	dst = append(dst, 0x80|uint8(sb.Compression&7)<<4)
	dst = appendU16(dst, sb.Records)
	dst = appendU32(dst, sb.UncompressedSize)
	return append(appendU32(dst, uint32(len(e.Body))), e.Body...)
}

// ReadEntry reads the entry at the start of data and returns it and its
// encoded size. Body aliases data.
func ReadEntry(data []byte) (e Entry, n int, err error) {
	r := reader{b: data}
	e.SubBatch, e.Body = r.entry()
	if r.err != nil {
		return Entry{}, 0, r.err
	}
	return e, r.off, nil
}

// entry reads a chunk entry or a published message: see Entry.
func (r *reader) entry() (*SubBatch, []byte) {
	if r.err != nil {
		return nil, nil
	}
	if r.left() < 1 {
		r.fail(ErrTruncated, "entry needs 1 byte, 0 left")
		return nil, nil
	}
	if r.b[r.off]&0x80 == 0 {
		n := r.u32()
		return nil, nonEmpty(r.take(int(n)))
	}
	sb := &SubBatch{Compression: Compression(r.u8() >> 4 & 7), Records: r.u16(), UncompressedSize: r.u32()}
	n := r.u32()
	body := nonEmpty(r.take(int(n)))
	if r.err != nil {
		return nil, nil
	}
	return sb, body
}

// chunkError reports malformed chunk data as a *DecodeError with Key 0.
func chunkError(off int, err error, format string, args ...any) error {
	return &DecodeError{Offset: off, Err: err, Detail: fmt.Sprintf(format, args...)}
}
