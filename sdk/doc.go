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
// package exports the ABI of sdk/abi (mr_abi_version, mr_alloc, mr_call;
// file wasm.go) and dispatches every call through Call: decode the request
// without reflection, run the handler, turn its error (or panic) into an
// *abi.Error, encode the result envelope. Built natively, the same handlers
// run in `go test`, and sdk/sdktest checks them against recorded fixtures.
//
// For token-priced models, PriceList turns a price list (pricing.ParseModels
// format, the plugin's NAME.json or an embedded default) into the plugin's
// Description and offers TokenAdmit (validate and quote) and TokenSettle
// (price the real usage); TokenPlugin wires them into a complete Plugin.
// For models priced per unit (per image, per second, per request),
// PriceList.Load loads a list the plugin checks (CheckPrices runs a check on
// every route and reference price), UnitRoute finds a route's price for a
// call, and Hold and Charge turn a usage into the admit or settle result.
// Digits, ParseInt, ParseCount and QuoteValue parse and quote the text of
// abi.Param values in the same way in every plugin.
//
// What a plugin must not do, and this package does not offer: read a clock
// (the only time is AdmitRequest.Now / SettleRequest.Now), read files,
// environment, network or randomness, or keep anything from one request for
// the next — an instance is pooled and reused, and its memory only grows.
// encoding/json is used only at Configure time (pricing.ParseModels), never
// on the per-call path.
package sdk
