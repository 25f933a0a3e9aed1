// Command jms is a Warren plugin: the x-jms-topic and x-jms-queue exchange
// types, the server side of JMS topics with message selectors and of JMS
// queues. On x-jms-topic, a binding made as RabbitMQ's JMS client makes it
// (a selector in Erlang form, rjms_erlang_selector) routes on the selector
// alone, as in RabbitMQ; other bindings route by topic pattern and, with
// an SQL selector (x-selector), by the selector too.
//
// The routing logic is in package router, the selectors in package
// selector; see README.md. Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jms.wasm .
package main

import (
	"github.com/warrenmq/warren/plugins/jms/router"
	"github.com/warrenmq/warren/sdk"
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:    "jms",
		Version: router.Version,
		// Selectors read the headers, and the JMS header fields read the
		// properties (priority, message-id, timestamp, ...).
		Features: sdk.FeatureHeaders | sdk.FeatureProperties,
		Types:    []sdk.ExchangeType{router.TopicType{}, router.QueueType{}},
	})
}

// main is never called in a reactor module; the package needs one.
func main() {}
