package sim

import (
	"net/http"
)

const chatPath = "/v1/chat/completions"

// chatReply is what every piece of a chat completion answer is written from.
type chatReply struct {
	model   string
	created int64
	rep     reply
	c       Counts
	finish  string // stop, or length when the reply was capped
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
	x := chatReply{model: req.Model, created: s.now().Unix(), rep: buildReply(req.Model, echo, limit), finish: "stop"}
	c.Completion, c.Capped = x.rep.words(), x.rep.capped
	if x.rep.capped {
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
	b = appendString(b, x.rep.text)
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, x.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendChatUsage(b, x.c)
	return append(b, `,"service_tier":"default","system_fingerprint":"fp_sim"}`...)
}

// chatStream streams the answer as chat.completion.chunk events: the role,
// one per content chunk, the finish reason, the usage when the caller
// asked for it (stream_options.include_usage), then [DONE].
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
	b := append(frameData(sc.out[:0]), pre...)
	defer func() { sc.out = b }()
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	b = frameEnd(append(append(b, usageNull...), '}'))
	if !st.event(b) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		b = append(frameData(b[:0]), pre...)
		b = append(b, `{"index":0,"delta":{"content":`...)
		b = appendString(b, x.rep.chunk(i, n))
		b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
		b = frameEnd(append(append(b, usageNull...), '}'))
		if !st.content(i, b) {
			return
		}
	}
	st.contentDone()
	b = append(frameData(b[:0]), pre...)
	b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	b = append(b, x.finish...)
	b = append(b, `"}]`...)
	b = frameEnd(append(append(b, usageNull...), '}'))
	if !st.event(b) {
		return
	}
	if includeUsage {
		b = append(frameData(b[:0]), pre...)
		b = append(b, `],"usage":`...)
		b = appendChatUsage(b, x.c)
		b = frameEnd(append(b, '}'))
		if !st.event(b) {
			return
		}
	}
	b = append(b[:0], "data: [DONE]\n\n"...)
	st.event(b)
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
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
	return b
}
