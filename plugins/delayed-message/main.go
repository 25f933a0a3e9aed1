// Command delayed-message is a Warren plugin: the x-delayed-message
// exchange type. A message with an x-delay header (milliseconds) is held
// by the broker for that long, then routed as the exchange's
// x-delayed-type argument says (direct, topic, fanout, headers, or a
// plugin's type such as x-jms-topic) over the exchange's bindings.
//
// The plugin only decides the type and the hold (package delayed); the
// broker owns the timers and keeps held messages durable. See README.md.
// Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o delayed-message.wasm .
package main

import (
	"github.com/warrenmq/warren/plugins/delayed-message/delayed"
	"github.com/warrenmq/warren/sdk"
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:     "delayed-message",
		Version:  delayed.Version,
		Features: sdk.FeatureHeaders, // x-delay
		Types:    []sdk.ExchangeType{delayed.Type{}},
	})
}

// main is never called in a reactor module; the package needs one.
func main() {}
