package streamproto

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/warrenmq/warren/protocol/stream"
)

// maxSubBatchBytes bounds a sub-batch's uncompressed size: a client
// declares it, and a body that inflates past it is refused before it
// is read further, so a small frame cannot make the broker allocate
// gigabytes.
const maxSubBatchBytes = 64 << 20

// errSubBatch is a sub-batch that does not decode: its compression, its
// size or its records.
var errSubBatch = errors.New("streamproto: malformed sub-batch")

// subBatchRecords returns the records of a sub-batch entry: its body
// inflated with its compression (the stream clients' four: gzip, and the
// snappy, lz4 and zstd framed formats, read with the libraries the
// clients write them with), then split into records, each a uint32
// length and the message.
func subBatchRecords(sb *stream.SubBatch, body []byte) ([][]byte, error) {
	if sb.UncompressedSize > maxSubBatchBytes {
		return nil, fmt.Errorf("%w: %d bytes uncompressed, past %d", errSubBatch, sb.UncompressedSize, maxSubBatchBytes)
	}
	data := body
	if sb.Compression != stream.CompressionNone {
		var r io.Reader
		switch sb.Compression {
		case stream.CompressionGzip:
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, fmt.Errorf("%w: gzip: %v", errSubBatch, err)
			}
			r = zr
		case stream.CompressionSnappy:
			r = snappy.NewReader(bytes.NewReader(body))
		case stream.CompressionLZ4:
			r = lz4.NewReader(bytes.NewReader(body))
		case stream.CompressionZstd:
			zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxSubBatchBytes))
			if err != nil {
				return nil, fmt.Errorf("%w: zstd: %v", errSubBatch, err)
			}
			defer zr.Close()
			r = zr
		default:
			return nil, fmt.Errorf("%w: compression %d is not known", errSubBatch, sb.Compression)
		}
		var out bytes.Buffer
		out.Grow(int(sb.UncompressedSize))
		n, err := io.Copy(&out, io.LimitReader(r, int64(sb.UncompressedSize)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errSubBatch, err)
		}
		if n != int64(sb.UncompressedSize) {
			return nil, fmt.Errorf("%w: %d bytes uncompressed, %d declared", errSubBatch, n, sb.UncompressedSize)
		}
		data = out.Bytes()
	} else {
		// Uncompressed, the body is the records: copied, as the frame's
		// buffer is the reader's.
		data = append([]byte(nil), body...)
	}
	records := make([][]byte, 0, min(int(sb.Records), len(data)/4))
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, fmt.Errorf("%w: %d bytes left after the records", errSubBatch, len(data))
		}
		n := binary.BigEndian.Uint32(data)
		if uint64(n) > uint64(len(data)-4) {
			return nil, fmt.Errorf("%w: a record of %d bytes, %d left", errSubBatch, n, len(data)-4)
		}
		records = append(records, data[4:4+n:4+n])
		data = data[4+n:]
	}
	if len(records) != int(sb.Records) {
		return nil, fmt.Errorf("%w: %d records, %d declared", errSubBatch, len(records), sb.Records)
	}
	return records, nil
}
