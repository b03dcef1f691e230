package xlate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzChatParseRequest: any body is read or refused without a panic;
// what is read is written as JSON that reads back.
func FuzzChatParseRequest(f *testing.F) {
	f.Add(chatRead(f, "request_tools.json"))
	f.Add([]byte(`{"messages":[{"role":"assistant","reasoning_details":[{"type":"reasoning.text","text":"t","signature":"s"}],"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"r"}],"thinking":{"type":"enabled","budget_tokens":5000}}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"data:image/gif;base64,R0lG"}]}],"response_format":{"type":"json_object"},"stop":["a","b"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := chatParseRequest(body)
		if err != nil {
			return
		}
		built, err := chatBuildRequest(r)
		if err != nil {
			return // what the neutral form holds and chat cannot say
		}
		if !json.Valid(built) {
			t.Fatalf("built request is not JSON: %s", built)
		}
		if _, err := chatParseRequest(built); err != nil {
			t.Fatalf("built request %s does not read back: %v", built, err)
		}
	})
}

// FuzzChatDecoder: any stream, one data event per line, decodes without a
// panic into events in stream.go's order, and a chat caller's stream of
// JSON chunks.
func FuzzChatDecoder(f *testing.F) {
	for _, name := range []string{"stream_text.sse", "stream_tools.sse"} {
		f.Add(bytes.Join(chatSSE(chatRead(f, name)), []byte("\n")))
	}
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"reasoning":"a","reasoning_details":[{"type":"reasoning.text","signature":"s"},{"type":"reasoning.encrypted","data":"d"}]}}]}` + "\n" +
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"f","arguments":"{"}}]},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"error":{"message":"m","code":"rate_limit"}}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := &chatChecker{}
		d := chatNewDecoder()
		enc := chatNewEncoder(&Request{Model: "m", IncludeUsage: true})
		var out []byte
		emit := func(ev *Event) {
			c.emit(ev)
			out = enc.Encode(out, ev)
		}
		failed := false
		for _, line := range bytes.Split(stream, []byte("\n")) {
			chatCheckFast(t, line)
			if err := d.Event("", line, emit); err != nil {
				failed = true
				break
			}
		}
		if !failed && d.End(emit) != nil {
			failed = true
		}
		if c.err != nil {
			t.Fatal(c.err)
		}
		out = enc.Close(out, failed || c.ended)
		chatValidSSE(t, out)
	})
}

// chatCheckFast fails when the decoder's fast path reads a chunk that
// encoding/json refuses, or reads it otherwise.
func chatCheckFast(t *testing.T, data []byte) {
	t.Helper()
	var fast, slow chatChunkWire
	if !chatFastChunk(data, &fast, &chatScanCache{}) {
		return
	}
	if err := json.Unmarshal(data, &slow); err != nil {
		t.Fatalf("fast path read %q, which encoding/json refuses: %v", data, err)
	}
	norm := func(c *chatChunkWire) {
		if len(c.Choices) == 0 {
			c.Choices = nil
		}
		for i := range c.Choices {
			d := &c.Choices[i].Delta
			if len(d.ToolCalls) == 0 {
				d.ToolCalls = nil
			}
			if len(d.ReasoningDetails) == 0 {
				d.ReasoningDetails = nil
			}
		}
	}
	norm(&fast)
	norm(&slow)
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q read as\n%+v by the fast path,\n%+v by encoding/json", data, fast, slow)
	}
}

func TestChatFastChunk(t *testing.T) {
	for _, data := range []string{
		`{"id":"a","choices":[{"index":0,"delta":{"content":"tab\t nl\n q\" bs\\ sl\/ \u00e9 \ud83c\udf89 \ud800 \udc00x \ud800\u0041 é"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":null},null],"usage":null,"error":null}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":null,"type":null,"function":{"name":null,"arguments":"{\""}},null]},"finish_reason":null}]}`,
		`{"choices":[{"index":-0,"delta":{}}]}`, `{"choices":[{"index":1.0}]}`, `{"choices":[{"index":01}]}`,
		`{"choices":[{"index":1e2}]}`, `{"choices":[{"index":99999999999}]}`,
		`{"id":"a","id":"b"}`, `{"ID":"a"}`, `{"i\u0064":"a"}`, `{"id":"\xff"}`, "{\"id\":\"\xff\"}",
		`{"x":[1,-2.5e+3,true,false,null,{"y":"\u00zz"}]}`, `{"x":[1,-2.5e+3,true,false,null,{"y":"z"}]}`,
		`{"x":01}`, `{"x":-}`, `{"x":1.}`, `{"x":.5}`, `{"x":tru}`, `{"x":"a\qb"}`, `{"x":"a` + "\x01" + `b"}`,
		`{"usage":{"prompt_tokens":1},"choices":[]}`, `{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"t"}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"extra_content":{"google":{"thought_signature":"s"}},"function":{"name":"f"}}]}}]}`,
		`{"error":{"message":"m"}}`, `{"object":"error","message":"m","type":"t"}`, `{} `, ` {}x`, `[]`, `"s"`, ``,
		strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70),
	} {
		chatCheckFast(t, []byte(data))
	}
	var c chatChunkWire
	if !chatFastChunk([]byte(`{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"delta":{"content":"x\ny"},"finish_reason":null}]}`), &c, &chatScanCache{}) {
		t.Error("fast path gave up on a plain chunk")
	}
}

// FuzzChatParseAnswer: any answer is read or found malformed without a
// panic; what is read is written as JSON that reads back to as many parts.
func FuzzChatParseAnswer(f *testing.F) {
	f.Add(chatRead(f, "answer_tool_calls.json"))
	f.Add([]byte(`{"id":"x","choices":[{"message":{"content":"hi","reasoning_details":[{"type":"reasoning.text","text":"t","signature":"s"},{"type":"reasoning.encrypted","data":"d"}],"refusal":"no"},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":1}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := chatParseAnswer(body)
		if err != nil {
			return
		}
		out, err := chatWriteAnswer(a, &Request{Model: "m"})
		if err != nil || !json.Valid(out) {
			t.Fatalf("answer written as %s, %v", out, err)
		}
		back, err := chatParseAnswer(out)
		if err != nil {
			t.Fatalf("written answer %s does not read back: %v", out, err)
		}
		if back.Usage != a.Usage || back.Finish != a.Finish {
			t.Fatalf("read back %+v from %+v", back, a)
		}
	})
}

// BenchmarkChatEncoder is the cost of writing one text delta event.
func BenchmarkChatEncoder(b *testing.B) {
	enc := chatNewEncoder(&Request{Model: "gpt-4o-mini"})
	buf := enc.Encode(nil, &Event{Kind: EvStart, ID: "chatcmpl-123"})
	buf = enc.Encode(buf, &Event{Kind: EvBlockStart, Part: Text})
	ev := &Event{Kind: EvDelta, Text: " How can I help you today?"}
	b.ReportAllocs()
	for b.Loop() {
		buf = enc.Encode(buf[:0], ev)
	}
}

// BenchmarkChatDecoder is the cost of reading one text delta chunk.
func BenchmarkChatDecoder(b *testing.B) {
	d := chatNewDecoder()
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":" How can I help you today?"},"logprobs":null,"finish_reason":null}]}`)
	n := 0
	emit := func(*Event) { n++ }
	if err := d.Event("", data, emit); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Event("", data, emit); err != nil {
			b.Fatal(err)
		}
	}
}
