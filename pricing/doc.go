// Package pricing is ModelRelay's money and metering arithmetic: exact
// nano-USD amounts (Nano), route prices and the charge of a call's usage
// (Price.Charge), the price-list configuration of model plugins
// (ParseModels) and its JSON form in the price table (Price.MarshalJSON;
// docs/api.md#prices), and the
// reading of token usage out of provider responses and streams (ChatUsage,
// ResponsesUsage, MessagesUsage, SystemOneUsage and the stream Meters).
//
// Money rules, which every function here keeps:
//   - An amount is an int64 count of nano-USD. Decimal text is parsed exactly
//     (ParseUSD); text finer than one nano-USD is an error, never rounded.
//   - Token prices are nano-USD per one million tokens. A charge is summed
//     exactly in 128 bits and rounded once, upward, to the nano-USD.
//   - Amounts are formatted from the integers (Nano.String, Nano.Fixed).
//
// What this package must not do: use floating point for money, import
// anything outside the standard library (internal/jsonscan, used by the
// usage readers, is itself standard-library only), or touch the operating system,
// network, clock or randomness — it is compiled into WebAssembly plugins
// (GOOS=wasip1) as well as into the gateway. The usage readers see provider
// bodies that hold prompts and completions: their errors name fields and byte
// offsets and never quote the body, and nothing here keeps or logs a body.
package pricing
