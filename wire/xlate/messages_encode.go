package xlate

import "strconv"

// msgEncoder writes neutral events as the stream a Messages caller reads:
// the events Anthropic documents, in its order, with the caller's block
// indexes from 0. message_start waits for the first event after Start, so
// that the input usage an upstream reports at its start (Anthropic,
// Gemini) is in it; otherwise it shows zeros and the final counts come in
// message_delta. Finish and Usage are remembered and written by Close.
type msgEncoder struct {
	model    string
	id       string
	pending  bool // Start seen, message_start not yet written
	started  bool // message_start written
	open     bool // a block is open
	skip     bool // the open block is not shown to the caller
	openType PartType
	index    int // the caller's index of the open (or next) block
	usage    Usage
	hasUsage bool
	finish   string
	stopSeq  string
}

func msgNewEncoder(r *Request) Encoder {
	e := &msgEncoder{}
	if r != nil {
		e.model = r.Model
	}
	return e
}

const (
	msgEvStart      = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
	msgEvBlockStart = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"
	msgEvDelta      = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"
	msgEvBlockStop  = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":"
	msgEvEnd        = "}\n\n"
)

// Encode appends the caller's events for ev.
func (e *msgEncoder) Encode(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case EvStart:
		if !e.started && !e.pending {
			e.pending, e.id = true, CallerID("msg_", ev.ID)
			if e.model == "" {
				e.model = ev.Model
			}
		}
	case EvUsage:
		e.usage, e.hasUsage = ev.Usage, true
		return e.begin(dst)
	case EvBlockStart:
		return e.blockStart(e.closeBlock(e.begin(dst)), ev)
	case EvDelta:
		return e.delta(dst, ev.Text)
	case EvSignature:
		if e.open && !e.skip && e.openType == Thinking {
			dst = e.deltaHead(dst)
			dst = append(dst, `"signature_delta","signature":`...)
			dst = appendString(dst, ev.Text)
			return append(dst, "}}\n\n"...)
		}
	case EvBlockEnd:
		return e.closeBlock(dst)
	case EvFinish:
		e.finish, e.stopSeq = ev.Finish, ev.StopSequence
	case EvError:
		name := ev.Name
		if name == "" {
			name = "api_error"
		}
		dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"...)
		dst = appendString(dst, name)
		dst = append(dst, `,"message":`...)
		dst = appendString(dst, ev.Text)
		return append(dst, "}}\n\n"...)
	}
	return dst
}

// begin appends message_start unless it is written: the input usage
// known so far, no output yet; the cache_creation breakdown only when
// usage is known (the SDKs keep message_start's, and take only the totals
// from message_delta).
func (e *msgEncoder) begin(dst []byte) []byte {
	if e.started {
		return dst
	}
	if !e.pending {
		e.id = CallerID("msg_", "")
	}
	e.started, e.pending = true, false
	dst = append(dst, msgEvStart...)
	dst = appendString(dst, e.id)
	dst = append(dst, `,"type":"message","role":"assistant","model":`...)
	dst = appendString(dst, e.model)
	dst = append(dst, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	u := e.usage
	u.Output = 0
	dst = msgAppendUsage(dst, &u, e.hasUsage)
	return append(dst, "}}\n\n"...)
}

// blockStart appends content_block_start for the block types a Messages
// caller knows; any other block (a ReasoningItem) is left out with its
// events.
func (e *msgEncoder) blockStart(dst []byte, ev *Event) []byte {
	e.open, e.openType, e.skip = true, ev.Part, false
	var block string
	switch ev.Part {
	case Text:
		block = `{"type":"text","text":""}`
	case Thinking:
		block = `{"type":"thinking","thinking":"","signature":""}`
	case RedactedThinking, ToolCall:
	default:
		e.skip = true
		return dst
	}
	dst = append(dst, msgEvBlockStart...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	dst = append(dst, `,"content_block":`...)
	switch ev.Part {
	case RedactedThinking:
		dst = append(dst, `{"type":"redacted_thinking","data":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, '}')
	case ToolCall:
		dst = append(dst, `{"type":"tool_use","id":`...)
		dst = appendString(dst, callIDWithSig(ev.ID, ev.Text))
		dst = append(dst, `,"name":`...)
		dst = appendString(dst, ev.Name)
		dst = append(dst, `,"input":{}}`...)
	default:
		dst = append(dst, block...)
	}
	return append(dst, msgEvEnd...)
}

// deltaHead appends a content_block_delta up to its delta type's value.
func (e *msgEncoder) deltaHead(dst []byte) []byte {
	dst = append(dst, msgEvDelta...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	return append(dst, `,"delta":{"type":`...)
}

func (e *msgEncoder) delta(dst []byte, text string) []byte {
	if !e.open || e.skip {
		return dst
	}
	switch e.openType {
	case Text:
		dst = e.deltaHead(dst)
		dst = append(dst, `"text_delta","text":`...)
	case Thinking:
		dst = e.deltaHead(dst)
		dst = append(dst, `"thinking_delta","thinking":`...)
	case ToolCall:
		dst = e.deltaHead(dst)
		dst = append(dst, `"input_json_delta","partial_json":`...)
	default:
		return dst
	}
	dst = appendString(dst, text)
	return append(dst, "}}\n\n"...)
}

// closeBlock appends content_block_stop for the open block.
func (e *msgEncoder) closeBlock(dst []byte) []byte {
	if !e.open {
		return dst
	}
	e.open = false
	if e.skip {
		return dst
	}
	dst = append(dst, msgEvBlockStop...)
	dst = strconv.AppendInt(dst, int64(e.index), 10)
	e.index++
	return append(dst, msgEvEnd...)
}

// Close appends message_delta (the stop reason and the whole usage, its
// cache_creation breakdown too) and message_stop; a failed stream gets
// neither.
func (e *msgEncoder) Close(dst []byte, failed bool) []byte {
	if failed {
		return dst
	}
	dst = e.closeBlock(e.begin(dst))
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"...)
	dst = appendString(dst, msgStopReason(e.finish))
	dst = append(dst, `,"stop_sequence":`...)
	dst = msgAppendStopSequence(dst, e.finish, e.stopSeq)
	dst = append(dst, `},"usage":`...)
	dst = msgAppendUsage(dst, &e.usage, true)
	dst = append(dst, msgEvEnd...)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
