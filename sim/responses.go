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
	rep        reply
	c          Counts
	// compaction, when set, is the encrypted_content of the one output
	// item, a compaction (the input had a compaction_trigger item).
	compaction []byte
}

// finalStatus is the status of the finished response.
func (x *respReply) finalStatus() string {
	if x.rep.capped {
		return "incomplete"
	}
	return "completed"
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
	var idBuf, itemBuf [48]byte
	x := respReply{
		id:      s.id(idBuf[:0], "resp_"),
		itemID:  s.id(itemBuf[:0], "msg_"),
		created: s.now().Unix(),
		model:   req.Model,
		maxOut:  req.MaxOutputTokens,
		rep:     buildReply(req.Model, echo, limit),
	}
	c.Completion, c.Capped = x.rep.words(), x.rep.capped
	if req.Input.compactionTrigger() {
		x.rep = reply{}
		c.Completion, c.Capped = CompactTokens, false
		x.itemID = s.id(itemBuf[:0], "cmp_")
		x.compaction = appendHex([]byte("sim-compaction-"), fnvBytes(fnvString(fnvOffset, req.Model), sc.body.Bytes()), 16)
	}
	x.c = c

	if !req.Stream {
		sc.out = x.appendResponse(sc.out, true)
		writeJSON(w, http.StatusOK, sc.out)
		return
	}

	st, ok := s.startStream(w, r, cfg)
	if !ok {
		return
	}
	seq := int64(0)
	b := sc.out[:0]
	// begin starts event `name` with its type and sequence number.
	begin := func(name string) {
		b = frameEvent(b[:0], name)
		b = append(b, `{"type":"`...)
		b = append(b, name...)
		b = append(b, `","sequence_number":`...)
		b = appendInt(b, seq)
		seq++
	}
	end := func() { b = frameEnd(append(b, '}')) }
	// itemEvent and responseEvent frame event `name` carrying the output
	// item or the response, in progress or done.
	itemEvent := func(name string, done bool) {
		begin(name)
		b = append(b, `,"output_index":0,"item":`...)
		b = x.appendItem(b, done)
		end()
	}
	responseEvent := func(name string, done bool) {
		begin(name)
		b = append(b, `,"response":`...)
		b = x.appendResponse(b, done)
		end()
	}
	defer func() { sc.out = b }()

	for _, name := range [2]string{"response.created", "response.in_progress"} {
		responseEvent(name, false)
		if !st.event(b) {
			return
		}
	}
	if x.compaction != nil {
		// One item, whole when added; its done event is the one content
		// event (timing and cuts apply to it).
		itemEvent("response.output_item.added", true)
		if !st.event(b) {
			return
		}
		itemEvent("response.output_item.done", true)
		if !st.content(0, b) {
			return
		}
		st.contentDone()
		responseEvent("response.completed", true)
		st.event(b)
		return
	}
	itemEvent("response.output_item.added", false)
	if !st.event(b) {
		return
	}
	begin("response.content_part.added")
	b = x.appendPartRef(b)
	b = append(b, `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
	end()
	if !st.event(b) {
		return
	}
	n := cfg.chunks
	for i := 0; i < n; i++ {
		begin("response.output_text.delta")
		b = x.appendPartRef(b)
		b = append(b, `,"delta":`...)
		b = appendString(b, x.rep.chunk(i, n))
		b = append(b, `,"logprobs":[]`...)
		end()
		if !st.content(i, b) {
			return
		}
	}
	st.contentDone()
	begin("response.output_text.done")
	b = x.appendPartRef(b)
	b = append(b, `,"text":`...)
	b = appendString(b, x.rep.text)
	b = append(b, `,"logprobs":[]`...)
	end()
	if !st.event(b) {
		return
	}
	begin("response.content_part.done")
	b = x.appendPartRef(b)
	b = append(b, `,"part":`...)
	b = x.appendPart(b)
	end()
	if !st.event(b) {
		return
	}
	itemEvent("response.output_item.done", true)
	if !st.event(b) {
		return
	}
	responseEvent("response."+x.finalStatus(), true)
	st.event(b)
}

// appendPartRef appends the item_id/output_index/content_index fields.
func (x *respReply) appendPartRef(b []byte) []byte {
	b = append(b, `,"item_id":"`...)
	b = append(b, x.itemID...)
	return append(b, `","output_index":0,"content_index":0`...)
}

// appendPart appends the finished output_text part.
func (x *respReply) appendPart(b []byte) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":`...)
	b = appendString(b, x.rep.text)
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
	case x.rep.capped:
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
		b = x.appendItem(b, true)
	}
	b = append(b, `],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"service_tier":"default","store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":`...)
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
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	b = appendInt(b, c.Prompt+c.Completion)
	return append(b, '}')
}
