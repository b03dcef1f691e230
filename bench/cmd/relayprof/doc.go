// Command relayprof is a bench-only build of `relay serve` with the Go
// profiler (net/http/pprof) on a second address, for finding where the
// gateway spends its time and memory under the benchmark's load
// (bench/run.sh PROFILE=1). It wires the same packages the same way as
// cmd/relay's startServer: the Badger ledger (holds left by a crash
// recovered), the plugin host, the gateway handler and the same server
// timeouts. Keep it in step with cmd/relay/serve.go.
//
// What it must not do: ship. The profiler exposes the process's internals;
// relayprof binds it to the -pprof address only (the benchmark uses
// 127.0.0.1 in a private network namespace), and nothing in the product
// imports this package.
package main
