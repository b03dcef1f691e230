package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// chatSSE is the data of each event of an SSE text.
func chatSSE(text []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(text, []byte("\n\n")) {
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				out = append(out, bytes.TrimPrefix(data, []byte(" ")))
			}
		}
	}
	return out
}

// chatChecker checks that events come in the order stream.go promises.
type chatChecker struct {
	evs      []Event
	started  bool
	open     bool
	next     int
	finished bool
	ended    bool // after an error
	err      error
}

func (c *chatChecker) emit(ev *Event) {
	c.evs = append(c.evs, *ev)
	if c.err != nil {
		return
	}
	fail := func(msg string) { c.err = fmt.Errorf("event %d (%+v): %s", len(c.evs)-1, *ev, msg) }
	switch {
	case c.ended:
		fail("after an error")
	case ev.Kind == EvError:
		c.ended = true
	case ev.Kind == EvStart:
		if c.started {
			fail("second start")
		}
		c.started = true
	case !c.started:
		fail("before start")
	case c.finished && ev.Kind != EvUsage:
		fail("after finish")
	case ev.Kind == EvBlockStart:
		if c.open || ev.Block != c.next {
			fail("block opened out of turn")
		}
		c.open = true
	case ev.Kind == EvDelta || ev.Kind == EvSignature || ev.Kind == EvBlockEnd:
		if !c.open || ev.Block != c.next {
			fail("not in the open block")
		}
		if ev.Kind == EvBlockEnd {
			c.open = false
			c.next++
		}
	case ev.Kind == EvFinish:
		if c.open {
			fail("finish inside a block")
		}
		c.finished = true
	}
}

// chatDecodeAll decodes the data events of a stream and ends it.
func chatDecodeAll(data [][]byte) (*chatChecker, error) {
	c := &chatChecker{}
	d := chatNewDecoder()
	for _, ev := range data {
		if err := d.Event("", ev, c.emit); err != nil {
			return c, err
		}
	}
	if err := d.End(c.emit); err != nil {
		return c, err
	}
	return c, c.err
}

// chatTranslate runs a chat stream through Stream into a chat caller's.
func chatTranslate(t *testing.T, data [][]byte, r *Request) []byte {
	t.Helper()
	s, err := NewStream(Chat, Chat, r)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, ev := range data {
		b, err := s.Event("", ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	b, err := s.End()
	if err != nil {
		t.Fatal(err)
	}
	return append(out, b...)
}

// chatValidSSE fails unless every event of out is a JSON chunk or [DONE].
func chatValidSSE(t testing.TB, out []byte) {
	t.Helper()
	if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("stream does not end an event: %q", out)
	}
	for _, data := range chatSSE(out) {
		if string(data) != "[DONE]" && !json.Valid(data) {
			t.Fatalf("chunk is not JSON: %s", data)
		}
	}
}

func TestChatDecodeText(t *testing.T) {
	c, err := chatDecodeAll(chatSSE(chatRead(t, "stream_text.sse")))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: EvStart, ID: "chatcmpl-123", Model: "gpt-4o-mini"},
		{Kind: EvBlockStart, Part: Text},
		{Kind: EvDelta, Text: "Hello"},
		{Kind: EvDelta, Text: "!"},
		{Kind: EvDelta, Text: " How can I help you today?"},
		{Kind: EvBlockEnd},
		{Kind: EvFinish, Finish: FinishStop},
	}
	if !reflect.DeepEqual(c.evs, want) {
		t.Errorf("events %+v\nwant %+v", c.evs, want)
	}
}

// chatWantToolEvents is what stream_tools.sse decodes to.
func chatWantToolEvents() []Event {
	return []Event{
		{Kind: EvStart, ID: "chatcmpl-9x", Model: "gpt-4.1-2025-04-14"},
		{Kind: EvBlockStart, Part: ToolCall, ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Name: "get_weather"},
		{Kind: EvDelta, Text: `{"`}, {Kind: EvDelta, Text: "location"}, {Kind: EvDelta, Text: `":"`},
		{Kind: EvDelta, Text: "Paris"}, {Kind: EvDelta, Text: `, France"}`},
		{Kind: EvBlockEnd},
		{Kind: EvBlockStart, Block: 1, Part: ToolCall, ID: "call_M8UOzBWVnrPPyTOuCgyB0eqm", Name: "get_weather"},
		{Kind: EvDelta, Block: 1, Text: `{"location": "Bogot`}, {Kind: EvDelta, Block: 1, Text: `á, Colombia"}`},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvFinish, Finish: FinishToolCalls},
		{Kind: EvUsage, Usage: Usage{Input: 93, CacheRead: 1024, Output: 46}},
	}
}

func TestChatDecodeParallelTools(t *testing.T) {
	c, err := chatDecodeAll(chatSSE(chatRead(t, "stream_tools.sse")))
	if err != nil {
		t.Fatal(err)
	}
	if want := chatWantToolEvents(); !reflect.DeepEqual(c.evs, want) {
		t.Errorf("events %+v\nwant %+v", c.evs, want)
	}
}

// TestChatStreamRoundTrip translates OpenAI's documented streams into a
// chat caller's as the golden files say, and decodes what it wrote back
// into the same events: text, tool calls, ids, usage.
func TestChatStreamRoundTrip(t *testing.T) {
	for _, c := range []struct {
		in, golden string
		usage      bool
	}{
		{"stream_text.sse", "stream_text.out.sse", false},
		{"stream_tools.sse", "stream_tools.out.sse", true},
	} {
		t.Run(c.in, func(t *testing.T) {
			data := chatSSE(chatRead(t, c.in))
			orig, err := chatDecodeAll(data)
			if err != nil {
				t.Fatal(err)
			}
			out := chatTranslate(t, data, &Request{Model: orig.evs[0].Model, IncludeUsage: c.usage})
			chatValidSSE(t, out)
			chatGolden(t, c.golden, out)
			back, err := chatDecodeAll(chatSSE(out))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.evs, orig.evs) {
				t.Errorf("read back %+v\nwant %+v", back.evs, orig.evs)
			}
		})
	}
}

// chatNeutralEvents is a stream only other shapes bring: signed and
// redacted thinking, Gemini signatures given both ways, an error-free end
// on a stop sequence with usage that has cache writes.
func chatNeutralEvents() []Event {
	return []Event{
		{Kind: EvStart, ID: "msg_01", Model: "claude-sonnet-4-5"},
		{Kind: EvBlockStart, Block: 0, Part: Thinking},
		{Kind: EvDelta, Block: 0, Text: "Let me think"},
		{Kind: EvDelta, Block: 0, Text: " \"hard\"\n"},
		{Kind: EvSignature, Block: 0, Text: "EqQBCg"},
		{Kind: EvBlockEnd, Block: 0},
		{Kind: EvBlockStart, Block: 1, Part: RedactedThinking, Text: "EmwKAh"},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvBlockStart, Block: 2, Part: Text},
		{Kind: EvDelta, Block: 2, Text: "Sure <b>&</b>\u2028"},
		{Kind: EvBlockEnd, Block: 2},
		{Kind: EvBlockStart, Block: 3, Part: ToolCall, ID: "call_0", Name: "f", Text: "sigA"},
		{Kind: EvDelta, Block: 3, Text: `{"a":`},
		{Kind: EvDelta, Block: 3, Text: `1}`},
		{Kind: EvBlockEnd, Block: 3},
		{Kind: EvBlockStart, Block: 4, Part: ToolCall, ID: "call_1", Name: "g"},
		{Kind: EvSignature, Block: 4, Text: "sigB"},
		{Kind: EvBlockEnd, Block: 4},
		{Kind: EvUsage, Usage: Usage{Input: 3, CacheRead: 4, CacheWrite5m: 5, CacheWrite1h: 6, Output: 7, Reasoning: 2}},
		{Kind: EvFinish, Finish: FinishStopSequence, StopSequence: "END"},
	}
}

func TestChatEncodeNeutral(t *testing.T) {
	enc := chatNewEncoder(&Request{Model: "alias", IncludeUsage: true})
	var out []byte
	for _, ev := range chatNeutralEvents() {
		out = enc.Encode(out, &ev)
	}
	out = enc.Close(out, false)
	chatValidSSE(t, out)
	chatGolden(t, "stream_neutral.out.sse", out)
	back, err := chatDecodeAll(chatSSE(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Kind: EvStart, ID: "chatcmpl-01", Model: "alias"},
		{Kind: EvBlockStart, Part: Thinking},
		{Kind: EvDelta, Text: "Let me think"},
		{Kind: EvDelta, Text: " \"hard\"\n"},
		{Kind: EvSignature, Text: "EqQBCg"},
		{Kind: EvBlockEnd},
		{Kind: EvBlockStart, Block: 1, Part: RedactedThinking, Text: "EmwKAh"},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvBlockStart, Block: 2, Part: Text},
		{Kind: EvDelta, Block: 2, Text: "Sure <b>&</b>\u2028"},
		{Kind: EvBlockEnd, Block: 2},
		{Kind: EvBlockStart, Block: 3, Part: ToolCall, ID: "call_0", Name: "f", Text: "sigA"},
		{Kind: EvDelta, Block: 3, Text: `{"a":`},
		{Kind: EvDelta, Block: 3, Text: `1}`},
		{Kind: EvBlockEnd, Block: 3},
		{Kind: EvBlockStart, Block: 4, Part: ToolCall, ID: "call_1", Name: "g", Text: "sigB"},
		{Kind: EvBlockEnd, Block: 4},
		{Kind: EvFinish, Finish: FinishToolCalls}, // chat says stop; calls were made
		// prompt_tokens holds the cache writes, which chat cannot tell apart
		{Kind: EvUsage, Usage: Usage{Input: 14, CacheRead: 4, Output: 7, Reasoning: 2}},
	}
	if !reflect.DeepEqual(back.evs, want) {
		t.Errorf("read back %+v\nwant %+v", back.evs, want)
	}
}

// TestChatEncodeEnds: the usage chunk only when asked, no [DONE] after an
// error, an error in OpenAI's shape.
func TestChatEncodeEnds(t *testing.T) {
	events := []Event{{Kind: EvStart, ID: "x"}, {Kind: EvUsage, Usage: Usage{Input: 1, Output: 2}}, {Kind: EvFinish, Finish: FinishLength}}
	for _, include := range []bool{false, true} {
		enc := chatNewEncoder(&Request{IncludeUsage: include})
		var out []byte
		for _, ev := range events {
			out = enc.Encode(out, &ev)
		}
		out = enc.Close(out, false)
		chatValidSSE(t, out)
		s := string(out)
		if strings.Contains(s, `"usage"`) != include || !strings.HasSuffix(s, "data: [DONE]\n\n") || !strings.Contains(s, `"finish_reason":"length"`) {
			t.Errorf("include_usage %v: %s", include, s)
		}
	}
	s, _ := NewStream(Chat, Chat, &Request{})
	_, _ = s.Event("", []byte(`{"id":"a","choices":[{"index":0,"delta":{"content":"hi"}}]}`))
	out := s.Fail("overloaded_error", "Overloaded")
	chatValidSSE(t, out)
	if want := `data: {"error":{"message":"Overloaded","type":"overloaded_error","code":null}}` + "\n\n"; string(out) != want {
		t.Errorf("failed stream ends %q, want %q", out, want)
	}
}

// TestChatDecodeErrors: a stream must end after its finish_reason with
// its tool calls' arguments whole, and tool calls come one after another.
func TestChatDecodeErrors(t *testing.T) {
	const head = `{"id":"c","choices":[{"index":0,"delta":`
	call := func(idx int, rest string) string {
		return head + fmt.Sprintf(`{"tool_calls":[{"index":%d%s}]}}]}`, idx, rest)
	}
	finish := head + `{},"finish_reason":"tool_calls"}]}`
	for name, c := range map[string]struct {
		data []string
		msg  string
	}{
		"ends inside a tool call": {[]string{call(0, `,"id":"a","function":{"name":"f","arguments":"{\"x"}`)}, "inside a tool call"},
		"ends without finish":     {[]string{head + `{"content":"hi"}}]}`, "[DONE]"}, "before its finish_reason"},
		"ends before any chunk":   {nil, "before its finish_reason"},
		"malformed arguments":     {[]string{call(0, `,"id":"a","function":{"name":"f","arguments":"{\"x"}`), finish}, "malformed tool-argument stream"},
		"arguments before name":   {[]string{call(0, `,"function":{"arguments":"{}"}`)}, "malformed tool-argument stream"},
		"earlier index again": {[]string{
			call(0, `,"id":"a","function":{"name":"f","arguments":"{}"}`),
			call(1, `,"id":"b","function":{"name":"f","arguments":"{}"}`),
			call(0, `,"function":{"arguments":"{}"}`),
		}, "malformed tool-argument stream"},
		"bad args at switch": {[]string{
			call(0, `,"id":"a","function":{"name":"f","arguments":"{"}`),
			call(1, `,"id":"b","function":{"name":"f","arguments":"{}"}`),
		}, "malformed tool-argument stream"},
		"not JSON":           {[]string{`{"id":`}, "stream chunk"},
		"negative usage":     {[]string{head + `{"content":"hi"}}],"usage":{"prompt_tokens":-4}}`}, "prompt_tokens"},
		"text after finish":  {[]string{finish, head + `{"content":"more"}}]}`}, "after finish_reason"},
		"negative tool idx":  {[]string{call(-1, `,"id":"a","function":{"name":"f"}`)}, "malformed tool-argument stream"},
		"chunk not a object": {[]string{`[1]`}, "stream chunk"},
	} {
		data := make([][]byte, len(c.data))
		for i, d := range c.data {
			data[i] = []byte(d)
		}
		ck, err := chatDecodeAll(data)
		var m *ErrMalformed
		if !errors.As(err, &m) || !strings.Contains(m.Msg, c.msg) {
			t.Errorf("%s: got %v, want ErrMalformed saying %q", name, err, c.msg)
		}
		if ck.err != nil {
			t.Errorf("%s: %v", name, ck.err)
		}
	}
}

// TestChatDecodeVariants reads what compatible servers send beside
// OpenAI's shape: vLLM's reasoning and error, reasoning_details with a
// signature, Gemini's calls without index and id, errors mid-stream.
func TestChatDecodeVariants(t *testing.T) {
	for name, c := range map[string]struct {
		data []string
		want []Event
	}{
		"vllm reasoning": {[]string{
			`{"id":"v","model":"qwen","choices":[{"index":0,"delta":{"reasoning":"hm"}}]}`,
			`{"id":"v","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		}, []Event{
			{Kind: EvStart, ID: "v", Model: "qwen"}, {Kind: EvBlockStart, Part: Thinking}, {Kind: EvDelta, Text: "hm"},
			{Kind: EvBlockEnd}, {Kind: EvBlockStart, Block: 1, Part: Text}, {Kind: EvDelta, Block: 1, Text: "ok"},
			{Kind: EvBlockEnd, Block: 1}, {Kind: EvUsage, Usage: Usage{Input: 3, Output: 2}}, {Kind: EvFinish, Finish: FinishStop},
		}},
		"details signature then more thinking": {[]string{
			`{"choices":[{"index":0,"delta":{"reasoning":"a","reasoning_details":[{"type":"reasoning.text","text":"a"}]}}]}`,
			`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"s","format":"anthropic-claude-v1"}]}}]}`,
			`{"choices":[{"index":0,"delta":{"reasoning_content":"b"},"finish_reason":"length"}]}`,
		}, []Event{
			{Kind: EvStart}, {Kind: EvBlockStart, Part: Thinking}, {Kind: EvDelta, Text: "a"}, {Kind: EvSignature, Text: "s"},
			{Kind: EvBlockEnd}, {Kind: EvBlockStart, Block: 1, Part: Thinking}, {Kind: EvDelta, Block: 1, Text: "b"},
			{Kind: EvBlockEnd, Block: 1}, {Kind: EvFinish, Finish: FinishLength},
		}},
		"gemini calls without index or id": {[]string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{}"},"extra_content":{"google":{"thought_signature":"t"}}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"x","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
		}, []Event{
			{Kind: EvStart}, {Kind: EvBlockStart, Part: ToolCall, ID: "call_0", Name: "f", Text: "t"}, {Kind: EvDelta, Text: "{}"},
			{Kind: EvBlockEnd}, {Kind: EvBlockStart, Block: 1, Part: ToolCall, ID: "x", Name: "g"}, {Kind: EvDelta, Block: 1, Text: "{}"},
			{Kind: EvBlockEnd, Block: 1}, {Kind: EvFinish, Finish: FinishToolCalls},
		}},
		"openai error": {[]string{
			`{"choices":[{"index":0,"delta":{"content":"a"}}]}`,
			`{"error":{"message":"boom","type":"server_error","code":null}}`,
			`{"choices":[{"index":0,"delta":{"content":"ignored"}}]}`,
		}, []Event{
			{Kind: EvStart}, {Kind: EvBlockStart, Part: Text}, {Kind: EvDelta, Text: "a"},
			{Kind: EvError, Name: "server_error", Text: "boom"},
		}},
		"vllm error": {[]string{`{"object":"error","message":"too long","type":"BadRequestError","code":400}`},
			[]Event{{Kind: EvError, Name: "BadRequestError", Text: "too long"}}},
	} {
		data := make([][]byte, len(c.data))
		for i, d := range c.data {
			data[i] = []byte(d)
		}
		ck, err := chatDecodeAll(data)
		if err != nil || !reflect.DeepEqual(ck.evs, c.want) {
			t.Errorf("%s: %v\ngot  %+v\nwant %+v", name, err, ck.evs, c.want)
		}
	}
}

// TestChatAppendString agrees with encoding/json on what each string
// decodes back to, invalid UTF-8 included.
func TestChatAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", "quote \" backslash \\ slash /", "\x00\x01\x1f\x7f", "tab\tnl\ncr\r",
		"é ü 中文 🎉", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "<html>&amp;",
	} {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, enc, err)
		}
		ref, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(ref, &want)
		if got != want {
			t.Errorf("%q: decodes to %q, encoding/json's to %q", s, got, want)
		}
	}
}
