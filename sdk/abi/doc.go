// Package abi is the wire contract between the ModelRelay plugin host and its
// WebAssembly guests. It imports only the standard library and is the single
// source of truth for both sides: export names, the ABI version, the
// operations, and the request/result envelopes with their binary encoding.
//
// What it must not do: import anything outside the standard library (it is
// compiled into every guest); use reflection or encoding/json on the
// per-call path; change an envelope's layout without a new ABI version,
// since host and guests are built apart.
//
// Start reading at abi.go (exports, operations, envelopes); codec.go is the
// binary encoding and envelopes.go each envelope's, fuzzed (FuzzDecode) so
// that no input panics.
package abi
