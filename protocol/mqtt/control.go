package mqtt

// Keep alive, the end of a connection, and 5.0's extended
// authentication: PINGREQ, PINGRESP, DISCONNECT and AUTH.

// Pingreq is the client's keep-alive (section 3.12).
type Pingreq struct{}

// Pingresp answers a PINGREQ (section 3.13).
type Pingresp struct{}

func (*Pingreq) Type() PacketType  { return TypePingreq }
func (*Pingresp) Type() PacketType { return TypePingresp }

func (*Pingreq) Append(dst []byte, _ Version) []byte  { return append(dst, byte(TypePingreq)<<4, 0) }
func (*Pingresp) Append(dst []byte, _ Version) []byte { return append(dst, byte(TypePingresp)<<4, 0) }

// Disconnect ends a connection (section 3.14): before 5.0 sent by the
// client only, and empty; in 5.0 by either side, with a reason code.
type Disconnect struct {
	ReasonCode ReasonCode // 5.0
	Properties Properties // 5.0
}

func (d *Disconnect) Type() PacketType { return TypeDisconnect }

// Append appends the DISCONNECT: empty before 5.0; in 5.0 without the
// reason code and properties when they are Normal disconnection and none
// (remaining length 0), without the properties when there are none
// (remaining length 1).
func (d *Disconnect) Append(dst []byte, v Version) []byte {
	dst = append(dst, byte(TypeDisconnect)<<4, 0)
	start := len(dst)
	switch {
	case v < V5:
	case d.Properties.IsEmpty() && d.ReasonCode == ReasonNormalDisconnection:
	case d.Properties.IsEmpty():
		dst = append(dst, byte(d.ReasonCode))
	default:
		dst = d.Properties.appendBlock(append(dst, byte(d.ReasonCode)))
	}
	return fixRemainingLength(dst, start)
}

// decodeDisconnect reads a DISCONNECT: the reason code, if any, must be
// one DISCONNECT may carry (a Protocol Error).
func decodeDisconnect(r *reader) Packet {
	d := &Disconnect{}
	if r.ver < V5 || r.left() == 0 {
		return d
	}
	d.ReasonCode = r.reasonCode()
	if r.left() > 0 {
		r.properties(&d.Properties, TypeDisconnect)
	}
	return d
}

// Auth is a step of 5.0's extended authentication (section 3.15).
type Auth struct {
	ReasonCode ReasonCode // Success, Continue authentication or Re-authenticate
	Properties Properties // the Authentication Method, and Data
}

func (a *Auth) Type() PacketType { return TypeAuth }

// Append appends the AUTH, with an empty body (remaining length 0) when
// it is Success without properties. AUTH does not exist before 5.0: v
// below V5 panics.
func (a *Auth) Append(dst []byte, v Version) []byte {
	if v < V5 {
		panic("mqtt: AUTH in MQTT " + v.String())
	}
	dst = append(dst, byte(TypeAuth)<<4, 0)
	start := len(dst)
	if !a.Properties.IsEmpty() || a.ReasonCode != ReasonSuccess {
		dst = a.Properties.appendBlock(append(dst, byte(a.ReasonCode)))
	}
	return fixRemainingLength(dst, start)
}

// decodeAuth reads an AUTH. An empty one is Success. Any other must carry
// an Authentication Method (section 3.15.2.2.2: "It is a Protocol Error
// to omit the Authentication Method"), so one of remaining length 1, a
// reason code without properties, is refused.
func decodeAuth(r *reader) Packet {
	a := &Auth{}
	if r.left() == 0 {
		return a
	}
	a.ReasonCode = r.reasonCode()
	if r.left() > 0 {
		r.properties(&a.Properties, TypeAuth)
	}
	if r.err == nil && !a.Properties.Has(PropAuthenticationMethod) {
		r.protocolError(r.off, ErrMissingProperty, "AUTH without an Authentication Method")
	}
	return a
}
