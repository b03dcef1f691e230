package xlate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// respSSE is one event of a responses stream.
type respSSE struct {
	name string
	data map[string]any
	raw  string
}

// respReadSSE splits a stream into its events, failing the test on any
// event that is not "event: T\ndata: {"type":T,...,"sequence_number":n}"
// with n counting from 0.
func respReadSSE(t *testing.T, stream []byte) []respSSE {
	t.Helper()
	s := string(stream)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end an event: %q", s)
	}
	var evs []respSSE
	for i, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(block, "\ndata: ")
		name, ok2 := strings.CutPrefix(name, "event: ")
		if !ok || !ok2 || strings.Contains(data, "\n") {
			t.Fatalf("event %d is not one event line and one data line: %q", i, block)
		}
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(data))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, data)
		}
		if m["type"] != name {
			t.Errorf("event %d: type %v under event: %s", i, m["type"], name)
		}
		if m["sequence_number"] != json.Number(strconv.Itoa(i)) {
			t.Errorf("event %d: sequence_number %v", i, m["sequence_number"])
		}
		if !strings.HasPrefix(data, `{"type":"`+name+`",`) || !strings.HasSuffix(data, `,"sequence_number":`+strconv.Itoa(i)+"}") {
			t.Errorf("event %d: type first and sequence_number last: %s", i, data)
		}
		evs = append(evs, respSSE{name: name, data: m, raw: data})
	}
	return evs
}

// respEncodeAll runs events through an encoder for r and closes it.
func respEncodeAll(r *Request, evs []Event, failed bool) []byte {
	enc := respNewEncoder(r)
	var out []byte
	for i := range evs {
		out = enc.Encode(out, &evs[i])
	}
	return enc.Close(out, failed)
}

// respStreamFull is a stream of thinking (signed, then redacted), text
// and a tool call, as a messages upstream's decoder emits it.
func respStreamFull() []Event {
	return []Event{
		{Kind: EvStart, ID: "msg_01ABC", Model: "claude-sonnet-4-5"},
		{Kind: EvBlockStart, Block: 0, Part: Thinking},
		{Kind: EvDelta, Block: 0, Text: "Let me think"},
		{Kind: EvDelta, Block: 0, Text: " about \"Paris\".\n"},
		{Kind: EvSignature, Block: 0, Text: "EqQBCgIYAhIM1gbcDa9G"},
		{Kind: EvBlockEnd, Block: 0},
		{Kind: EvBlockStart, Block: 1, Part: RedactedThinking, Text: "EmwKAhgBEgy3va3p"},
		{Kind: EvBlockEnd, Block: 1},
		{Kind: EvBlockStart, Block: 2, Part: Text},
		{Kind: EvDelta, Block: 2, Text: "Checking "},
		{Kind: EvDelta, Block: 2, Text: "the weather…\u2028</script>"},
		{Kind: EvBlockEnd, Block: 2},
		{Kind: EvBlockStart, Block: 3, Part: ToolCall, ID: "toolu_01", Name: "get_weather"},
		{Kind: EvDelta, Block: 3, Text: `{"location":`},
		{Kind: EvDelta, Block: 3, Text: `"Paris"}`},
		{Kind: EvBlockEnd, Block: 3},
		{Kind: EvFinish, Finish: FinishToolCalls},
		{Kind: EvUsage, Usage: Usage{Input: 10, CacheRead: 5, Output: 40, Reasoning: 12}},
	}
}

func TestRespEncoderGolden(t *testing.T) {
	respDeterministic(t)
	r := respParse(t, "request_tool_outputs.json")
	out := respEncodeAll(r, respStreamFull(), false)
	respGolden(t, "stream_full.sse", out)
	evs := respReadSSE(t, out)

	var names []string
	for _, ev := range evs {
		names = append(names, strings.TrimPrefix(ev.name, "response."))
	}
	want := "created in_progress output_item.added reasoning_summary_part.added reasoning_summary_text.delta " +
		"reasoning_summary_text.delta reasoning_summary_text.done reasoning_summary_part.done output_item.done " +
		"output_item.added content_part.added output_text.delta output_text.delta output_text.done content_part.done " +
		"output_item.done output_item.added function_call_arguments.delta function_call_arguments.delta " +
		"function_call_arguments.done output_item.done completed"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events:\n%s\nwant\n%s", got, want)
	}

	// The completed response holds the items output_item.done gave, in
	// order, and the usage in the responses convention.
	last := evs[len(evs)-1].raw
	var done struct {
		Response struct {
			ID     string            `json:"id"`
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
			Usage  json.RawMessage   `json:"usage"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(last), &done); err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	for _, ev := range evs {
		if ev.name == "response.output_item.done" {
			var d struct{ Item json.RawMessage }
			_ = json.Unmarshal([]byte(ev.raw), &d)
			items = append(items, d.Item)
			if n, _ := ev.data["output_index"].(json.Number).Int64(); int(n) != len(items)-1 {
				t.Errorf("output_item.done output_index %d, want %d", n, len(items)-1)
			}
		}
	}
	if !reflect.DeepEqual(done.Response.Output, items) {
		t.Errorf("completed output %s\nwant the done items %s", done.Response.Output, items)
	}
	if done.Response.ID != "resp_01ABC" || done.Response.Status != "completed" {
		t.Errorf("completed response %s %s", done.Response.ID, done.Response.Status)
	}
	respSameJSON(t, "usage", done.Response.Usage, json.RawMessage(`{"input_tokens":15,"input_tokens_details":{"cached_tokens":5},
		"output_tokens":40,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":55}`))
}

// respShape is the keys of a JSON value's objects, recursively: what a
// parser that reads fields by name sees of it.
func respShape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = respShape(x)
		}
		return m
	case []any:
		if len(v) == 0 {
			return []any{}
		}
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = respShape(x)
		}
		return s
	}
	return nil
}

// respShapeKey names an event by its type and, for item events, the
// type of its item.
func respShapeKey(ev respSSE) string {
	k := ev.name
	if it, ok := ev.data["item"].(map[string]any); ok {
		k += "/" + it["type"].(string)
	}
	return k
}

// TestRespEncoderDocumentedShape: every event the encoder writes has the
// fields of the same event in OpenAI's documented stream (reasoning
// summary, text and a function call), no more and no fewer.
func TestRespEncoderDocumentedShape(t *testing.T) {
	docs := map[string]any{}
	for _, ev := range respReadSSE(t, respFixture(t, "documented_stream.sse")) {
		docs[respShapeKey(ev)] = respShape(ev.data)
	}
	var evs []Event
	for _, ev := range respStreamFull() {
		if ev.Part != RedactedThinking && ev.Block != 1 {
			evs = append(evs, ev)
		}
	}
	seen := map[string]bool{}
	for _, ev := range respReadSSE(t, respEncodeAll(&Request{Model: "m"}, evs, false)) {
		k := respShapeKey(ev)
		seen[k] = true
		want, ok := docs[k]
		if !ok {
			t.Errorf("%s is not in the documented stream", k)
			continue
		}
		got := respShape(ev.data)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s fields:\n%v\nwant\n%v", k, got, want)
		}
	}
	var missing []string
	for k := range docs {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("documented events never written: %v", missing)
	}
}

// TestRespMRXRoundTrip: thinking and its signatures survive the stream's
// reasoning item and come back unchanged when the caller sends it again.
func TestRespMRXRoundTrip(t *testing.T) {
	out := respEncodeAll(&Request{Model: "m"}, respStreamFull(), false)
	var item json.RawMessage
	for _, ev := range respReadSSE(t, out) {
		if ev.name == "response.output_item.done" && strings.Contains(ev.raw, `"type":"reasoning"`) {
			var d struct{ Item json.RawMessage }
			if err := json.Unmarshal([]byte(ev.raw), &d); err != nil {
				t.Fatal(err)
			}
			item = d.Item
		}
	}
	if item == nil {
		t.Fatal("no reasoning item done")
	}
	r, err := ParseRequest(Responses, []byte(`{"model":"m","input":[{"role":"user","content":"hi"},`+string(item)+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Part{
		{Type: Thinking, Text: "Let me think about \"Paris\".\n", Signature: "EqQBCgIYAhIM1gbcDa9G"},
		{Type: RedactedThinking, Data: "EmwKAhgBEgy3va3p"},
	}
	if len(r.Messages) != 2 || !reflect.DeepEqual(r.Messages[1], Message{Role: RoleAssistant, Parts: want}) {
		t.Errorf("messages = %+v", r.Messages)
	}
}

// TestRespEncoderError: an upstream error is response.failed with its
// code and message, and the stream then ends without a success event.
func TestRespEncoderError(t *testing.T) {
	evs := respStreamFull()[:11]
	evs = append(evs, Event{Kind: EvError, Name: "overloaded_error", Text: "Overloaded"})
	out := respEncodeAll(&Request{Model: "m"}, evs, true)
	got := respReadSSE(t, out)
	last := got[len(got)-1]
	if last.name != "response.failed" {
		t.Fatalf("last event %s", last.name)
	}
	var f struct {
		Response struct {
			Status string            `json:"status"`
			Error  respErrorObj      `json:"error"`
			Output []json.RawMessage `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(last.raw), &f); err != nil {
		t.Fatal(err)
	}
	if f.Response.Status != "failed" || f.Response.Error != (respErrorObj{"overloaded_error", "Overloaded"}) || len(f.Response.Output) != 1 {
		t.Errorf("failed response %+v", f.Response)
	}
	if bytes.Contains(out, []byte("response.completed")) {
		t.Error("a failed stream holds response.completed")
	}
	// An error before anything else still makes a whole stream.
	out = respEncodeAll(nil, []Event{{Kind: EvError, Text: "boom"}}, true)
	got = respReadSSE(t, out)
	if len(got) != 3 || got[2].name != "response.failed" || !strings.Contains(got[2].raw, `"error":{"code":"server_error","message":"boom"}`) {
		t.Errorf("early error stream: %s", out)
	}
}

// TestRespEncoderEmpty: a stream closed with no event is still whole.
func TestRespEncoderEmpty(t *testing.T) {
	evs := respReadSSE(t, respEncodeAll(nil, nil, false))
	if len(evs) != 3 || evs[0].name != "response.created" || evs[1].name != "response.in_progress" || evs[2].name != "response.completed" {
		t.Errorf("events %+v", evs)
	}
}

// TestRespEncoderIncomplete: a stream cut at the output bound ends with
// response.incomplete; the open block is ended first.
func TestRespEncoderIncomplete(t *testing.T) {
	evs := []Event{
		{Kind: EvStart, ID: "chatcmpl-9"},
		{Kind: EvBlockStart, Part: Text},
		{Kind: EvDelta, Text: "Once upon"},
		{Kind: EvFinish, Finish: FinishLength},
	}
	out := respEncodeAll(&Request{Model: "gpt-x"}, evs, false)
	got := respReadSSE(t, out)
	last := got[len(got)-1]
	if last.name != "response.incomplete" || got[len(got)-2].name != "response.output_item.done" {
		t.Fatalf("stream: %s", out)
	}
	for _, s := range []string{`"status":"incomplete"`, `"incomplete_details":{"reason":"max_output_tokens"}`, `"id":"resp_9"`, `"model":"gpt-x"`, `"usage":null`, `"text":"Once upon"`} {
		if !strings.Contains(last.raw, s) {
			t.Errorf("response.incomplete lacks %s: %s", s, last.raw)
		}
	}
}

// TestRespEncoderReasoningItem: an upstream's own reasoning item keeps
// its id and encrypted content.
func TestRespEncoderReasoningItem(t *testing.T) {
	out := respEncodeAll(&Request{}, []Event{
		{Kind: EvStart, ID: "x"},
		{Kind: EvBlockStart, Part: ReasoningItem, ID: "rs_up"},
		{Kind: EvDelta, Text: "summary"},
		{Kind: EvSignature, Text: "gAAAA"},
		{Kind: EvBlockEnd},
		{Kind: EvBlockStart, Part: Thinking},
		{Kind: EvBlockEnd},
	}, false)
	evs := respReadSSE(t, out)
	want := `"item":{"id":"rs_up","type":"reasoning","summary":[{"type":"summary_text","text":"summary"}],"encrypted_content":"gAAAA"}`
	if !strings.Contains(evs[7].raw, want) || evs[7].name != "response.output_item.done" {
		t.Errorf("event 7 = %s, want %s", evs[7].raw, want)
	}
	if !strings.Contains(evs[9].raw, `"output_index":1,"item":{"id":"rs_`) || !strings.Contains(evs[9].raw, `"summary":[],"encrypted_content":"mrx1.`) {
		t.Errorf("event 9 = %s: the thinking run's item", evs[9].raw)
	}
}

// BenchmarkRespEncoder is the cost of one event: a text delta, and on
// average over a whole stream of thinking, text and a tool call.
func BenchmarkRespEncoder(b *testing.B) {
	b.Run("delta", func(b *testing.B) {
		enc := respNewEncoder(&Request{Model: "m"})
		buf := enc.Encode(nil, &Event{Kind: EvStart, ID: "msg_1"})
		buf = enc.Encode(buf[:0], &Event{Kind: EvBlockStart, Part: Text})
		ev := &Event{Kind: EvDelta, Text: "Hello, the weather in Paris is \"fine\" today.\n"}
		b.ReportAllocs()
		for b.Loop() {
			buf = enc.Encode(buf[:0], ev)
			if e := enc.(*respEncoder); len(e.buf) > 1<<20 {
				e.buf = e.buf[:0]
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		evs := respStreamFull()
		r := &Request{Model: "m"}
		var enc Encoder
		var buf []byte
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := i % len(evs)
			if k == 0 {
				if enc != nil {
					buf = enc.Close(buf[:0], false)
				}
				enc = respNewEncoder(r)
			}
			buf = enc.Encode(buf[:0], &evs[k])
			i++
		}
	})
}
