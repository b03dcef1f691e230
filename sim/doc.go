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
// (ChatUsage, ResponsesUsage, MessagesUsage, GeminiUsage, SystemOneUsage,
// ReplyText, ThinkingText, Signature) compute exactly what the server
// reports, so tests can state their expectations without running it.
//
// The four text formats (chat completions, responses, messages, Gemini's
// generateContent) share one semantics: the same token counting, reply
// text, prompt caching rules, faults and timing, tool calls scripted by
// the prompt (sim:call lines) and thinking, so a test or a coding CLI can
// run a multi-turn tool loop offline in any of them.
//
// Where to start reading:
//   - sim.go: New, the endpoints it serves, its Options, and the faults
//     and timing a test or benchmark can ask for.
//   - request.go: what a request may carry.
//   - count.go: how tokens are counted and what the reply text is.
//   - turn.go: tool calls scripted by the prompt, and thinking.
//   - conv.go: the round trips the sim checks (tool results, signatures).
//   - stream.go: the events of each streamed format.
//   - gemini_request.go, gemini.go: the Gemini endpoints.
//   - cache.go: prompt caching, per model and per prompt_cache_key.
//   - compact.go, images.go, video.go, systemone.go: the other endpoints.
package sim
