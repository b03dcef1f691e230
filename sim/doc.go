// Package sim is the simulated upstream provider: one http.Handler that
// answers the wire formats of every upstream the gateway relays to. It is
// the upstream of relay sim, relay demo, every test and every benchmark.
// It uses the standard library only.
//
// What it must not do: call out to the network, write to disk, log or keep
// prompt, completion or file content (a video job keeps only the final
// status its prompt selected; the prompt cache keeps 64-bit hashes); take
// a global lock on the chat, responses or messages hot path; validate more
// strictly than the providers it stands for.
//
// Every number it reports is deterministic, and the exported helpers
// (ChatUsage, ResponsesUsage, MessagesUsage, SystemOneUsage, ReplyText)
// compute exactly what the server reports, so tests can state their
// expectations without running it.
//
// Where to start reading:
//   - sim.go: New, the endpoints it serves, its Options, and the faults
//     and timing a test or benchmark can ask for.
//   - request.go: what a request may carry.
//   - count.go: how tokens are counted and what the reply text is.
//   - stream.go: the events of each streamed format.
//   - cache.go: prompt caching, per model and per prompt_cache_key.
//   - compact.go, images.go, video.go, systemone.go: the other endpoints.
package sim
