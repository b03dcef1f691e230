// Package pricing is ModelRelay's money and metering arithmetic: exact
// nano-USD amounts (Nano), route prices and the charge of a call's usage
// (Price.Charge), the price-list configuration of model plugins
// (ParseModels) and its JSON form in the price table (Price.MarshalJSON;
// docs/api.md#prices). Reading usage out of provider answers and streams
// is the wire package's; the Usage it reads is units.Usage.
//
// Money rules, which every function here keeps:
//   - An amount is an int64 count of nano-USD. Decimal text is parsed exactly
//     (ParseUSD); text finer than one nano-USD is an error, never rounded.
//   - Token prices are nano-USD per one million tokens. A charge is summed
//     exactly in 128 bits and rounded once, upward, to the nano-USD.
//   - Amounts are formatted from the integers (Nano.String, Nano.Fixed).
//
// What this package must not do: use floating point for money, import
// anything outside the standard library but wire/units (itself
// standard-library only), or touch the operating system, network, clock or
// randomness — it is compiled into WebAssembly plugins
// (GOOS=wasip1) as well as into the gateway.
package pricing
