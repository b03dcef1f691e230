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
	rep := buildReply(req.Model, lastText(req.Messages, "user"), *req.MaxTokens)
	c.Completion, c.Capped = rep.words(), rep.capped
	stop := "end_turn"
	if rep.capped {
		stop = "max_tokens"
	}
	var idBuf [48]byte
	id := s.id(idBuf[:0], "msg_")

	// head appends the message object up to its content array.
	head := func(b []byte) []byte {
		b = append(b, `{"id":"`...)
		b = append(b, id...)
		b = append(b, `","type":"message","role":"assistant","model":`...)
		b = appendString(b, req.Model)
		return append(b, `,"content":[`...)
	}

	if !req.Stream {
		b := head(sc.out)
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, rep.text)
		b = append(b, `}],"stop_reason":"`...)
		b = append(b, stop...)
		b = append(b, `","stop_sequence":null,"usage":`...)
		b = appendMessagesUsage(b, c, c.Completion)
		b = append(b, '}')
		sc.out = b
		writeJSON(w, http.StatusOK, b)
		return
	}

	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	b := frameEvent(sc.out[:0], "message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = head(b)
	b = append(b, `],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendMessagesUsage(b, c, 1)
	b = frameEnd(append(b, "}}"...))
	defer func() { sc.out = b }()
	if !st.event(b) {
		return
	}
	b = frameEvent(b[:0], "content_block_start")
	b = append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`...)
	if !st.event(frameEnd(b)) {
		return
	}
	b = frameEvent(b[:0], "ping")
	b = append(b, `{"type":"ping"}`...)
	if !st.event(frameEnd(b)) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		b = frameEvent(b[:0], "content_block_delta")
		b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
		b = appendString(b, rep.chunk(i, n))
		b = frameEnd(append(b, "}}"...))
		if !st.content(i, b) {
			return
		}
	}
	st.contentDone()
	b = frameEvent(b[:0], "content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":0}`...)
	if !st.event(frameEnd(b)) {
		return
	}
	b = frameEvent(b[:0], "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"`...)
	b = append(b, stop...)
	b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b = appendInt(b, c.Completion)
	b = frameEnd(append(b, "}}"...))
	if !st.event(b) {
		return
	}
	b = frameEvent(b[:0], "message_stop")
	b = append(b, `{"type":"message_stop"}`...)
	st.event(frameEnd(b))
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
