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
	rep   reply
	c     Counts
	stop  string // end_turn, or max_tokens when the reply was capped
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
	x := msgReply{id: s.id(idBuf[:0], "msg_"), model: req.Model, rep: buildReply(req.Model, lastText(req.Messages, "user"), *req.MaxTokens), stop: "end_turn"}
	c.Completion, c.Capped = x.rep.words(), x.rep.capped
	if x.rep.capped {
		x.stop = "max_tokens"
	}
	x.c = c
	if !req.Stream {
		b := x.head(sc.out)
		b = append(b, `{"type":"text","text":`...)
		b = appendString(b, x.rep.text)
		b = append(b, `}],"stop_reason":"`...)
		b = append(b, x.stop...)
		b = append(b, `","stop_sequence":null,"usage":`...)
		b = appendMessagesUsage(b, x.c, x.c.Completion)
		sc.out = append(b, '}')
		writeJSON(w, http.StatusOK, sc.out)
		return
	}
	s.messagesStream(w, r, cfg, sc, &x)
}

// messagesStream streams the answer as the messages API's events:
// message_start, one text block (a delta per content chunk), message_delta
// with the stop reason and output tokens, message_stop.
func (s *Server) messagesStream(w http.ResponseWriter, r *http.Request, cfg *config, sc *scratch, x *msgReply) {
	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	b := frameEvent(sc.out[:0], "message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = x.head(b)
	b = append(b, `],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendMessagesUsage(b, x.c, 1)
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
		b = appendString(b, x.rep.chunk(i, n))
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
	b = append(b, x.stop...)
	b = append(b, `","stop_sequence":null},"usage":{"output_tokens":`...)
	b = appendInt(b, x.c.Completion)
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
