// Package guest is the plugin side of the ABI under package sdk: the one
// registered plugin, the dispatch of every call to its handlers (Call), and
// the wasm exports mr_abi_version, mr_alloc and mr_call (wasm.go, built for
// GOOS=wasip1 only). sdk.Register hands it the plugin; sdk/sdktest runs
// fixtures through Call, as the wasm build does.
//
// Call decodes a request without reflection, runs the handler, turns its
// error (or panic) into an *abi.Error and encodes the result envelope. The
// wasm build reuses its input and output buffers and the strings of the
// last request (abi.Strings) from call to call; a guest instance runs one
// call at a time.
//
// What it must not do: export anything to plugin authors (they import sdk),
// or allocate on the per-call path beyond what decoding a new string needs.
package guest
