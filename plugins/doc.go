// Package plugins is the host side of ModelRelay's plugin ABI: it loads the
// WebAssembly plugins of a directory into one wazero runtime, keeps a bounded
// pool of instances per plugin, runs each call in a sandbox with a deadline
// and a memory ceiling, builds the model catalogue from what the plugins
// describe, and reloads the directory while requests are in flight.
//
// What it must not do: hand a plugin request bodies, prompts, completions,
// credentials or files (the gateway passes summaries: model, route, token
// estimates, decoded parameters); talk to upstream providers, touch the
// ledger or decide HTTP statuses; grant a plugin any capability beyond the
// ABI; let a plugin's failure escape as a panic or take down other plugins.
//
// Where to start reading:
//   - host.go: Open, a plugin's lifecycle, and Admit, Settle and Select.
//   - runtime.go: the sandbox (no filesystem, network or clock of its
//     own) and the fuel meter that stops a looping guest (guard.go).
//   - instance.go: the pool of instances and when they are replaced.
//   - park.go: idle plugins parked and loaded again on their next call.
//   - reload.go: the directory polled and a new catalogue swapped in.
//   - errors.go: which failures discard an instance, and the settle retry.
//   - catalog.go, plans.go: the catalogue and the cached line plans.
//
// The ABI itself is sdk/abi; why the host is built this way, with its
// measurements, is plugins/RATIONALE-plugins.md. TestFixtures runs a built
// plugin against recorded fixtures (sdk/fixture) for relay plugin test.
package plugins
