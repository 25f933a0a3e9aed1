package hold

import (
	"github.com/warrenmq/warren/core/message"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

// recordVersion is the held message record's format. Version 1 is also
// the format of the releases before versions, which wrote no version key.
const recordVersion = 1

// record is a held message in the delay store: its vhost, exchange, due
// time and kind are in the key.
type record struct {
	Via string // the exchange type that held it
	Msg *message.Message
}

func (r record) Table() protocol.Table {
	return protocol.Table{tablerec.VersionKey: int64(recordVersion), "via": r.Via, "message_exchange": r.Msg.Exchange,
		"routing_key": r.Msg.RoutingKey, "flags": int32(r.Msg.Flags), "properties": r.Msg.Props, "body": r.Msg.Body}
}

// encode is h's record.
func encode(h *Held) ([]byte, error) {
	return protocol.AppendTable(nil, record{Via: h.Via, Msg: h.Msg}.Table())
}

// decode reads a record encode wrote (or the first format's, which also
// names the vhost and exchange).
func decode(rec []byte) (*Held, error) {
	t, _, err := protocol.DecodeTable(rec)
	if err != nil {
		return nil, err
	}
	r := tablerec.Open("held message record", t, recordVersion)
	via, exchange, key, flags := r.StringOr("via", ""), r.String("message_exchange"), r.String("routing_key"), r.Int("flags")
	props, body := r.BytesOr("properties"), r.BytesOr("body")
	if err := r.Err(); err != nil {
		return nil, err
	}
	m, err := message.New(exchange, key, uint16(flags), props, body)
	if err != nil {
		return nil, err
	}
	return &Held{Msg: m, Via: via}, nil
}

// LegacyNames reads which vhost and exchange a record of the delay store's
// first format (storage.ScanHeld) belongs to; the record itself is read
// as it is in the new format.
func LegacyNames(rec []byte) (vhost, exchange string, ok bool) {
	t, _, err := protocol.DecodeTable(rec)
	if err != nil {
		return "", "", false
	}
	vhost, ok1 := t["vhost"].(string)
	exchange, ok2 := t["exchange"].(string)
	return vhost, exchange, ok1 && ok2
}
