package sim

import (
	"net/http"
	"strings"
)

// geminiPrefix is the path prefix of the Gemini endpoints.
const geminiPrefix = "/v1beta/models/"

// matchGemini maps /v1beta/models/{model}:generateContent and
// :streamGenerateContent to their route and the model.
func matchGemini(path string) (rt route, model string) {
	rest, ok := strings.CutPrefix(path, geminiPrefix)
	if !ok {
		return routeNone, ""
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || strings.Contains(rest[:i], "/") {
		return routeNone, ""
	}
	switch rest[i+1:] {
	case "generateContent":
		return routeGemini, rest[:i]
	case "streamGenerateContent":
		return routeGeminiStream, rest[:i]
	}
	return routeNone, ""
}

// geminiReply is what every piece of a Gemini answer is written from.
type geminiReply struct {
	model string
	id    []byte
	t     turn
	c     Counts
	show  bool   // the thought part is shown (includeThoughts)
	ids   bool   // function calls carry ids
	sig   string // the thoughtSignature, "" without thinking
}

// gemini answers POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent.
func (s *Server) gemini(w http.ResponseWriter, r *http.Request, cfg *config, model string, stream bool) {
	if stream && r.URL.Query().Get("alt") != "sse" {
		badRequest(w, shapeGoogle, "alt: the sim streams streamGenerateContent only with alt=sse")
		return
	}
	if !serves(model, famGemini) {
		writeError(w, shapeGoogle, http.StatusNotFound, "", "", "models/"+model+
			" is not found for API version v1beta, or is not supported for generateContent")
		return
	}
	sc := getScratch()
	defer putScratch(sc)
	if err := readBody(r, sc); err != nil {
		bodyError(w, shapeGoogle, err)
		return
	}
	req, err := parseGemini(sc.body.Bytes())
	if err != nil {
		badRequest(w, shapeGoogle, err.Error())
		return
	}
	req.model = model
	var idBuf [48]byte
	x := geminiReply{model: model, id: s.id(idBuf[:0], "")}
	x.c, x.t, x.show, x.ids = geminiPlan(req)
	if x.t.think != "" {
		x.sig = Signature(model, x.t.think)
	}
	if !stream {
		b := append(sc.out[:0], `{"candidates":[{"content":{"role":"model","parts":[`...)
		b = x.appendParts(b)
		b = append(b, `]},"finishReason":"`...)
		b = append(b, x.finish()...)
		b = append(b, `","index":0}],"usageMetadata":`...)
		b = x.appendUsage(b)
		sc.out = x.appendTail(b)
		writeJSON(w, http.StatusOK, sc.out)
		return
	}
	s.geminiStream(w, r, cfg, sc, &x)
}

func (x *geminiReply) finish() string {
	if x.t.rep.capped {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// appendParts appends every part of the whole answer: the thought part
// when shown, the text part, the functionCall parts.
func (x *geminiReply) appendParts(b []byte) []byte {
	calls := len(x.t.calls) > 0
	if x.show && x.t.think != "" {
		b = x.appendThought(b, !calls)
		b = append(b, ',')
	}
	b = append(b, `{"text":`...)
	b = appendString(b, x.t.rep.text)
	if x.sig != "" && !calls && !x.show {
		b = x.appendSig(b)
	}
	b = append(b, '}')
	return x.appendCalls(b, true)
}

// appendThought appends the thought part, with the signature when sig.
func (x *geminiReply) appendThought(b []byte, sig bool) []byte {
	b = append(b, `{"text":`...)
	b = appendString(b, x.t.think)
	b = append(b, `,"thought":true`...)
	if sig {
		b = x.appendSig(b)
	}
	return append(b, '}')
}

func (x *geminiReply) appendSig(b []byte) []byte {
	b = append(b, `,"thoughtSignature":`...)
	return appendString(b, x.sig)
}

// appendCalls appends a functionCall part per call, each after a comma
// when comma; the first carries the signature.
func (x *geminiReply) appendCalls(b []byte, comma bool) []byte {
	for i := range x.t.calls {
		c := &x.t.calls[i]
		if comma || i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"functionCall":{`...)
		if x.ids {
			b = append(c.appendID(append(b, `"id":"`...), "call_"), `",`...)
		}
		b = append(b, `"name":`...)
		b = appendString(b, c.name)
		b = append(b, `,"args":`...)
		b = append(b, c.args...)
		b = append(b, '}')
		if i == 0 && x.sig != "" {
			b = x.appendSig(b)
		}
		b = append(b, '}')
	}
	return b
}

// appendUsage appends the usageMetadata object.
func (x *geminiReply) appendUsage(b []byte) []byte {
	c := &x.c
	b = append(b, `{"promptTokenCount":`...)
	b = appendInt(b, c.Prompt)
	b = append(b, `,"candidatesTokenCount":`...)
	b = appendInt(b, c.Completion)
	b = append(b, `,"totalTokenCount":`...)
	b = appendInt(b, c.Prompt+c.Completion+c.Reasoning)
	if c.Cached > 0 {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = appendInt(b, c.Cached)
	}
	if c.Reasoning > 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = appendInt(b, c.Reasoning)
	}
	return append(b, '}')
}

// appendTail appends modelVersion and responseId and closes the object.
func (x *geminiReply) appendTail(b []byte) []byte {
	b = append(b, `,"modelVersion":`...)
	b = appendString(b, x.model)
	b = append(b, `,"responseId":"`...)
	b = append(b, x.id...)
	return append(b, `"}`...)
}

// geminiStream streams the answer as `data: {chunk}` events: the thought
// part when shown, one text part per content chunk, then the last chunk
// with the function calls (or an empty text), finishReason and usage.
func (s *Server) geminiStream(w http.ResponseWriter, r *http.Request, cfg *config, sc *scratch, x *geminiReply) {
	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	b := sc.out[:0]
	defer func() { sc.out = b }()
	open := func() {
		b = append(frameData(b[:0]), `{"candidates":[{"content":{"role":"model","parts":[`...)
	}
	end := func() []byte {
		b = frameEnd(x.appendTail(append(b, `]},"index":0}]`...)))
		return b
	}
	calls := len(x.t.calls) > 0
	if x.show && x.t.think != "" {
		open()
		b = x.appendThought(b, !calls)
		if !st.event(end()) {
			return
		}
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		open()
		b = append(appendString(append(b, `{"text":`...), x.t.rep.chunk(i, n)), '}')
		if !st.content(i, end()) {
			return
		}
	}
	st.contentDone()
	open()
	if calls {
		b = x.appendCalls(b, false)
	} else {
		b = append(b, `{"text":""`...)
		if x.sig != "" && !x.show {
			b = x.appendSig(b)
		}
		b = append(b, '}')
	}
	b = append(b, `]},"finishReason":"`...)
	b = append(b, x.finish()...)
	b = append(b, `","index":0}],"usageMetadata":`...)
	b = frameEnd(x.appendTail(x.appendUsage(b)))
	st.event(b)
}

// googleStatus is the canonical status name of an HTTP status.
func googleStatus(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable, 529:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	switch {
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case code < 500:
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}
