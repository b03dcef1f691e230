package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// gemSSE is the data of each event of an SSE body (\n or \r\n lines).
func gemSSE(body []byte) [][]byte {
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	var out [][]byte
	for _, ev := range bytes.Split(body, []byte("\n\n")) {
		var data [][]byte
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" ")))
			}
		}
		if data != nil {
			out = append(out, bytes.Join(data, []byte("\n")))
		}
	}
	return out
}

var gemKindNames = map[EventKind]string{
	EvStart: "start", EvBlockStart: "block_start", EvDelta: "delta", EvSignature: "signature",
	EvBlockEnd: "block_end", EvUsage: "usage", EvFinish: "finish", EvError: "error",
}

// gemEventLine is one event as a golden line: its kind and set fields.
func gemEventLine(ev *Event) string {
	var b strings.Builder
	b.WriteString(gemKindNames[ev.Kind])
	switch ev.Kind {
	case EvStart:
		fmt.Fprintf(&b, " id=%q model=%q", ev.ID, ev.Model)
	case EvBlockStart:
		fmt.Fprintf(&b, " %d %s", ev.Block, gemTypeNames[ev.Part])
		if ev.ID != "" || ev.Name != "" {
			fmt.Fprintf(&b, " id=%q name=%q", ev.ID, ev.Name)
		}
		if ev.Part == ToolCall && ev.Text != "" {
			fmt.Fprintf(&b, " sig=%q", ev.Text)
		}
	case EvDelta, EvSignature:
		fmt.Fprintf(&b, " %d %q", ev.Block, ev.Text)
	case EvBlockEnd:
		fmt.Fprintf(&b, " %d", ev.Block)
	case EvUsage:
		fmt.Fprintf(&b, " %+v", ev.Usage)
	case EvFinish:
		fmt.Fprintf(&b, " %s", ev.Finish)
	case EvError:
		fmt.Fprintf(&b, " %s %q", ev.Name, ev.Text)
	}
	return b.String()
}

// gemDecode feeds each data to a fresh decoder, then End: the events,
// and the first error.
func gemDecode(datas [][]byte) ([]Event, error) {
	var evs []Event
	emit := func(ev *Event) { evs = append(evs, *ev) }
	d := &gemDecoder{}
	for _, data := range datas {
		if err := d.Event("", data, emit); err != nil {
			return evs, err
		}
	}
	return evs, d.End(emit)
}

// gemCheckEvents reports the first break of the neutral stream's order
// (stream.go): Start first, blocks one at a time numbered from 0, deltas
// and signatures inside their block, one Finish, nothing after Error.
func gemCheckEvents(evs []Event) error {
	open, next, started, finished := -1, 0, false, false
	for i, ev := range evs {
		switch {
		case ev.Kind == EvError:
			if i != len(evs)-1 {
				return fmt.Errorf("event %d: events after an error", i)
			}
			continue
		case !started && ev.Kind != EvStart, started && ev.Kind == EvStart:
			return fmt.Errorf("event %d: %s where Start must come once, first", i, gemKindNames[ev.Kind])
		case finished && ev.Kind != EvUsage:
			return fmt.Errorf("event %d: %s after Finish", i, gemKindNames[ev.Kind])
		}
		switch ev.Kind {
		case EvStart:
			started = true
		case EvBlockStart:
			if open >= 0 || ev.Block != next {
				return fmt.Errorf("event %d: block %d opens while %d is open (next %d)", i, ev.Block, open, next)
			}
			open, next = ev.Block, next+1
		case EvDelta, EvSignature, EvBlockEnd:
			if ev.Block != open {
				return fmt.Errorf("event %d: %s of block %d while %d is open", i, gemKindNames[ev.Kind], ev.Block, open)
			}
			if ev.Kind == EvBlockEnd {
				open = -1
			}
		case EvUsage:
			u := ev.Usage
			if u.Input < 0 || u.CacheRead < 0 || u.Output < 0 || u.Reasoning < 0 || u.Reasoning > u.Output {
				return fmt.Errorf("event %d: usage %+v", i, u)
			}
		case EvFinish:
			if open >= 0 {
				return fmt.Errorf("event %d: Finish with block %d open", i, open)
			}
			finished = true
		}
	}
	return nil
}

// TestGeminiDecoderGolden: a thinking stream as streamGenerateContent
// sends it (a signed thought, text over two chunks, the last chunk's empty
// text carrying a signature). stream.golden was checked by hand: the
// thought is one block signed once, the text one block, usage 11 in and
// 17 + 214 out, emitted when it changed.
func TestGemDecoderGolden(t *testing.T) {
	evs, err := gemDecode(gemSSE(gemRead(t, "stream.sse")))
	if err != nil {
		t.Fatal(err)
	}
	if err := gemCheckEvents(evs); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range evs {
		b.WriteString(gemEventLine(&evs[i]) + "\n")
	}
	gemCheckGolden(t, "stream.golden", []byte(b.String()))
}

// TestGeminiStreamMatchesAnswer: the stream's blocks gathered as an answer
// equal the whole answer of the same parts, finish and usage.
func TestGemStreamMatchesAnswer(t *testing.T) {
	datas := gemSSE(gemRead(t, "stream.sse"))
	evs, err := gemDecode(datas)
	if err != nil {
		t.Fatal(err)
	}
	streamed := &Answer{}
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case EvStart:
			streamed.ID, streamed.Model = ev.ID, ev.Model
		case EvUsage:
			streamed.Usage, streamed.HasUsage = ev.Usage, true
		case EvFinish:
			streamed.Finish = ev.Finish
		default:
			gemCollect(streamed, ev)
		}
	}
	var whole, last map[string]any
	var parts []any
	for _, d := range datas {
		if err := json.Unmarshal(d, &last); err != nil {
			t.Fatal(err)
		}
		c := last["candidates"].([]any)[0].(map[string]any)
		parts = append(parts, c["content"].(map[string]any)["parts"].([]any)...)
	}
	whole = last
	whole["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"] = parts
	body, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	a, err := gemParseAnswer(body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := gemAnswerJSON(t, streamed), gemAnswerJSON(t, a); !bytes.Equal(got, want) {
		t.Fatalf("stream %s\nanswer %s", got, want)
	}
}

func TestGemDecoderCases(t *testing.T) {
	cases := []struct {
		name   string
		chunks []string
		want   string // the events, one per line
	}{
		{"parallel calls", []string{
			`{"candidates":[{"content":{"parts":[{"text":"On it."}],"role":"model"}}],"responseId":"r1","modelVersion":"gemini-3-pro-preview"}`,
			`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"location": "Paris"}},"thoughtSignature":"sigA"},{"functionCall":{"id":"fc_9","name":"get_time","args":{}}}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":12,"thoughtsTokenCount":40},"responseId":"r1"}`,
		}, `start id="r1" model="gemini-3-pro-preview"
block_start 0 text
delta 0 "On it."
block_end 0
block_start 1 tool_call id="call_0" name="get_weather" sig="sigA"
delta 1 "{\"location\":\"Paris\"}"
block_end 1
block_start 2 tool_call id="fc_9" name="get_time"
delta 2 "{}"
block_end 2
usage {Input:20 CacheRead:0 CacheWrite5m:0 CacheWrite1h:0 Output:52 Reasoning:40}
finish tool_calls
`},
		{"blocked prompt", []string{`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9},"modelVersion":"m"}`},
			`start id="" model="m"
usage {Input:9 CacheRead:0 CacheWrite5m:0 CacheWrite1h:0 Output:0 Reasoning:0}
finish content_filter
`},
		{"length, then a usage-only chunk", []string{
			`{"candidates":[{"content":{"parts":[{"text":"Once","thought":true},{"text":"upon"}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`,
			`{"candidates":[{"content":{"parts":[{"text":"ignored"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}`,
			"  ",
		}, `start id="" model=""
usage {Input:3 CacheRead:0 CacheWrite5m:0 CacheWrite1h:0 Output:1 Reasoning:0}
block_start 0 thinking
delta 0 "Once"
block_end 0
block_start 1 text
delta 1 "upon"
block_end 1
finish length
usage {Input:3 CacheRead:0 CacheWrite5m:0 CacheWrite1h:0 Output:2 Reasoning:0}
`},
		{"error chunk", []string{
			`{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}`,
			`{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`,
			`{"candidates":[{"content":{"parts":[{"text":"more"}]}}]}`,
		}, `start id="" model=""
block_start 0 text
delta 0 "Hi"
error UNAVAILABLE "The model is overloaded."
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var datas [][]byte
			for _, ch := range c.chunks {
				datas = append(datas, []byte(ch))
			}
			evs, err := gemDecode(datas)
			if err != nil {
				t.Fatal(err)
			}
			if err := gemCheckEvents(evs); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i := range evs {
				b.WriteString(gemEventLine(&evs[i]) + "\n")
			}
			if b.String() != c.want {
				t.Fatalf("events:\n%s\nwant:\n%s", b.String(), c.want)
			}
		})
	}
}

func TestGemDecoderErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		chunks []string
		want   string
	}{
		{"no finishReason", []string{`{"candidates":[{"content":{"parts":[{"text":"cut"}]}}],"usageMetadata":{"promptTokenCount":4}}`}, "the stream ended without a finishReason"},
		{"empty stream", nil, "the stream ended without a finishReason"},
		{"args not an object", []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"{\"a\":1}"}}]},"finishReason":"STOP"}]}`}, "functionCall.args is not a JSON object"},
		{"args an array", []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":[1,2]}}]}}]}`}, "functionCall.args is not a JSON object"},
		{"call without a name", []string{`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]}}]}`}, "functionCall without a name"},
		{"not JSON", []string{`[DONE]`}, "stream chunk: "},
		{"truncated chunk", []string{`{"candidates":[{"content":`}, "stream chunk: invalid JSON"},
		{"negative usage", []string{`{"usageMetadata":{"thoughtsTokenCount":-1}}`}, "usageMetadata.thoughtsTokenCount is negative (-1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var datas [][]byte
			for _, ch := range c.chunks {
				datas = append(datas, []byte(ch))
			}
			evs, err := gemDecode(datas)
			var m *ErrMalformed
			if !errors.As(err, &m) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want an *ErrMalformed with %q", err, c.want)
			}
			if cerr := gemCheckEvents(evs); cerr != nil {
				t.Fatal(cerr)
			}
		})
	}
}

// FuzzGeminiDecoder: any stream (events cut at blank lines) decodes
// without panic into events in the neutral order, or an ErrMalformed.
func FuzzGemDecoder(f *testing.F) {
	f.Add(gemRead(f, "stream.sse"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":[1]}},\"thoughtSignature\":\"s\"},{\"text\":\"x\",\"thought\":true}]},\"finishReason\":\"STOP\"}]}\n\n"))
	f.Add([]byte("data: {\"promptFeedback\":{\"blockReason\":\"OTHER\"}}\n\ndata: {\"error\":{\"status\":\"INTERNAL\"}}\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		evs, err := gemDecode(gemSSE(body))
		var m *ErrMalformed
		if err != nil && !errors.As(err, &m) {
			t.Fatalf("error %v is no ErrMalformed", err)
		}
		if cerr := gemCheckEvents(evs); cerr != nil {
			t.Fatal(cerr)
		}
		for _, ev := range evs {
			if ev.Kind == EvDelta && ev.Block >= 0 && strings.HasPrefix(ev.Text, "{") && !json.Valid([]byte(ev.Text)) {
				t.Fatalf("arguments %q are not JSON", ev.Text)
			}
		}
	})
}

// FuzzGeminiParseAnswer: any body parses without panic, and a parsed
// answer sent back as the next turn (its calls answered) builds a valid
// JSON request.
func FuzzGemParseAnswer(f *testing.F) {
	f.Add(gemRead(f, "answer.json"))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"a","thought":true,"thoughtSignature":"s"},{"text":"\u003cb\u003e"}]},"finishReason":"SAFETY"}],"usageMetadata":{"promptTokenCount":1}}`))
	f.Add([]byte(`{"promptFeedback":{"blockReason":"SAFETY"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := gemParseAnswer(body)
		if err != nil {
			var m *ErrMalformed
			if !errors.As(err, &m) {
				t.Fatalf("error %v is no ErrMalformed", err)
			}
			return
		}
		msgs := []Message{{Role: RoleUser, Parts: []Part{{Type: Text, Text: "q"}}}, {Role: RoleAssistant, Parts: a.Parts}}
		var results []Part
		for _, p := range a.Parts {
			if p.Type == ToolCall {
				results = append(results, Part{Type: ToolResult, ID: p.ID, Content: []Part{{Type: Text, Text: p.Arguments}}})
			}
		}
		if results != nil {
			msgs = append(msgs, Message{Role: RoleUser, Parts: results})
		}
		out, err := gemBuildRequest(&Request{Messages: msgs})
		if err != nil {
			t.Fatalf("the answer's parts cannot be sent back: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

// FuzzGeminiBuildRequest: whatever the caller's strings, the body is valid
// JSON or the error an *Invalid.
func FuzzGemBuildRequest(f *testing.F) {
	f.Add("hi", `{"a":1}`, `{"type":"object"}`, "0.5", "data:image/png;base64,AAAA", "medium")
	f.Add("\xff\x00<&>", "", "{", "1e400", "https://x/y.GIF", "max")
	f.Fuzz(func(t *testing.T, text, args, schema, temp, imageURL, effort string) {
		r := &Request{
			System: []string{text},
			Messages: []Message{
				{Role: RoleUser, Parts: []Part{{Type: Text, Text: text}, {Type: Image, URL: imageURL}}},
				{Role: RoleAssistant, Parts: []Part{{Type: Thinking, Text: text, Signature: text}, {Type: ToolCall, ID: text, Name: "f", Arguments: args, Signature: text}}},
				{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: text, Content: []Part{{Type: Text, Text: text}}}}},
			},
			Tools:       []Tool{{Name: text, Description: text, Parameters: json.RawMessage(schema)}},
			Temperature: json.RawMessage(temp),
			Stop:        []string{text},
			Format:      &Format{Type: "json_schema", Schema: json.RawMessage(schema)},
			Reasoning:   &Reasoning{Effort: effort},
		}
		out, err := gemBuildRequest(r)
		if err != nil {
			var inv *Invalid
			if !errors.As(err, &inv) {
				t.Fatalf("error %v is no *Invalid", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}

// BenchmarkGeminiDecoder is the cost of one streamed text chunk.
func BenchmarkGemDecoder(b *testing.B) {
	chunk := []byte(`{"candidates": [{"content": {"parts": [{"text": " the quick brown fox jumps over the lazy dog"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 11,"totalTokenCount": 11,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 11}]},"modelVersion": "gemini-2.5-flash","responseId": "pWg0aLyqIZ6Qz7IP1ZCR-Q4"}`)
	d := &gemDecoder{}
	n := 0
	emit := func(*Event) { n++ }
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if err := d.Event("", chunk, emit); err != nil {
			b.Fatal(err)
		}
	}
	if n == 0 {
		b.Fatal("no events")
	}
}
