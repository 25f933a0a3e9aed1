package chash

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/warrenmq/warren/sdk"
)

// TestRabbitMQPlacements replays testdata/rabbitmq-3.10.8.txt: exchanges
// declared on a real RabbitMQ 3.10.8, bindings made and removed in order,
// and the queue each published value reached there (testdata/record made
// it). With hash-algorithm: rabbitmq, Warren must send every value to the
// same queue.
func TestRabbitMQPlacements(t *testing.T) {
	f, err := os.Open("testdata/rabbitmq-3.10.8.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		x       *fixture
		name    string
		src     string // routing key, header or the property's name
		ids     map[string]sdk.BindingID
		checked int
	)
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if len(fields) != 3 {
			t.Fatalf("line %d: %q is not three tab-separated fields", line, text)
		}
		switch fields[0] {
		case "exchange":
			args := map[string]any{}
			src = "routing key"
			for _, kv := range strings.Split(fields[2], ",") {
				k, v, _ := strings.Cut(kv, "=")
				args[k] = v
				if k == ArgHashHeader || k == ArgHashProperty {
					src = v
				}
			}
			x, name, ids = newFixture(t, args), fields[1], map[string]sdk.BindingID{}
		case "bind":
			ids[fields[1]+" "+fields[2]] = x.bind(fields[1], fields[2])
		case "unbind":
			x.unbind(ids[fields[1]+" "+fields[2]])
		case "route":
			m := placementMessage(t, src, fields[1])
			if got := x.route(m); got != fields[2] {
				t.Errorf("line %d: %s: %s %q went to %s, RabbitMQ sent it to %s", line, name, src, fields[1], got, fields[2])
			}
			checked++
		default:
			t.Fatalf("line %d: unknown record %q", line, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if checked < 5000 {
		t.Fatalf("only %d placements checked", checked)
	}
}

// placementMessage builds the message record published for a value:
// value is the routing key, or the spec of the header h, or the message
// id, correlation id or timestamp; "none" leaves the header or property
// out.
func placementMessage(t *testing.T, src, value string) *sdk.Message {
	t.Helper()
	switch src {
	case "routing key":
		return sdk.RawMessage(value, 0, nil, nil)
	case "message_id", "correlation_id", "timestamp":
		if value == "none" {
			return sdk.RawMessage("", 0, nil, nil)
		}
		switch src {
		case "message_id":
			return sdk.RawMessage("", 0x0080, append([]byte{byte(len(value))}, value...), nil)
		case "correlation_id":
			return sdk.RawMessage("", 0x0400, append([]byte{byte(len(value))}, value...), nil)
		}
		sec, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return sdk.RawMessage("", 0x0040, binary.BigEndian.AppendUint64(nil, sec), nil)
	}
	if value == "none" {
		return sdk.RawMessage("", 0, nil, nil)
	}
	entry := append([]byte{byte(len(src))}, src...)
	entry = append(entry, fieldSpec(t, value)...)
	table := append(binary.BigEndian.AppendUint32(nil, uint32(len(entry))), entry...)
	return sdk.RawMessage("", 0x2000, table, nil)
}

// fieldSpec encodes a value spec (testdata/record/main.go) as the AMQP
// field value amqp091-go sent: type octet, then the value.
func fieldSpec(t *testing.T, spec string) []byte {
	t.Helper()
	typ, text, _ := strings.Cut(spec, ":")
	i, _ := strconv.ParseInt(text, 10, 64)
	fl, _ := strconv.ParseFloat(text, 64)
	b := []byte(typ)
	be := binary.BigEndian
	withLength := func(content []byte) []byte {
		return append(be.AppendUint32(b, uint32(len(content))), content...)
	}
	switch typ {
	case "S":
		return withLength([]byte(text))
	case "x":
		raw, err := hex.DecodeString(text)
		if err != nil {
			t.Fatal(err)
		}
		return withLength(raw)
	case "b", "B":
		return append(b, byte(i))
	case "s":
		return be.AppendUint16(b, uint16(i))
	case "I":
		return be.AppendUint32(b, uint32(i))
	case "l", "T":
		return be.AppendUint64(b, uint64(i))
	case "f":
		return be.AppendUint32(b, math.Float32bits(float32(fl)))
	case "d":
		return be.AppendUint64(b, math.Float64bits(fl))
	case "t":
		if text == "true" {
			return append(b, 1)
		}
		return append(b, 0)
	case "D":
		scale, unscaled, _ := strings.Cut(text, "/")
		s, _ := strconv.Atoi(scale)
		u, _ := strconv.Atoi(unscaled)
		return be.AppendUint32(append(b, byte(s)), uint32(int32(u)))
	case "V":
		return b
	case "A":
		var content []byte
		if text != "" {
			for _, e := range strings.Split(text, "|") {
				content = append(content, fieldSpec(t, e)...)
			}
		}
		return withLength(content)
	case "F":
		var content []byte
		if text != "" {
			name, v, _ := strings.Cut(text, "=")
			content = append(append([]byte{byte(len(name))}, name...), fieldSpec(t, v)...)
		}
		return withLength(content)
	}
	t.Fatalf("bad value spec %q", spec)
	return nil
}

// TestHashAlgorithmArgument: hash-algorithm takes the two names only.
func TestHashAlgorithmArgument(t *testing.T) {
	for _, bad := range []any{"jump", "", "RabbitMQ", 1, nil} {
		tb, _ := sdk.MakeTable(map[string]any{"hash-algorithm": bad})
		checkError(t, "hash-algorithm", Type{}.ValidateDeclare(&sdk.Declaration{Args: tb}), "Unsupported hash-algorithm")
	}
	for _, good := range []string{"rendezvous", "rabbitmq"} {
		f := newFixture(t, map[string]any{"hash-algorithm": good, "hash-header": "h"})
		if got := f.x.Info()["hash_algorithm"]; got != good {
			t.Errorf("info says %v, declared %s", got, good)
		}
	}
}
