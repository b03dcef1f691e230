package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelrelay/modelrelay/internal/jsonscan"
	"github.com/modelrelay/modelrelay/pricing"
)

// errStreamCut marks a stream that ended without its proper end; the handler
// aborts the client connection so the client sees the cut too.
var errStreamCut = errors.New("stream cut")

// relayStream relays an SSE answer event by event, flushing after each, and
// settles from the usage read out of the stream as it passes. For chat
// completions whose client did not ask for usage, the usage chunk the gateway
// asked for is removed (and the "usage":null member it adds to every chunk),
// so the client sees exactly what the provider would have sent it.
func (g *Gateway) relayStream(ctx context.Context, w http.ResponseWriter, c *call, up *upstream) error {
	stripUsage := c.ep.name == pricing.EndpointChat && !c.sum.includeUsage
	meter := c.ep.meter()
	// A read of this call's generation waits for its settle (or release).
	// A settle left to the background ends it there (SettleAnswered).
	c.ticket.BeginStream()
	defer c.ticket.EndStream()
	h := w.Header()
	g.copyResponseHeaders(h, up.resp.Header)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(up.resp.StatusCode)
	res := g.relayEvents(w, c, up, meter, stripUsage)
	textBytes, events, readErr, writeErr, complete := res.textBytes, res.events, res.readErr, res.writeErr, res.complete
	u, ok := meter.Usage()
	note := ""
	if !ok {
		u = pricing.Usage{InputTokens: settleInputTokens(c.callerBytes), OutputTokens: pricing.EstimateTokens(textBytes)}
		switch {
		case writeErr != nil || ctx.Err() != nil:
			note = fmt.Sprintf("estimated: the client went away after %d events", events)
		case readErr != nil:
			note = fmt.Sprintf("estimated: the upstream stream was cut after %d events", events)
		default:
			note = fmt.Sprintf("estimated: the stream ended without usage after %d events", events)
		}
	}
	st := c.ticket.Price(ctx, u, note)
	if err := c.ticket.SettleAnswered(ctx, st); err != nil {
		g.log.Error("stream settled with error", "request_id", c.info.rid, "error", err.Error())
	} else {
		c.info.charge = st.Charge.Fixed()
	}
	if readErr != nil {
		up.line.recordFailure(g.now(), fmt.Errorf("stream cut: %w", readErr))
	}
	if !complete && readErr != nil && writeErr == nil && ctx.Err() == nil {
		return errStreamCut
	}
	return nil
}

// parseEvent returns the event name and data of one raw SSE event (data
// lines joined by "\n"); data is nil when the event has no data line.
func parseEvent(ev []byte) (name, data []byte) {
	dataLines := 0
	var joined []byte
	for len(ev) > 0 {
		i := bytes.IndexByte(ev, '\n')
		var ln []byte
		if i < 0 {
			ln, ev = ev, nil
		} else {
			ln, ev = ev[:i], ev[i+1:]
		}
		ln = bytes.TrimSuffix(ln, []byte("\r"))
		switch {
		case bytes.HasPrefix(ln, []byte("data:")):
			v := ln[5:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			dataLines++
			if dataLines == 1 {
				data = v
			} else {
				if dataLines == 2 {
					joined = append(joined, data...)
				}
				joined = append(append(joined, '\n'), v...)
				data = joined
			}
		case bytes.HasPrefix(ln, []byte("event:")):
			name = bytes.TrimSpace(ln[6:])
		}
	}
	if dataLines > 0 && data == nil {
		data = []byte{}
	}
	return name, data
}

// rebuildData replaces the data of a single-data-line event, keeping the
// other lines as they were.
func rebuildData(ev, data []byte) []byte {
	var out []byte
	for len(ev) > 0 {
		i := bytes.IndexByte(ev, '\n')
		var ln []byte
		if i < 0 {
			ln, ev = ev, nil
		} else {
			ln, ev = ev[:i+1], ev[i+1:]
		}
		if bytes.HasPrefix(ln, []byte("data:")) {
			out = append(out, "data: "...)
			out = append(out, data...)
			if bytes.HasSuffix(ln, []byte("\r\n")) {
				out = append(out, '\r', '\n')
			} else if bytes.HasSuffix(ln, []byte("\n")) {
				out = append(out, '\n')
			}
			continue
		}
		out = append(out, ln...)
	}
	return out
}

// Delivered text of one SSE event, for the estimate of a stream that ends
// without usage: the bytes of generated text (content, reasoning, tool-call
// arguments) it carried. Every event of every stream is measured, so each
// reader scans for its few strings (scanChatText, scanMessagesText,
// textString) and decodes the event with encoding/json (decodeChatText,
// decodeMessagesText, decodeResponsesText) only when the scan is not sure of
// encoding/json's answer: a string with a \u escape, a control character or
// bytes that are not UTF-8; a key repeated, escaped, non-ASCII or in another
// case; a member of another type. The rest of an event is not validated: a
// malformed event whose text the scan finds counts that text (it was
// delivered), where a decode would have counted nothing.
func chatText(data []byte) int {
	if len(data) == 0 || data[0] != '{' {
		return 0
	}
	if n, ok := scanChatText(data); ok {
		return n
	}
	return decodeChatText(data)
}

// scanChatText sums choices[].delta's content, reasoning_content and
// tool_calls[].function.arguments.
func scanChatText(data []byte) (int, bool) {
	choices, ok := textField(data, "choices", '[')
	if !ok || choices == nil {
		return 0, ok
	}
	return sumElements(choices, scanChoiceText)
}

func scanChoiceText(choice []byte) (int, bool) {
	delta, ok := elementField(choice, "delta", '{')
	if !ok || delta == nil {
		return 0, ok
	}
	n, ok := sumStrings(delta, "content", "reasoning_content")
	if !ok {
		return 0, false
	}
	calls, ok := textField(delta, "tool_calls", '[')
	if !ok || calls == nil {
		return n, ok
	}
	m, ok := sumElements(calls, scanCallText)
	return n + m, ok
}

func scanCallText(call []byte) (int, bool) {
	fn, ok := elementField(call, "function", '{')
	if !ok || fn == nil {
		return 0, ok
	}
	return textString(fn, "arguments")
}

// sumElements adds up text over the elements of the array arr, stopping at
// the first element text is not sure of.
func sumElements(arr []byte, text func(elem []byte) (int, bool)) (int, bool) {
	n, sure := 0, true
	walked := jsonscan.Elements(arr, func(elem []byte) bool {
		m, ok := text(elem)
		n, sure = n+m, ok
		return ok
	})
	return n, walked && sure
}

func decodeChatText(data []byte) int {
	var ch struct {
		Choices []struct {
			Delta struct {
				Content          string `json:"content"`
				ReasoningContent string `json:"reasoning_content"`
				ToolCalls        []struct {
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal(data, &ch) != nil {
		return 0
	}
	n := 0
	for _, c := range ch.Choices {
		n += len(c.Delta.Content) + len(c.Delta.ReasoningContent)
		for _, t := range c.Delta.ToolCalls {
			n += len(t.Function.Arguments)
		}
	}
	return n
}

func responsesText(data []byte) int {
	if !bytes.Contains(data, []byte(`"delta"`)) {
		return 0
	}
	if n, ok := textString(data, "delta"); ok {
		return n
	}
	return decodeResponsesText(data)
}

func decodeResponsesText(data []byte) int {
	var ev struct {
		Delta string `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return 0
	}
	return len(ev.Delta)
}

func messagesText(data []byte) int {
	if !bytes.Contains(data, []byte(`"delta"`)) {
		return 0
	}
	if n, ok := scanMessagesText(data); ok {
		return n
	}
	return decodeMessagesText(data)
}

func decodeMessagesText(data []byte) int {
	var ev struct {
		Delta struct {
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return 0
	}
	return len(ev.Delta.Text) + len(ev.Delta.PartialJSON) + len(ev.Delta.Thinking)
}

func scanMessagesText(data []byte) (int, bool) {
	delta, ok := textField(data, "delta", '{')
	if !ok || delta == nil {
		return 0, ok
	}
	return sumStrings(delta, "text", "partial_json", "thinking")
}

// sumStrings adds up the decoded lengths of obj's string members named keys.
func sumStrings(obj []byte, keys ...string) (n int, ok bool) {
	for _, k := range keys {
		m, ok := textString(obj, k)
		if !ok {
			return 0, false
		}
		n += m
	}
	return n, true
}

// textField is member key of the object obj when it is of the kind its
// first byte names ('{', '[' or '"'); nil when absent or null. ok is false
// when the scan is not sure or the member is of another kind (which
// encoding/json refuses, making the whole event count nothing).
func textField(obj []byte, key string, kind byte) (val []byte, ok bool) {
	val, _, found, ok := jsonscan.Member(obj, key)
	if !ok || !found {
		return nil, ok
	}
	return nullOr(val, kind)
}

// elementField is textField of an array element that is an object or null
// (nil, as encoding/json decodes null into a struct).
func elementField(elem []byte, key string, kind byte) ([]byte, bool) {
	obj, ok := nullOr(elem, '{')
	if !ok || obj == nil {
		return nil, ok
	}
	return textField(obj, key, kind)
}

// nullOr is val when it is of the kind its first byte names, nil when it is
// null, and not ok otherwise.
func nullOr(val []byte, kind byte) ([]byte, bool) {
	switch {
	case string(val) == "null":
		return nil, true
	case len(val) > 0 && val[0] == kind:
		return val, true
	}
	return nil, false
}

// textString is the decoded length of the string member key of obj: 0 when
// absent or null.
func textString(obj []byte, key string) (int, bool) {
	val, ok := textField(obj, key, '"')
	if !ok || val == nil {
		return 0, ok
	}
	return jsonscan.StringLen(val)
}

// streamResult is what relayEvents saw.
type streamResult struct {
	textBytes int   // generated text delivered, for the estimate
	events    int   // events written to the client
	readErr   error // the upstream stream broke
	writeErr  error // the client went away
	complete  bool  // the stream ended cleanly
}

// relayEvents copies SSE events from upstream to the client one by one,
// flushing after each, feeding each to the meter.
func (g *Gateway) relayEvents(w http.ResponseWriter, c *call, up *upstream, meter pricing.Meter, stripUsage bool) streamResult {
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}

	var (
		rd        = bufio.NewReaderSize(up.resp.Body, 4<<10) // longer lines accumulate in ev
		ev        []byte                                     // the raw bytes of the event being read
		textBytes int
		events    int
		writeErr  error
		readErr   error
	)
	emit := func() {
		if len(ev) == 0 {
			return
		}
		name, data := parseEvent(ev)
		out := ev
		if stripUsage && data != nil {
			if pricing.IsChatUsageOnlyChunk(data) {
				_ = meter.Observe(string(name), data)
				ev = ev[:0]
				return
			}
			if bytes.Contains(data, []byte(`"usage"`)) {
				out = rebuildData(ev, stripUsageNull(data))
			}
		}
		// The event goes to the client first; metering and text counting
		// (for a cut stream's estimate) are only needed at the end.
		defer func() {
			if data != nil || len(name) > 0 {
				_ = meter.Observe(string(name), data)
			}
			if data != nil && c.ep.text != nil {
				textBytes += c.ep.text(data)
			}
		}()
		if writeErr == nil {
			if events == 0 && c.info != nil && !c.info.start.IsZero() {
				c.info.ttfb = g.now().Sub(c.info.start)
			}
			if _, err := w.Write(out); err != nil {
				writeErr = err
			} else if flusher != nil {
				flusher.Flush()
			}
		}
		events++
		ev = ev[:0]
	}
	for {
		line, err := rd.ReadSlice('\n')
		ev = append(ev, line...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') { // blank line: end of event
			emit()
			if writeErr != nil {
				break
			}
		}
	}
	complete := readErr == nil && writeErr == nil && len(bytes.TrimSpace(ev)) == 0
	if len(bytes.TrimSpace(ev)) > 0 && writeErr == nil {
		// A final event without its blank line: pass it on as it came.
		emit()
	}

	return streamResult{textBytes: textBytes, events: events, readErr: readErr, writeErr: writeErr, complete: complete}
}
