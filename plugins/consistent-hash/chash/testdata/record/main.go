// Command record publishes to a real RabbitMQ's x-consistent-hash
// exchanges and records which queue each message reached, as the
// placements file TestRabbitMQPlacements replays against Warren's
// hash-algorithm: rabbitmq:
//
//	go run ./plugins/consistent-hash/chash/testdata/record amqp://guest:guest@localhost:5678/ \
//		> plugins/consistent-hash/chash/testdata/rabbitmq-3.10.8.txt
//
// Each scenario declares an exchange (with hash-algorithm: rabbitmq,
// which RabbitMQ ignores, so the same declaration serves both brokers),
// makes and removes bindings in order, publishes one message per value
// with publisher confirms, then drains every queue with basic.get. It
// lives under testdata so the go tool leaves it out of builds and tests.
//
// Value specs (the file's second column) are "TYPE:TEXT" for header
// values, TYPE an AMQP field type: S string, x hex bytes, b B s I l
// integers, f d floats, t true/false, T seconds, D scale/unscaled,
// V void, A elements separated by '|', F one entry name=spec; "none"
// for a missing header or property.
package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

type scenario struct {
	name   string
	args   amqp.Table
	steps  [][3]string // bind|unbind, queue, weight
	values []string    // routing keys, or value specs
}

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: record AMQP-URL")
	}
	conn, err := amqp.Dial(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	props, _ := conn.Properties["version"].(string)
	fmt.Printf("# Placements recorded from RabbitMQ %s (rabbitmq_consistent_hash_exchange)\n", props)
	fmt.Printf("# by testdata/record on %s. Lines: exchange NAME ARGS, bind|unbind QUEUE WEIGHT\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Printf("# (in the order made), then route VALUE QUEUE: the routing key, or the\n")
	fmt.Printf("# header or property value spec (see record/main.go), and where it went.\n")
	for _, s := range scenarios() {
		run(ch, s)
	}
}

func keys(prefix string, n int) []string {
	var v []string
	for i := range n {
		v = append(v, fmt.Sprint(prefix, i))
	}
	return v
}

func scenarios() []scenario {
	rk := append(keys("order-", 1500), "", "a", "béla", "日本語", strings.Repeat("long.key.", 25), "customer.12345.orders")
	var typed []string
	for i := range 60 {
		typed = append(typed, fmt.Sprint("S:customer-", i), fmt.Sprint("I:", i*7919-100000), fmt.Sprint("l:", int64(i)*1234567890123))
	}
	for i := range 20 {
		typed = append(typed, fmt.Sprint("b:", i*13-128), fmt.Sprint("B:", i*13), fmt.Sprint("s:", i*3001-30000),
			fmt.Sprint("d:", float64(i)*1.25-7), fmt.Sprint("f:", float32(i)*0.5), fmt.Sprint("T:", 1700000000+i*86401),
			fmt.Sprint("x:", hex.EncodeToString([]byte(fmt.Sprint("bytes", i)))), fmt.Sprint("D:", i%4, "/", i*1000+7))
	}
	typed = append(typed, "t:true", "t:false", "V:", "none", "S:", "d:0", "d:-0", "I:42", "S:42", "l:42",
		"A:S:a|I:1", "A:", "A:l:7|t:true|S:x", "F:k=S:v", "F:n=I:5", "F:")
	var ids, tss []string
	for i := range 300 {
		ids = append(ids, fmt.Sprint("job-", i))
	}
	for i := range 200 {
		tss = append(tss, fmt.Sprint(1600000000+i*3607))
	}
	ids = append(ids, "none")
	tss = append(tss, "none", "0")
	weights := func(ws ...int) (steps [][3]string) {
		for i, w := range ws {
			steps = append(steps, [3]string{"bind", fmt.Sprint("q", i), fmt.Sprint(w)})
		}
		return steps
	}
	many := make([]int, 20)
	for i := range many {
		many[i] = i%5 + 1
	}
	alg := func(t amqp.Table) amqp.Table {
		t["hash-algorithm"] = "rabbitmq"
		return t
	}
	return []scenario{
		{"rk-1-2-3", alg(amqp.Table{}), weights(1, 2, 3), rk},
		{"rk-equal-4", alg(amqp.Table{}), weights(1, 1, 1, 1), rk},
		{"rk-20", alg(amqp.Table{}), weights(many...), rk[:1000]},
		{"rk-heavy", alg(amqp.Table{}), weights(100, 250, 1000, 7), rk[:1000]},
		{"rk-removed", alg(amqp.Table{}), append(weights(2, 1, 4, 1, 3, 2),
			[3]string{"unbind", "q1", "1"}, [3]string{"unbind", "q3", "1"}, [3]string{"bind", "q1", "5"}), rk[:1000]},
		{"rk-duplicate", alg(amqp.Table{}), append(weights(1, 2, 3), [3]string{"bind", "q0", "9"}), rk[:600]},
		{"header", alg(amqp.Table{"hash-header": "h"}), weights(1, 1, 2, 3), typed},
		{"message-id", alg(amqp.Table{"hash-property": "message_id"}), weights(1, 2, 2, 1), ids},
		{"correlation-id", alg(amqp.Table{"hash-property": "correlation_id"}), weights(3, 1, 1), ids[:200]},
		{"timestamp", alg(amqp.Table{"hash-property": "timestamp"}), weights(1, 1, 1, 1, 1), tss},
	}
}

func run(ch *amqp.Channel, s scenario) {
	x := "chx-record-" + s.name
	must(ch.ExchangeDeclare(x, "x-consistent-hash", false, true, false, false, s.args))
	var args []string
	for _, k := range []string{"hash-algorithm", "hash-header", "hash-property"} {
		if v, ok := s.args[k]; ok {
			args = append(args, fmt.Sprint(k, "=", v))
		}
	}
	fmt.Printf("\nexchange\t%s\t%s\n", s.name, strings.Join(args, ","))
	queues := map[string]string{} // queue name -> its short name
	for _, st := range s.steps {
		q := x + "-" + st[1]
		if _, ok := queues[q]; !ok {
			_, err := ch.QueueDeclare(q, false, true, true, false, nil)
			must(err)
			queues[q] = st[1]
		}
		if st[0] == "bind" {
			must(ch.QueueBind(q, st[2], x, false, nil))
		} else {
			must(ch.QueueUnbind(q, st[2], x, nil))
		}
		fmt.Printf("%s\t%s\t%s\n", st[0], st[1], st[2])
	}
	for i, v := range s.values {
		p := amqp.Publishing{Body: []byte(strconv.Itoa(i))}
		key := ""
		switch {
		case s.args["hash-header"] != nil:
			if v != "none" {
				p.Headers = amqp.Table{"h": value(v)}
			}
		case s.args["hash-property"] == "timestamp":
			if v != "none" {
				sec, _ := strconv.ParseInt(v, 10, 64)
				p.Timestamp = time.Unix(sec, 0)
			}
		case s.args["hash-property"] == "message_id":
			if v != "none" {
				p.MessageId = v
			}
		case s.args["hash-property"] == "correlation_id":
			if v != "none" {
				p.CorrelationId = v
			}
		default:
			key = v
		}
		conf, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), x, key, false, false, p)
		must(err)
		if !conf.Wait() {
			log.Fatalf("%s: message %d nacked", s.name, i)
		}
	}
	where := make([]string, len(s.values))
	for q, short := range queues {
		for {
			d, ok, err := ch.Get(q, true)
			must(err)
			if !ok {
				break
			}
			i, _ := strconv.Atoi(string(d.Body))
			where[i] = short
		}
	}
	for i, v := range s.values {
		if where[i] == "" {
			where[i] = "-"
		}
		fmt.Printf("route\t%s\t%s\n", v, where[i])
	}
	must(ch.ExchangeDelete(x, false, false))
}

// value is the amqp091-go value that encodes as the spec.
func value(spec string) any {
	typ, text, _ := strings.Cut(spec, ":")
	i, _ := strconv.ParseInt(text, 10, 64)
	f, _ := strconv.ParseFloat(text, 64)
	switch typ {
	case "S":
		return text
	case "x":
		b, err := hex.DecodeString(text)
		must(err)
		return b
	case "b":
		return int8(i)
	case "B":
		return uint8(i)
	case "s":
		return int16(i)
	case "I":
		return int32(i)
	case "l":
		return i
	case "f":
		return float32(f)
	case "d":
		return f
	case "t":
		return text == "true"
	case "T":
		return time.Unix(i, 0)
	case "D":
		scale, unscaled, _ := strings.Cut(text, "/")
		s, _ := strconv.Atoi(scale)
		u, _ := strconv.Atoi(unscaled)
		return amqp.Decimal{Scale: uint8(s), Value: int32(u)}
	case "V":
		return nil
	case "A":
		a := []any{}
		if text != "" {
			for _, e := range strings.Split(text, "|") {
				a = append(a, value(e))
			}
		}
		return a
	case "F":
		if text == "" {
			return amqp.Table{}
		}
		name, v, _ := strings.Cut(text, "=")
		return amqp.Table{name: value(v)}
	}
	log.Fatalf("bad value spec %q", spec)
	return nil
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
