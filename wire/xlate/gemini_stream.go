package xlate

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// gemDecoder reads an alt=sse stream of generateContent: each event's
// data is one GenerateContentResponse chunk. Text parts continue the open
// Text block, thought parts the open Thinking block (until that block is
// signed); a functionCall part comes whole and is a ToolCall block of its
// own. usageMetadata, cumulative on every chunk that has it, is an
// EvUsage when it changed; the finishReason closes the open block and is
// the Finish. gemParseAnswer reads a whole answer through the same parts
// walk, so an answer and a stream of the same content read alike.
type gemDecoder struct {
	started  bool
	finished bool
	failed   bool     // an error chunk came: the stream is over
	open     PartType // the open block's type; 0 when none
	signed   bool     // the open Thinking block has its signature
	block    int      // the open block's number, or the next one's
	calls    int      // function calls seen (numbering the ids Gemini leaves out)
	usage    Usage
	hasUsage bool
}

func (d *gemDecoder) Event(_ string, data []byte, emit func(*Event)) error {
	data = bytes.TrimSpace(data)
	if d.failed || len(data) == 0 {
		return nil
	}
	var ch gemResponseWire
	if err := json.Unmarshal(data, &ch); err != nil {
		return gemDecodeError("stream chunk", err)
	}
	if ch.Error != nil {
		d.failed = true
		name := ch.Error.Status
		if name == "" {
			name = "api_error"
		}
		emit(&Event{Kind: EvError, Name: name, Text: ch.Error.Message})
		return nil
	}
	if !d.started {
		d.started = true
		emit(&Event{Kind: EvStart, ID: ch.ResponseID, Model: ch.ModelVersion})
	}
	// The first chunk's usage comes before its parts: a messages caller's
	// message_start carries the input counts Gemini reports from it. Later
	// usage follows the parts, as Gemini sends it.
	if d.block == 0 && d.open == 0 {
		if err := d.observeUsage(ch.UsageMetadata, emit); err != nil {
			return err
		}
	}
	finish := ""
	if !d.finished {
		switch {
		case len(ch.Candidates) > 0:
			c := &ch.Candidates[0]
			if c.Content != nil {
				if err := d.parts(c.Content.Parts, emit); err != nil {
					return err
				}
			}
			if c.FinishReason != "" {
				finish = gemFinish(c.FinishReason, d.calls > 0)
			}
		case ch.PromptFeedback != nil && ch.PromptFeedback.BlockReason != "":
			finish = FinishContentFilter
		}
	}
	if finish != "" {
		d.closeBlock(emit)
	}
	if err := d.observeUsage(ch.UsageMetadata, emit); err != nil {
		return err
	}
	if finish != "" {
		d.finished = true
		emit(&Event{Kind: EvFinish, Finish: finish})
	}
	return nil
}

// observeUsage emits a chunk's usage when it says more than the last.
func (d *gemDecoder) observeUsage(um *gemUsageWire, emit func(*Event)) error {
	if um == nil {
		return nil
	}
	u, err := um.usage()
	if err != nil {
		return err
	}
	if !d.hasUsage || u != d.usage {
		d.usage, d.hasUsage = u, true
		emit(&Event{Kind: EvUsage, Usage: u})
	}
	return nil
}

// End: a stream that ended without a finishReason (nor an error chunk)
// was cut.
func (d *gemDecoder) End(func(*Event)) error {
	if d.failed || d.finished {
		return nil
	}
	return malformed("the stream ended without a finishReason")
}

// parts emits the blocks of one chunk's (or answer's) parts.
func (d *gemDecoder) parts(parts []gemPartWire, emit func(*Event)) error {
	for i := range parts {
		p := &parts[i]
		switch {
		case p.FunctionCall != nil:
			if err := d.call(p, emit); err != nil {
				return err
			}
		case p.Text != nil && p.Thought:
			d.thought(p, emit)
		case p.Text != nil && *p.Text != "":
			// A signature on plain text has no neutral field: it is
			// left out (Gemini requires signatures back on function
			// calls only).
			d.openBlock(Text, emit)
			emit(&Event{Kind: EvDelta, Block: d.block, Text: *p.Text})
		}
	}
	return nil
}

// thought adds a thought part to the open Thinking block, or opens one
// when none is open or the open one is already signed.
func (d *gemDecoder) thought(p *gemPartWire, emit func(*Event)) {
	if *p.Text == "" && p.ThoughtSignature == "" {
		return
	}
	if d.open == Thinking && d.signed {
		d.closeBlock(emit)
	}
	d.openBlock(Thinking, emit)
	if *p.Text != "" {
		emit(&Event{Kind: EvDelta, Block: d.block, Text: *p.Text})
	}
	if p.ThoughtSignature != "" {
		d.signed = true
		emit(&Event{Kind: EvSignature, Block: d.block, Text: p.ThoughtSignature})
	}
}

// call emits a whole function call as one ToolCall block, its
// thoughtSignature the start's Text (as the chat decoder gives a call's
// signature), its arguments in one delta.
func (d *gemDecoder) call(p *gemPartWire, emit func(*Event)) error {
	fc := p.FunctionCall
	if fc.Name == "" {
		return malformed("functionCall without a name")
	}
	args, err := gemCompactArgs(fc.Args)
	if err != nil {
		return err
	}
	id := fc.ID
	if id == "" {
		id = "call_" + strconv.Itoa(d.calls)
	}
	d.calls++
	d.closeBlock(emit)
	d.open = ToolCall
	emit(&Event{Kind: EvBlockStart, Block: d.block, Part: ToolCall, ID: id, Name: fc.Name, Text: p.ThoughtSignature})
	emit(&Event{Kind: EvDelta, Block: d.block, Text: args})
	d.closeBlock(emit)
	return nil
}

// gemCompactArgs is functionCall.args as compact JSON text; absent or
// null args are {}.
func gemCompactArgs(args json.RawMessage) (string, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		return "{}", nil
	}
	if args[0] != '{' {
		return "", malformed("functionCall.args is not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return "", malformed("functionCall.args is not valid JSON")
	}
	return buf.String(), nil
}

// openBlock makes a block of type t the open one: it stays open when it
// already is (text continuing text), else the open block is closed first.
func (d *gemDecoder) openBlock(t PartType, emit func(*Event)) {
	if d.open == t {
		return
	}
	d.closeBlock(emit)
	d.open = t
	emit(&Event{Kind: EvBlockStart, Block: d.block, Part: t})
}

func (d *gemDecoder) closeBlock(emit func(*Event)) {
	if d.open == 0 {
		return
	}
	emit(&Event{Kind: EvBlockEnd, Block: d.block})
	d.open, d.signed = 0, false
	d.block++
}
