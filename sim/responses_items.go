package sim

// The reasoning and function call items of a responses answer.

// outputs is the number of output items.
func (x *respReply) outputs() int64 {
	return x.msgIndex() + 1 + int64(len(x.t.calls))
}

// appendOutput appends output item index: the reasoning item, the message
// item or a function call, in progress or done.
func (x *respReply) appendOutput(b []byte, index int64, done bool) []byte {
	m := x.msgIndex()
	switch {
	case index < m:
		return x.appendReasoning(b, done)
	case index == m:
		return x.appendItem(b, done)
	}
	return appendFunctionCall(b, &x.t.calls[index-m-1], done)
}

// appendReasoning appends the reasoning item: its summary is the
// reasoning text; encrypted_content when the request asked for it.
func (x *respReply) appendReasoning(b []byte, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, x.rsID...)
	b = append(b, `","type":"reasoning","summary":[`...)
	if done {
		b = append(b, `{"type":"summary_text","text":`...)
		b = append(appendString(b, x.t.think), '}')
	}
	b = append(b, ']')
	if done && x.enc != "" {
		b = append(b, `,"encrypted_content":`...)
		b = appendString(b, x.enc)
	}
	return append(b, '}')
}

// appendFunctionCall appends a function_call item, in progress (no
// arguments yet) or completed.
func appendFunctionCall(b []byte, c *toolCall, done bool) []byte {
	b = append(b, `{"id":"`...)
	b = c.appendID(b, "fc_")
	b = append(b, `","type":"function_call","status":"`...)
	args := ""
	if done {
		b = append(b, "completed"...)
		args = c.args
	} else {
		b = append(b, "in_progress"...)
	}
	b = append(b, `","arguments":`...)
	b = appendString(b, args)
	b = append(b, `,"call_id":"`...)
	b = c.appendID(b, "call_")
	b = append(b, `","name":`...)
	b = appendString(b, c.name)
	return append(b, '}')
}

// streamReasoning sends the reasoning item: added, its summary part added,
// the summary text in one delta, text done, part done, item done.
func streamReasoning(st *stream, e *respEvents, x *respReply) bool {
	if !st.event(e.item(x, "response.output_item.added", 0, false)) {
		return false
	}
	for _, ev := range [...]string{
		"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
		"response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
	} {
		e.begin(ev)
		e.ref(x.rsID, 0)
		e.b = append(e.b, `,"summary_index":0`...)
		switch ev {
		case "response.reasoning_summary_part.added":
			e.b = append(e.b, `,"part":{"type":"summary_text","text":""}`...)
		case "response.reasoning_summary_text.delta":
			e.b = appendString(append(e.b, `,"delta":`...), x.t.think)
		case "response.reasoning_summary_text.done":
			e.b = appendString(append(e.b, `,"text":`...), x.t.think)
		default:
			e.b = append(appendString(append(e.b, `,"part":{"type":"summary_text","text":`...), x.t.think), '}')
		}
		if !st.event(e.end()) {
			return false
		}
	}
	return st.event(e.item(x, "response.output_item.done", 0, true))
}

// streamFunctionCalls sends each function_call item: added, its
// arguments in two deltas, arguments done, item done.
func streamFunctionCalls(st *stream, e *respEvents, x *respReply) bool {
	for i := range x.t.calls {
		c := &x.t.calls[i]
		index := x.msgIndex() + 1 + int64(i)
		if !st.event(e.item(x, "response.output_item.added", index, false)) {
			return false
		}
		var id [24]byte
		itemID := c.appendID(id[:0], "fc_")
		a, b := c.argPieces()
		for _, piece := range [2]string{a, b} {
			e.begin("response.function_call_arguments.delta")
			e.ref(itemID, index)
			e.b = appendString(append(e.b, `,"delta":`...), piece)
			if !st.event(e.end()) {
				return false
			}
		}
		e.begin("response.function_call_arguments.done")
		e.ref(itemID, index)
		e.b = appendString(append(e.b, `,"arguments":`...), c.args)
		if !st.event(e.end()) || !st.event(e.item(x, "response.output_item.done", index, true)) {
			return false
		}
	}
	return true
}
