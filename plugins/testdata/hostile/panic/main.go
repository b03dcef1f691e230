// Command panic is a hostile plugin built with the sdk: asked with the param
// mode=panic its Admit handler panics, which the sdk recovers into an
// internal *abi.Error. Any other call is served, by the same instance.
package main

import (
	"github.com/modelrelay/modelrelay/sdk"
	"github.com/modelrelay/modelrelay/sdk/abi"
)

var served int64

func init() {
	sdk.Register(sdk.Plugin{
		Name: "panic",
		Describe: func() abi.Description {
			return abi.Description{Models: []abi.Model{{
				ID:        "panic-model",
				Endpoints: []string{"chat_completions"},
				AutoRoute: "standard",
				Routes:    []abi.RoutePrice{{Route: "standard", Price: abi.Price{Unit: "per_million_tokens", Input: 1000, Output: 2000}}},
			}}}
		},
		Admit: func(req abi.AdmitRequest) (abi.AdmitResult, error) {
			for _, p := range req.Params {
				if p.Name == "mode" && p.Value == "panic" {
					panic("boom")
				}
			}
			served++
			// Hold counts the calls this instance served: a test can tell
			// whether the instance survived the panic.
			return abi.AdmitResult{Hold: served}, nil
		},
		Settle: func(abi.SettleRequest) (abi.SettleResult, error) { return abi.SettleResult{Charge: 1}, nil },
	})
}

func main() {}
