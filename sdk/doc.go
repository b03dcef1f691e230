// Package sdk is what a ModelRelay plugin author imports. A plugin is a main
// package that registers one Plugin in init and leaves main empty:
//
//	package main
//
//	import "github.com/modelrelay/modelrelay/sdk"
//
//	func init() { sdk.Register(sdk.TokenPlugin("modelg", []byte(prices))) }
//
//	func main() {}
//
// Built with `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared`, the
// module exports the ABI of sdk/abi, and every call reaches the registered
// Plugin's handlers already decoded; an error (or a panic) becomes an
// *abi.Error for the host. Built natively, the same handlers run in
// `go test`, and sdk/sdktest checks them against recorded fixtures.
//
// The API, in full:
//   - Plugin, Register: the handlers, and the one plugin of the module.
//   - TokenPlugin: a complete plugin for token-priced models, its prices
//     from NAME.json or an embedded default (pricing.ParseModels format).
//   - PriceList: those prices, to compose with rules of one's own: Route
//     and UnitRoute find a call's price; TokenAdmit (validate and quote)
//     and TokenSettle (price the real usage) are TokenPlugin's handlers.
//   - CheckedList: a PriceList loaded from NAME.json or a default, every
//     model through a check of the plugin's; Hold and Charge turn a usage
//     priced per unit (image, second, request) into the admit or settle
//     result.
//   - Invalid (400, naming the field), Forbidden (403), Unprocessable (422)
//     and Internal (500) errors; QuoteValue quotes a client's value in one.
//
// What a plugin must not do, and this package does not offer: read a clock
// (the only time is AdmitRequest.Now / SettleRequest.Now), read files,
// environment, network or randomness, or keep anything from one request for
// the next — an instance is pooled and reused, and its memory only grows.
// encoding/json is used only at Configure time (pricing.ParseModels), never
// on the per-call path.
package sdk
