// Command systemone is ModelRelay's first-party plugin for the typed-question
// models (sysmodel-1.13.0, sysmodel-latest, sysmodel-preview) on the
// systemone endpoint. It validates the questions and the state size from the
// params the gateway derives from the request (state_tokens, and per
// question its type, option count, min, max and instruction tokens), quotes
// the hold as the host's input token estimate × the input price, and charges
// the provider's usage.input_tokens at $0.04494 per million; output is free.
// Its price list is systemone.json (pricing.ParseModels format, unit
// per_million_tokens with output 0), embedded at build time; a
// systemone.json beside systemone.wasm replaces it. See README.md for the
// rules and prices.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o systemone.wasm ./plugins/systemone
//
// What it must not do: read a clock, files, environment, network or
// randomness; keep anything from one call for the next; see or echo the
// state, instructions or options (it receives only their sizes and counts);
// or price with floats (min and max are compared as exact decimals).
package main
