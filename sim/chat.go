package sim

import (
	"net/http"
)

const chatPath = "/v1/chat/completions"

// chatReply is what every piece of a chat completion answer is written from.
type chatReply struct {
	model   string
	created int64
	t       turn
	c       Counts
	finish  string // stop, length when the reply was capped, tool_calls
}

// chat answers POST /v1/chat/completions.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, cfg *config) {
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeOpenAI, chatPath, parseChat)
	if !ok {
		return
	}
	c, echo, limit := chatPlan(req)
	if req.PromptCacheKey != "" {
		kp := chatKeyedPrefix(req)
		c.Cached = kp.cached(&s.cache, s.now().UnixNano())
	}
	x := chatReply{model: req.Model, created: s.now().Unix(), t: chatTurn(req, echo, limit), finish: "stop"}
	c.setOutput(&x.t)
	switch {
	case len(x.t.calls) > 0:
		x.finish = "tool_calls"
	case x.t.rep.capped:
		x.finish = "length"
	}
	x.c = c
	if !req.Stream {
		sc.out = s.appendChat(sc.out, &x)
		writeJSON(w, http.StatusOK, sc.out)
		return
	}
	s.chatStream(w, r, cfg, sc, &x, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
}

// appendChat appends the whole chat.completion object.
func (s *Server) appendChat(b []byte, x *chatReply) []byte {
	b = append(b, `{"id":`...)
	b = append(s.id(append(b, '"'), "chatcmpl-"), '"')
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt(b, x.created)
	b = append(b, `,"model":`...)
	b = appendString(b, x.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = appendString(b, x.t.rep.text)
	if x.t.think != "" {
		b = append(b, `,"reasoning_content":`...)
		b = appendString(b, x.t.think)
	}
	if len(x.t.calls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range x.t.calls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendChatCallStart(b, &x.t.calls[i], -1, x.t.calls[i].args)
		}
		b = append(b, ']')
	}
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, x.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendChatUsage(b, x.c)
	return append(b, `,"service_tier":"default","system_fingerprint":"fp_sim"}`...)
}

// appendChatCallStart appends a tool call with its id, name and args; a
// streamed one (index >= 0) carries its index.
func appendChatCallStart(b []byte, c *toolCall, index int, args string) []byte {
	b = append(b, '{')
	if index >= 0 {
		b = append(b, `"index":`...)
		b = append(appendInt(b, int64(index)), ',')
	}
	b = append(b, `"id":"`...)
	b = c.appendID(b, "call_")
	b = append(b, `","type":"function","function":{"name":`...)
	b = appendString(b, c.name)
	b = append(b, `,"arguments":`...)
	b = appendString(b, args)
	return append(b, "}}"...)
}

// chatStream streams the answer as chat.completion.chunk events: the role,
// the reasoning when there is one, one per content chunk, the tool calls,
// the finish reason, the usage when the caller asked for it
// (stream_options.include_usage), then [DONE].
func (s *Server) chatStream(w http.ResponseWriter, r *http.Request, cfg *config, sc *scratch, x *chatReply, includeUsage bool) {
	usageNull := ""
	if includeUsage {
		usageNull = `,"usage":null`
	}
	// pre is every chunk's start, up to its choices.
	pre := sc.pre
	pre = append(pre, `{"id":`...)
	pre = append(s.id(append(pre, '"'), "chatcmpl-"), '"')
	pre = append(pre, `,"object":"chat.completion.chunk","created":`...)
	pre = appendInt(pre, x.created)
	pre = append(pre, `,"model":`...)
	pre = appendString(pre, x.model)
	pre = append(pre, `,"service_tier":"default","system_fingerprint":"fp_sim","choices":[`...)
	sc.pre = pre

	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	e := chatEvents{b: sc.out[:0], pre: pre, tail: usageNull}
	defer func() { sc.out = e.b }()
	e.start()
	e.b = append(e.b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	if !st.event(e.end()) {
		return
	}
	if x.t.think != "" && !st.event(e.delta("reasoning_content", x.t.think)) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		if !st.content(i, e.delta("content", x.t.rep.chunk(i, n))) {
			return
		}
	}
	st.contentDone()
	if !chatStreamCalls(st, &e, x.t.calls) {
		return
	}
	e.start()
	e.b = append(e.b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	e.b = append(e.b, x.finish...)
	e.b = append(e.b, `"}]`...)
	if !st.event(e.end()) {
		return
	}
	if includeUsage {
		e.b = append(frameData(e.b[:0]), pre...)
		e.b = append(e.b, `],"usage":`...)
		e.b = appendChatUsage(e.b, x.c)
		e.b = frameEnd(append(e.b, '}'))
		if !st.event(e.b) {
			return
		}
	}
	e.b = append(e.b[:0], "data: [DONE]\n\n"...)
	st.event(e.b)
}

// chatStreamCalls streams each tool call: its id and name, then its
// arguments in two pieces.
func chatStreamCalls(st *stream, e *chatEvents, calls []toolCall) bool {
	for i := range calls {
		c := &calls[i]
		e.start()
		e.b = append(e.b, `{"index":0,"delta":{"tool_calls":[`...)
		e.b = appendChatCallStart(e.b, c, i, "")
		e.b = append(e.b, `]},"logprobs":null,"finish_reason":null}]`...)
		if !st.event(e.end()) {
			return false
		}
		a, b := c.argPieces()
		for _, piece := range [2]string{a, b} {
			e.start()
			e.b = append(e.b, `{"index":0,"delta":{"tool_calls":[{"index":`...)
			e.b = appendInt(e.b, int64(i))
			e.b = append(e.b, `,"function":{"arguments":`...)
			e.b = appendString(e.b, piece)
			e.b = append(e.b, `}}]},"logprobs":null,"finish_reason":null}]`...)
			if !st.event(e.end()) {
				return false
			}
		}
	}
	return true
}

// chatEvents frames the chunks of a streamed chat answer into b.
type chatEvents struct {
	b    []byte
	pre  []byte // every chunk's start, up to its choices
	tail string // ,"usage":null when the caller asked for usage
}

func (e *chatEvents) start() { e.b = append(frameData(e.b[:0]), e.pre...) }

func (e *chatEvents) end() []byte {
	e.b = frameEnd(append(append(e.b, e.tail...), '}'))
	return e.b
}

// delta frames a chunk whose delta is the object {"field": value}.
func (e *chatEvents) delta(field, value string) []byte {
	e.start()
	e.b = append(e.b, `{"index":0,"delta":{"`...)
	e.b = append(e.b, field...)
	e.b = append(e.b, `":`...)
	e.b = appendString(e.b, value)
	e.b = append(e.b, `},"logprobs":null,"finish_reason":null}]`...)
	return e.end()
}

// appendChatUsage appends a chat completion usage object.
func appendChatUsage(b []byte, c Counts) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, c.Prompt)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, c.Completion)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, c.Prompt+c.Completion)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, c.Cached)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, c.Reasoning)
	b = append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return b
}
