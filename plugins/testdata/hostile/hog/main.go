// Command hog is a hostile plugin built with the sdk: asked with the param
// mode=hog it allocates without bound until the Go runtime runs out of memory
// (the host caps instance memory). Any other call is served.
package main

import (
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

var hoard [][]byte

func init() {
	sdk.Register(sdk.Plugin{
		Name: "hog",
		Describe: func() abi.Description {
			return abi.Description{Models: []abi.Model{model("hog-model")}}
		},
		Admit: func(req abi.AdmitRequest) (abi.AdmitResult, error) {
			if mode(req.Params) == "hog" {
				for {
					hoard = append(hoard, make([]byte, 1<<20))
				}
			}
			return abi.AdmitResult{Hold: 1}, nil
		},
		Settle: func(abi.SettleRequest) (abi.SettleResult, error) { return abi.SettleResult{Charge: 1}, nil },
	})
}

func mode(params []abi.Param) string {
	for _, p := range params {
		if p.Name == "mode" {
			return p.Value
		}
	}
	return ""
}

func model(id string) abi.Model {
	return abi.Model{
		ID:        id,
		Endpoints: []string{"chat_completions"},
		AutoRoute: "standard",
		Routes:    []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 1000, Output: 2000}}},
	}
}

func main() {}
