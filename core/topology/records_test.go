package topology

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenmq/warren/core/exchange"
	"github.com/warrenmq/warren/core/policy"
	"github.com/warrenmq/warren/internal/tablerec"
	"github.com/warrenmq/warren/protocol"
)

var someArgs = protocol.Table{"x-max-length": int32(5), "x-queue-type": "quorum", "x-dead-letter-exchange": "dlx"}

// Every record and command reads back as it was written, through the
// bytes the store and the log hold.
func TestRecordsRoundTrip(t *testing.T) {
	toQueue := exchange.Destination{Kind: exchange.ToQueue, Name: "q"}
	toExchange := exchange.Destination{Kind: exchange.ToExchange, Name: "x2"}
	records := []struct {
		name string
		rec  interface{ Table() protocol.Table }
		read func(protocol.Table) (any, error)
	}{
		{"exchange", ExchangeRecord{Type: "topic", Durable: true, Internal: true, Args: someArgs}, readAs(ReadExchangeRecord)},
		{"named exchange", ExchangeRecord{Name: "x", Type: "x-consistent-hash", AutoDelete: true}, readAs(ReadExchangeRecord)},
		{"classic queue", QueueRecord{Durable: true, Args: someArgs, StoreID: 9}, readAs(ReadQueueRecord)},
		{"remote queue", QueueRecord{Name: "r", Exclusive: true, AutoDelete: true, Home: "n2", Incarnation: 1 << 60}, readAs(ReadQueueRecord)},
		{"quorum queue", QueueRecord{Durable: true, StoreID: 4, Home: "n1", Incarnation: 4, Members: []string{"n1", "n2", "n3"}}, readAs(ReadQueueRecord)},
		{"binding to a queue", BindingRecord{Source: "amq.topic", Destination: toQueue, Key: "a.*", Args: someArgs}, readAs(ReadBindingRecord)},
		{"binding to an exchange", BindingRecord{Source: "x", Destination: toExchange}, readAs(ReadBindingRecord)},
		{"policy", PolicyRecord{Pattern: "^q", ApplyTo: policy.Queues, Priority: -3, Definition: protocol.Table{"max-length": int64(3)}}, readAs(ReadPolicyRecord)},
	}
	for _, c := range records {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.read(throughBytes(t, c.rec.Table()))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.rec) {
				t.Fatalf("read back %#v\nwrote %#v", got, c.rec)
			}
		})
	}
	commands := []Command{
		DeclareExchange{Exchange: ExchangeRecord{Name: "x", Type: "direct", Durable: true, Args: someArgs}},
		DeleteExchange{Name: "x", IfUnused: true},
		Bind{Binding: BindingRecord{Source: "x", Destination: toQueue, Key: "k"}},
		Bind{Binding: BindingRecord{Source: "x", Destination: toQueue, Key: "k"}, QueueHome: "n1", QueueID: 77},
		Unbind{Binding: BindingRecord{Source: "x", Destination: toExchange, Key: "k", Args: someArgs}},
		DeclareQueue{Def: QueueDef{Name: "q", Durable: true, Args: someArgs, Home: "n1", ID: 12}},
		DeclareQueue{Def: QueueDef{Name: "qq", Durable: true, Home: "n2", ID: 13, Members: []string{"n2", "n1"}, MemberIDs: []uint64{5, 6}}},
		DeleteQueue{Name: "q", Incarnation: 12},
		QuorumMembers{Name: "qq", Incarnation: 13, Members: []string{"n1"}},
	}
	for _, c := range commands {
		vh, got, err := ReadCommand(throughBytes(t, CommandTable("/v", c)))
		if err != nil || vh != "/v" {
			t.Fatalf("%#v: %q %v", c, vh, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("read back %#v\nwrote %#v", got, c)
		}
	}
}

func readAs[R any](read func(protocol.Table) (R, error)) func(protocol.Table) (any, error) {
	return func(t protocol.Table) (any, error) { return read(t) }
}

// throughBytes is t as the store or the log gives it back.
func throughBytes(t testing.TB, tab protocol.Table) protocol.Table {
	t.Helper()
	out, err := tablerec.Reencode(tab)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// What releases before versions wrote, as they wrote it (the tables
// their encoders made, kept here as data), reads as what it meant.
func TestRecordsOfBeforeVersions(t *testing.T) {
	cases := []struct {
		name string
		old  protocol.Table
		read func(protocol.Table) (any, error)
		want any
	}{
		{"exchange", protocol.Table{"type": "fanout", "durable": true, "auto_delete": false, "internal": false, "arguments": protocol.Table{}},
			readAs(ReadExchangeRecord), ExchangeRecord{Type: "fanout", Durable: true}},
		{"exchange from before transient ones were kept", protocol.Table{"type": "direct"},
			readAs(ReadExchangeRecord), ExchangeRecord{Type: "direct", Durable: true}},
		{"queue from before clusters", protocol.Table{"arguments": protocol.Table{}, "id": int64(3)},
			readAs(ReadQueueRecord), QueueRecord{Durable: true, StoreID: 3}},
		{"queue homed here", protocol.Table{"durable": false, "auto_delete": true, "arguments": someArgs, "id": int64(8),
			"exclusive": true, "home": "n1", "cluster_id": int64(99)},
			readAs(ReadQueueRecord), QueueRecord{AutoDelete: true, Args: someArgs, StoreID: 8, Exclusive: true, Home: "n1", Incarnation: 99}},
		{"queue homed elsewhere", protocol.Table{"durable": true, "auto_delete": false, "exclusive": false, "arguments": protocol.Table{},
			"home": "n3", "cluster_id": int64(7)},
			readAs(ReadQueueRecord), QueueRecord{Durable: true, Home: "n3", Incarnation: 7}},
		{"quorum queue", protocol.Table{"durable": true, "auto_delete": false, "arguments": protocol.Table{}, "id": int64(5),
			"members": []any{"n1", "n2"}, "cluster_id": int64(5), "home": "n1"},
			readAs(ReadQueueRecord), QueueRecord{Durable: true, StoreID: 5, Members: []string{"n1", "n2"}, Incarnation: 5, Home: "n1"}},
		{"binding", protocol.Table{"source": "x", "destination": "y", "destination_type": "exchange", "routing_key": "k", "arguments": protocol.Table{}},
			readAs(ReadBindingRecord), BindingRecord{Source: "x", Destination: exchange.Destination{Kind: exchange.ToExchange, Name: "y"}, Key: "k"}},
		{"policy", protocol.Table{"pattern": ".*", "apply-to": "all", "priority": int64(1), "definition": protocol.Table{"ha-mode": "all"}},
			readAs(ReadPolicyRecord), PolicyRecord{Pattern: ".*", ApplyTo: policy.All, Priority: 1, Definition: protocol.Table{"ha-mode": "all"}}},
	}
	for _, c := range cases {
		got, err := c.read(throughBytes(t, c.old))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: read %#v, want %#v", c.name, got, c.want)
		}
	}
	oldCommands := []struct {
		old  protocol.Table
		want Command
	}{
		{protocol.Table{"op": "declare_exchange", "vhost": "/", "name": "x", "type": "topic", "durable": true, "auto_delete": false,
			"internal": false, "arguments": protocol.Table{}}, DeclareExchange{Exchange: ExchangeRecord{Name: "x", Type: "topic", Durable: true}}},
		{protocol.Table{"op": "bind", "vhost": "/", "source": "x", "routing_key": "k", "arguments": protocol.Table{},
			"destination": "q", "destination_type": "queue", "queue_home": "n2", "queue_id": int64(4)},
			Bind{Binding: BindingRecord{Source: "x", Destination: exchange.Destination{Kind: exchange.ToQueue, Name: "q"}, Key: "k"}, QueueHome: "n2", QueueID: 4}},
		{protocol.Table{"op": "declare_queue", "vhost": "/", "name": "qq", "durable": true, "auto_delete": false, "exclusive": false,
			"arguments": protocol.Table{}, "home": "n1", "id": int64(3), "members": []any{"n1"}, "member_ids": []any{int64(11)}},
			DeclareQueue{Def: QueueDef{Name: "qq", Durable: true, Home: "n1", ID: 3, Members: []string{"n1"}, MemberIDs: []uint64{11}}}},
		{protocol.Table{"op": "delete_queue", "vhost": "/", "name": "q", "id": int64(3)}, DeleteQueue{Name: "q", Incarnation: 3}},
		{protocol.Table{"op": "quorum_members", "vhost": "/", "name": "q", "id": int64(3), "members": []any{"a", "b"}},
			QuorumMembers{Name: "q", Incarnation: 3, Members: []string{"a", "b"}}},
	}
	for _, c := range oldCommands {
		_, got, err := ReadCommand(throughBytes(t, c.old))
		if err != nil {
			t.Fatalf("%v: %v", c.old, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("read %#v, want %#v", got, c.want)
		}
	}
}

// A record or a command a node cannot read is refused, by name: one of a
// later version, an unknown op, a field misspelt or of another type.
func TestRecordsRefuseWhatTheyCannotRead(t *testing.T) {
	later := ExchangeRecord{Type: "direct"}.Table()
	later[tablerec.VersionKey] = int64(recordVersion + 1)
	if _, err := ReadExchangeRecord(later); err == nil || !strings.Contains(err.Error(), "exchange record of version 2") {
		t.Fatalf("a later version: %v", err)
	}
	wrongType := QueueRecord{Durable: true}.Table()
	wrongType["durable"] = "yes"
	var fe *tablerec.FieldError
	if _, err := ReadQueueRecord(wrongType); !errors.As(err, &fe) || fe.Field != "durable" || fe.Kind != "queue record" {
		t.Fatalf("a field of another type: %v", err)
	}
	misspelt := CommandTable("/", DeleteExchange{Name: "x"})
	delete(misspelt, "name")
	misspelt["nmae"] = "x"
	if _, _, err := ReadCommand(misspelt); err == nil || !strings.Contains(err.Error(), `field "name" is missing`) {
		t.Fatalf("a misspelt field: %v", err)
	}
	if _, _, err := ReadCommand(protocol.Table{"op": "declare_stream_v9", "vhost": "/"}); err == nil || !strings.Contains(err.Error(), "declare_stream_v9") {
		t.Fatalf("an unknown op: %v", err)
	}
	badKind := BindingRecord{Source: "x", Destination: exchange.Destination{Name: "q"}}.Table()
	badKind["destination_type"] = "topic"
	if _, err := ReadBindingRecord(badKind); err == nil || !strings.Contains(err.Error(), "destination_type") {
		t.Fatalf("a destination type: %v", err)
	}
}

// The decoders take any table without panicking, and what they accept
// encodes to a table they read back the same.
func FuzzReadRecords(f *testing.F) {
	for _, tab := range []protocol.Table{
		ExchangeRecord{Type: "topic", Args: someArgs}.Table(),
		QueueRecord{Home: "n", Members: []string{"a"}}.Table(),
		BindingRecord{Source: "s", Key: "k"}.Table(),
		PolicyRecord{Pattern: "p"}.Table(),
		CommandTable("/", DeclareQueue{Def: QueueDef{Name: "q", MemberIDs: []uint64{1}}}),
		CommandTable("/", Bind{Binding: BindingRecord{Source: "x"}, QueueHome: "h"}),
	} {
		b, err := protocol.AppendTable(nil, tab)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, _, err := protocol.DecodeTable(b)
		if err != nil {
			return
		}
		if x, err := ReadExchangeRecord(tab); err == nil {
			roundTrips(t, x, x.Table(), readAs(ReadExchangeRecord))
		}
		if q, err := ReadQueueRecord(tab); err == nil {
			roundTrips(t, q, q.Table(), readAs(ReadQueueRecord))
		}
		if bd, err := ReadBindingRecord(tab); err == nil {
			roundTrips(t, bd, bd.Table(), readAs(ReadBindingRecord))
		}
		if p, err := ReadPolicyRecord(tab); err == nil {
			roundTrips(t, p, p.Table(), readAs(ReadPolicyRecord))
		}
		if vh, c, err := ReadCommand(tab); err == nil {
			_, again, err := ReadCommand(throughBytes(t, CommandTable(vh, c)))
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("command %#v read back as %#v (%v)", c, again, err)
			}
		}
	})
}

func roundTrips(t *testing.T, want any, tab protocol.Table, read func(protocol.Table) (any, error)) {
	t.Helper()
	got, err := read(throughBytes(t, tab))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%#v read back as %#v (%v)", want, got, err)
	}
}
