// Package sim is the simulated upstream provider: one http.Handler that
// answers the wire formats of every upstream the gateway relays to. It is
// the upstream of `relay sim`, `relay demo`, every test and every benchmark.
// It uses the standard library only.
//
// What it must not do: call out to the network, write to disk, log or keep
// prompt, completion or file content (a video job keeps only the final
// status its prompt selected; the prompt cache keeps 64-bit hashes), or take
// a global lock on the chat/responses/messages hot path.
//
// # Endpoints
//
// All under /v1; JSON unless stated. Unknown paths answer 404, a known path
// with the wrong method 405, both with an error body.
//
//	POST /v1/chat/completions     text models (spec 2.1); JSON or SSE
//	POST /v1/responses            modelb-6-astra, modelb-6.1-sol, modelc-4.7; JSON or SSE
//	POST /v1/responses/compact    the responses models; JSON
//	POST /v1/messages             modela-fable-5-1, modela-sonnet-5-5, modela-opus-5-5; JSON or SSE
//	POST /v1/messages/count_tokens the messages models; JSON {"input_tokens": N}
//	POST /v1/images/generations   modelb-image-2.5-sunburst, modelb-image-2.5-flare
//	POST /v1/images/edits         same models, multipart/form-data
//	POST /v1/videos/generations   modelc-imagine-video-1.5
//	GET  /v1/videos/{id}          status document
//	GET  /v1/videos/{id}/content  video/mp4 once done
//	POST /v1/systemone            sysmodel-1.13.0, sysmodel-latest, sysmodel-preview (alias /v1/system_one)
//	GET  /v1/models               every model of Models()
//	GET  /v1/images/files/{x}.png the target of response_format=url image answers
//
// A model the endpoint does not serve (unknown, or of another family) is
// 404: OpenAI shape {"error":{"message":"The model `x` does not exist",
// "type":"invalid_request_error","param":null,"code":"model_not_found"}};
// /v1/messages and /v1/messages/count_tokens answer every error in the
// Anthropic shape {"type":"error","error":{"type":"not_found_error",
// "message":"…"}}. A body that is not valid JSON, or misses a required
// field, is 400 and the message names the field (typed questions:
// validation problems are 422 with a FastAPI-style
// {"detail":[{"loc","msg","type"}]}). /v1/messages needs the header
// anthropic-version (or the spec's neutral spelling vendorx-version) and
// max_tokens, else 400 invalid_request_error; count_tokens needs the header
// but not max_tokens.
//
// # What the sim accepts
//
// It validates no more strictly than the providers: what it does not read
// passes. Messages: a message role is "user", "assistant" or "system"
// (Claude Code puts system turns inside messages; they count as any other
// turn); blocks of any type (thinking, tool_use, tool_result, image,
// document, …) with cache_control on any of them; tools with any fields
// (defer_loading, cache_control, server tools), thinking,
// context_management, output_config, metadata and unknown top-level or
// per-message fields. cache_control is checked as upstream checks it (type
// "ephemeral", ttl "5m" or "1h"). Responses: items of any type and role
// (developer messages, reasoning items with content null, function calls
// and outputs, compaction items, unknown fields such as store, include,
// prompt_cache_key, client_metadata).
//
// # Token counting
//
// Every number is deterministic and the exported helpers (ChatUsage,
// ResponsesUsage, MessagesUsage, SystemOneUsage, ReplyText) compute exactly
// what the server reports.
//
//   - Tokens(s) = ceil(len(s)/4), len in bytes: 0 for "", at least 1 otherwise.
//   - A content is a string (Tokens of it) or an array of parts: a part of
//     type text, input_text or output_text counts Tokens(text); any other
//     part (image, file, tool_use, tool_result, …) counts PartTokens (85).
//   - Chat prompt_tokens = Σ over messages (MessageTokens (4) + content).
//     Tools, names and tool_calls are not counted.
//   - Responses input_tokens = Tokens(instructions) + (a string input:
//     4 + Tokens(input); an item array: per item with content 4 + content,
//     per other item 4 + Tokens of its raw JSON).
//   - Chat and responses cached tokens (stateless): 0 below CacheMinTokens
//     (1024) prompt tokens, else floor(prompt/2/64)*64. They are part of
//     prompt_tokens / input_tokens, as upstream. A request with a
//     prompt_cache_key is different: see "Prompt caching (chat and
//     responses with prompt_cache_key)".
//   - Messages: the prompt is the system blocks, then per message (system
//     turns included) 4 + its blocks. Tools are not counted. See "Prompt caching" for how it splits into input_tokens,
//     cache reads and cache writes.
//   - Typed questions: input_tokens = Tokens(state) + Σ per question
//     (Tokens(name) + Tokens(instructions) + Σ Tokens(option)); output 0.
//
// # Token counts and compaction
//
// count_tokens answers the whole prompt a messages call with the same body
// counts (input, cache reads and cache writes together); it reads and
// writes no cache entry. /v1/responses/compact counts its input as
// /v1/responses does (instructions and input, cached tokens by the same
// rule; no input counts the instructions alone) and reports CompactTokens
// (32) output tokens; its answer is {"id":"resp_…","object":
// "response.compaction","created_at","output","usage"}, output being every
// user message of the input ({"type":"message","role":"user"} with its
// content; a string input becomes one input_text) then one
// {"id":"cmp_…","type":"compaction","encrypted_content":"sim-compaction-<hash>"}.
// A /v1/responses call whose input has a compaction_trigger item (Codex
// CLI's remote compaction) answers that compaction item as its only output,
// with the same usage rule; streamed, its events are response.created,
// response.in_progress, response.output_item.added,
// response.output_item.done (the content event for timing and cuts) and
// response.completed.
//
// # Completions
//
// The reply text is "Simulated reply from <model>:" followed by the first
// EchoWords (64) whitespace-separated words of the last user message (its
// text parts joined by spaces), then filler words until it has ReplyWords
// (24) words. A canary in a short prompt therefore appears in the reply.
// The completion token count is the number of words. The request's max
// tokens field (chat: max_completion_tokens, else max_tokens; responses:
// max_output_tokens; messages: max_tokens) caps the words; when it cuts the
// reply, chat finish_reason is "length", responses status "incomplete" with
// incomplete_details.reason "max_output_tokens", messages stop_reason
// "max_tokens" (otherwise "stop", "completed", "end_turn"). A max tokens
// field below 1 is 400.
//
// # Streams
//
// A streamed reply carries exactly Chunks (default 8) content chunks: chunk
// i holds words [i*W/N, (i+1)*W/N) of the W-word reply with their leading
// space, so the chunks concatenate to the reply; a chunk is empty when the
// reply has fewer words than chunks. Every event is flushed on its own.
//
//   - Chat: `data: {chat.completion.chunk}` events: one with
//     delta{role:"assistant",content:""}, the content chunks, one with an
//     empty delta and finish_reason; then, exactly when
//     stream_options.include_usage is true, a chunk with "choices":[] and
//     usage (all earlier chunks then carry "usage":null; without
//     include_usage no chunk has a usage field); then `data: [DONE]`.
//   - Responses: `event: X` / `data: {"type":"X","sequence_number":n,…}`
//     for response.created, response.in_progress,
//     response.output_item.added, response.content_part.added, one
//     response.output_text.delta per chunk, response.output_text.done,
//     response.content_part.done, response.output_item.done, then
//     response.completed — or, as upstream does, response.incomplete when
//     max_output_tokens cut the reply — carrying the full response and usage.
//   - Messages: message_start (usage with the input and cache fields and
//     output_tokens 1), content_block_start, ping, one content_block_delta
//     (text_delta) per chunk, content_block_stop, message_delta
//     (delta{stop_reason, stop_sequence:null}, usage{output_tokens}),
//     message_stop.
//
// # Prompt caching (messages)
//
// A block (in system or in a message) with cache_control
// {"type":"ephemeral", "ttl":"5m"|"1h"} is a breakpoint: the prompt prefix up
// to and including it is a cache entry, keyed by a hash of the model and
// the prefix content (text parts by type and text, other parts by their raw
// JSON). For each request the sim finds the longest prefix, ending at any
// block boundary at or before the last breakpoint, that is in the cache:
// its tokens are cache_read_input_tokens. Each breakpoint after it writes
// the tokens since the previous breakpoint (or the read prefix) as
// ephemeral_5m_input_tokens or ephemeral_1h_input_tokens by its ttl
// (default 5m); cache_creation_input_tokens is their sum. Every breakpoint
// is then stored (a read refreshes its lifetime). input_tokens is the rest:
// the tokens after the last breakpoint. There is no minimum cacheable
// length. Entries expire after their ttl; the cache holds at most 65536
// prefixes. MessagesUsage reports the first-time split (every breakpoint a
// write); a repeat of the same request reads what the first one wrote.
//
// # Prompt caching (chat and responses with prompt_cache_key)
//
// A chat or responses request with a non-empty prompt_cache_key is cached
// as a provider account caches it: each sim instance has its own cache, so
// two sims are two accounts. The prompt has a boundary at the end of each
// message (responses: after the instructions, then after the string input
// or each input item), keyed by a hash of the model, the prompt_cache_key
// and the prompt up to it. cached_tokens is the longest prefix ending at a
// boundary that this sim has seen within 5 minutes, rounded down to a
// multiple of CacheBlock, and 0 when it is under CacheMinTokens; every
// boundary is then stored (or refreshed). So the first request with a key
// reports no cached tokens, and a repeat (or a next turn extending it) of a
// prompt of at least 1024 tokens reports the prefix seen before. ChatUsage
// and ResponsesUsage report the first time (0 cached).
//
// # Images and video
//
// Image answers are {"created", "data":[n × {"b64_json": an 8×8 PNG}]}, or
// {"url"} items with response_format=url; n is 1..128 (default 1), size is
// "auto", empty or <W>x<H>. Edits read the multipart body as a stream (never
// ParseMultipartForm, never a file on disk): model, prompt and a non-empty
// image (or image[]) file are required; the body is capped at 64 MiB.
//
// A video job (POST → {"request_id":"vid_…","model","status":"pending"})
// follows the VideoSteps schedule (default 1s, fixed at creation): pending
// (progress 0) for the first step, processing after 1 step (33, then 66 after
// 2), and after 3 steps final: done (progress 100, with
// video{url:"/v1/videos/{id}/content", duration}), or failed (with
// error{code:"generation_failed"}) when the prompt contains "[fail]", or
// expired when it contains "[expire]". /content is 404 until the job is
// done, then a small fixed MP4 (ftyp + mdat boxes). Unknown ids are 404. At
// most 16384 jobs are kept, the oldest forgotten first.
//
// # Typed questions
//
// Answers are derived from FNV-1a hashes of state and question name: noul
// {"type":"noul","noul":p}; choice {"type":"choice","choice":o,
// "probabilities":{o:p,…}} (the most probable option); score
// {"type":"score","score":x} within [min, max] (defaults 0 and 1). 422 when
// Tokens(state) > 32768 + Tokens(the longest question instructions)
// ("state is too long: N tokens, limit M"), when a choice question has no
// options (or a duplicate), a score question has min > max, a type is not
// noul, choice or score, questions is empty, or model, state or questions
// is missing.
//
// # Faults and timing
//
// Fault-eligible requests are every POST and the two GET video endpoints,
// after routing and the API key check (a missing or wrong key is 401
// before any fault; GET /v1/models is never faulted). Faults are on when
// ErrorRate > 0, Status != 0 or Hang is set; the rate is then ErrorRate, or
// 1 (every request) when ErrorRate is 0. Eligible request i, counted from 0
// since New or the last SetOptions, faults iff floor((i+1)*rate) >
// floor(i*rate): over any first N requests exactly floor(N*rate) fault (0.5
// faults requests 1, 3, 5, …). With a non-zero Seed (-seed) each eligible
// request faults independently with probability rate instead (the i-th draw
// of SplitMix64 from Seed), so runs of failures occur as in production; the
// same seed gives the same sequence. A faulted request hangs without headers
// until the client goes away when Hang is set; otherwise, after Latency, it
// gets Status (default 500) and an error body (Anthropic shape on
// /v1/messages): 429 has Retry-After: RetryAfter (default 1) and type
// "requests"/"rate_limit_error", code "rate_limit_exceeded"; 503 and 529
// have message "overloaded" (type "server_error" code "overloaded" /
// "overloaded_error"); other 5xx "server_error"/"api_error".
//
// Latency is waited before the headers of every fault-eligible answer. A
// stream then flushes its headers, waits FirstChunk, sends its opening
// events and the first content chunk, and waits ChunkGap before each later
// content chunk; its closing events follow without waits. CutAfter > 0
// aborts every stream (panic(http.ErrAbortHandler): the connection is
// closed without a terminating chunk) right after min(CutAfter, Chunks)
// content chunks have been flushed: no finish chunk, usage chunk, [DONE] or
// closing event is sent. Close releases hanging and waiting requests by
// aborting them.
package sim
