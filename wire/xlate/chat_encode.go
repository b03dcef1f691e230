package xlate

import (
	"strconv"
)

// chatEncoder writes neutral events as the chat.completion.chunk stream a
// chat caller reads: a first chunk with the assistant's role, a chunk per
// delta, and, in Close, the finish chunk, the usage chunk when the caller
// asked for it (stream_options.include_usage) and "data: [DONE]". Every
// chunk is appended by hand from a prefix made once (id, object, created,
// model), so that an event costs its delta's escaping and little more.
type chatEncoder struct {
	r *Request
	// head is `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,`.
	head    []byte
	started bool     // the role chunk is written
	open    PartType // the open block's type, 0 when none
	tools   int      // tool calls started; the open one is tools-1
	details int      // reasoning_details indices given out
	detail  int      // the open thinking block's index
	// pending: the open tool call's start chunk waits for its first
	// argument delta (or its end), so that a signature given after its
	// start still goes with it.
	pending                   bool
	callID, callName, callSig string
	finish                    string
	usage                     Usage
	hasUsage                  bool
}

const (
	chatChoiceHead  = `"choices":[{"index":0,"delta":`
	chatChoiceTail  = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"
	chatSSEDone     = "data: [DONE]\n\n"
	chatDetailTail  = `,"format":"` + chatReasoningFormat + `","index":`
	chatRoleDelta   = `{"role":"assistant","content":""}`
	chatErrorPrefix = `data: {"error":{"message":`
)

func chatNewEncoder(r *Request) Encoder {
	if r == nil {
		r = &Request{}
	}
	return &chatEncoder{r: r}
}

// setHead makes the chunks' prefix, with the id made from the upstream's
// and the model the caller asked for (the upstream's when it named none).
func (e *chatEncoder) setHead(upstreamID, upstreamModel string) {
	h := append(make([]byte, 0, 128), `data: {"id":`...)
	h = appendString(h, CallerID("chatcmpl-", upstreamID))
	h = append(h, `,"object":"chat.completion.chunk","created":`...)
	h = strconv.AppendInt(h, chatNow(), 10)
	h = append(h, `,"model":`...)
	model := e.r.Model
	if model == "" {
		model = upstreamModel
	}
	h = appendString(h, model)
	e.head = append(h, ',')
}

// begin appends the start of a content chunk, up to its delta, after the
// role chunk if that is not yet written.
func (e *chatEncoder) begin(dst []byte) []byte {
	dst = e.role(dst)
	dst = append(dst, e.head...)
	return append(dst, chatChoiceHead...)
}

// role appends the first chunk, once.
func (e *chatEncoder) role(dst []byte) []byte {
	if e.started {
		return dst
	}
	e.started = true
	if e.head == nil {
		e.setHead("", "")
	}
	dst = append(dst, e.head...)
	dst = append(dst, chatChoiceHead...)
	dst = append(dst, chatRoleDelta...)
	return append(dst, chatChoiceTail...)
}

func (e *chatEncoder) Encode(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case EvStart:
		if e.head == nil {
			e.setHead(ev.ID, ev.Model)
		}
		return e.role(dst)
	case EvBlockStart:
		return e.blockStart(dst, ev)
	case EvDelta:
		return e.delta(dst, ev.Text)
	case EvSignature:
		return e.signature(dst, ev.Text)
	case EvBlockEnd:
		if e.pending {
			dst = e.callStart(dst)
		}
		e.open = 0
	case EvUsage:
		e.usage, e.hasUsage = ev.Usage, true
	case EvFinish:
		e.finish = ev.Finish
	case EvError:
		dst = append(dst, chatErrorPrefix...)
		dst = appendString(dst, ev.Text)
		typ := ev.Name
		if typ == "" {
			typ = "server_error"
		}
		dst = append(dst, `,"type":`...)
		dst = appendString(dst, typ)
		dst = append(dst, `,"code":null}}`+"\n\n"...)
	}
	return dst
}

func (e *chatEncoder) blockStart(dst []byte, ev *Event) []byte {
	if e.pending {
		dst = e.callStart(dst)
	}
	e.open = ev.Part
	switch ev.Part {
	case Thinking:
		e.detail = e.details
		e.details++
	case RedactedThinking:
		dst = e.begin(dst)
		dst = append(dst, `{"reasoning_details":[{"type":"reasoning.encrypted","data":`...)
		dst = appendString(dst, ev.Text)
		dst = append(dst, chatDetailTail...)
		dst = strconv.AppendInt(dst, int64(e.details), 10)
		dst = append(dst, `}]}`...)
		dst = append(dst, chatChoiceTail...)
		e.details++
	case ToolCall:
		// A Gemini signature may come as the start's Text or as a
		// Signature event before the first argument delta.
		e.pending, e.callID, e.callName, e.callSig = true, ev.ID, ev.Name, ev.Text
		e.tools++
	}
	return dst
}

func (e *chatEncoder) delta(dst []byte, text string) []byte {
	switch e.open {
	case Text:
		if text == "" {
			return dst
		}
		dst = append(e.begin(dst), `{"content":`...)
		dst = appendString(dst, text)
	case Thinking:
		if text == "" {
			return dst
		}
		dst = append(e.begin(dst), `{"reasoning_content":`...)
		dst = appendString(dst, text)
	case ToolCall:
		if e.pending {
			dst = e.callStart(dst)
		}
		if text == "" {
			return dst
		}
		dst = append(e.begin(dst), `{"tool_calls":[{"index":`...)
		dst = strconv.AppendInt(dst, int64(e.tools-1), 10)
		dst = append(dst, `,"function":{"arguments":`...)
		dst = appendString(dst, text)
		dst = append(dst, `}}]`...)
	default:
		return dst
	}
	dst = append(dst, '}')
	return append(dst, chatChoiceTail...)
}

func (e *chatEncoder) signature(dst []byte, sig string) []byte {
	switch {
	case e.open == ToolCall && e.pending:
		e.callSig = sig
	case e.open == Thinking && sig != "":
		dst = e.begin(dst)
		dst = append(dst, `{"reasoning_details":[{"type":"reasoning.text","signature":`...)
		dst = appendString(dst, sig)
		dst = append(dst, chatDetailTail...)
		dst = strconv.AppendInt(dst, int64(e.detail), 10)
		dst = append(dst, `}]}`...)
		dst = append(dst, chatChoiceTail...)
	}
	return dst
}

// callStart appends the open tool call's first chunk: its index, id,
// name, empty arguments and Gemini signature, if any.
func (e *chatEncoder) callStart(dst []byte) []byte {
	e.pending = false
	dst = append(e.begin(dst), `{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(e.tools-1), 10)
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, e.callID)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = appendString(dst, e.callName)
	dst = append(dst, `,"arguments":""}`...)
	if e.callSig != "" {
		dst = append(dst, `,"extra_content":{"google":{"thought_signature":`...)
		dst = appendString(dst, e.callSig)
		dst = append(dst, `}}`...)
	}
	dst = append(dst, `}]}`...)
	return append(dst, chatChoiceTail...)
}

// Close appends the finish chunk, the usage chunk if the caller asked for
// usage and it is known, and [DONE]; after an error, nothing: the error
// chunk already ended the stream.
func (e *chatEncoder) Close(dst []byte, failed bool) []byte {
	if failed {
		return dst
	}
	if e.pending {
		dst = e.callStart(dst)
	}
	dst = e.begin(dst)
	dst = append(dst, `{},"logprobs":null,"finish_reason":"`...)
	dst = append(dst, chatFinishOut(e.finish)...)
	dst = append(dst, `"}]}`+"\n\n"...)
	if e.r.IncludeUsage && e.hasUsage {
		dst = append(dst, e.head...)
		dst = append(dst, `"choices":[],"usage":`...)
		dst = chatAppendUsage(dst, e.usage)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, chatSSEDone...)
}
