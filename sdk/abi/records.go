package abi

import (
	"errors"
	"fmt"
	"strings"
)

// Definition is the record of warren_validate_declare and warren_create.
// Its byte slices alias the input.
type Definition struct {
	Exchange uint32 // None in validate_declare
	VHost    []byte
	Name     []byte
	Type     []byte
	Flags    uint8
	Args     []byte // field table with its length prefix
}

// AppendDefinition encodes a definition record.
func AppendDefinition(b []byte, exchange uint32, vhost, name, typ string, flags uint8, args []byte) []byte {
	b = AppendU32(b, exchange)
	b = AppendStr8(b, vhost)
	b = AppendStr8(b, name)
	b = AppendStr8(b, typ)
	b = AppendU8(b, flags)
	return AppendTable(b, args)
}

// ReadDefinition decodes a definition record.
func ReadDefinition(in []byte) (d Definition, err error) {
	r := NewReader(in)
	d.Exchange = r.U32()
	d.VHost = r.Str8()
	d.Name = r.Str8()
	d.Type = r.Str8()
	d.Flags = r.U8()
	d.Args = r.Table()
	return d, r.FieldError("definition", "exchange id", "virtual host", "exchange name", "exchange type", "flags", "arguments")
}

// Binding is the record of warren_validate_binding and warren_add_binding.
type Binding struct {
	Exchange uint32
	Binding  uint32 // None in validate_binding
	DestKind uint8
	DestName []byte
	Key      []byte
	Args     []byte
}

// AppendBinding encodes a binding record.
func AppendBinding(b []byte, exchange, binding uint32, destKind uint8, destName, key string, args []byte) []byte {
	b = AppendU32(b, exchange)
	b = AppendU32(b, binding)
	b = AppendU8(b, destKind)
	b = AppendStr8(b, destName)
	b = AppendStr8(b, key)
	return AppendTable(b, args)
}

// ReadBinding decodes a binding record.
func ReadBinding(in []byte) (d Binding, err error) {
	r := NewReader(in)
	d.Exchange = r.U32()
	d.Binding = r.U32()
	d.DestKind = r.U8()
	d.DestName = r.Str8()
	d.Key = r.Str8()
	d.Args = r.Table()
	return d, r.FieldError("binding", "exchange id", "binding id", "destination kind", "destination name", "binding key", "arguments")
}

// AppendRemove encodes the record of warren_remove_bindings.
func AppendRemove(b []byte, exchange uint32, bindings []uint32) []byte {
	b = AppendU32(b, exchange)
	b = AppendU32(b, uint32(len(bindings)))
	for _, id := range bindings {
		b = AppendU32(b, id)
	}
	return b
}

// ReadRemove decodes the record of warren_remove_bindings, appending the
// binding ids to ids (pass a reused slice to avoid allocating).
func ReadRemove(in []byte, ids []uint32) (exchange uint32, out []uint32, err error) {
	r := NewReader(in)
	exchange = r.U32()
	n := r.U32()
	if err := r.FieldError("removal", "exchange id", "count"); err != nil {
		return 0, ids, err
	}
	if uint64(n)*4 > uint64(r.Len()) {
		return 0, ids, &TruncatedError{Record: "removal", Field: fmt.Sprintf("the %d binding ids", n), Size: len(in)}
	}
	for range n {
		ids = append(ids, r.U32())
	}
	return exchange, ids, nil
}

// AppendPolicy encodes the record of warren_policy_changed; a nil policy is
// encoded as absent.
func AppendPolicy(b []byte, exchange uint32, policy []byte, present bool) []byte {
	b = AppendU32(b, exchange)
	if !present {
		return AppendU8(b, 0)
	}
	b = AppendU8(b, 1)
	return AppendTable(b, policy)
}

// ReadPolicy decodes the record of warren_policy_changed; table is nil when
// no policy applies.
func ReadPolicy(in []byte) (exchange uint32, table []byte, err error) {
	r := NewReader(in)
	exchange = r.U32()
	if r.U8() != 0 {
		table = r.Table()
	}
	return exchange, table, r.FieldError("policy", "exchange id", "present", "policy definition")
}

// AppendExchange encodes the record of warren_delete and warren_info: the
// exchange id alone.
func AppendExchange(b []byte, exchange uint32) []byte { return AppendU32(b, exchange) }

// RouteSize is the size of a route record with these field lengths.
func RouteSize(key, props, body int) int { return 4 + 1 + key + 2 + 4 + props + 4 + body }

// PutRoute writes a route record into dst, which must hold RouteSize bytes
// (key at most 255 bytes), and returns the bytes written. It lets the host
// encode straight into guest memory.
func PutRoute(dst []byte, exchange uint32, key string, flags uint16, props, body []byte) int {
	_ = dst[RouteSize(len(key), len(props), len(body))-1]
	le.PutUint32(dst, exchange)
	dst[4] = uint8(len(key))
	n := 5 + copy(dst[5:], key)
	le.PutUint16(dst[n:], flags)
	le.PutUint32(dst[n+2:], uint32(len(props)))
	n += 6 + copy(dst[n+6:], props)
	le.PutUint32(dst[n:], uint32(len(body)))
	n += 4 + copy(dst[n+4:], body)
	return n
}

// Route is the decoded route record; its slices alias the input.
type Route struct {
	Exchange uint32
	Key      []byte
	Flags    uint16
	Props    []byte
	Body     []byte
}

// ReadRoute decodes a route record without allocating.
func ReadRoute(in []byte) (m Route, err error) {
	r := NewReader(in)
	m.Exchange = r.U32()
	m.Key = r.Str8()
	m.Flags = r.U16()
	m.Props = r.Bytes32()
	m.Body = r.Bytes32()
	return m, r.FieldError("route", "exchange id", "routing key", "property flags", "property list", "body")
}

// ---- outputs ----

// AppendError encodes an ERROR output.
func AppendError(b []byte, code uint16, text string) []byte {
	b = append(b, StatusError)
	b = AppendU16(b, code)
	return AppendStr16(b, text)
}

// AppendFault encodes a FAULT output.
func AppendFault(b []byte, text string) []byte {
	return AppendStr16(append(b, StatusFault), text)
}

// Output is a decoded output's status and its payload or error.
type Output struct {
	Status  uint8
	Code    uint16 // StatusError
	Text    []byte // StatusError, StatusFault
	Payload []byte // StatusOK
}

// ErrStatus reports an output whose status byte is unknown.
var ErrStatus = errors.New("abi: unknown output status")

// ReadOutput decodes an output. Empty output is OK without payload.
func ReadOutput(out []byte) (o Output, err error) {
	if len(out) == 0 {
		return o, nil
	}
	o.Status = out[0]
	r := NewReader(out[1:])
	switch o.Status {
	case StatusOK:
		o.Payload = out[1:]
		return o, nil
	case StatusError:
		o.Code = r.U16()
		o.Text = r.Str16()
		return o, r.FieldError("ERROR output", "reply code", "text")
	case StatusFault:
		o.Text = r.Str16()
		return o, r.FieldError("FAULT output", "text")
	}
	return o, fmt.Errorf("%w %d (0 OK, 1 ERROR and 2 FAULT are defined)", ErrStatus, o.Status)
}

// Description is the OK payload of warren_describe.
type Description struct {
	Name     string
	Version  string
	Features uint32
	Types    []string
	Settings []Setting
}

// Setting is one plugin setting a description declares.
type Setting struct {
	Kind uint8 // one of the Setting* constants
	Name string
	Doc  string
}

// AppendDescription encodes a description (without the status byte).
func AppendDescription(b []byte, d *Description) []byte {
	b = AppendStr8(b, d.Name)
	b = AppendStr8(b, d.Version)
	b = AppendU32(b, d.Features)
	b = AppendU8(b, uint8(len(d.Types)))
	for _, t := range d.Types {
		b = AppendStr8(b, t)
	}
	b = AppendU8(b, uint8(len(d.Settings)))
	for _, s := range d.Settings {
		b = AppendU8(b, s.Kind)
		b = AppendStr8(b, s.Name)
		b = AppendStr16(b, s.Doc)
	}
	return b
}

// ReadDescription decodes a description payload. It allocates.
func ReadDescription(p []byte) (d Description, err error) {
	r := NewReader(p)
	field := func(name string) error {
		if r.Err() != nil {
			return &TruncatedError{Record: "description", Field: name, Size: len(p)}
		}
		return nil
	}
	d.Name = string(r.Str8())
	d.Version = string(r.Str8())
	d.Features = r.U32()
	types := int(r.U8())
	if err := field("one of 'plugin name', 'version', 'features', 'type count'"); err != nil {
		return d, err
	}
	for i := range types {
		d.Types = append(d.Types, string(r.Str8()))
		if err := field(fmt.Sprintf("field 'type name' of type %d of %d", i+1, types)); err != nil {
			return d, err
		}
	}
	settings := int(r.U8())
	if err := field("field 'setting count'"); err != nil {
		return d, err
	}
	for i := range settings {
		var s Setting
		s.Kind = r.U8()
		s.Name = string(r.Str8())
		s.Doc = string(r.Str16())
		if err := field(fmt.Sprintf("one of 'kind', 'name', 'documentation' of setting %d of %d", i+1, settings)); err != nil {
			return d, err
		}
		d.Settings = append(d.Settings, s)
	}
	if unknown := d.Features &^ knownFeatures; unknown != 0 {
		return d, fmt.Errorf("abi: description declares unknown feature bits %#x (features %#x; this broker knows %s)",
			unknown, d.Features, knownFeatureList())
	}
	return d, nil
}

func knownFeatureList() string {
	var names []string
	for _, f := range FeatureNames {
		names = append(names, fmt.Sprintf("%#x %s", f.Bit, f.Name))
	}
	return strings.Join(names, ", ")
}

// AppendRouteIDs starts a route OK payload: the status, the count and the
// binding ids.
func AppendRouteIDs(b []byte, ids []uint32) []byte {
	b = append(b, StatusOK)
	b = AppendU32(b, uint32(len(ids)))
	for _, id := range ids {
		b = AppendU32(b, id)
	}
	return b
}

// AppendVia appends the via action.
func AppendVia(b []byte, holdMillis uint64, typ string) []byte {
	b = append(b, ActionVia)
	b = AppendU64(b, holdMillis)
	return AppendStr8(b, typ)
}

// AppendSetHeaders appends the set-headers action (1.1): an encoded field
// table of headers to set; void values remove.
func AppendSetHeaders(b []byte, table []byte) []byte {
	return AppendTable(append(b, ActionSetHeaders), table)
}

// AppendValidateAs appends a validate-as check (1.1) to a validate
// answer; start the answer with StatusOK.
func AppendValidateAs(b []byte, typ string) []byte {
	return AppendStr8(append(b, CheckValidateAs), typ)
}

// ErrCheck reports a validate answer with a check this version does not
// define.
var ErrCheck = errors.New("abi: unknown check in a validate answer")

// ReadChecks decodes the OK payload of warren_validate_declare and
// warren_validate_binding (1.1): the exchange types to validate as, in
// order. An empty payload asks for nothing. It allocates only when there
// are checks.
func ReadChecks(p []byte) (validateAs []string, err error) {
	r := NewReader(p)
	for r.Len() > 0 {
		switch code := r.U8(); code {
		case CheckValidateAs:
			t := r.Str8()
			if r.Err() != nil {
				return nil, &TruncatedError{Record: "validate answer", Field: "field 'exchange type' of a validate-as check", Size: len(p)}
			}
			validateAs = append(validateAs, string(t))
		default:
			return nil, fmt.Errorf("%w: code %d", ErrCheck, code)
		}
	}
	return validateAs, nil
}

// RouteOutput is a decoded route OK payload. IDs holds the binding ids as
// raw little-endian u32s (read them with ID), so decoding does not allocate.
type RouteOutput struct {
	IDs    []byte
	Via    []byte // exchange type of a via action; nil when none
	HasVia bool
	Hold   uint64 // milliseconds, with Via
	// SetHeaders is the table of a set-headers action (1.1), with its
	// length prefix; nil when none.
	SetHeaders []byte
}

// Count is the number of binding ids.
func (o *RouteOutput) Count() int { return len(o.IDs) / 4 }

// ID returns the i-th binding id.
func (o *RouteOutput) ID(i int) uint32 { return le.Uint32(o.IDs[4*i:]) }

// Errors of ReadRouteOutput.
var (
	ErrAction          = errors.New("abi: unknown route action")
	ErrViaTwice        = errors.New("abi: more than one via action")
	ErrViaIDs          = errors.New("abi: via action together with binding ids")
	ErrSetHeadersTwice = errors.New("abi: more than one set-headers action")
	ErrSetHeadersAlone = errors.New("abi: set-headers action without a via action that holds the message")
)

// ReadRouteOutput decodes the OK payload of warren_route. An empty payload
// routes nowhere.
func ReadRouteOutput(p []byte) (o RouteOutput, err error) {
	if len(p) == 0 {
		return o, nil
	}
	r := NewReader(p)
	n := r.U32()
	if r.Err() != nil || uint64(n)*4 > uint64(r.Len()) {
		return o, ErrShort
	}
	o.IDs = r.take(int(n) * 4)
	for r.Len() > 0 && r.Err() == nil {
		switch action := r.U8(); action {
		case ActionVia:
			if o.HasVia {
				return o, ErrViaTwice
			}
			o.HasVia = true
			o.Hold = r.U64()
			o.Via = r.Str8()
			if r.Err() != nil {
				return o, &TruncatedError{Record: "route output", Field: "a field of the via action", Size: len(p)}
			}
		case ActionSetHeaders:
			if o.SetHeaders != nil {
				return o, ErrSetHeadersTwice
			}
			o.SetHeaders = r.Table()
			if r.Err() != nil {
				return o, &TruncatedError{Record: "route output", Field: "the table of the set-headers action", Size: len(p)}
			}
		default:
			return o, fmt.Errorf("%w %d", ErrAction, action)
		}
	}
	if err := r.Err(); err != nil {
		return o, &TruncatedError{Record: "route output", Field: "an action code", Size: len(p)}
	}
	if o.HasVia && n > 0 {
		return o, ErrViaIDs
	}
	if o.SetHeaders != nil && (!o.HasVia || o.Hold == 0) {
		return o, ErrSetHeadersAlone
	}
	return o, nil
}
