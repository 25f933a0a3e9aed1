package stream

import "encoding/binary"

// Command is one decoded frame: a request, a response, or a one-way
// command. Every command type in this package is a pointer to a struct
// named after the command, its response named with "Response" after it.
type Command interface {
	// Key returns the frame's key, with ResponseBit for a response.
	Key() Key
	// Append appends the frame without its size prefix: key, version
	// and fields. AppendFrame adds the prefix.
	Append(dst []byte) []byte
}

// sizePrefix is the uint32 that precedes every frame and counts the bytes
// after it.
const sizePrefix = 4

// AppendFrame appends c as a whole frame, size prefix included.
func AppendFrame(dst []byte, c Command) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = c.Append(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-sizePrefix))
	return dst
}

// decoder decodes the fields of one command, in versions 1 to
// maxVersion, after the key and version.
type decoder struct {
	maxVersion uint16
	decode     func(r *reader, version uint16) Command
}

// decoders is the table Decode dispatches on, by key response bit
// included. Tune's response is a Tune with the response bit; Heartbeat,
// Publish, Deliver and the other one-way commands have no response.
var decoders = map[Key]decoder{
	KeyDeclarePublisher:                      {1, decodeDeclarePublisher},
	KeyDeclarePublisher | ResponseBit:        {1, decodeDeclarePublisherResponse},
	KeyPublish:                               {2, decodePublish},
	KeyPublishConfirm:                        {1, decodePublishConfirm},
	KeyPublishError:                          {1, decodePublishError},
	KeyQueryPublisherSequence:                {1, decodeQueryPublisherSequence},
	KeyQueryPublisherSequence | ResponseBit:  {1, decodeQueryPublisherSequenceResponse},
	KeyDeletePublisher:                       {1, decodeDeletePublisher},
	KeyDeletePublisher | ResponseBit:         {1, decodeDeletePublisherResponse},
	KeySubscribe:                             {1, decodeSubscribe},
	KeySubscribe | ResponseBit:               {1, decodeSubscribeResponse},
	KeyDeliver:                               {2, decodeDeliver},
	KeyCredit:                                {1, decodeCredit},
	KeyCredit | ResponseBit:                  {1, decodeCreditResponse},
	KeyStoreOffset:                           {1, decodeStoreOffset},
	KeyQueryOffset:                           {1, decodeQueryOffset},
	KeyQueryOffset | ResponseBit:             {1, decodeQueryOffsetResponse},
	KeyUnsubscribe:                           {1, decodeUnsubscribe},
	KeyUnsubscribe | ResponseBit:             {1, decodeUnsubscribeResponse},
	KeyCreate:                                {1, decodeCreate},
	KeyCreate | ResponseBit:                  {1, decodeCreateResponse},
	KeyDelete:                                {1, decodeDelete},
	KeyDelete | ResponseBit:                  {1, decodeDeleteResponse},
	KeyMetadata:                              {1, decodeMetadata},
	KeyMetadata | ResponseBit:                {1, decodeMetadataResponse},
	KeyMetadataUpdate:                        {1, decodeMetadataUpdate},
	KeyPeerProperties:                        {1, decodePeerProperties},
	KeyPeerProperties | ResponseBit:          {1, decodePeerPropertiesResponse},
	KeySaslHandshake:                         {1, decodeSaslHandshake},
	KeySaslHandshake | ResponseBit:           {1, decodeSaslHandshakeResponse},
	KeySaslAuthenticate:                      {1, decodeSaslAuthenticate},
	KeySaslAuthenticate | ResponseBit:        {1, decodeSaslAuthenticateResponse},
	KeyTune:                                  {1, decodeTune},
	KeyTune | ResponseBit:                    {1, decodeTuneResponse},
	KeyOpen:                                  {1, decodeOpen},
	KeyOpen | ResponseBit:                    {1, decodeOpenResponse},
	KeyClose:                                 {1, decodeClose},
	KeyClose | ResponseBit:                   {1, decodeCloseResponse},
	KeyHeartbeat:                             {1, decodeHeartbeat},
	KeyRoute:                                 {1, decodeRoute},
	KeyRoute | ResponseBit:                   {1, decodeRouteResponse},
	KeyPartitions:                            {1, decodePartitions},
	KeyPartitions | ResponseBit:              {1, decodePartitionsResponse},
	KeyConsumerUpdate:                        {1, decodeConsumerUpdate},
	KeyConsumerUpdate | ResponseBit:          {1, decodeConsumerUpdateResponse},
	KeyExchangeCommandVersions:               {1, decodeExchangeCommandVersions},
	KeyExchangeCommandVersions | ResponseBit: {1, decodeExchangeCommandVersionsResponse},
	KeyStreamStats:                           {1, decodeStreamStats},
	KeyStreamStats | ResponseBit:             {1, decodeStreamStatsResponse},
	KeyCreateSuperStream:                     {1, decodeCreateSuperStream},
	KeyCreateSuperStream | ResponseBit:       {1, decodeCreateSuperStreamResponse},
	KeyDeleteSuperStream:                     {1, decodeDeleteSuperStream},
	KeyDeleteSuperStream | ResponseBit:       {1, decodeDeleteSuperStreamResponse},
	KeyResolveOffsetSpec:                     {1, decodeResolveOffsetSpec},
	KeyResolveOffsetSpec | ResponseBit:       {1, decodeResolveOffsetSpecResponse},
}

// Decode decodes one frame, without its size prefix (as FrameReader
// returns it). An unknown key is an *UnknownCommandError, an unknown
// version of a known command an *UnsupportedVersionError, and fields that
// do not decode, or bytes left after them, a *DecodeError.
//
// Byte slices in the result ([]byte fields: messages, chunks, SASL data)
// alias frame; strings and maps are copies.
func Decode(frame []byte) (Command, error) {
	if len(frame) < 4 {
		return nil, &UnknownCommandError{Short: true}
	}
	key := Key(binary.BigEndian.Uint16(frame))
	version := binary.BigEndian.Uint16(frame[2:])
	d, ok := decoders[key]
	if !ok {
		return nil, &UnknownCommandError{Key: key}
	}
	if version < 1 || version > d.maxVersion {
		return nil, &UnsupportedVersionError{Key: key, Version: version}
	}
	r := &reader{b: frame, off: 4, key: key}
	c := d.decode(r, version)
	if err := r.end(); err != nil {
		return nil, err
	}
	return c, nil
}

// Most responses carry a correlation id and a code and nothing else.

func appendPlainResponse(dst []byte, k Key, corr uint32, code ResponseCode) []byte {
	return appendU16(appendCorrelated(dst, k|ResponseBit, corr), uint16(code))
}

func (r *reader) code() ResponseCode { return ResponseCode(r.u16()) }
