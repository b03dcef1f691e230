// Package wasmmeter makes a WebAssembly module stoppable at a cost of about
// a nanosecond per loop iteration and function call, instead of wazero's
// WithCloseOnContextDone, which leaves compiled code for Go at every loop
// header (tens of nanoseconds each, and a Go guest has one in every
// function).
//
// Instrument adds a fuel counter (a mutable i32 global) and an imported host
// function, ImportModule.ImportName. Every function entry and every loop
// header subtracts a cost from the counter; a bulk memory or table operation
// subtracts one unit per KiB (or per 1,024 elements) it is asked to move.
// When the counter reaches zero the guest calls the host function and the
// counter is refilled. The host function is where the embedder stops a guest
// that has run too long (by panicking, which wazero turns into an error from
// the call), and a call into Go is also where the Go scheduler and garbage
// collector can reach the goroutine running the guest.
//
// Every infinite execution must branch backwards (a loop header) or call
// (a function entry) without end, so it calls the host function again and
// again. Between two calls of the host function the guest runs at most about
// Fuel units: with a unit of at most costUnitBytes bytes of straight-line
// code, or 1 KiB moved by one bulk operation, that is a fraction of a
// millisecond of guest time for the default fuel. A call into an imported
// (host) function, which can take long on its own, goes through a wrapper
// that calls the host function first, so a guest overruns its deadline by
// at most one host call.
//
// The metered module must be exactly as valid as the original: code that
// could name the fuel global could refill it and never stop, so indices the
// original module does not have are refused, and every instruction is
// decoded the way wazero decodes it (meter.go, code.go), so that no code is
// hidden from the meter.
//
// It must not change what a module computes: only the fuel global, the
// import and the wrappers are added, and data segments are joined
// (data.go) only where an instance's starting memory stays the same.
// Start reading at Instrument (meter.go); exports.go reads a module's
// exports without asking wazero to build every function's definition.
package wasmmeter
