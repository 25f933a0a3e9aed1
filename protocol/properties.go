package protocol

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Basic property flags, in the order the properties appear on the wire:
// bit 15 is the first. Bit 1 is unused and bit 0 would announce a second
// flags word; both are rejected.
const (
	FlagContentType     = 0x8000
	FlagContentEncoding = 0x4000
	FlagHeaders         = 0x2000
	FlagDeliveryMode    = 0x1000
	FlagPriority        = 0x0800
	FlagCorrelationID   = 0x0400
	FlagReplyTo         = 0x0200
	FlagExpiration      = 0x0100
	FlagMessageID       = 0x0080
	FlagTimestamp       = 0x0040
	FlagType            = 0x0020
	FlagUserID          = 0x0010
	FlagAppID           = 0x0008
	FlagClusterID       = 0x0004

	knownFlags = 0xfffc
	numProps   = 14
)

// propKinds gives the wire type of property i, where i is the flag's bit
// counted from bit 15. It follows basicPropertyFields, which the generator
// takes from the spec; a test keeps the two in step.
var propKinds = [numProps]byte{
	's', // content-type
	's', // content-encoding
	'F', // headers
	'o', // delivery-mode
	'o', // priority
	's', // correlation-id
	's', // reply-to
	's', // expiration
	's', // message-id
	'T', // timestamp
	's', // type
	's', // user-id
	's', // app-id
	's', // cluster-id ("reserved" in the spec)
}

// propIndex maps a single flag bit to its property index.
func propIndex(flag uint16) int { return bits.LeadingZeros16(flag) }

// Properties is a decoded basic property list. Flags says which properties
// are present: a present empty string is distinct from an absent one, and
// fields whose flag is clear are ignored by Append.
type Properties struct {
	Flags           uint16
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8 // 1 transient, 2 persistent
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string // per-message TTL in milliseconds, as a decimal string
	MessageID       string
	Timestamp       uint64 // seconds since the Unix epoch
	Type            string
	UserID          string
	AppID           string
	ClusterID       string
}

// DecodeProperties decodes the property list raw announced by flags,
// copying strings and decoding the headers table.
func DecodeProperties(flags uint16, raw []byte) (Properties, error) {
	v, err := ScanProperties(flags, raw)
	if err != nil {
		return Properties{}, err
	}
	p := Properties{Flags: flags}
	if p.Headers, err = v.Headers(); err != nil {
		return Properties{}, err
	}
	p.DeliveryMode = v.DeliveryMode()
	p.Priority = v.Priority()
	p.Timestamp, _ = v.Timestamp()
	for i, s := range p.strings() {
		if b, ok := v.Bytes(0x8000 >> i); ok && s != nil && len(b) > 0 {
			*s = string(b)
		}
	}
	return p, nil
}

// strings returns pointers to the string properties by property index, nil
// for the others.
func (p *Properties) strings() [numProps]*string {
	return [numProps]*string{
		&p.ContentType, &p.ContentEncoding, nil, nil, nil,
		&p.CorrelationID, &p.ReplyTo, &p.Expiration, &p.MessageID, nil,
		&p.Type, &p.UserID, &p.AppID, &p.ClusterID,
	}
}

// Append appends the property list for the properties present in p.Flags
// (not the flags word itself). A string over 255 bytes, a headers table
// that does not encode, or a flag outside the fourteen defined is an error.
func (p *Properties) Append(buf []byte) ([]byte, error) {
	if p.Flags&^knownFlags != 0 {
		return buf, fmt.Errorf("protocol: property flags 0x%04x set undefined bits", p.Flags)
	}
	strs := p.strings()
	for i := range numProps {
		if p.Flags&(0x8000>>i) == 0 {
			continue
		}
		switch propKinds[i] {
		case 's':
			s := *strs[i]
			if len(s) > 255 {
				return buf, fmt.Errorf("protocol: property %s is %d bytes, more than a short string holds", basicPropertyFields[i], len(s))
			}
			buf = AppendShortStr(buf, s)
		case 'o':
			if i == propIndex(FlagDeliveryMode) {
				buf = append(buf, p.DeliveryMode)
			} else {
				buf = append(buf, p.Priority)
			}
		case 'T':
			buf = AppendLongLong(buf, p.Timestamp)
		case 'F':
			var err error
			if buf, err = AppendTable(buf, p.Headers); err != nil {
				return buf, fmt.Errorf("%w (in property headers)", err)
			}
		}
	}
	return buf, nil
}

// PropertyView indexes a raw property list without decoding the headers
// table or copying strings, for the publish path, where the broker needs a
// few properties (delivery mode, expiration, priority) and forwards the
// rest as received. It aliases raw.
type PropertyView struct {
	flags uint16
	raw   []byte
	off   [numProps]uint32 // offset in raw of each present property's encoding
}

// ScanProperties indexes the property list raw announced by flags in one
// pass, checking every length, so the accessors cannot fail. The headers
// table is checked only as far as its length; Headers decodes the rest.
// Bytes left over after the last property are a *BadSyntaxError.
func ScanProperties(flags uint16, raw []byte) (PropertyView, error) {
	v := PropertyView{flags: flags, raw: raw}
	if flags&^knownFlags != 0 {
		return PropertyView{}, syntaxErrorf("property flags 0x%04x set undefined bits", flags)
	}
	off := 0
	for i := range numProps {
		if flags&(0x8000>>i) == 0 {
			continue
		}
		v.off[i] = uint32(off)
		left := len(raw) - off
		var n int
		switch propKinds[i] {
		case 's':
			if left >= 1 {
				n = 1 + int(raw[off])
			} else {
				n = 1
			}
		case 'o':
			n = 1
		case 'T':
			n = 8
		case 'F':
			if left >= 4 {
				if l := binary.BigEndian.Uint32(raw[off:]); uint64(l) <= uint64(left-4) {
					n = 4 + int(l)
				} else {
					return PropertyView{}, syntaxErrorf("property %s: table of %d bytes, %d left", basicPropertyFields[i], l, left-4)
				}
			} else {
				n = 4
			}
		}
		if n > left {
			return PropertyView{}, syntaxErrorf("property %s: %d bytes needed, %d left", basicPropertyFields[i], n, left)
		}
		off += n
	}
	if off != len(raw) {
		return PropertyView{}, syntaxErrorf("%d bytes left after the last property", len(raw)-off)
	}
	return v, nil
}

// Flags returns the property flags word.
func (v *PropertyView) Flags() uint16 { return v.flags }

// Raw returns the property list the view indexes.
func (v *PropertyView) Raw() []byte { return v.raw }

// Has reports whether the property with the given flag is present.
func (v *PropertyView) Has(flag uint16) bool { return v.flags&flag != 0 }

// Bytes returns the encoded value of the property with the given flag, if
// present, aliasing the raw list: a short string without its length octet,
// an octet, the 8 timestamp bytes, or a table with its length prefix. It
// lets a caller inspect a string without allocating.
func (v *PropertyView) Bytes(flag uint16) ([]byte, bool) {
	if flag == 0 || flag&(flag-1) != 0 || v.flags&flag == 0 || flag&^knownFlags != 0 {
		return nil, false
	}
	i := propIndex(flag)
	off := int(v.off[i])
	switch propKinds[i] {
	case 's':
		n := int(v.raw[off])
		return v.raw[off+1 : off+1+n], true
	case 'o':
		return v.raw[off : off+1], true
	case 'T':
		return v.raw[off : off+8], true
	default: // 'F'
		n := int(binary.BigEndian.Uint32(v.raw[off:]))
		return v.raw[off : off+4+n], true
	}
}

// String returns the short-string property with the given flag as a new
// string, if present.
func (v *PropertyView) String(flag uint16) (string, bool) {
	if flag&knownFlags == 0 || propKinds[propIndex(flag)] != 's' {
		return "", false
	}
	b, ok := v.Bytes(flag)
	return string(b), ok
}

func (v *PropertyView) octet(flag uint16) uint8 {
	if b, ok := v.Bytes(flag); ok {
		return b[0]
	}
	return 0
}

// DeliveryMode returns the delivery mode, 0 if absent.
func (v *PropertyView) DeliveryMode() uint8 { return v.octet(FlagDeliveryMode) }

// Priority returns the priority, 0 if absent.
func (v *PropertyView) Priority() uint8 { return v.octet(FlagPriority) }

// Expiration returns the expiration (per-message TTL) property.
func (v *PropertyView) Expiration() (string, bool) { return v.String(FlagExpiration) }

// UserID returns the user-id property.
func (v *PropertyView) UserID() (string, bool) { return v.String(FlagUserID) }

// MessageID returns the message-id property.
func (v *PropertyView) MessageID() (string, bool) { return v.String(FlagMessageID) }

// CorrelationID returns the correlation-id property.
func (v *PropertyView) CorrelationID() (string, bool) { return v.String(FlagCorrelationID) }

// Timestamp returns the timestamp property.
func (v *PropertyView) Timestamp() (uint64, bool) {
	b, ok := v.Bytes(FlagTimestamp)
	if !ok {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}

// HeadersRaw returns the encoded headers table, length prefix included.
func (v *PropertyView) HeadersRaw() ([]byte, bool) { return v.Bytes(FlagHeaders) }

// Headers decodes the headers table: nil if absent or empty.
func (v *PropertyView) Headers() (Table, error) {
	b, ok := v.HeadersRaw()
	if !ok {
		return nil, nil
	}
	t, _, err := DecodeTable(b)
	if err != nil {
		return nil, inContext("property headers", err)
	}
	return t, nil
}
