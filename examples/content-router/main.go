// Command content-router is a Warren plugin: the x-content exchange type,
// which routes on the fields of a JSON body. None of the built-in types
// looks inside a body; this one is the "content inspection" level of
// routing.
//
// Build it as a WASI reactor (see README.md):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o content-router.wasm .
package main

import (
	"github.com/warrenmq/warren/examples/content-router/content"
	"github.com/warrenmq/warren/sdk"
)

func init() {
	sdk.Register(sdk.Plugin{
		Name:     "content-router",
		Version:  "1.0.0",
		Features: sdk.FeatureBody,
		Types:    []sdk.ExchangeType{content.Type{}},
		Settings: []sdk.Setting{{
			Name: "max_body",
			Kind: sdk.IntSetting,
			Doc:  "largest body in bytes the exchange looks into (default 1 MiB); larger messages match nothing",
		}},
		OnSettingsChanged: content.SettingsChanged,
	})
}

// main is never called in a reactor module; the package needs one.
func main() {}
