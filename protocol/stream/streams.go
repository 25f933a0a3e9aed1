package stream

// Streams and super streams: Create, Delete, Metadata, MetadataUpdate,
// Route, Partitions, StreamStats, CreateSuperStream, DeleteSuperStream.

// Create creates a stream with arguments (max-length-bytes,
// max-age, stream-max-segment-size-bytes, queue-leader-locator...).
type Create struct {
	CorrelationID uint32
	Stream        string
	Arguments     map[string]string
}

func (c *Create) Key() Key { return KeyCreate }

func (c *Create) Append(dst []byte) []byte {
	return appendMap(appendString(appendCorrelated(dst, KeyCreate, c.CorrelationID), c.Stream), c.Arguments)
}

func decodeCreate(r *reader, _ uint16) Command {
	return &Create{CorrelationID: r.u32(), Stream: r.str(), Arguments: r.stringMap()}
}

// CreateResponse answers Create.
type CreateResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *CreateResponse) Key() Key { return KeyCreate | ResponseBit }

func (c *CreateResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyCreate, c.CorrelationID, c.Code)
}

func decodeCreateResponse(r *reader, _ uint16) Command {
	return &CreateResponse{CorrelationID: r.u32(), Code: r.code()}
}

// Delete deletes a stream.
type Delete struct {
	CorrelationID uint32
	Stream        string
}

func (c *Delete) Key() Key { return KeyDelete }

func (c *Delete) Append(dst []byte) []byte {
	return appendString(appendCorrelated(dst, KeyDelete, c.CorrelationID), c.Stream)
}

func decodeDelete(r *reader, _ uint16) Command {
	return &Delete{CorrelationID: r.u32(), Stream: r.str()}
}

// DeleteResponse answers Delete.
type DeleteResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *DeleteResponse) Key() Key { return KeyDelete | ResponseBit }

func (c *DeleteResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyDelete, c.CorrelationID, c.Code)
}

func decodeDeleteResponse(r *reader, _ uint16) Command {
	return &DeleteResponse{CorrelationID: r.u32(), Code: r.code()}
}

// Metadata asks where streams' leaders and replicas are.
type Metadata struct {
	CorrelationID uint32
	Streams       []string
}

func (c *Metadata) Key() Key { return KeyMetadata }

func (c *Metadata) Append(dst []byte) []byte {
	return appendStrings(appendCorrelated(dst, KeyMetadata, c.CorrelationID), c.Streams)
}

func decodeMetadata(r *reader, _ uint16) Command {
	return &Metadata{CorrelationID: r.u32(), Streams: r.strings()}
}

// Broker is a node in a MetadataResponse, which refers to it by Reference.
type Broker struct {
	Reference uint16
	Host      string
	Port      uint32
}

// StreamMetadata is one stream in a MetadataResponse: its code
// (CodeStreamDoesNotExist, CodeStreamNotAvailable, CodeAccessRefused), and
// if CodeOK its leader's and replicas' broker references (0xffff: no
// leader).
type StreamMetadata struct {
	Stream   string
	Code     ResponseCode
	Leader   uint16
	Replicas []uint16
}

// MetadataResponse lists the brokers, then the streams asked for. Unlike
// other responses it has no code of its own.
type MetadataResponse struct {
	CorrelationID uint32
	Brokers       []Broker
	Streams       []StreamMetadata
}

func (c *MetadataResponse) Key() Key { return KeyMetadata | ResponseBit }

func (c *MetadataResponse) Append(dst []byte) []byte {
	dst = appendCorrelated(dst, KeyMetadata|ResponseBit, c.CorrelationID)
	dst = appendU32(dst, uint32(len(c.Brokers)))
	for _, b := range c.Brokers {
		dst = appendU32(appendString(appendU16(dst, b.Reference), b.Host), b.Port)
	}
	dst = appendU32(dst, uint32(len(c.Streams)))
	for _, s := range c.Streams {
		dst = appendU16(appendU16(appendString(dst, s.Stream), uint16(s.Code)), s.Leader)
		dst = appendU32(dst, uint32(len(s.Replicas)))
		for _, ref := range s.Replicas {
			dst = appendU16(dst, ref)
		}
	}
	return dst
}

func decodeMetadataResponse(r *reader, _ uint16) Command {
	c := &MetadataResponse{CorrelationID: r.u32()}
	if n := r.count(2 + 2 + 4); n > 0 {
		c.Brokers = make([]Broker, 0, n)
		for range n {
			c.Brokers = append(c.Brokers, Broker{Reference: r.u16(), Host: r.str(), Port: r.u32()})
		}
	}
	if n := r.count(2 + 2 + 2 + 4); n > 0 {
		c.Streams = make([]StreamMetadata, 0, n)
		for range n {
			s := StreamMetadata{Stream: r.str(), Code: r.code(), Leader: r.u16()}
			if m := r.count(2); m > 0 {
				s.Replicas = make([]uint16, 0, m)
				for range m {
					s.Replicas = append(s.Replicas, r.u16())
				}
			}
			c.Streams = append(c.Streams, s)
		}
	}
	return c
}

// MetadataUpdate tells a client that a stream changed (its Code is
// CodeStreamNotAvailable when the stream was deleted or moved), so it
// should ask for metadata again.
type MetadataUpdate struct {
	Code   ResponseCode
	Stream string
}

func (c *MetadataUpdate) Key() Key { return KeyMetadataUpdate }

func (c *MetadataUpdate) Append(dst []byte) []byte {
	return appendString(appendU16(appendHeader(dst, KeyMetadataUpdate, 1), uint16(c.Code)), c.Stream)
}

func decodeMetadataUpdate(r *reader, _ uint16) Command {
	return &MetadataUpdate{Code: r.code(), Stream: r.str()}
}

// Route asks which partitions of a super stream a routing key goes to.
type Route struct {
	CorrelationID uint32
	RoutingKey    string
	SuperStream   string
}

func (c *Route) Key() Key { return KeyRoute }

func (c *Route) Append(dst []byte) []byte {
	dst = appendCorrelated(dst, KeyRoute, c.CorrelationID)
	return appendString(appendString(dst, c.RoutingKey), c.SuperStream)
}

func decodeRoute(r *reader, _ uint16) Command {
	return &Route{CorrelationID: r.u32(), RoutingKey: r.str(), SuperStream: r.str()}
}

// RouteResponse lists the streams a routing key goes to.
type RouteResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Streams       []string
}

func (c *RouteResponse) Key() Key { return KeyRoute | ResponseBit }

func (c *RouteResponse) Append(dst []byte) []byte {
	return appendStrings(appendPlainResponse(dst, KeyRoute, c.CorrelationID, c.Code), c.Streams)
}

func decodeRouteResponse(r *reader, _ uint16) Command {
	c := &RouteResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Streams = r.strings()
	}
	return c
}

// Partitions asks for a super stream's partitions.
type Partitions struct {
	CorrelationID uint32
	SuperStream   string
}

func (c *Partitions) Key() Key { return KeyPartitions }

func (c *Partitions) Append(dst []byte) []byte {
	return appendString(appendCorrelated(dst, KeyPartitions, c.CorrelationID), c.SuperStream)
}

func decodePartitions(r *reader, _ uint16) Command {
	return &Partitions{CorrelationID: r.u32(), SuperStream: r.str()}
}

// PartitionsResponse lists a super stream's partitions, in order.
type PartitionsResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Streams       []string
}

func (c *PartitionsResponse) Key() Key { return KeyPartitions | ResponseBit }

func (c *PartitionsResponse) Append(dst []byte) []byte {
	return appendStrings(appendPlainResponse(dst, KeyPartitions, c.CorrelationID, c.Code), c.Streams)
}

func decodePartitionsResponse(r *reader, _ uint16) Command {
	c := &PartitionsResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Streams = r.strings()
	}
	return c
}

// StreamStats asks for a stream's statistics.
type StreamStats struct {
	CorrelationID uint32
	Stream        string
}

func (c *StreamStats) Key() Key { return KeyStreamStats }

func (c *StreamStats) Append(dst []byte) []byte {
	return appendString(appendCorrelated(dst, KeyStreamStats, c.CorrelationID), c.Stream)
}

func decodeStreamStats(r *reader, _ uint16) Command {
	return &StreamStats{CorrelationID: r.u32(), Stream: r.str()}
}

// StreamStatsResponse gives the statistics by name
// (first_chunk_id, committed_chunk_id).
type StreamStatsResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Stats         map[string]int64
}

func (c *StreamStatsResponse) Key() Key { return KeyStreamStats | ResponseBit }

func (c *StreamStatsResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeyStreamStats, c.CorrelationID, c.Code)
	dst = appendU32(dst, uint32(len(c.Stats)))
	for _, k := range sortedKeys(c.Stats) {
		dst = appendU64(appendString(dst, k), uint64(c.Stats[k]))
	}
	return dst
}

func decodeStreamStatsResponse(r *reader, _ uint16) Command {
	c := &StreamStatsResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() == 0 {
		return c
	}
	if n := r.count(2 + 8); n > 0 {
		c.Stats = make(map[string]int64, n)
		for range n {
			k := r.str()
			c.Stats[k] = int64(r.u64())
		}
	}
	return c
}

// CreateSuperStream creates a super stream: its partitions, the binding
// key of each, and the arguments of the partition streams.
type CreateSuperStream struct {
	CorrelationID uint32
	Name          string
	Partitions    []string
	BindingKeys   []string
	Arguments     map[string]string
}

func (c *CreateSuperStream) Key() Key { return KeyCreateSuperStream }

func (c *CreateSuperStream) Append(dst []byte) []byte {
	dst = appendString(appendCorrelated(dst, KeyCreateSuperStream, c.CorrelationID), c.Name)
	dst = appendStrings(appendStrings(dst, c.Partitions), c.BindingKeys)
	return appendMap(dst, c.Arguments)
}

func decodeCreateSuperStream(r *reader, _ uint16) Command {
	return &CreateSuperStream{
		CorrelationID: r.u32(),
		Name:          r.str(),
		Partitions:    r.strings(),
		BindingKeys:   r.strings(),
		Arguments:     r.stringMap(),
	}
}

// CreateSuperStreamResponse answers CreateSuperStream.
type CreateSuperStreamResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *CreateSuperStreamResponse) Key() Key { return KeyCreateSuperStream | ResponseBit }

func (c *CreateSuperStreamResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyCreateSuperStream, c.CorrelationID, c.Code)
}

func decodeCreateSuperStreamResponse(r *reader, _ uint16) Command {
	return &CreateSuperStreamResponse{CorrelationID: r.u32(), Code: r.code()}
}

// DeleteSuperStream deletes a super stream and its partitions.
type DeleteSuperStream struct {
	CorrelationID uint32
	Name          string
}

func (c *DeleteSuperStream) Key() Key { return KeyDeleteSuperStream }

func (c *DeleteSuperStream) Append(dst []byte) []byte {
	return appendString(appendCorrelated(dst, KeyDeleteSuperStream, c.CorrelationID), c.Name)
}

func decodeDeleteSuperStream(r *reader, _ uint16) Command {
	return &DeleteSuperStream{CorrelationID: r.u32(), Name: r.str()}
}

// DeleteSuperStreamResponse answers DeleteSuperStream.
type DeleteSuperStreamResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *DeleteSuperStreamResponse) Key() Key { return KeyDeleteSuperStream | ResponseBit }

func (c *DeleteSuperStreamResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyDeleteSuperStream, c.CorrelationID, c.Code)
}

func decodeDeleteSuperStreamResponse(r *reader, _ uint16) Command {
	return &DeleteSuperStreamResponse{CorrelationID: r.u32(), Code: r.code()}
}
