package plugins

import (
	"errors"
	"strings"
)

// # Errors
//
// A guest's structured error (an *abi.Error in its result envelope: an
// invalid request field, a forbidden call) is returned unchanged and the
// instance stays in the pool. Every other failure is an *Error naming the
// plugin and the operation: a trap or a panic that reached the host, a call
// past its deadline (errors.Is(err, context.DeadlineExceeded)), a guest out
// of memory (ErrMemoryLimit), a malformed result (ErrMalformed), no plugin
// for the model (ErrNoPlugin). The instance that failed is closed and
// replaced; the process, the other instances and the other plugins carry on.
// The gateway answers an *Error with 503 for Select and 500 otherwise.
//
// Settle is stricter: the usage has happened, so a guest's own error on it
// is a failure too (wrapped in the *Error, the instance discarded), and a
// failed settle is tried once more on an instance created for the retry
// (version.fresh), not taken from the pool.

// Error is a plugin failure: a trap, a panic that reached the host, a call
// past its deadline, a memory blow-up, a malformed result, a plugin that
// could not be loaded, or no plugin serving the model asked for. Its message
// names the plugin. The instance that failed has been discarded.
//
// A guest's own structured error (an *abi.Error in the result envelope) is
// not an Error: the host returns it unchanged — except on a settle, where it
// is a failure and the Error wraps it (see Host.Settle).
//
// The gateway maps an Error to 503 for Select and to 500 otherwise.
type Error struct {
	Plugin string // the plugin at fault; "" when no plugin serves the request
	Op     string // "load", "instantiate", "admit", "settle", "select", …
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("plugin ")
	if e.Plugin == "" {
		b.WriteString("(none)")
	} else {
		b.WriteString(e.Plugin)
	}
	if e.Op != "" {
		b.WriteString(": ")
		b.WriteString(e.Op)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Causes an Error wraps; test them with errors.Is. A call past its deadline
// wraps context.DeadlineExceeded instead.
var (
	// ErrNoPlugin: no loaded plugin serves the model (or implements select).
	ErrNoPlugin = errors.New("no plugin serves it")
	// ErrMalformed: the guest returned something the ABI does not allow (an
	// undecodable envelope, a result outside its memory, a negative amount,
	// a plan naming an unknown line, an invalid description).
	ErrMalformed = errors.New("malformed result")
	// ErrMemoryLimit: the guest failed with its memory at the limit.
	ErrMemoryLimit = errors.New("memory limit reached")
	// ErrABI: the module does not speak this host's ABI (missing or
	// mistyped exports, another ABI version, not built as a reactor).
	ErrABI = errors.New("ABI mismatch")
	// ErrClosed: the Host was closed.
	ErrClosed = errors.New("host closed")
)
