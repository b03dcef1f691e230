package xlate

import "strconv"

// respEncoder writes neutral events as a responses caller's stream:
// response.created and response.in_progress, then an output item per text
// block, per tool call and per run of thinking blocks, and at Close
// response.completed (or response.incomplete) with the whole response.
// Every event is "event: TYPE\ndata: {"type":TYPE,...,"sequence_number":N}".
// A call of a custom tool is a custom_tool_call item whose input comes
// whole when the call ends (the function's arguments hold it JSON-quoted).
type respEncoder struct {
	echo    *respEcho
	custom  map[string]bool // the request's custom tools
	head    respHead
	seq     int64
	started bool
	done    bool   // an error or the end was written
	out     []byte // the finished output items, joined with commas
	nOut    int    // output items added: the next one's output_index

	// The open block: its type (0: none), item id and output index, and
	// its text, arguments or redacted data so far.
	kind     PartType
	id       string
	idx      int
	buf      []byte
	callID   string
	name     string
	isCustom bool // the open call is a custom tool's
	sig      string
	partOpen bool // a summary part of the open thinking block was added

	// The open reasoning item: of a run of thinking blocks (the blocks
	// for its encrypted_content), or of an upstream's reasoning item
	// (native, enc its encrypted content).
	rsOpen   bool
	rsNative bool
	rsID     string
	rsIdx    int
	rsEnc    string
	thoughts []respThought
	summary  []string

	finish   string
	usage    Usage
	hasUsage bool
}

// respNewEncoder returns the encoder of a stream for r's caller.
func respNewEncoder(r *Request) Encoder {
	if r == nil {
		r = &Request{}
	}
	return &respEncoder{echo: respMakeEcho(r), head: respHead{model: r.Model}, custom: respCustomNames(r)}
}

// Encode appends the events ev stands for.
func (e *respEncoder) Encode(dst []byte, ev *Event) []byte {
	if e.done {
		return dst
	}
	if !e.started {
		dst = e.start(dst, ev)
	}
	switch ev.Kind {
	case EvBlockStart:
		dst = e.endBlock(dst)
		dst = e.blockStart(dst, ev)
	case EvDelta:
		dst = e.delta(dst, ev.Text)
	case EvSignature:
		switch e.kind {
		case Thinking:
			e.sig = ev.Text
		case ReasoningItem:
			e.rsEnc = ev.Text
		}
	case EvBlockEnd:
		dst = e.endBlock(dst)
	case EvUsage:
		e.usage, e.hasUsage = ev.Usage, true
	case EvFinish:
		e.finish = ev.Finish
	case EvError:
		dst = e.fail(dst, ev.Name, ev.Text)
	}
	return dst
}

// Close ends the stream: the open block and reasoning item, then
// response.completed or response.incomplete, unless it failed.
func (e *respEncoder) Close(dst []byte, failed bool) []byte {
	if e.done || failed {
		e.done = true
		return dst
	}
	if !e.started {
		dst = e.start(dst, &Event{})
	}
	dst = e.endBlock(dst)
	dst = e.closeRun(dst)
	status, incomplete := respStatus(e.finish)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	var u *Usage
	if e.hasUsage {
		u = &e.usage
	}
	dst = respBegin(dst, typ)
	dst = append(dst, `"response":`...)
	dst = respAppendResponse(dst, e.echo, &e.head, status, nil, incomplete, e.out, u)
	dst = append(dst, ',')
	e.done = true
	return e.end(dst)
}

// start writes response.created and response.in_progress.
func (e *respEncoder) start(dst []byte, ev *Event) []byte {
	e.started = true
	id := ""
	if ev.Kind == EvStart {
		id = ev.ID
		if e.head.model == "" {
			e.head.model = ev.Model
		}
	}
	e.head.id = CallerID("resp_", id)
	e.head.created = respNow()
	for _, typ := range [...]string{"response.created", "response.in_progress"} {
		dst = respBegin(dst, typ)
		dst = append(dst, `"response":`...)
		dst = respAppendResponse(dst, e.echo, &e.head, "in_progress", nil, "", nil, nil)
		dst = append(dst, ',')
		dst = e.end(dst)
	}
	return dst
}

// fail writes response.failed: the items finished so far and the error.
func (e *respEncoder) fail(dst []byte, code, msg string) []byte {
	if code == "" {
		code = "server_error"
	}
	errObj := append([]byte(`{"code":`), appendString(nil, code)...)
	errObj = append(errObj, `,"message":`...)
	errObj = append(appendString(errObj, msg), '}')
	var u *Usage
	if e.hasUsage {
		u = &e.usage
	}
	dst = respBegin(dst, "response.failed")
	dst = append(dst, `"response":`...)
	dst = respAppendResponse(dst, e.echo, &e.head, "failed", errObj, "", e.out, u)
	dst = append(dst, ',')
	e.done = true
	return e.end(dst)
}

// respBegin opens an event of type typ, up to its fields.
func respBegin(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, "\","...)
}

// end closes an event with its sequence number.
func (e *respEncoder) end(dst []byte) []byte {
	dst = append(dst, `"sequence_number":`...)
	dst = strconv.AppendInt(dst, e.seq, 10)
	e.seq++
	return append(dst, "}\n\n"...)
}

// respRef appends an event's item_id and output_index fields.
func respRef(dst []byte, id string, idx int) []byte {
	dst = append(dst, `"item_id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	return append(dst, ',')
}

// itemEvent writes an output_item.added or .done event for the item
// render appends; a done item is kept for the response's output.
func (e *respEncoder) itemEvent(dst []byte, done bool, idx int, render func([]byte) []byte) []byte {
	typ := "response.output_item.added"
	if done {
		typ = "response.output_item.done"
	}
	dst = respBegin(dst, typ)
	dst = append(dst, `"output_index":`...)
	dst = strconv.AppendInt(dst, int64(idx), 10)
	dst = append(dst, `,"item":`...)
	if !done {
		dst = render(dst)
	} else {
		if len(e.out) > 0 {
			e.out = append(e.out, ',')
		}
		n := len(e.out)
		e.out = render(e.out)
		dst = append(dst, e.out[n:]...)
	}
	dst = append(dst, ',')
	return e.end(dst)
}

// blockStart opens a block's output item (or, for a thinking block, the
// reasoning item of its run when it is the first).
func (e *respEncoder) blockStart(dst []byte, ev *Event) []byte {
	e.kind, e.buf, e.sig, e.partOpen = ev.Part, e.buf[:0], "", false
	switch ev.Part {
	case Text:
		dst = e.closeRun(dst)
		e.id, e.idx = "msg_"+respHex(), e.nOut
		e.nOut++
		id := e.id
		dst = e.itemEvent(dst, false, e.idx, func(b []byte) []byte { return respAppendMessageItem(b, id, false, "") })
		dst = respBegin(dst, "response.content_part.added")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"content_index":0,"part":{"type":"output_text","text":"","annotations":[]},`...)
		return e.end(dst)
	case ToolCall:
		dst = e.closeRun(dst)
		e.callID, e.name, e.isCustom = callIDWithSig(respOr(ev.ID, "call_"), ev.Text), ev.Name, e.custom[ev.Name]
		e.idx = e.nOut
		e.nOut++
		if e.isCustom {
			e.id = "ctc_" + respHex()
			return e.itemEvent(dst, false, e.idx, func(b []byte) []byte {
				return respAppendCustomItem(b, e.id, false, e.callID, e.name, "")
			})
		}
		e.id = "fc_" + respHex()
		return e.itemEvent(dst, false, e.idx, func(b []byte) []byte {
			return respAppendCallItem(b, e.id, false, e.callID, e.name, "")
		})
	case Thinking, RedactedThinking:
		if e.rsOpen && e.rsNative {
			dst = e.closeRun(dst)
		}
		if !e.rsOpen {
			dst = e.openRun(dst, "rs_"+respHex(), false)
		}
		if ev.Part == RedactedThinking {
			e.buf = append(e.buf, ev.Text...)
		}
	case ReasoningItem:
		dst = e.closeRun(dst)
		dst = e.openRun(dst, respOr(ev.ID, "rs_"), true)
	}
	return dst
}

// openRun opens a reasoning item.
func (e *respEncoder) openRun(dst []byte, id string, native bool) []byte {
	e.rsOpen, e.rsNative, e.rsID, e.rsIdx, e.rsEnc = true, native, id, e.nOut, ""
	e.thoughts, e.summary = e.thoughts[:0], e.summary[:0]
	e.nOut++
	return e.itemEvent(dst, false, e.rsIdx, func(b []byte) []byte { return respAppendReasoningItem(b, id, nil, "") })
}

// closeRun ends the open reasoning item: output_item.done with its
// summary and encrypted_content.
func (e *respEncoder) closeRun(dst []byte) []byte {
	if !e.rsOpen {
		return dst
	}
	e.rsOpen = false
	enc := e.rsEnc
	if !e.rsNative {
		enc = respEncodeThinking(e.thoughts)
	}
	return e.itemEvent(dst, true, e.rsIdx, func(b []byte) []byte {
		return respAppendReasoningItem(b, e.rsID, e.summary, enc)
	})
}

// delta adds text to the open block: a text or arguments delta, or a
// thinking delta as reasoning summary text.
func (e *respEncoder) delta(dst []byte, text string) []byte {
	switch e.kind {
	case Text:
		e.buf = append(e.buf, text...)
		dst = respBegin(dst, "response.output_text.delta")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"content_index":0,"delta":`...)
		dst = appendString(dst, text)
		dst = append(dst, `,"logprobs":[],`...)
		return e.end(dst)
	case ToolCall:
		e.buf = append(e.buf, text...)
		if e.isCustom {
			return dst // the input is known when the arguments are whole
		}
		dst = respBegin(dst, "response.function_call_arguments.delta")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"delta":`...)
		dst = appendString(dst, text)
		dst = append(dst, ',')
		return e.end(dst)
	case Thinking, ReasoningItem:
		if text == "" {
			return dst
		}
		if !e.partOpen {
			e.partOpen = true
			dst = e.summaryEvent(dst, "response.reasoning_summary_part.added")
			dst = append(dst, `"part":{"type":"summary_text","text":""},`...)
			dst = e.end(dst)
		}
		e.buf = append(e.buf, text...)
		dst = e.summaryEvent(dst, "response.reasoning_summary_text.delta")
		dst = append(dst, `"delta":`...)
		dst = appendString(dst, text)
		dst = append(dst, ',')
		return e.end(dst)
	case RedactedThinking:
		e.buf = append(e.buf, text...)
	}
	return dst
}

// summaryEvent opens an event of the open reasoning item's summary part,
// up to its own fields.
func (e *respEncoder) summaryEvent(dst []byte, typ string) []byte {
	dst = respBegin(dst, typ)
	dst = respRef(dst, e.rsID, e.rsIdx)
	dst = append(dst, `"summary_index":`...)
	dst = strconv.AppendInt(dst, int64(len(e.summary)), 10)
	return append(dst, ',')
}

// endSummary ends the open summary part: its text done, the part done.
func (e *respEncoder) endSummary(dst []byte) []byte {
	if !e.partOpen {
		return dst
	}
	e.partOpen = false
	text := string(e.buf)
	dst = e.summaryEvent(dst, "response.reasoning_summary_text.done")
	dst = append(dst, `"text":`...)
	dst = appendString(dst, text)
	dst = append(dst, ',')
	dst = e.end(dst)
	dst = e.summaryEvent(dst, "response.reasoning_summary_part.done")
	dst = append(dst, `"part":{"type":"summary_text","text":`...)
	dst = appendString(dst, text)
	dst = append(dst, "},"...)
	dst = e.end(dst)
	e.summary = append(e.summary, text)
	return dst
}

// endBlock ends the open block: a text's or a call's done events and
// output item; a thinking block joins its run's reasoning item, which
// stays open for the next one.
func (e *respEncoder) endBlock(dst []byte) []byte {
	kind := e.kind
	e.kind = 0
	switch kind {
	case Text:
		text := string(e.buf)
		dst = respBegin(dst, "response.output_text.done")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"content_index":0,"text":`...)
		dst = appendString(dst, text)
		dst = append(dst, `,"logprobs":[],`...)
		dst = e.end(dst)
		dst = respBegin(dst, "response.content_part.done")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"content_index":0,"part":{"type":"output_text","text":`...)
		dst = appendString(dst, text)
		dst = append(dst, `,"annotations":[]},`...)
		dst = e.end(dst)
		return e.itemEvent(dst, true, e.idx, func(b []byte) []byte { return respAppendMessageItem(b, e.id, true, text) })
	case ToolCall:
		if e.isCustom {
			return e.endCustom(dst)
		}
		args := respArguments(string(e.buf))
		dst = respBegin(dst, "response.function_call_arguments.done")
		dst = respRef(dst, e.id, e.idx)
		dst = append(dst, `"name":`...)
		dst = appendString(dst, e.name)
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, args)
		dst = append(dst, ',')
		dst = e.end(dst)
		return e.itemEvent(dst, true, e.idx, func(b []byte) []byte {
			return respAppendCallItem(b, e.id, true, e.callID, e.name, args)
		})
	case Thinking:
		text := string(e.buf)
		dst = e.endSummary(dst)
		e.thoughts = append(e.thoughts, respThought{T: "thinking", X: text, S: e.sig})
	case RedactedThinking:
		e.thoughts = append(e.thoughts, respThought{T: "redacted", D: string(e.buf)})
	case ReasoningItem:
		dst = e.endSummary(dst)
		dst = e.closeRun(dst)
	}
	return dst
}

// endCustom ends a custom tool's call: its whole input as one delta, the
// input done, the custom_tool_call item done.
func (e *respEncoder) endCustom(dst []byte) []byte {
	input := respCustomInput(string(e.buf))
	dst = respBegin(dst, "response.custom_tool_call_input.delta")
	dst = respRef(dst, e.id, e.idx)
	dst = append(dst, `"delta":`...)
	dst = appendString(dst, input)
	dst = append(dst, ',')
	dst = e.end(dst)
	dst = respBegin(dst, "response.custom_tool_call_input.done")
	dst = respRef(dst, e.id, e.idx)
	dst = append(dst, `"input":`...)
	dst = appendString(dst, input)
	dst = append(dst, ',')
	dst = e.end(dst)
	return e.itemEvent(dst, true, e.idx, func(b []byte) []byte {
		return respAppendCustomItem(b, e.id, true, e.callID, e.name, input)
	})
}
