// Package pricecheck holds the checks the first-party unit-priced plugins
// (images, video, systemone) run on every model of their price list at
// configure time, with the error naming the price at fault in the same way
// in each: the endpoints a model is served on (Endpoints), every route and
// reference price (Prices), and the size or resolution tiers a price has
// (Tiers). A plugin passes them as sdk.CheckedList.Check.
//
// What it must not do: run on the per-call path, or import anything but
// pricing and the standard library (it is compiled into wasm guests).
package pricecheck
