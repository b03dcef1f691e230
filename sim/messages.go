package sim

import (
	"net/http"
)

const messagesPath = "/v1/messages"

// versionHeaders are the accepted spellings of the messages API version
// header: the vendor's own and the neutral one (docs/api.md#versioning).
var versionHeaders = [...]string{"anthropic-version", "vendorx-version"}

// hasVersion reports whether r carries the messages API version header.
func hasVersion(r *http.Request) bool {
	for _, h := range versionHeaders {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return false
}

// msgReply is what every piece of a messages answer is written from.
type msgReply struct {
	id    []byte
	model string
	t     turn
	c     Counts
	stop  string // end_turn, max_tokens when the reply was capped, tool_use
	// shown is the thinking text the answer shows ("" with display
	// "omitted"); sig its signature.
	shown, sig string
}

// head appends the message object up to its content array.
func (x *msgReply) head(b []byte) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, x.id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendString(b, x.model)
	return append(b, `,"content":[`...)
}

// messages answers POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request, cfg *config) {
	if !hasVersion(r) {
		badRequest(w, shapeAnthropic, "anthropic-version: header is required")
		return
	}
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeAnthropic, messagesPath, parseMessages)
	if !ok {
		return
	}
	p := messagesPrefix(req)
	c := p.counts(&s.cache, s.now().UnixNano())
	var idBuf [48]byte
	x := msgReply{id: s.id(idBuf[:0], "msg_"), model: req.Model, t: messagesTurn(req), stop: "end_turn"}
	c.setOutput(&x.t)
	switch {
	case len(x.t.calls) > 0:
		x.stop = "tool_use"
	case x.t.rep.capped:
		x.stop = "max_tokens"
	}
	if x.t.think != "" {
		if req.Thinking.Display != "omitted" {
			x.shown = x.t.think
		}
		x.sig = Signature(req.Model, x.shown)
	}
	x.c = c
	if !req.Stream {
		b := x.head(sc.out)
		if x.t.think != "" {
			b = append(b, `{"type":"thinking","thinking":`...)
			b = appendString(b, x.shown)
			b = append(b, `,"signature":`...)
			b = append(appendString(b, x.sig), "},"...)
		}
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, x.t.rep.text)
		b = append(b, '}')
		for i := range x.t.calls {
			b = appendToolUse(append(b, ','), &x.t.calls[i], x.t.calls[i].args)
		}
		b = append(b, `],"stop_reason":"`...)
		b = append(b, x.stop...)
		b = append(b, `","stop_sequence":null,"usage":`...)
		b = appendMessagesUsage(b, x.c, x.c.Completion)
		sc.out = append(b, '}')
		writeJSON(w, http.StatusOK, sc.out)
		return
	}
	s.messagesStream(w, r, cfg, sc, &x)
}

// appendToolUse appends a tool_use block with the given input.
func appendToolUse(b []byte, c *toolCall, input string) []byte {
	b = append(b, `{"type":"tool_use","id":"`...)
	b = c.appendID(b, "toolu_")
	b = append(b, `","name":`...)
	b = appendString(b, c.name)
	b = append(b, `,"input":`...)
	b = append(b, input...)
	return append(b, '}')
}

// msgEvents frames the events of a streamed messages answer into b.
type msgEvents struct {
	b     []byte
	index int64 // of the current content block
}

// begin starts event name with its type.
func (e *msgEvents) begin(name string) {
	e.b = frameEvent(e.b[:0], name)
	e.b = append(e.b, `{"type":"`...)
	e.b = append(e.b, name...)
	e.b = append(e.b, '"')
}

// blockStart frames content_block_start of the current block, whose
// content_block is block.
func (e *msgEvents) blockStart(block string) []byte {
	e.begin("content_block_start")
	e.b = append(e.b, `,"index":`...)
	e.b = appendInt(e.b, e.index)
	e.b = append(e.b, `,"content_block":`...)
	e.b = append(e.b, block...)
	e.b = frameEnd(append(e.b, '}'))
	return e.b
}

// delta frames a content_block_delta of the current block: a delta of
// type typ whose field holds value as a JSON string.
func (e *msgEvents) delta(typ, field, value string) []byte {
	e.begin("content_block_delta")
	e.b = append(e.b, `,"index":`...)
	e.b = appendInt(e.b, e.index)
	e.b = append(e.b, `,"delta":{"type":"`...)
	e.b = append(e.b, typ...)
	e.b = append(e.b, `","`...)
	e.b = append(e.b, field...)
	e.b = append(e.b, `":`...)
	e.b = appendString(e.b, value)
	e.b = frameEnd(append(e.b, "}}"...))
	return e.b
}

// blockStop frames content_block_stop of the current block and moves to
// the next.
func (e *msgEvents) blockStop() []byte {
	e.begin("content_block_stop")
	e.b = append(e.b, `,"index":`...)
	e.b = appendInt(e.b, e.index)
	e.b = frameEnd(append(e.b, '}'))
	e.index++
	return e.b
}

// messagesStream streams the answer as the messages API's events:
// message_start, the thinking block (thinking_delta, signature_delta) when
// there is one, the text block (a delta per content chunk), each tool_use
// block (input_json_delta in two pieces), message_delta with the stop
// reason and output tokens, message_stop. A ping follows the first
// content_block_start.
func (s *Server) messagesStream(w http.ResponseWriter, r *http.Request, cfg *config, sc *scratch, x *msgReply) {
	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	e := msgEvents{b: frameEvent(sc.out[:0], "message_start")}
	defer func() { sc.out = e.b }()
	e.b = append(e.b, `{"type":"message_start","message":`...)
	e.b = x.head(e.b)
	e.b = append(e.b, `],"stop_reason":null,"stop_sequence":null,"usage":`...)
	e.b = appendMessagesUsage(e.b, x.c, 1)
	e.b = frameEnd(append(e.b, "}}"...))
	if !st.event(e.b) || x.t.think != "" && !streamThinking(st, &e, x) {
		return
	}
	if !st.event(e.blockStart(`{"type":"text","text":""}`)) || e.index == 0 && !ping(st, &e) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		if !st.content(i, e.delta("text_delta", "text", x.t.rep.chunk(i, n))) {
			return
		}
	}
	st.contentDone()
	if !st.event(e.blockStop()) || !streamToolUses(st, &e, x.t.calls) {
		return
	}
	e.begin("message_delta")
	e.b = append(e.b, `,"delta":{"stop_reason":"`...)
	e.b = append(e.b, x.stop...)
	e.b = append(e.b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	e.b = appendInt(e.b, x.c.Completion)
	e.b = frameEnd(append(e.b, "}}"...))
	if !st.event(e.b) {
		return
	}
	e.begin("message_stop")
	st.event(frameEnd(append(e.b, '}')))
}

// ping frames and sends the ping event.
func ping(st *stream, e *msgEvents) bool {
	e.begin("ping")
	return st.event(frameEnd(append(e.b, '}')))
}

// streamThinking sends the thinking block: start, ping, the thinking text
// in one thinking_delta (none when it is not shown), its signature, stop.
func streamThinking(st *stream, e *msgEvents, x *msgReply) bool {
	if !st.event(e.blockStart(`{"type":"thinking","thinking":"","signature":""}`)) || !ping(st, e) {
		return false
	}
	if x.shown != "" && !st.event(e.delta("thinking_delta", "thinking", x.shown)) {
		return false
	}
	return st.event(e.delta("signature_delta", "signature", x.sig)) && st.event(e.blockStop())
}

// streamToolUses sends each tool_use block: start with an empty input,
// the input JSON in two input_json_delta pieces, stop.
func streamToolUses(st *stream, e *msgEvents, calls []toolCall) bool {
	for i := range calls {
		c := &calls[i]
		if !st.event(e.blockStart(string(appendToolUse(nil, c, "{}")))) {
			return false
		}
		a, b := c.argPieces()
		if !st.event(e.delta("input_json_delta", "partial_json", a)) || !st.event(e.delta("input_json_delta", "partial_json", b)) {
			return false
		}
		if !st.event(e.blockStop()) {
			return false
		}
	}
	return true
}

// appendMessagesUsage appends a messages usage object with the given
// output_tokens.
func appendMessagesUsage(b []byte, c Counts, output int64) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, c.Prompt)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, c.CacheWrite+c.CacheWrite1h)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = appendInt(b, c.Cached)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = appendInt(b, c.CacheWrite)
	b = append(b, `,"ephemeral_1h_input_tokens":`...)
	b = appendInt(b, c.CacheWrite1h)
	b = append(b, `},"output_tokens":`...)
	b = appendInt(b, output)
	return append(b, `,"service_tier":"standard"}`...)
}
