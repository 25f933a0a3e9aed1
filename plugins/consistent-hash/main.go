// Command consistent-hash is a Warren plugin: the x-consistent-hash
// exchange type, which sends each message to exactly one of its bindings,
// chosen by hashing the routing key (or a header, or a property), with
// each binding's share proportional to the weight in its binding key.
//
// The routing logic is package chash; see README.md for the syntax and the
// differences from RabbitMQ's plugin. Build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o consistent-hash.wasm .
package main

import (
	"github.com/warrenmq/warren/plugins/consistent-hash/chash"
	"github.com/warrenmq/warren/sdk"
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:    "consistent-hash",
		Version: chash.Version,
		// The headers feature passes the whole property list: hash-header
		// reads the headers, hash-property message-id, correlation-id or
		// timestamp.
		Features: sdk.FeatureHeaders | sdk.FeatureProperties,
		Types:    []sdk.ExchangeType{chash.Type{}},
	})
}

// main is never called in a reactor module; the package needs one.
func main() {}
