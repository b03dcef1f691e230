package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// msgSSE is one server-sent event.
type msgSSE struct {
	name string
	data []byte
}

// msgSplitSSE cuts a stream into its events (event: and data: lines; a
// comment or other field is not in these streams).
func msgSplitSSE(b []byte) []msgSSE {
	var out []msgSSE
	for _, chunk := range strings.Split(string(b), "\n\n") {
		var ev msgSSE
		var data []string
		for _, line := range strings.Split(chunk, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = append(data, v)
			}
		}
		if ev.name != "" || data != nil {
			ev.data = []byte(strings.Join(data, "\n"))
			out = append(out, ev)
		}
	}
	return out
}

// msgDecodeSSE decodes a whole upstream stream: the neutral events, and
// the first error (of an event, or of End).
func msgDecodeSSE(events []msgSSE) ([]Event, error) {
	dec := msgNewDecoder()
	var out []Event
	emit := func(ev *Event) { out = append(out, *ev) }
	for _, e := range events {
		if err := dec.Event(e.name, e.data, emit); err != nil {
			return out, err
		}
	}
	return out, dec.End(emit)
}

func msgEncodeEvents(evs []Event, r *Request) []byte {
	enc := msgNewEncoder(r)
	var out []byte
	for i := range evs {
		out = enc.Encode(out, &evs[i])
	}
	return enc.Close(out, false)
}

func msgEventsJSON(t *testing.T, evs []Event) []byte {
	var b []byte
	for _, ev := range evs {
		b = append(b, bytes.TrimSpace(msgCompactJSON(t, msgNeutralJSON(t, ev)))...)
		b = append(b, '\n')
	}
	return b
}

func msgCompactJSON(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// msgCheckCallerStream checks a stream written for a messages caller as
// the SDKs read it: every data line one JSON object whose type is the
// event's name; message_start first; blocks indexed 0, 1, ... each started,
// deltas only inside it, stopped before the next; message_delta then
// message_stop last.
func msgCheckCallerStream(t *testing.T, sse []byte) {
	t.Helper()
	events := msgSplitSSE(sse)
	open, next := -1, 0
	for i, e := range events {
		var w struct {
			Type  string `json:"type"`
			Index *int   `json:"index"`
		}
		if err := json.Unmarshal(e.data, &w); err != nil || w.Type != e.name {
			t.Fatalf("event %d (%s): data %s (%v)", i, e.name, e.data, err)
		}
		switch {
		case i == 0 && w.Type != "message_start":
			t.Fatalf("first event %s", w.Type)
		case w.Type == "content_block_start":
			if open != -1 || *w.Index != next {
				t.Fatalf("event %d: block %d starts with %d open, %d next", i, *w.Index, open, next)
			}
			open = next
		case w.Type == "content_block_delta" || w.Type == "content_block_stop":
			if *w.Index != open {
				t.Fatalf("event %d: %s of block %d, %d open", i, w.Type, *w.Index, open)
			}
			if w.Type == "content_block_stop" {
				open, next = -1, next+1
			}
		}
	}
	n := len(events)
	if n < 3 || events[n-2].name != "message_delta" || events[n-1].name != "message_stop" || open != -1 {
		t.Fatalf("the stream does not end with message_delta and message_stop:\n%s", sse)
	}
}

// TestMsgStreamGolden decodes Anthropic's documented streams into neutral
// events and writes them back for a messages caller through the
// registered Stream; the written stream decodes into the same events.
func TestMsgStreamGolden(t *testing.T) {
	for _, name := range []string{"stream_text", "stream_tool_use", "stream_thinking"} {
		t.Run(name, func(t *testing.T) {
			in := msgSplitSSE(msgReadFixture(t, name+".sse"))
			evs, err := msgDecodeSSE(in)
			if err != nil {
				t.Fatal(err)
			}
			msgGolden(t, name+".events.jsonl", msgEventsJSON(t, evs))
			s, err := NewStream(Messages, Messages, &Request{Model: "claude-caller-alias"})
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for _, e := range in {
				b, err := s.Event(e.name, e.data)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
			}
			end, err := s.End()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, end...)
			msgGolden(t, name+".out.sse", out)
			msgCheckCallerStream(t, out)
			back, err := msgDecodeSSE(msgSplitSSE(out))
			if err != nil {
				t.Fatal(err)
			}
			if a, b := msgWithoutUsage(evs, "claude-caller-alias"), msgWithoutUsage(back, ""); !reflect.DeepEqual(a, b) {
				t.Errorf("written back, the events differ:\n got %+v\nwant %+v", b, a)
			}
			if a, b := msgLastUsage(evs), msgLastUsage(back); a != b {
				t.Errorf("usage %+v, then %+v", a, b)
			}
		})
	}
}

// msgWithoutUsage is evs without their usage events, the Start's model set
// to model (when given): what a written stream must keep.
func msgWithoutUsage(evs []Event, model string) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Kind == EvUsage {
			continue
		}
		if ev.Kind == EvStart && model != "" {
			ev.Model = model
		}
		out = append(out, ev)
	}
	return out
}

func msgLastUsage(evs []Event) Usage {
	var u Usage
	for _, ev := range evs {
		if ev.Kind == EvUsage {
			u = ev.Usage
		}
	}
	return u
}

// TestMsgEncoderFromNeutral writes a stream as another upstream gives it:
// usage only after the finish, thinking without a signature, a reasoning
// item the caller cannot see, tool arguments in pieces.
func TestMsgEncoderFromNeutral(t *testing.T) {
	evs := []Event{
		{Kind: EvStart, ID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", Model: "gpt-4o-2024-08-06"},
		{Kind: EvBlockStart, Block: 0, Part: Thinking},
		{Kind: EvDelta, Block: 0, Text: "Weather "},
		{Kind: EvDelta, Block: 0, Text: "first."},
		{Kind: EvBlockEnd, Block: 0},
		{Kind: EvBlockStart, Block: 1, Part: ReasoningItem, ID: "rs_1"},
		{Kind: EvSignature, Block: 1, Text: "encrypted"},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvBlockStart, Block: 2, Part: Text},
		{Kind: EvDelta, Block: 2, Text: "Checking \"SF\"\n\u2028<now> ✓"},
		{Kind: EvBlockEnd, Block: 2},
		{Kind: EvBlockStart, Block: 3, Part: ToolCall, ID: "call_abc", Name: "get_weather"},
		{Kind: EvDelta, Block: 3, Text: `{"location":`},
		{Kind: EvDelta, Block: 3, Text: ` "San Francisco, CA"}`},
		{Kind: EvBlockEnd, Block: 3},
		{Kind: EvBlockStart, Block: 4, Part: RedactedThinking, Text: "EmwKAhgB"},
		{Kind: EvBlockEnd, Block: 4},
		{Kind: EvFinish, Finish: FinishToolCalls},
		{Kind: EvUsage, Usage: Usage{Input: 10, CacheRead: 20, CacheWrite5m: 3, CacheWrite1h: 4, Output: 50, Reasoning: 30}},
	}
	out := msgEncodeEvents(evs, &Request{Model: "gpt-4o"})
	msgGolden(t, "neutral_stream.out.sse", out)
	msgCheckCallerStream(t, out)

	// A stop sequence, and the input usage known at the start.
	evs = []Event{
		{Kind: EvStart, ID: "resp_1"},
		{Kind: EvUsage, Usage: Usage{Input: 7, CacheRead: 2, Output: 1}},
		{Kind: EvFinish, Finish: FinishStopSequence, StopSequence: "END"},
		{Kind: EvUsage, Usage: Usage{Input: 7, CacheRead: 2, Output: 3}},
	}
	out = msgEncodeEvents(evs, &Request{Model: "m"})
	want := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":2,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":0}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"END\"},\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":2,\"cache_creation\":{\"ephemeral_5m_input_tokens\":0,\"ephemeral_1h_input_tokens\":0},\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestMsgStreamError: an upstream error event becomes the caller's error
// event, and the stream then ends without message_stop.
func TestMsgStreamError(t *testing.T) {
	s, err := NewStream(Messages, Messages, &Request{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, e := range msgSplitSSE(msgReadFixture(t, "stream_text.sse"))[:4] {
		b, err := s.Event(e.name, e.data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	b, err := s.Event("error", []byte(`{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, b...)
	end, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, end...)
	text := string(out)
	if !strings.HasSuffix(text, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n") || strings.Contains(text, "message_stop") {
		t.Errorf("stream:\n%s", text)
	}
	if fail := s.Fail("api_error", "x"); fail != nil {
		t.Errorf("Fail after the end wrote %s", fail)
	}

	s, _ = NewStream(Messages, Messages, &Request{Model: "m"})
	if got := string(s.Fail("timeout_error", "the upstream stopped \"answering\"")); got != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"timeout_error\",\"message\":\"the upstream stopped \\\"answering\\\"\"}}\n\n" {
		t.Errorf("Fail wrote %s", got)
	}
}

func TestMsgDecoderUsage(t *testing.T) {
	evs, err := msgDecodeSSE([]msgSSE{
		{"message_start", []byte(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":3,"output_tokens":1}}}`)},
		{"message_delta", []byte(`{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":20}}`)},
		{"message_delta", []byte(`{"type":"message_delta","delta":{},"usage":{"input_tokens":12,"cache_creation":{"ephemeral_1h_input_tokens":5},"output_tokens":21}}`)},
		{"message_stop", []byte(`{"type":"message_stop"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var usages []Usage
	var finishes []string
	for _, ev := range evs {
		switch ev.Kind {
		case EvUsage:
			usages = append(usages, ev.Usage)
		case EvFinish:
			finishes = append(finishes, ev.Finish)
		}
	}
	want := []Usage{
		{Input: 10, CacheWrite5m: 5, CacheRead: 3, Output: 1},
		{Input: 10, CacheWrite5m: 5, CacheRead: 3, Output: 20},
		{Input: 12, CacheWrite1h: 5, CacheRead: 3, Output: 21},
	}
	if !reflect.DeepEqual(usages, want) || !reflect.DeepEqual(finishes, []string{FinishLength}) {
		t.Errorf("usage %+v, finish %v", usages, finishes)
	}
}

// TestMsgDecoderRedactedAndStartText: pings, event types to come and
// citations are skipped; a redacted_thinking block carries its data; a
// block that starts with text or input gives it as its first delta; a
// second message_stop is ignored.
func TestMsgDecoderRedactedAndStartText(t *testing.T) {
	evs, err := msgDecodeSSE([]msgSSE{
		{"ping", nil},
		{"future_event", []byte(`{"type":"future_event","x":1}`)},
		{"message_start", []byte(`{"type":"message_start","message":{"id":"msg_1","model":"m"}}`)},
		{"ping", []byte(`{"type": "ping"}`)},
		{"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwK"}}`)},
		{"content_block_stop", []byte(`{"type":"content_block_stop","index":0}`)},
		{"content_block_start", []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{"a": 1}}}`)},
		{"content_block_stop", []byte(`{"type":"content_block_stop","index":1}`)},
		{"content_block_start", []byte(`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"Hi"}}`)},
		{"content_block_delta", []byte(`{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{}}}`)},
		{"content_block_stop", []byte(`{"type":"content_block_stop","index":2}`)},
		{"message_stop", []byte(`{"type":"message_stop"}`)},
		{"message_stop", []byte(`{"type":"message_stop"}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: EvStart, ID: "msg_1", Model: "m"},
		{Kind: EvBlockStart, Block: 0, Part: RedactedThinking, Text: "EmwK"},
		{Kind: EvBlockEnd, Block: 0, Part: RedactedThinking},
		{Kind: EvBlockStart, Block: 1, Part: ToolCall, ID: "t", Name: "f"},
		{Kind: EvDelta, Block: 1, Text: `{"a":1}`},
		{Kind: EvBlockEnd, Block: 1, Part: ToolCall},
		{Kind: EvBlockStart, Block: 2, Part: Text},
		{Kind: EvDelta, Block: 2, Text: "Hi"},
		{Kind: EvBlockEnd, Block: 2, Part: Text},
		{Kind: EvFinish, Finish: FinishStop},
	}
	if !reflect.DeepEqual(evs, want) {
		t.Errorf("got  %+v\nwant %+v", evs, want)
	}
}

func TestMsgDecoderMalformed(t *testing.T) {
	full := msgSplitSSE(msgReadFixture(t, "stream_tool_use.sse"))
	start := full[0]
	toolStart := msgSSE{"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`)}
	partial := func(s string) msgSSE {
		b, _ := json.Marshal(s)
		return msgSSE{"content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":` + string(b) + `}}`)}
	}
	stop := msgSSE{"content_block_stop", []byte(`{"type":"content_block_stop","index":0}`)}
	cases := map[string]struct {
		events []msgSSE
		want   string
	}{
		"cut inside a tool call":   {[]msgSSE{start, toolStart, partial(`{"location": "San`)}, "inside a tool call"},
		"malformed partial_json":   {[]msgSSE{start, toolStart, partial(`{"location": `), partial(`}`), stop}, "malformed tool-argument stream"},
		"arguments not an object":  {[]msgSSE{start, toolStart, partial(`[1]`), stop}, "malformed tool-argument stream"},
		"no message_stop":          {full[:len(full)-1], "before message_stop"},
		"nothing at all":           {nil, "before message_stop"},
		"content before the start": {full[1:], "before message_start"},
		"two starts":               {[]msgSSE{start, start}, "second message_start"},
		"not JSON":                 {[]msgSSE{start, {"content_block_delta", []byte(`{"type":"content_block_delta",`)}}, "invalid JSON"},
		"delta of the wrong type":  {[]msgSSE{start, toolStart, {"content_block_delta", []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`)}}, "wrong type"},
		"delta of another block":   {[]msgSSE{start, toolStart, {"content_block_delta", []byte(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{"}}`)}}, "outside its content block"},
		"stop of another block":    {[]msgSSE{start, toolStart, {"content_block_stop", []byte(`{"type":"content_block_stop","index":3}`)}}, "outside its content block"},
		"a block inside a block":   {[]msgSSE{start, toolStart, toolStart}, "inside another"},
		"message_stop in a block":  {[]msgSSE{start, toolStart, {"message_stop", []byte(`{"type":"message_stop"}`)}}, "inside a content block"},
		"server tool":              {[]msgSSE{start, {"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`)}}, "cannot be translated"},
		"tool without a name":      {[]msgSSE{start, {"content_block_start", []byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","input":{}}}`)}}, "without id or name"},
		"negative usage":           {[]msgSSE{start, {"message_delta", []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-5}}`)}}, "negative"},
		"fractional usage":         {[]msgSSE{start, {"message_delta", []byte(`{"type":"message_delta","delta":{},"usage":{"output_tokens":2.5}}`)}}, "usage"},
		"overflowing usage":        {[]msgSSE{start, {"message_delta", []byte(`{"type":"message_delta","delta":{},"usage":{"output_tokens":9223372036854775807}}`)}}, "overflow"},
	}
	for name, c := range cases {
		_, err := msgDecodeSSE(c.events)
		var m *ErrMalformed
		if !errors.As(err, &m) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrMalformed saying %q", name, err, c.want)
		}
	}
}

// TestMsgFastDelta: the decoder's shortcut for deltas as Anthropic writes
// them reads what the JSON decoder reads, and gives way to it on anything
// else.
func TestMsgFastDelta(t *testing.T) {
	cases := []struct {
		data string
		ok   bool
		kind msgDeltaKind
		idx  int
		text string
	}{
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`, true, msgDeltaText, 0, "Hello"},
		{`{"type":"content_block_delta","index":12,"delta":{"type":"thinking_delta","thinking":"a\nb \"c\" \u00e9 é"}}`, true, msgDeltaThinking, 12, "a\nb \"c\" é é"},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\\\"\":"}}` + "\n", true, msgDeltaJSON, 1, `{"a\"":`},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}`, true, msgDeltaText, 1, ""},
		{`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x\"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"},"extra":1}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x` + "\xff" + `"}}`, true, msgDeltaText, 1, "x\ufffd"},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\ud83d\ude00 \ud83d \ude00\u00E9\/\b\f\r\t"}}`, true, msgDeltaText, 1, "😀 \ufffd \ufffdé/\b\f\r\t"},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\u00g0"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x` + "\n" + `"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\x"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"s"}}`, false, 0, 0, ""},
		{`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}`, false, 0, 0, ""},
		{`{"type":"content_block_delta","index":99999999999,"delta":{"type":"text_delta","text":"x"}}`, false, 0, 0, ""},
	}
	for _, c := range cases {
		kind, idx, text, ok := msgFastDelta([]byte(c.data))
		if ok != c.ok || ok && (kind != c.kind || idx != c.idx || text != c.text) {
			t.Errorf("%s: %v %v %d %q, want %v %v %d %q", c.data, ok, kind, idx, text, c.ok, c.kind, c.idx, c.text)
		}
		if !ok {
			continue
		}
		var w msgEventWire
		if err := json.Unmarshal([]byte(c.data), &w); err != nil {
			t.Fatal(err)
		}
		if k, s := msgDeltaOf(w.Delta); k != kind || s != text || *w.Index != idx {
			t.Errorf("%s: the JSON decoder reads %v %q", c.data, k, s)
		}
	}
}
