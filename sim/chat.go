package sim

import (
	"net/http"
)

const chatPath = "/v1/chat/completions"

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
	rep := buildReply(req.Model, echo, limit)
	c.Completion, c.Capped = rep.words(), rep.capped
	finish := "stop"
	if rep.capped {
		finish = "length"
	}
	created := s.now().Unix()

	if !req.Stream {
		b := sc.out
		b = append(b, `{"id":`...)
		b = append(s.id(append(b, '"'), "chatcmpl-"), '"')
		b = append(b, `,"object":"chat.completion","created":`...)
		b = appendInt(b, created)
		b = append(b, `,"model":`...)
		b = appendString(b, req.Model)
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = appendString(b, rep.text)
		b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
		b = append(b, finish...)
		b = append(b, `"}],"usage":`...)
		b = appendChatUsage(b, c)
		b = append(b, `,"service_tier":"default","system_fingerprint":"fp_sim"}`...)
		sc.out = b
		writeJSON(w, http.StatusOK, b)
		return
	}

	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	usageNull := ""
	if includeUsage {
		usageNull = `,"usage":null`
	}
	pre := sc.pre
	pre = append(pre, `{"id":`...)
	pre = append(s.id(append(pre, '"'), "chatcmpl-"), '"')
	pre = append(pre, `,"object":"chat.completion.chunk","created":`...)
	pre = appendInt(pre, created)
	pre = append(pre, `,"model":`...)
	pre = appendString(pre, req.Model)
	pre = append(pre, `,"service_tier":"default","system_fingerprint":"fp_sim","choices":[`...)
	sc.pre = pre

	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	b := append(frameData(sc.out[:0]), pre...)
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
	b = frameEnd(append(append(b, usageNull...), '}'))
	if !st.event(b) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		b = append(frameData(b[:0]), pre...)
		b = append(b, `{"index":0,"delta":{"content":`...)
		b = appendString(b, rep.chunk(i, n))
		b = append(b, `},"logprobs":null,"finish_reason":null}]`...)
		b = frameEnd(append(append(b, usageNull...), '}'))
		if !st.content(i, b) {
			sc.out = b
			return
		}
	}
	st.contentDone()
	b = append(frameData(b[:0]), pre...)
	b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	b = append(b, finish...)
	b = append(b, `"}]`...)
	b = frameEnd(append(append(b, usageNull...), '}'))
	if !st.event(b) {
		sc.out = b
		return
	}
	if includeUsage {
		b = append(frameData(b[:0]), pre...)
		b = append(b, `],"usage":`...)
		b = appendChatUsage(b, c)
		b = frameEnd(append(b, '}'))
		if !st.event(b) {
			sc.out = b
			return
		}
	}
	b = append(b[:0], "data: [DONE]\n\n"...)
	st.event(b)
	sc.out = b
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
