package stream

// The connection's commands: the handshake (PeerProperties, SaslHandshake,
// SaslAuthenticate, Tune, Open), Close, Heartbeat and
// ExchangeCommandVersions.
//
// A response that stops after its code decodes with its other fields
// zero, as RabbitMQ reads it: peers send error responses that way.

// PeerProperties is the client's first request: its properties (product,
// version, platform, connection_name...).
type PeerProperties struct {
	CorrelationID uint32
	Properties    map[string]string
}

func (c *PeerProperties) Key() Key { return KeyPeerProperties }

func (c *PeerProperties) Append(dst []byte) []byte {
	return appendMap(appendCorrelated(dst, KeyPeerProperties, c.CorrelationID), c.Properties)
}

func decodePeerProperties(r *reader, _ uint16) Command {
	return &PeerProperties{CorrelationID: r.u32(), Properties: r.stringMap()}
}

// PeerPropertiesResponse carries the server's properties.
type PeerPropertiesResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Properties    map[string]string
}

func (c *PeerPropertiesResponse) Key() Key { return KeyPeerProperties | ResponseBit }

func (c *PeerPropertiesResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeyPeerProperties, c.CorrelationID, c.Code)
	return appendMap(dst, c.Properties)
}

func decodePeerPropertiesResponse(r *reader, _ uint16) Command {
	c := &PeerPropertiesResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Properties = r.stringMap()
	}
	return c
}

// SaslHandshake asks for the SASL mechanisms the server offers.
type SaslHandshake struct {
	CorrelationID uint32
}

func (c *SaslHandshake) Key() Key { return KeySaslHandshake }

func (c *SaslHandshake) Append(dst []byte) []byte {
	return appendCorrelated(dst, KeySaslHandshake, c.CorrelationID)
}

func decodeSaslHandshake(r *reader, _ uint16) Command {
	return &SaslHandshake{CorrelationID: r.u32()}
}

// SaslHandshakeResponse lists the mechanisms (PLAIN, AMQPLAIN, EXTERNAL...).
type SaslHandshakeResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Mechanisms    []string
}

func (c *SaslHandshakeResponse) Key() Key { return KeySaslHandshake | ResponseBit }

func (c *SaslHandshakeResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeySaslHandshake, c.CorrelationID, c.Code)
	return appendStrings(dst, c.Mechanisms)
}

func decodeSaslHandshakeResponse(r *reader, _ uint16) Command {
	c := &SaslHandshakeResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Mechanisms = r.strings()
	}
	return c
}

// SaslAuthenticate sends the chosen mechanism and the client's response
// (for PLAIN: "\x00user\x00password").
type SaslAuthenticate struct {
	CorrelationID uint32
	Mechanism     string
	Data          []byte // empty goes as null
}

func (c *SaslAuthenticate) Key() Key { return KeySaslAuthenticate }

func (c *SaslAuthenticate) Append(dst []byte) []byte {
	dst = appendString(appendCorrelated(dst, KeySaslAuthenticate, c.CorrelationID), c.Mechanism)
	return appendBytes(dst, c.Data)
}

func decodeSaslAuthenticate(r *reader, _ uint16) Command {
	return &SaslAuthenticate{CorrelationID: r.u32(), Mechanism: r.str(), Data: r.bytes()}
}

// SaslAuthenticateResponse accepts or refuses the client, or with
// CodeSaslChallenge carries a challenge. Data is sent as the spec's bytes
// (int32 length) and left out when empty; RabbitMQ's own encoder, which
// never sends a challenge for its mechanisms, would write an int16 length.
type SaslAuthenticateResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Data          []byte
}

func (c *SaslAuthenticateResponse) Key() Key { return KeySaslAuthenticate | ResponseBit }

func (c *SaslAuthenticateResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeySaslAuthenticate, c.CorrelationID, c.Code)
	if len(c.Data) > 0 {
		dst = appendBytes(dst, c.Data)
	}
	return dst
}

func decodeSaslAuthenticateResponse(r *reader, _ uint16) Command {
	c := &SaslAuthenticateResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Data = r.bytes()
	}
	return c
}

// Tune is the server's proposal of frame_max (bytes, 0 for no limit) and
// heartbeat (seconds, 0 for none). It has no correlation id.
type Tune struct {
	FrameMax  uint32
	Heartbeat uint32
}

func (c *Tune) Key() Key { return KeyTune }

func (c *Tune) Append(dst []byte) []byte {
	return appendU32(appendU32(appendHeader(dst, KeyTune, 1), c.FrameMax), c.Heartbeat)
}

func decodeTune(r *reader, _ uint16) Command {
	return &Tune{FrameMax: r.u32(), Heartbeat: r.u32()}
}

// TuneResponse is the client's answer to Tune: the values it agrees on,
// in Tune's layout.
type TuneResponse struct {
	FrameMax  uint32
	Heartbeat uint32
}

func (c *TuneResponse) Key() Key { return KeyTune | ResponseBit }

func (c *TuneResponse) Append(dst []byte) []byte {
	return appendU32(appendU32(appendHeader(dst, KeyTune|ResponseBit, 1), c.FrameMax), c.Heartbeat)
}

func decodeTuneResponse(r *reader, _ uint16) Command {
	return &TuneResponse{FrameMax: r.u32(), Heartbeat: r.u32()}
}

// Open picks the virtual host.
type Open struct {
	CorrelationID uint32
	VirtualHost   string
}

func (c *Open) Key() Key { return KeyOpen }

func (c *Open) Append(dst []byte) []byte {
	return appendString(appendCorrelated(dst, KeyOpen, c.CorrelationID), c.VirtualHost)
}

func decodeOpen(r *reader, _ uint16) Command {
	return &Open{CorrelationID: r.u32(), VirtualHost: r.str()}
}

// OpenResponse carries the connection properties (advertised_host,
// advertised_port). Empty properties are left out, as RabbitMQ does.
type OpenResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Properties    map[string]string
}

func (c *OpenResponse) Key() Key { return KeyOpen | ResponseBit }

func (c *OpenResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeyOpen, c.CorrelationID, c.Code)
	if len(c.Properties) > 0 {
		dst = appendMap(dst, c.Properties)
	}
	return dst
}

func decodeOpenResponse(r *reader, _ uint16) Command {
	return &OpenResponse{CorrelationID: r.u32(), Code: r.code(), Properties: r.optionalMap()}
}

// Close closes the connection, from either peer.
type Close struct {
	CorrelationID uint32
	Code          ResponseCode
	Reason        string
}

func (c *Close) Key() Key { return KeyClose }

func (c *Close) Append(dst []byte) []byte {
	dst = appendU16(appendCorrelated(dst, KeyClose, c.CorrelationID), uint16(c.Code))
	return appendString(dst, c.Reason)
}

func decodeClose(r *reader, _ uint16) Command {
	return &Close{CorrelationID: r.u32(), Code: r.code(), Reason: r.str()}
}

// CloseResponse acknowledges a Close.
type CloseResponse struct {
	CorrelationID uint32
	Code          ResponseCode
}

func (c *CloseResponse) Key() Key { return KeyClose | ResponseBit }

func (c *CloseResponse) Append(dst []byte) []byte {
	return appendPlainResponse(dst, KeyClose, c.CorrelationID, c.Code)
}

func decodeCloseResponse(r *reader, _ uint16) Command {
	return &CloseResponse{CorrelationID: r.u32(), Code: r.code()}
}

// Heartbeat is key and version only, from either peer.
type Heartbeat struct{}

func (c *Heartbeat) Key() Key { return KeyHeartbeat }

func (c *Heartbeat) Append(dst []byte) []byte { return appendHeader(dst, KeyHeartbeat, 1) }

func decodeHeartbeat(*reader, uint16) Command { return &Heartbeat{} }

// CommandVersion is the range of versions a peer speaks of one command.
type CommandVersion struct {
	Key        Key
	MinVersion uint16
	MaxVersion uint16
}

func appendCommandVersions(dst []byte, cvs []CommandVersion) []byte {
	dst = appendU32(dst, uint32(len(cvs)))
	for _, cv := range cvs {
		dst = appendU16(appendU16(appendU16(dst, uint16(cv.Key)), cv.MinVersion), cv.MaxVersion)
	}
	return dst
}

func (r *reader) commandVersions() []CommandVersion {
	n := r.count(6)
	if n == 0 {
		return nil
	}
	cvs := make([]CommandVersion, 0, n)
	for range n {
		cvs = append(cvs, CommandVersion{Key: Key(r.u16()), MinVersion: r.u16(), MaxVersion: r.u16()})
	}
	return cvs
}

// ExchangeCommandVersions tells the server which command versions the
// client speaks (Publish 2 for filter values, Deliver 2 for the committed
// chunk id); the response gives the server's.
type ExchangeCommandVersions struct {
	CorrelationID uint32
	Commands      []CommandVersion
}

func (c *ExchangeCommandVersions) Key() Key { return KeyExchangeCommandVersions }

func (c *ExchangeCommandVersions) Append(dst []byte) []byte {
	return appendCommandVersions(appendCorrelated(dst, KeyExchangeCommandVersions, c.CorrelationID), c.Commands)
}

func decodeExchangeCommandVersions(r *reader, _ uint16) Command {
	return &ExchangeCommandVersions{CorrelationID: r.u32(), Commands: r.commandVersions()}
}

// ExchangeCommandVersionsResponse gives the server's command versions.
type ExchangeCommandVersionsResponse struct {
	CorrelationID uint32
	Code          ResponseCode
	Commands      []CommandVersion
}

func (c *ExchangeCommandVersionsResponse) Key() Key { return KeyExchangeCommandVersions | ResponseBit }

func (c *ExchangeCommandVersionsResponse) Append(dst []byte) []byte {
	dst = appendPlainResponse(dst, KeyExchangeCommandVersions, c.CorrelationID, c.Code)
	return appendCommandVersions(dst, c.Commands)
}

func decodeExchangeCommandVersionsResponse(r *reader, _ uint16) Command {
	c := &ExchangeCommandVersionsResponse{CorrelationID: r.u32(), Code: r.code()}
	if r.left() > 0 {
		c.Commands = r.commandVersions()
	}
	return c
}
