// Command images is ModelRelay's first-party plugin for the image models
// (modelb-image-2.5-sunburst and modelb-image-2.5-flare) on the
// image_generation and image_edit endpoints. It validates the params the
// gateway decoded from the request (size, n, quality, response_format,
// stream), pins an omitted or "auto" size to 1024x1024 (AdmitResult.Set),
// quotes the hold as the size tier's price × n, and charges the tier's price
// × the images the provider returned, never more than n. Its price list is
// images.json (pricing.ParseModels format, unit per_image with the size
// tiers 1K and 2K), embedded at build time; an images.json beside
// images.wasm replaces it. See README.md for the rules and prices.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o images.wasm ./plugins/images
//
// What it must not do: read a clock, files, environment, network or
// randomness; keep anything from one call for the next; see or echo prompt
// or image content (it receives only the params listed above); or price
// with floats.
package main
