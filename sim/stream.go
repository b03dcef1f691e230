package sim

import (
	"context"
	"net/http"
)

// # Streams
//
// A streamed reply carries exactly Chunks (default 8) content chunks: chunk
// i holds words [i*W/N, (i+1)*W/N) of the W-word reply text with their
// leading space, so the chunks concatenate to the text; a chunk is empty
// when the text has fewer words than chunks. The reasoning (one event or
// block before them) and the tool calls (after them, with the closing
// events) are not content chunks: no ChunkGap before them, and a cut
// stream (CutAfter) ends before any call. Every event is flushed on its own.
//
//   - Chat: `data: {chat.completion.chunk}` events: one with
//     delta{role:"assistant",content:""}, with thinking one with
//     delta{reasoning_content}, the content chunks, per tool call one
//     delta{tool_calls:[{index,id,type,function:{name,arguments:""}}]} and
//     two with its arguments in pieces, one with an empty delta and
//     finish_reason; then, exactly when stream_options.include_usage is
//     true, a chunk with "choices":[] and usage (all earlier chunks then
//     carry "usage":null; without include_usage no chunk has a usage
//     field); then `data: [DONE]`.
//   - Responses: `event: X` / `data: {"type":"X","sequence_number":n,…}`
//     for response.created, response.in_progress; with thinking the
//     reasoning item (response.output_item.added,
//     response.reasoning_summary_part.added,
//     response.reasoning_summary_text.delta and .done,
//     response.reasoning_summary_part.done, response.output_item.done);
//     the message item: response.output_item.added,
//     response.content_part.added, one response.output_text.delta per
//     chunk, response.output_text.done, response.content_part.done,
//     response.output_item.done; per tool call response.output_item.added
//     (function_call in progress), two response.function_call_arguments.delta,
//     response.function_call_arguments.done, response.output_item.done;
//     then response.completed — or, as upstream does, response.incomplete
//     when max_output_tokens cut the reply — carrying the full response
//     and usage.
//   - Messages: message_start (usage with the input and cache fields and
//     output_tokens 1); with thinking a thinking block (content_block_start,
//     one thinking_delta unless display is "omitted", signature_delta,
//     content_block_stop); the text block: content_block_start, one
//     content_block_delta (text_delta) per chunk, content_block_stop; per
//     tool call a tool_use block (content_block_start with input {}, two
//     input_json_delta, content_block_stop); a ping after the first
//     content_block_start; message_delta (delta{stop_reason,
//     stop_sequence:null}, usage{output_tokens}), message_stop.
//   - Gemini: see gemini_request.go.

// stream writes server-sent events with the configured timing and cut.
type stream struct {
	s    *Server
	w    http.ResponseWriter
	fl   http.Flusher
	ctx  context.Context
	cfg  *config
	sent int // content chunks flushed
}

// startStream sends the event-stream headers, flushes them and waits
// FirstChunk. It returns false when the client went away.
func (s *Server) startStream(w http.ResponseWriter, r *http.Request, cfg *config) (*stream, bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	st := &stream{s: s, w: w, fl: fl, ctx: r.Context(), cfg: cfg}
	st.flush()
	return st, s.wait(st.ctx, cfg.opts.FirstChunk)
}

func (st *stream) flush() {
	if st.fl != nil {
		st.fl.Flush()
	}
}

// event writes one complete SSE event (already framed) and flushes it.
func (st *stream) event(b []byte) bool {
	if _, err := st.w.Write(b); err != nil {
		return false
	}
	st.flush()
	return true
}

// content writes content chunk i (already framed): it waits ChunkGap before
// every chunk but the first, and aborts the connection once CutAfter chunks
// are out.
func (st *stream) content(i int, b []byte) bool {
	if i > 0 && !st.s.wait(st.ctx, st.cfg.opts.ChunkGap) {
		return false
	}
	if !st.event(b) {
		return false
	}
	st.sent++
	if cut := st.cfg.opts.CutAfter; cut > 0 && st.sent >= cut {
		panic(http.ErrAbortHandler)
	}
	return true
}

// contentDone is called after the last content chunk: a stream with
// CutAfter set and not yet cut (CutAfter >= Chunks) is cut here, before its
// closing events.
func (st *stream) contentDone() {
	if st.cfg.opts.CutAfter > 0 {
		panic(http.ErrAbortHandler)
	}
}

// frameData starts a `data: ` event in b.
func frameData(b []byte) []byte { return append(b, "data: "...) }

// frameEvent starts an `event: name\ndata: ` event in b.
func frameEvent(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

// frameEnd ends an event.
func frameEnd(b []byte) []byte { return append(b, '\n', '\n') }
