package xlate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// chatChunkWire is one chat.completion.chunk of an upstream's stream, or
// an error in its place: {"error":{...}} as OpenAI writes it, or vLLM's
// {"object":"error","message":...,"type":...}.
type chatChunkWire struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *chatUsageWire    `json:"usage"`
	Error   json.RawMessage   `json:"error"`
	Message string            `json:"message"`
	Type    string            `json:"type"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDeltaWire `json:"delta"`
	FinishReason *string       `json:"finish_reason"`
}

type chatDeltaWire struct {
	Content          string                `json:"content"`
	ReasoningContent string                `json:"reasoning_content"`
	Reasoning        string                `json:"reasoning"`
	ReasoningDetails []chatReasoningDetail `json:"reasoning_details"`
	Refusal          string                `json:"refusal"`
	ToolCalls        []chatToolDeltaWire   `json:"tool_calls"`
}

type chatToolDeltaWire struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	ExtraContent *chatGoogle `json:"extra_content"`
}

// errorOf is the error a chunk stands for, ok false when it is none.
func (c *chatChunkWire) errorOf() (typ, msg string, ok bool) {
	if c.Object == "error" {
		typ, msg = c.Type, c.Message
	} else if chatIsNull(c.Error) {
		return "", "", false
	} else {
		var e struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		if json.Unmarshal(c.Error, &e) != nil {
			_ = json.Unmarshal(c.Error, &e.Message) // {"error":"text"}
		}
		typ, msg = e.Type, e.Message
		if typ == "" {
			_ = json.Unmarshal(e.Code, &typ) // a string code names the error
		}
	}
	if typ == "" {
		typ = "api_error"
	}
	return typ, msg, true
}

// chatDecoder reads an upstream's chat stream into neutral events:
// reasoning deltas into Thinking blocks (a signature in reasoning_details
// ends one), content and refusal into Text blocks, each tool call index
// into a ToolCall block, finish_reason into the open block's end and
// Finish, each usage object into Usage.
type chatDecoder struct {
	started, finished bool
	failed, done      bool
	block             int      // the open block's number, or the next one's
	open              PartType // the open block's type, 0 when none
	signed            bool     // the open thinking block has its signature
	toolIdx           int      // the open tool call's upstream index
	toolID            string
	seen              []int // the upstream indices of tool calls begun
	nextIdx           int   // above every index in seen
	args              []byte
	generated         int // ids made for calls that came without one
	tools             int
	ev                Event         // the event emitted, reused
	chunk             chatChunkWire // the chunk read, reused
	cache             chatScanCache
}

func chatNewDecoder() Decoder { return &chatDecoder{} }

var chatMalformedArgs = &ErrMalformed{Msg: "malformed tool-argument stream"}

func (d *chatDecoder) send(emit func(*Event), ev Event) {
	d.ev = ev
	emit(&d.ev)
}

func (d *chatDecoder) Event(_ string, data []byte, emit func(*Event)) error {
	if d.done || d.failed {
		return nil
	}
	data = bytes.TrimSpace(data)
	switch {
	case len(data) == 0:
		return nil
	case string(data) == "[DONE]":
		d.done = true
		return nil
	}
	c := &d.chunk
	*c = chatChunkWire{Choices: c.Choices[:0]}
	if !chatFastChunk(data, c, &d.cache) {
		*c = chatChunkWire{}
		if err := json.Unmarshal(data, c); err != nil {
			return chatMalformedJSON("a stream chunk", err)
		}
	}
	if typ, msg, ok := c.errorOf(); ok {
		d.failed = true
		d.send(emit, Event{Kind: EvError, Name: typ, Text: msg})
		return nil
	}
	if !d.started {
		d.started = true
		d.send(emit, Event{Kind: EvStart, ID: c.ID, Model: c.Model})
	}
	finish := ""
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // n is 1: no other choice is asked for
		}
		if err := d.delta(&ch.Delta, emit); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" && !d.finished {
			finish = *ch.FinishReason
		}
	}
	if finish != "" {
		if err := d.closeBlock(emit); err != nil {
			return err
		}
	}
	if c.Usage != nil {
		u, err := c.Usage.usage()
		if err != nil {
			return err
		}
		d.send(emit, Event{Kind: EvUsage, Usage: u})
	}
	if finish != "" {
		d.finished = true
		d.send(emit, Event{Kind: EvFinish, Finish: chatFinishIn(finish, d.tools > 0)})
	}
	return nil
}

// delta reads one choice's delta, in the order a delta is read: reasoning,
// then its details (whose text repeats reasoning_content where both are
// given), content, refusal, tool calls.
func (d *chatDecoder) delta(dl *chatDeltaWire, emit func(*Event)) error {
	think := dl.ReasoningContent
	if think == "" {
		think = dl.Reasoning
	}
	if d.finished {
		if think != "" || dl.Content != "" || dl.Refusal != "" || len(dl.ToolCalls) > 0 || len(dl.ReasoningDetails) > 0 {
			return malformed("content after finish_reason")
		}
		return nil
	}
	if think != "" {
		if err := d.thinking(think, emit); err != nil {
			return err
		}
	}
	for i := range dl.ReasoningDetails {
		if err := d.detail(&dl.ReasoningDetails[i], think != "", emit); err != nil {
			return err
		}
	}
	for _, text := range [...]string{dl.Content, dl.Refusal} {
		if text == "" {
			continue
		}
		if d.open != Text {
			if err := d.closeBlock(emit); err != nil {
				return err
			}
			d.startBlock(emit, Event{Part: Text})
		}
		d.send(emit, Event{Kind: EvDelta, Block: d.block, Text: text})
	}
	for i := range dl.ToolCalls {
		if err := d.tool(&dl.ToolCalls[i], emit); err != nil {
			return err
		}
	}
	return nil
}

// thinking adds text to the open thinking block, or to a new one when the
// open block is another or already signed.
func (d *chatDecoder) thinking(text string, emit func(*Event)) error {
	if d.open != Thinking || d.signed {
		if err := d.closeBlock(emit); err != nil {
			return err
		}
		d.startBlock(emit, Event{Part: Thinking})
	}
	d.send(emit, Event{Kind: EvDelta, Block: d.block, Text: text})
	return nil
}

// detail reads a reasoning_details entry: text (unless reasoning_content
// carried it), a signature that ends the thinking block, encrypted
// reasoning as a block of its own. Entries of the thinking's format (or
// unmarked) are signed or redacted thinking; OpenAI's encrypted entries a
// ReasoningItem; other entries give their text only.
func (d *chatDecoder) detail(det *chatReasoningDetail, hasText bool, emit func(*Event)) error {
	ours := det.Format == "" || det.Format == chatReasoningFormat
	switch det.Type {
	case "reasoning.text", "reasoning.summary":
		text := det.Text
		if det.Type == "reasoning.summary" {
			text = det.Summary
		}
		if text != "" && !hasText {
			if err := d.thinking(text, emit); err != nil {
				return err
			}
		}
		if det.Signature == "" || !ours {
			return nil
		}
		if d.open != Thinking || d.signed {
			if err := d.closeBlock(emit); err != nil {
				return err
			}
			d.startBlock(emit, Event{Part: Thinking})
		}
		d.send(emit, Event{Kind: EvSignature, Block: d.block, Text: det.Signature})
		d.signed = true
	case "reasoning.encrypted":
		if !ours && det.Format != "openai-responses-v1" {
			return nil
		}
		if err := d.closeBlock(emit); err != nil {
			return err
		}
		if ours {
			d.startBlock(emit, Event{Part: RedactedThinking, Text: det.Data})
		} else {
			d.startBlock(emit, Event{Part: ReasoningItem, ID: det.ID})
			d.send(emit, Event{Kind: EvSignature, Block: d.block, Text: det.Data})
		}
		return d.closeBlock(emit)
	}
	return nil
}

// tool reads one tool call delta: the start of a call (an index not seen
// before, with its name and id) or more of the open call's arguments.
// More for a call already ended, or arguments before a call's name, is a
// malformed stream. A delta without index (as some servers send) belongs
// to the open call unless it names another id.
func (d *chatDecoder) tool(tc *chatToolDeltaWire, emit func(*Event)) error {
	var idx int
	switch {
	case tc.Index != nil:
		idx = *tc.Index
	case d.open == ToolCall && (tc.ID == "" || tc.ID == d.toolID):
		idx = d.toolIdx
	default:
		idx = d.nextIdx
	}
	if d.open != ToolCall || idx != d.toolIdx {
		if err := d.startCall(idx, tc, emit); err != nil {
			return err
		}
	}
	if tc.Function.Arguments != "" {
		d.args = append(d.args, tc.Function.Arguments...)
		d.send(emit, Event{Kind: EvDelta, Block: d.block, Text: tc.Function.Arguments})
	}
	return nil
}

// startCall opens the ToolCall block of upstream index idx.
func (d *chatDecoder) startCall(idx int, tc *chatToolDeltaWire, emit func(*Event)) error {
	if idx < 0 || tc.Function.Name == "" || idx < d.nextIdx && slices.Contains(d.seen, idx) {
		return chatMalformedArgs
	}
	if err := d.closeBlock(emit); err != nil {
		return err
	}
	id := tc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(d.generated)
		d.generated++
	}
	d.seen = append(d.seen, idx)
	d.nextIdx = max(d.nextIdx, idx+1)
	d.toolIdx, d.toolID, d.args = idx, id, d.args[:0]
	d.tools++
	d.startBlock(emit, Event{Part: ToolCall, ID: id, Name: tc.Function.Name, Text: tc.ExtraContent.signature()})
	return nil
}

// startBlock opens a block of ev.Part, numbered next.
func (d *chatDecoder) startBlock(emit func(*Event), ev Event) {
	ev.Kind, ev.Block = EvBlockStart, d.block
	d.open, d.signed = ev.Part, false
	d.send(emit, ev)
}

// closeBlock ends the open block, if any; a tool call's arguments must by
// then be JSON.
func (d *chatDecoder) closeBlock(emit func(*Event)) error {
	if d.open == 0 {
		return nil
	}
	if d.open == ToolCall && len(d.args) > 0 && !json.Valid(d.args) {
		return chatMalformedArgs
	}
	d.send(emit, Event{Kind: EvBlockEnd, Block: d.block})
	d.open = 0
	d.block++
	return nil
}

// End checks that the stream ended where it may: after its finish_reason
// (or after an error, which ended it).
func (d *chatDecoder) End(func(*Event)) error {
	switch {
	case d.failed || d.finished:
		return nil
	case d.open == ToolCall:
		return malformed("the stream ended inside a tool call")
	}
	return malformed("the stream ended before its finish_reason")
}
