package sdk

import (
	"fmt"

	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sdk/internal/guest"
)

// Plugin is a plugin's handlers. Name is required; every handler is
// optional, and an operation whose handler is nil fails with an internal
// error naming the plugin and the operation.
type Plugin struct {
	// Name is the plugin's name (the .wasm file name without extension).
	Name string
	// Configure receives the bytes of NAME.json, empty when there is none.
	// When nil, a non-empty configuration is an error.
	Configure func(config []byte) error
	// Describe says what the plugin serves. When nil, the Description has
	// only Name and Implements. An empty Name or Implements in the returned
	// Description is filled in from the plugin: Name, and validate+quote
	// for Admit, price for Settle, select for Select.
	Describe func() abi.Description
	// Admit validates a call and quotes the most it can cost.
	Admit func(req abi.AdmitRequest) (abi.AdmitResult, error)
	// Settle prices the real usage of a call.
	Settle func(req abi.SettleRequest) (abi.SettleResult, error)
	// Select orders the lines that can serve a call.
	Select func(req abi.SelectRequest) (abi.SelectResult, error)
}

// Register makes p the plugin this module serves. Call it once, from init.
// A second registration or a plugin without a name is not a panic (a panic
// in init would kill the module before it can say why): every later call
// fails with an internal error that names the problem, so the host refuses
// to load the plugin with that message.
func Register(p Plugin) { guest.Register(guest.Plugin(p)) }

// Invalid is a 400 error naming the request field at fault.
func Invalid(field, format string, args ...any) *abi.Error {
	return &abi.Error{Code: abi.CodeInvalid, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Forbidden is a 403 error: the caller may not use this (model, route).
func Forbidden(format string, args ...any) *abi.Error {
	return &abi.Error{Code: abi.CodeForbidden, Message: fmt.Sprintf(format, args...)}
}

// Unprocessable is a 422 error.
func Unprocessable(format string, args ...any) *abi.Error {
	return &abi.Error{Code: abi.CodeUnprocessable, Message: fmt.Sprintf(format, args...)}
}

// Internal is a 500 error: the plugin, its configuration or the host is at
// fault, not the request.
func Internal(format string, args ...any) *abi.Error {
	return &abi.Error{Code: abi.CodeInternal, Message: fmt.Sprintf(format, args...)}
}
