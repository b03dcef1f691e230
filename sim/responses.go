package sim

import (
	"net/http"
)

const responsesPath = "/v1/responses"

// respReply is what every piece of a responses answer is written from.
type respReply struct {
	id, itemID []byte
	created    int64
	model      string
	maxOut     *int64
	t          turn
	c          Counts
	// compaction, when set, is the encrypted_content of the one output
	// item, a compaction (the input had a compaction_trigger item).
	compaction []byte
	// effort is the request's reasoning.effort; rsID the reasoning item's
	// id and enc its encrypted_content ("" unless the request's include
	// asked for it).
	effort string
	rsID   []byte
	enc    string
}

// finalStatus is the status of the finished response.
func (x *respReply) finalStatus() string {
	if x.t.rep.capped {
		return "incomplete"
	}
	return "completed"
}

// msgIndex is the output_index of the message item: after the reasoning
// item when there is one.
func (x *respReply) msgIndex() int64 {
	if x.t.think != "" {
		return 1
	}
	return 0
}

// responses answers POST /v1/responses.
func (s *Server) responses(w http.ResponseWriter, r *http.Request, cfg *config) {
	sc := getScratch()
	defer putScratch(sc)
	req, ok := readRequest(w, r, sc, shapeOpenAI, responsesPath, parseResponses)
	if !ok {
		return
	}
	c, echo, limit := responsesPlan(req)
	if req.PromptCacheKey != "" {
		kp := responsesKeyedPrefix(req)
		c.Cached = kp.cached(&s.cache, s.now().UnixNano())
	}
	var idBuf, itemBuf, rsBuf [48]byte
	x := respReply{
		id:      s.id(idBuf[:0], "resp_"),
		itemID:  s.id(itemBuf[:0], "msg_"),
		created: s.now().Unix(),
		model:   req.Model,
		maxOut:  req.MaxOutputTokens,
		t:       responsesTurn(req, echo, limit),
	}
	if req.Reasoning != nil {
		x.effort = req.Reasoning.Effort
	}
	c.setOutput(&x.t)
	if x.t.think != "" {
		x.rsID = s.id(rsBuf[:0], "rs_")
		if req.includes("reasoning.encrypted_content") {
			x.enc = encryptedReasoning(req.Model, x.t.think)
		}
	}
	if req.Input.compactionTrigger() {
		x.t = turn{}
		c = Counts{Prompt: c.Prompt, Cached: c.Cached, Completion: CompactTokens}
		x.itemID = s.id(itemBuf[:0], "cmp_")
		x.compaction = appendHex([]byte("sim-compaction-"), fnvBytes(fnvString(fnvOffset, req.Model), sc.body.Bytes()), 16)
	}
	x.c = c

	if !req.Stream {
		sc.out = x.appendResponse(sc.out, true)
		writeJSON(w, http.StatusOK, sc.out)
		return
	}

	s.responsesStream(w, r, cfg, sc, &x)
}

// respEvents frames the events of a streamed responses answer into b,
// each with its type and the next sequence number.
type respEvents struct {
	b   []byte
	seq int64
}

// begin starts event name with its type and sequence number.
func (e *respEvents) begin(name string) {
	b := frameEvent(e.b[:0], name)
	b = append(b, `{"type":"`...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	e.b = appendInt(b, e.seq)
	e.seq++
}

// end closes the event begun.
func (e *respEvents) end() []byte {
	e.b = frameEnd(append(e.b, '}'))
	return e.b
}

// item frames event name carrying output item index of x, in progress or
// done.
func (e *respEvents) item(x *respReply, name string, index int64, done bool) []byte {
	e.begin(name)
	e.b = append(e.b, `,"output_index":`...)
	e.b = appendInt(e.b, index)
	e.b = append(e.b, `,"item":`...)
	e.b = x.appendOutput(e.b, index, done)
	return e.end()
}

// ref appends the item_id and output_index fields of an event.
func (e *respEvents) ref(itemID []byte, index int64) {
	e.b = append(e.b, `,"item_id":"`...)
	e.b = append(e.b, itemID...)
	e.b = append(e.b, `","output_index":`...)
	e.b = appendInt(e.b, index)
}

// response frames event name carrying x's response, in progress or done.
func (e *respEvents) response(x *respReply, name string, done bool) []byte {
	e.begin(name)
	e.b = append(e.b, `,"response":`...)
	e.b = x.appendResponse(e.b, done)
	return e.end()
}

// responsesStream streams the answer: created and in_progress, then the
// compaction item, or the reasoning item, the text item with its content
// part and the function call items; then the final response.
func (s *Server) responsesStream(w http.ResponseWriter, r *http.Request, cfg *config, sc *scratch, x *respReply) {
	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	e := respEvents{b: sc.out[:0]}
	defer func() { sc.out = e.b }()
	if !st.event(e.response(x, "response.created", false)) || !st.event(e.response(x, "response.in_progress", false)) {
		return
	}
	if x.compaction != nil {
		// One item, whole when added; its done event is the one content
		// event (timing and cuts apply to it).
		if !st.event(e.item(x, "response.output_item.added", 0, true)) || !st.content(0, e.item(x, "response.output_item.done", 0, true)) {
			return
		}
		st.contentDone()
		st.event(e.response(x, "response.completed", true))
		return
	}
	if x.t.think != "" && !streamReasoning(st, &e, x) {
		return
	}
	m := x.msgIndex()
	if !st.event(e.item(x, "response.output_item.added", m, false)) || !streamText(st, &e, x, cfg.chunks) {
		return
	}
	if !st.event(e.item(x, "response.output_item.done", m, true)) || !streamFunctionCalls(st, &e, x) {
		return
	}
	st.event(e.response(x, "response."+x.finalStatus(), true))
}

// streamText writes the text item's content part: added, a delta per
// content chunk of n, the text done and the part done. It reports whether
// the stream is still open.
func streamText(st *stream, e *respEvents, x *respReply, n int) bool {
	m := x.msgIndex()
	e.begin("response.content_part.added")
	e.ref(x.itemID, m)
	e.b = append(e.b, `,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
	if !st.event(e.end()) {
		return false
	}
	for i := 0; i < n; i++ {
		e.begin("response.output_text.delta")
		e.ref(x.itemID, m)
		e.b = append(e.b, `,"content_index":0,"delta":`...)
		e.b = appendString(e.b, x.t.rep.chunk(i, n))
		e.b = append(e.b, `,"logprobs":[]`...)
		if !st.content(i, e.end()) {
			return false
		}
	}
	st.contentDone()
	e.begin("response.output_text.done")
	e.ref(x.itemID, m)
	e.b = append(e.b, `,"content_index":0,"text":`...)
	e.b = appendString(e.b, x.t.rep.text)
	e.b = append(e.b, `,"logprobs":[]`...)
	if !st.event(e.end()) {
		return false
	}
	e.begin("response.content_part.done")
	e.ref(x.itemID, m)
	e.b = append(e.b, `,"content_index":0,"part":`...)
	e.b = x.appendPart(e.b)
	return st.event(e.end())
}

// appendPart appends the finished output_text part.
func (x *respReply) appendPart(b []byte) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = appendString(b, x.t.rep.text)
	return append(b, '}')
}

// appendItem appends the output message item, empty and in progress or
// finished.
func (x *respReply) appendItem(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, x.itemID...)
	if x.compaction != nil {
		b = append(b, `","type":"compaction","encrypted_content":"`...)
		b = append(b, x.compaction...)
		return append(b, `"}`...)
	}
	b = append(b, `","type":"message","status":"`...)
	if !done {
		b = append(b, `in_progress","content":[]`...)
	} else {
		b = append(b, x.finalStatus()...)
		b = append(b, `","content":[`...)
		b = x.appendPart(b)
		b = append(b, ']')
	}
	return append(b, `,"role":"assistant"}`...)
}

// appendResponse appends the response object, in progress (no output, no
// usage) or finished.
func (x *respReply) appendResponse(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, x.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = appendInt(b, x.created)
	b = append(b, `,"status":"`...)
	switch {
	case !done:
		b = append(b, `in_progress","background":false,"error":null,"incomplete_details":null`...)
	case x.t.rep.capped:
		b = append(b, `incomplete","background":false,"error":null,"incomplete_details":{"reason":"max_output_tokens"}`...)
	default:
		b = append(b, `completed","background":false,"error":null,"incomplete_details":null`...)
	}
	b = append(b, `,"instructions":null,"max_output_tokens":`...)
	if x.maxOut != nil {
		b = appendInt(b, *x.maxOut)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, x.model)
	b = append(b, `,"output":[`...)
	if done {
		for i, n := int64(0), x.outputs(); i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = x.appendOutput(b, i, true)
		}
	}
	b = append(b, `],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":`...)
	if x.effort != "" {
		b = appendString(b, x.effort)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"summary":null},"service_tier":"default","store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":`...)
	if done {
		b = appendResponsesUsage(b, x.c)
	} else {
		b = append(b, "null"...)
	}
	return append(b, `,"user":null,"metadata":{}}`...)
}

// appendResponsesUsage appends a responses usage object.
func appendResponsesUsage(b []byte, c Counts) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, c.Prompt)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, c.Cached)
	b = append(b, `},"output_tokens":`...)
	b = appendInt(b, c.Completion)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, c.Reasoning)
	b = append(b, `},"total_tokens":`...)
	b = appendInt(b, c.Prompt+c.Completion)
	return append(b, '}')
}
