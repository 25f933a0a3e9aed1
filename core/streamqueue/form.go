package streamqueue

import (
	"hash/crc32"

	"github.com/warrenmq/warren/core/message"
	wire "github.com/warrenmq/warren/protocol/stream"
	"github.com/warrenmq/warren/storage"
)

// deliverForm is the form a stream's chunks of stream-protocol messages
// are stored in (stream.Config.Form): the chunk a Deliver carries, its
// header and its entries, each message's AMQP 1.0 encoding as the client
// sent it. A subscription then sends a stored chunk as it is, where it
// would otherwise decode each message and build the chunk again
// (BENCHMARKS.md, "Chunks stored as they are delivered"). The header is
// the one core/streamproto builds for a chunk of the same messages: type
// user, epoch 0, the chunk's first offset for its id and the first
// message's time for its timestamp. Chunks holding AMQP 0-9-1 messages
// have no form (they are converted as they are read, and RabbitMQ's
// conversion is not a byte-for-byte round trip).
func deliverForm(dst []byte, recs []storage.StreamRecord, bodies []int) ([]byte, bool) {
	if recs[0].Msg.Flags != message.FlagAMQP10 || len(recs) > 0xffff {
		return dst, false // storage.uniform: they share their flags
	}
	start := len(dst)
	dst = append(dst, make([]byte, wire.ChunkHeaderSize)...) // the header, once the CRC is known
	for i := range recs {
		body := recs[i].Msg.Body
		dst = wire.AppendEntry(dst, wire.Entry{Body: body})
		bodies[i] = len(dst) - len(body) - start
	}
	data := dst[start+wire.ChunkHeaderSize:]
	h := wire.ChunkHeader{Type: wire.ChunkUser, NumEntries: uint16(len(recs)), NumRecords: uint32(len(recs)),
		Timestamp: recs[0].Timestamp, ChunkID: recs[0].Offset, CRC: crc32.ChecksumIEEE(data), DataLength: uint32(len(data))}
	h.Append(dst[start:start])
	return dst, true
}
