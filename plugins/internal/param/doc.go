// Package param reads the abi.Param values of a call (the client's request
// fields, as text) the same way in the first-party plugins that take
// parameters (images, video, systemone): decimal integers without sign
// tricks, fraction or exponent (Digits, ParseInt, ParseCount), a parameter
// in a range (Int) or from a list (OneOf), and the 400s that name the
// parameter at fault, its value quoted with sdk.QuoteValue.
//
// Its functions are on the per-call path of a wasm guest: they never
// allocate on success, and format an error only when there is one. What it
// must not do: import anything but sdk, sdk/abi and the standard library.
package param
