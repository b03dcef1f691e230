// Command tokens is ModelRelay's first-party token-pricing plugin: it
// validates, quotes and prices calls to the text models of the chat
// completions, responses and messages endpoints at per-million-token prices
// (input, output, cache read, 5-minute and 1-hour cache writes, and
// long-context prices above a threshold). Its price list is tokens.json,
// embedded at build time; a tokens.json placed beside tokens.wasm replaces
// it without a rebuild. See README.md for the models and prices.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o tokens.wasm ./plugins/tokens
//
// What it must not do: read a clock, files, environment, network or
// randomness; keep anything from one call for the next; or price with
// floats. All of it is sdk.PriceList's TokenAdmit and TokenSettle.
package main
