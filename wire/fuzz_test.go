package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var decodeSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[]}],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"max_tokens":5,"max_completion_tokens":7}`,
	`{"model":"m","input":"x","max_output_tokens":3}`,
	`{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","messages":[{"role":"system","content":"x"}]}`, `{"model":"m","input":null}`, `{"model":"m","input":{}}`,
	`{"model":`, `[]`, `null`, `{"model":5}`, `{"messages":"x"}`, "\xff\xfe", `{"model":"m","stream_options":null}`,
	`{"model":"m","input":"x","messages":[{"role":"user","content":"x"}],"max_tokens":1,"prompt_cache_key":"k","metadata":{"user_id":"u"}}`,
	`{"model":"m","input":"x","prompt_cache_key":7}`, `{"model":"m","max_tokens":3,"messages":[],"metadata":{"user_id":[]}}`,
	`{"model":"m","prompt":"a cat","size":"1024x1024","n":2,"stream":true}`, `{"model":"m","prompt":"a boat","duration":8,"resolution":"720p"}`,
	`{"model":"m","state":"text","questions":{"a":{"type":"score","min":0,"max":1e1},"b":{"type":"choice","options":["x"]}}}`,
}

// Decoding never panics and fails only with a 400 that names a field.
func FuzzDecode(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range []func([]byte) (*Summary, error){DecodeChat, DecodeResponses, DecodeMessages, DecodeCountTokens, DecodeCompact, DecodeImages, DecodeVideo, DecodeSystemOne} {
			s, err := dec(body)
			if err != nil {
				var e *Error
				if !errors.As(err, &e) || e.Field == "" || e.Message == "" {
					t.Fatalf("decode error %v is not a 400 naming a field", err)
				}
				continue
			}
			if s.Model == "" || s.MaxOutput < 0 {
				t.Fatalf("accepted a summary without model or with negative output: %+v", s)
			}
		}
	})
}

// ForceIncludeUsage keeps the body valid JSON, sets include_usage, and
// changes nothing else.
func FuzzForceIncludeUsage(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"stream_options":{"include_usage":false,"x":1},"model":"m"}`))
	f.Add([]byte(`{ "model" : "m" , "stream_options" : { } }`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var before map[string]any
		if json.Unmarshal(body, &before) != nil || before == nil {
			return
		}
		out, err := ForceIncludeUsage(body)
		if err != nil {
			if _, ok := before["stream_options"]; ok {
				return // a stream_options that is not an object is rejected
			}
			t.Fatalf("valid object rejected: %v", err)
		}
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("result is not JSON: %v\n%s", err, out)
		}
		so, _ := after["stream_options"].(map[string]any)
		if so == nil || so["include_usage"] != true {
			t.Fatalf("include_usage not set: %s", out)
		}
		delete(after, "stream_options")
		delete(before, "stream_options")
		a, _ := json.Marshal(after)
		b, _ := json.Marshal(before)
		if !bytes.Equal(a, b) {
			t.Fatalf("other fields changed:\n%s\n%s", b, a)
		}
	})
}

// ParseEvent never panics and finds data in every data line.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte("data: {\"x\":1}\n\n"))
	f.Add([]byte("event: message_start\ndata: {}\n\n"))
	f.Add([]byte("data: a\ndata: b\r\n\r\n"))
	f.Add([]byte(": comment\n\n"))
	f.Fuzz(func(t *testing.T, ev []byte) {
		_, data := ParseEvent(ev)
		if data != nil && !bytes.Contains(ev, []byte("data:")) {
			t.Fatalf("data without a data line: %q", ev)
		}
		_ = stripUsageNull(ev)
		_ = ChatText(ev)
		_ = ResponsesText(ev)
		_ = MessagesText(ev)
	})
}

func TestForceIncludeUsage(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true}`},
		{`{"model":"m","stream_options":{"include_usage":false}}`, `{"model":"m","stream_options":{"include_usage":true}}`},
		{`{"model":"m","stream_options": {"x":1} ,"stream":true}`, `{"model":"m","stream_options": {"include_usage":true,"x":1} ,"stream":true}`},
		{`{"stream_options":null}`, `{"stream_options":{"include_usage":true}}`},
	}
	for _, c := range cases {
		got, err := ForceIncludeUsage([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s → %s (%v), want %s", c.in, got, err, c.want)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"model":"modelb-6-astra","messages":[{"role":"user","content":"` + strings.Repeat("a realistic prompt of moderate length ", 20) + `"}],"max_tokens":256,"stream":true,"temperature":0.2}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeChat(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestStreamText(t *testing.T) {
	const sure, unsure = true, false
	cases := []struct {
		name string
		text func([]byte) int
		data string
		want int
		scan bool // the scan answers alone, without encoding/json
	}{
		{"chat content", ChatText, `{"id":"c","choices":[{"index":0,"delta":{"content":"some words "},"finish_reason":null}],"usage":null}`, 11, sure},
		{"chat escapes", ChatText, `{"choices":[{"delta":{"content":"a\n\"b\""}}]}`, 5, sure},
		{"chat \\u escape (decoded)", ChatText, `{"choices":[{"delta":{"content":"caf\u00e9"}}]}`, 5, unsure},
		{"chat non-ASCII", ChatText, `{"choices":[{"delta":{"content":"café"}}]}`, 5, sure},
		{"chat reasoning and tools", ChatText, `{"choices":[{"delta":{"reasoning_content":"hmm","tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}},null,{"function":null}]}}]}`, 10, sure},
		{"chat two choices", ChatText, `{"choices":[{"delta":{"content":"ab"}},{"delta":{"content":"cde"}},null,{"delta":null}]}`, 5, sure},
		{"chat role only", ChatText, `{"choices":[{"delta":{"role":"assistant","content":null}}]}`, 0, sure},
		{"chat usage chunk", ChatText, `{"choices":[],"usage":{"prompt_tokens":3}}`, 0, sure},
		{"chat odd type refused", ChatText, `{"choices":[{"delta":{"content":7}}]}`, 0, unsure},
		{"chat choices not an array", ChatText, `{"choices":{"delta":{"content":"x"}}}`, 0, unsure},
		{"chat key in other case", ChatText, `{"choices":[{"delta":{"Content":"abc"}}]}`, 3, unsure},
		{"chat repeated key", ChatText, `{"choices":[{"delta":{"content":"a","content":"bcd"}}]}`, 3, unsure},
		{"chat not JSON", ChatText, `[DONE]`, 0, unsure},
		{"messages text", MessagesText, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`, 5, sure},
		{"messages tool input", MessagesText, `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}`, 5, sure},
		{"messages thinking", MessagesText, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`, 2, sure},
		{"messages stop", MessagesText, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`, 0, sure},
		{"messages no delta", MessagesText, `{"type":"message_stop"}`, 0, sure},
		{"responses delta", ResponsesText, `{"type":"response.output_text.delta","item_id":"m","delta":"Hi there"}`, 8, sure},
		{"responses other", ResponsesText, `{"type":"response.completed","response":{"usage":{"input_tokens":1}}}`, 0, sure},
		{"responses object delta refused", ResponsesText, `{"type":"x","delta":{"a":"b"}}`, 0, unsure},
	}
	scanners := map[string]func([]byte) (int, bool){ // by reader, as each reader calls its scan
		"chat":      scanChatText,
		"messages":  scanMessagesText,
		"responses": func(d []byte) (int, bool) { return textString(d, "delta") },
	}
	for _, c := range cases {
		if got := c.text([]byte(c.data)); got != c.want {
			t.Errorf("%s: %d text bytes, want %d", c.name, got, c.want)
		}
		// Were the scan never sure, every count above would still be
		// right, by decoding: this is what keeps the fast path in use.
		n, ok := scanners[strings.Fields(c.name)[0]]([]byte(c.data))
		if ok != c.scan || ok && n != c.want {
			t.Errorf("%s: the scan says %d, sure %v; want sure %v", c.name, n, ok, c.scan)
		}
	}
}

// FuzzStreamText: the scanning text readers give encoding/json's answer on
// every well-formed event.
func FuzzStreamText(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"a\nb","tool_calls":[{"function":{"arguments":"{}"}}]}}]}`,
		`{"choices":[{"delta":{"content":"caf\u00e9"}},null]}`,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"response.output_text.delta","delta":"x"}`,
		`{"choices":[{"delta":{"content":7}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The readers' own cheap guards (data starts with '{', names
		// "delta") come before either path.
		if !json.Valid(data) || data[0] != '{' {
			return
		}
		if got, want := ChatText(data), decodeChatText(data); got != want {
			t.Fatalf("ChatText(%s) = %d; encoding/json: %d", data, got, want)
		}
		if !bytes.Contains(data, []byte(`"delta"`)) {
			return
		}
		if got, want := MessagesText(data), decodeMessagesText(data); got != want {
			t.Fatalf("MessagesText(%s) = %d; encoding/json: %d", data, got, want)
		}
		if got, want := ResponsesText(data), decodeResponsesText(data); got != want {
			t.Fatalf("ResponsesText(%s) = %d; encoding/json: %d", data, got, want)
		}
	})
}
