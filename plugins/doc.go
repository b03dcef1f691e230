// Package plugins is the host side of ModelRelay's plugin ABI: it loads the
// WebAssembly plugins of a directory into one wazero runtime, keeps a bounded
// pool of instances per plugin, runs each call in a sandbox with a deadline
// and a memory ceiling, builds the model catalogue from what the plugins
// describe, and reloads the directory while requests are in flight.
//
// # Lifecycle
//
// Open scans Config.Dir. For every NAME.wasm it reads the file (and NAME.json
// beside it, the plugin's configuration), compiles it once per file version
// (wazero's file-backed compilation cache makes a restart cheap), checks the
// exports of the ABI (sdk/abi: mr_abi_version, mr_alloc, mr_call, memory)
// and their types, and creates the first instance: instantiation runs the
// reactor's _initialize, then the host checks the ABI version (refusing, for
// example, "plugin bad: … ABI version 7, host speaks 2"), hands the instance
// NAME.json with OpConfigure, and asks it to describe itself with OpDescribe.
// The description is validated with pricing's rules and indexed: model →
// plugin. Two plugins claiming one model, or two implementing select, is an
// error naming both. At Open every failure is fatal; the error names the
// plugin.
//
// Admit and Settle go to the plugin serving the request's model; Select goes
// to the one plugin implementing select, and its plans are cached per
// version of that plugin, keyed by model, route and the lines with their
// breaker states.
//
// # Sandbox
//
// A plugin gets what the ABI hands it and nothing else: no filesystem, no
// environment or arguments, no network, no stdin or stdout; wazero's fake
// clocks (the plugin's clock is the Now field of its requests), its
// deterministic random source and a sleep that returns at once. Standard
// error goes to the debug log, bounded per instance. Every module is
// metered before it is compiled (internal/wasmmeter): each function entry
// and loop header spends fuel, and a guest that has spent its fuel calls
// the host, which ends the call once its deadline has passed (guard.go).
// Without that a looping guest could never be stopped, and it would freeze
// the host's garbage collector. Memory is capped by
// Config.MemoryLimitPages.
//
// # Pool
//
// Each plugin version has at most Config.PoolSize instances. A call takes an
// idle one; while the pool has room it also starts creating one (with its
// own budget, not the caller's context) and takes whichever is ready first;
// it waits on the caller's context. Each call writes the encoded request into a guest buffer
// (mr_alloc), runs mr_call under Config.CallTimeout, and decodes the result
// envelope before the instance is released. An instance that has served
// Config.RecycleCalls calls, or whose memory grew beyond Config.RecycleBytes
// (wasm memory never shrinks), is replaced in the background. Instances keep
// state between calls; nothing of one request is meant to be visible to the
// next unless the plugin author chose so.
//
// # Parking
//
// A version with no call for Config.IdleRelease (default 1m) is parked: its
// instances and compiled module are closed, keeping only what the catalogue
// needs, and its next call compiles it again from the compilation cache and
// the metered copy kept beside it, and starts an instance (about 145 ms:
// BenchmarkUnpark). See park.go for the locking that keeps a
// running call or an instance being created from losing its module.
//
// # Reload
//
// A poller (Config.Poll) calls Reload, which compares each plugin's
// NAME.wasm and NAME.json by size and modification time and, when those
// differ, by sha256. Added and replaced plugins are loaded in full beside the
// serving ones; then the new Catalog is published with one atomic swap.
// Calls that started on a replaced version finish on it; the version is
// reference-counted and closes its instances once the last call returns. A
// plugin that fails to load, or that conflicts with another, is refused and
// logged with its name, and its previous version keeps serving. Every reload
// that changes something is logged with the names added, replaced and
// removed.
//
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
//
// # What it must not do
//
// This package never hands a plugin request bodies, prompts, completions,
// credentials or files: the gateway passes summaries (model, route, token
// estimates, decoded parameters) and the host passes them through. It does
// not talk to upstream providers, touch the ledger, or decide HTTP statuses;
// it does not grant a plugin any capability beyond the ABI; and it never lets
// a plugin's failure escape as a panic or take down other plugins.
//
// TestFixtures runs a built plugin against recorded fixtures (sdk/fixture)
// for `relay plugin test`.
package plugins
