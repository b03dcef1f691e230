package xlate

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// msgEventWire is the data of any Messages stream event.
type msgEventWire struct {
	Type         string         `json:"type"`
	Index        *int           `json:"index"`
	Message      *msgAnswerWire `json:"message"`
	ContentBlock *msgBlockWire  `json:"content_block"`
	Delta        *msgDeltaWire  `json:"delta"`
	Usage        *msgUsageWire  `json:"usage"`
	Error        *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// msgDeltaWire is the delta of content_block_delta and of message_delta.
type msgDeltaWire struct {
	Type         string  `json:"type"`
	Text         string  `json:"text"`
	Thinking     string  `json:"thinking"`
	PartialJSON  string  `json:"partial_json"`
	Signature    string  `json:"signature"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// msgDeltaKind is a content_block_delta's delta type.
type msgDeltaKind uint8

const (
	msgDeltaOther msgDeltaKind = iota // citations_delta and types to come: ignored
	msgDeltaText
	msgDeltaThinking
	msgDeltaJSON
	msgDeltaSignature
)

// msgDecoder reads an Anthropic upstream's stream (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping,
// error) into neutral events. A thinking block's signature is given at
// its end, after all its text.
type msgDecoder struct {
	ev       Event // the event being emitted, reused
	started  bool  // message_start seen
	stopped  bool  // message_stop seen
	failed   bool  // an error event seen
	finished bool  // Finish emitted
	open     bool  // a content block is open
	openType PartType
	index    int    // the open block's index upstream
	block    int    // the neutral number of the open (or next) block
	args     []byte // the open tool call's partial_json so far
	sig      string // the open thinking block's signature
	usage    msgUsageState
}

func msgNewDecoder() Decoder { return &msgDecoder{} }

// Event decodes one upstream event. Events of types this package does not
// know are ignored, as Anthropic asks of its clients; so are events
// without data, and anything after message_stop or an error.
func (d *msgDecoder) Event(_ string, data []byte, emit func(*Event)) error {
	if d.stopped || d.failed || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if kind, index, text, ok := msgFastDelta(data); ok && d.started {
		return d.delta(kind, index, text, emit)
	}
	var w msgEventWire
	if err := json.Unmarshal(data, &w); err != nil {
		return msgMalformedJSON("stream event", err)
	}
	switch w.Type {
	case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
		if !d.started {
			return malformed("a %s event before message_start", w.Type)
		}
	}
	switch w.Type {
	case "message_start":
		return d.start(&w, emit)
	case "content_block_start":
		return d.blockStart(&w, emit)
	case "content_block_delta":
		if w.Index == nil || w.Delta == nil {
			return malformed("content_block_delta without index or delta")
		}
		kind, text := msgDeltaOf(w.Delta)
		return d.delta(kind, *w.Index, text, emit)
	case "content_block_stop":
		return d.blockStop(&w, emit)
	case "message_delta":
		return d.messageDelta(&w, emit)
	case "message_stop":
		if d.open {
			return malformed("message_stop inside a content block")
		}
		d.stopped = true
		d.finish(FinishStop, "", emit)
	case "error":
		d.failed = true
		d.ev = Event{Kind: EvError, Name: "api_error", Text: "upstream error"}
		if w.Error != nil {
			d.ev.Name, d.ev.Text = w.Error.Type, w.Error.Message
		}
		emit(&d.ev)
	}
	return nil
}

// End checks that the stream ended where it may: after message_stop (or
// an error event), never inside a tool call.
func (d *msgDecoder) End(func(*Event)) error {
	switch {
	case d.failed:
		return nil
	case d.open && d.openType == ToolCall:
		return malformed("the stream ended inside a tool call")
	case !d.stopped:
		return malformed("the stream ended before message_stop")
	}
	return nil
}

func (d *msgDecoder) start(w *msgEventWire, emit func(*Event)) error {
	if d.started {
		return malformed("a second message_start")
	}
	if w.Message == nil {
		return malformed("message_start without a message")
	}
	d.started = true
	d.ev = Event{Kind: EvStart, ID: w.Message.ID, Model: w.Message.Model}
	emit(&d.ev)
	return d.addUsage(w.Message.Usage, emit)
}

// addUsage merges a usage object and emits the usage known so far.
func (d *msgDecoder) addUsage(w *msgUsageWire, emit func(*Event)) error {
	if w == nil {
		return nil
	}
	if err := d.usage.merge(w); err != nil {
		return err
	}
	u, err := d.usage.usage()
	if err != nil {
		return err
	}
	d.ev = Event{Kind: EvUsage, Usage: u}
	emit(&d.ev)
	return nil
}

func (d *msgDecoder) blockStart(w *msgEventWire, emit func(*Event)) error {
	if d.open {
		return malformed("a content block started inside another")
	}
	b := w.ContentBlock
	if w.Index == nil || b == nil {
		return malformed("content_block_start without index or content_block")
	}
	d.ev = Event{Kind: EvBlockStart, Block: d.block}
	var first string // text the block starts with
	switch b.Type {
	case "text":
		d.ev.Part = Text
		if b.Text != nil {
			first = *b.Text
		}
	case "thinking":
		d.ev.Part, d.sig = Thinking, b.Signature
		if b.Thinking != nil {
			first = *b.Thinking
		}
	case "redacted_thinking":
		d.ev.Part = RedactedThinking
		if b.Data != nil {
			d.ev.Text = *b.Data
		}
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			return malformed("a tool_use block without id or name")
		}
		d.ev.Part, d.ev.ID, d.ev.Name = ToolCall, b.ID, b.Name
		if !msgAbsent(b.Input) {
			args, ok := msgAppendObject(d.args[:0], string(b.Input))
			if !ok {
				return malformed("a tool_use input that is not a JSON object")
			}
			if string(args) != "{}" {
				first = string(args)
			}
		}
	default:
		return malformed("a %s block cannot be translated", msgQuote(b.Type))
	}
	d.open, d.openType, d.index, d.args = true, d.ev.Part, *w.Index, d.args[:0]
	emit(&d.ev)
	if first != "" {
		if d.openType == ToolCall {
			d.args = append(d.args, first...)
		}
		d.ev = Event{Kind: EvDelta, Block: d.block, Text: first}
		emit(&d.ev)
	}
	return nil
}

// msgDeltaOf is the kind and text of a content_block_delta's delta.
func msgDeltaOf(dw *msgDeltaWire) (msgDeltaKind, string) {
	switch dw.Type {
	case "text_delta":
		return msgDeltaText, dw.Text
	case "thinking_delta":
		return msgDeltaThinking, dw.Thinking
	case "input_json_delta":
		return msgDeltaJSON, dw.PartialJSON
	case "signature_delta":
		return msgDeltaSignature, dw.Signature
	}
	return msgDeltaOther, ""
}

// msgDeltaBlock is the block type each kind of delta belongs to.
var msgDeltaBlock = [...]PartType{msgDeltaText: Text, msgDeltaThinking: Thinking, msgDeltaJSON: ToolCall, msgDeltaSignature: Thinking}

func (d *msgDecoder) delta(kind msgDeltaKind, index int, text string, emit func(*Event)) error {
	if !d.open || index != d.index {
		return malformed("a content_block_delta outside its content block")
	}
	if kind == msgDeltaOther {
		return nil
	}
	if msgDeltaBlock[kind] != d.openType {
		return malformed("a delta of the wrong type for its content block")
	}
	switch {
	case kind == msgDeltaSignature:
		d.sig = text
		return nil
	case text == "":
		return nil
	case kind == msgDeltaJSON:
		d.args = append(d.args, text...)
	}
	d.ev = Event{Kind: EvDelta, Block: d.block, Text: text}
	emit(&d.ev)
	return nil
}

func (d *msgDecoder) blockStop(w *msgEventWire, emit func(*Event)) error {
	if !d.open || w.Index == nil || *w.Index != d.index {
		return malformed("a content_block_stop outside its content block")
	}
	if d.openType == ToolCall && len(d.args) > 0 {
		if _, ok := msgAppendObject(nil, string(d.args)); !ok {
			return malformed("malformed tool-argument stream")
		}
	}
	if d.sig != "" {
		d.ev = Event{Kind: EvSignature, Block: d.block, Text: d.sig}
		emit(&d.ev)
	}
	d.ev = Event{Kind: EvBlockEnd, Block: d.block, Part: d.openType}
	emit(&d.ev)
	d.open, d.sig, d.args = false, "", d.args[:0]
	d.block++
	return nil
}

func (d *msgDecoder) messageDelta(w *msgEventWire, emit func(*Event)) error {
	if d.open {
		return malformed("message_delta inside a content block")
	}
	if err := d.addUsage(w.Usage, emit); err != nil {
		return err
	}
	if w.Delta != nil && w.Delta.StopReason != nil {
		seq := ""
		if w.Delta.StopSequence != nil {
			seq = *w.Delta.StopSequence
		}
		d.finish(msgFinish(*w.Delta.StopReason), seq, emit)
	}
	return nil
}

// finish emits Finish once.
func (d *msgDecoder) finish(reason, seq string, emit func(*Event)) {
	if d.finished {
		return
	}
	d.finished = true
	if reason != FinishStopSequence {
		seq = ""
	}
	d.ev = Event{Kind: EvFinish, Finish: reason, StopSequence: seq}
	emit(&d.ev)
}

// The exact start of a content_block_delta as Anthropic writes it, and of
// the deltas that carry text.
var (
	msgFastHead   = []byte(`{"type":"content_block_delta","index":`)
	msgFastDeltas = [...]struct {
		kind msgDeltaKind
		head []byte
	}{
		{msgDeltaText, []byte(`,"delta":{"type":"text_delta","text":`)},
		{msgDeltaJSON, []byte(`,"delta":{"type":"input_json_delta","partial_json":`)},
		{msgDeltaThinking, []byte(`,"delta":{"type":"thinking_delta","thinking":`)},
	}
)

// msgFastDelta reads a text, thinking or tool-argument delta written as
// Anthropic writes it, without a JSON decoder; ok is false for anything
// else, which the decoder then reads in full.
func msgFastDelta(data []byte) (kind msgDeltaKind, index int, text string, ok bool) {
	rest, found := bytes.CutPrefix(data, msgFastHead)
	if !found {
		return 0, 0, "", false
	}
	n := 0
	for n < len(rest) && n < 9 && rest[n] >= '0' && rest[n] <= '9' {
		index = index*10 + int(rest[n]-'0')
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return 0, 0, "", false
	}
	rest = rest[n:]
	for _, fd := range msgFastDeltas {
		if s, found := bytes.CutPrefix(rest, fd.head); found {
			text, ok = msgFastString(s)
			return fd.kind, index, text, ok
		}
	}
	return 0, 0, "", false
}

// msgFastString reads s, the rest of a delta from a string's opening
// quote, which must be the string and `}}`.
func msgFastString(s []byte) (string, bool) {
	if len(s) == 0 || s[0] != '"' {
		return "", false
	}
	escaped := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return "", false
		case c == '"':
			if !bytes.Equal(bytes.TrimRight(s[i+1:], " \t\r\n"), []byte("}}")) {
				return "", false
			}
			if !escaped && utf8.Valid(s[1:i]) {
				return string(s[1:i]), true
			}
			return msgUnquote(s[1:i])
		}
	}
	return "", false
}

// msgUnquote decodes the inside of a JSON string exactly as encoding/json
// does: escapes, surrogate pairs (a lone surrogate is U+FFFD), and each
// byte of invalid UTF-8 as U+FFFD; ok is false where encoding/json fails.
func msgUnquote(s []byte) (string, bool) {
	buf := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			e := s[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r := msgHex4(s[i:])
				if r < 0 {
					return "", false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if len(s) > i+1 && s[i] == '\\' && s[i+1] == 'u' {
						r2 = msgHex4(s[i+2:])
					}
					if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
						i += 6
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, r)
			} else {
				buf = append(buf, s[i:i+size]...)
			}
			i += size
		}
	}
	return string(buf), true
}

// msgHex4 is the rune of four hex digits at the start of s, or -1.
func msgHex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
