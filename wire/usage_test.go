package wire

import (
	"strings"
	"testing"
)

type usageCase struct {
	name string
	body string
	want Usage
	ok   bool
	err  string // in the message; "" for none
}

func runUsageCases(t *testing.T, fn func([]byte) (Usage, bool, error), cases []usageCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := fn([]byte(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want one containing %q", err, tt.err)
				}
				if ok {
					t.Fatalf("ok with an error")
				}
				return
			}
			if err != nil || ok != tt.ok || got != tt.want {
				t.Fatalf("= %+v, %v, %v; want %+v, %v", got, ok, err, tt.want, tt.ok)
			}
		})
	}
}

func TestChatUsage(t *testing.T) {
	runUsageCases(t, ChatUsage, []usageCase{
		{"response with cache", `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],
			"usage":{"prompt_tokens":1200,"completion_tokens":34,"total_tokens":1234,"prompt_tokens_details":{"cached_tokens":1024}}}`,
			Usage{InputTokens: 176, CacheReadTokens: 1024, OutputTokens: 34}, true, ""},
		{"no details", `{"usage":{"prompt_tokens":10,"completion_tokens":5}}`, Usage{InputTokens: 10, OutputTokens: 5}, true, ""},
		{"null details", `{"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":null}}`, Usage{InputTokens: 10, OutputTokens: 5}, true, ""},
		{"usage-only chunk", `{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			Usage{InputTokens: 9, OutputTokens: 12}, true, ""},
		{"empty usage object", `{"usage":{}}`, Usage{}, true, ""},
		{"null usage", `{"choices":[{"delta":{"content":"x"}}],"usage":null}`, Usage{}, false, ""},
		{"no usage", `{"choices":[]}`, Usage{}, false, ""},
		{"cached above prompt", `{"usage":{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":11}}}`, Usage{}, false, "cached_tokens (11) is above usage.prompt_tokens (10)"},
		{"negative", `{"usage":{"prompt_tokens":10,"completion_tokens":-1}}`, Usage{}, false, "usage.completion_tokens is negative (-1)"},
		{"fractional count", `{"usage":{"prompt_tokens":10.5}}`, Usage{}, false, "usage.prompt_tokens must be int64"},
		{"string count", `{"usage":{"prompt_tokens":"10"}}`, Usage{}, false, "usage.prompt_tokens must be int64, not string"},
		{"usage not an object", `{"usage":[1]}`, Usage{}, false, "usage must be"},
		{"not an object", `[1,2]`, Usage{}, false, "must be a JSON object"},
		{"done marker", `[DONE]`, Usage{}, false, "invalid JSON at byte"},
		{"truncated", `{"usage":{"prompt_tokens":1`, Usage{}, false, "invalid JSON"},
		{"empty", ``, Usage{}, false, "chat completion"},
	})
}

func TestResponsesUsage(t *testing.T) {
	runUsageCases(t, ResponsesUsage, []usageCase{
		{"response", `{"id":"resp_1","object":"response","status":"completed","output":[],
			"usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048},"output_tokens":500,"output_tokens_details":{"reasoning_tokens":320},"total_tokens":3500}}`,
			Usage{InputTokens: 952, CacheReadTokens: 2048, OutputTokens: 500}, true, ""},
		{"no cache", `{"usage":{"input_tokens":7,"output_tokens":3}}`, Usage{InputTokens: 7, OutputTokens: 3}, true, ""},
		{"null usage", `{"status":"in_progress","usage":null}`, Usage{}, false, ""},
		{"cached above input", `{"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":2}}}`, Usage{}, false, "is above usage.input_tokens"},
		{"negative", `{"usage":{"input_tokens":-7}}`, Usage{}, false, "usage.input_tokens is negative"},
		{"bad JSON", `{"usage":`, Usage{}, false, "response: invalid JSON"},
	})
}

func TestMessagesUsage(t *testing.T) {
	runUsageCases(t, MessagesUsage, []usageCase{
		{"message with 1h breakdown", `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],
			"usage":{"input_tokens":21,"cache_creation_input_tokens":3000,"cache_read_input_tokens":10000,
			"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},"output_tokens":393}}`,
			Usage{InputTokens: 21, CacheReadTokens: 10000, CacheWriteTokens: 1000, CacheWrite1hTokens: 2000, OutputTokens: 393}, true, ""},
		{"no breakdown: all 5-minute", `{"usage":{"input_tokens":5,"cache_creation_input_tokens":300,"cache_read_input_tokens":0,"output_tokens":9}}`,
			Usage{InputTokens: 5, CacheWriteTokens: 300, OutputTokens: 9}, true, ""},
		{"null cache fields", `{"usage":{"input_tokens":5,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"cache_creation":null,"output_tokens":9}}`,
			Usage{InputTokens: 5, OutputTokens: 9}, true, ""},
		// The breakdown says 100 but the total says 300 with 50 at 1h: the
		// remaining 250 are billed as 5-minute writes.
		{"breakdown short of the total", `{"usage":{"input_tokens":1,"cache_creation_input_tokens":300,"cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":50}}}`,
			Usage{InputTokens: 1, CacheWriteTokens: 250, CacheWrite1hTokens: 50}, true, ""},
		{"breakdown without total", `{"usage":{"cache_creation":{"ephemeral_5m_input_tokens":7,"ephemeral_1h_input_tokens":8}}}`,
			Usage{CacheWriteTokens: 7, CacheWrite1hTokens: 8}, true, ""},
		{"no usage", `{"type":"message"}`, Usage{}, false, ""},
		{"negative 1h", `{"usage":{"cache_creation":{"ephemeral_1h_input_tokens":-8}}}`, Usage{}, false, "usage.cache_creation.ephemeral_1h_input_tokens is negative (-8)"},
		{"string tokens", `{"usage":{"output_tokens":"many"}}`, Usage{}, false, "usage.output_tokens must be int64, not string"},
	})
}

func TestSystemOneUsage(t *testing.T) {
	runUsageCases(t, SystemOneUsage, []usageCase{
		{"answer", `{"model":"sysmodel-1.13.0","answers":{"q":{"type":"noul","noul":0.73}},"usage":{"input_tokens":812,"output_tokens":3}}`,
			Usage{InputTokens: 812, OutputTokens: 3}, true, ""},
		{"no usage", `{"answers":{}}`, Usage{}, false, ""},
		{"negative", `{"usage":{"input_tokens":-1}}`, Usage{}, false, "usage.input_tokens is negative"},
		{"bad JSON", `{`, Usage{}, false, "typed-question response: invalid JSON"},
	})
}

// TestUsageErrorsDoNotQuoteBodies checks that errors name fields and offsets
// and never carry prompt or completion text.
func TestUsageErrorsDoNotQuoteBodies(t *testing.T) {
	const secret = "SECRET-PROMPT-TEXT"
	bodies := []string{
		`{"choices":[{"message":{"content":"` + secret + `"}}],"usage":{"prompt_tokens":"` + secret + `"}}`,
		`{"choices":[{"message":{"content":"` + secret + `"}}],"usage":` + secret + `}`,
		`{"content":"` + secret + `","usage":{"input_tokens":[` + secret + `]}}`,
		secret,
	}
	fns := map[string]func([]byte) (Usage, bool, error){
		"chat": ChatUsage, "responses": ResponsesUsage, "messages": MessagesUsage, "systemone": SystemOneUsage,
	}
	quotes := func(err error) bool {
		return strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "'S'")
	}
	errs := 0
	for name, fn := range fns {
		for _, b := range bodies {
			_, _, err := fn([]byte(b))
			if err == nil {
				continue // a field this reader does not look at
			}
			errs++
			if quotes(err) {
				t.Fatalf("%s: error %q quotes the body", name, err)
			}
		}
	}
	if errs < 3*len(fns) {
		t.Fatalf("only %d errors: the bodies do not exercise the readers", errs)
	}
	for _, m := range []Meter{NewChatMeter(), NewResponsesMeter(), NewMessagesMeter()} {
		err := m.Observe("response.completed", []byte(`{"type":"message_start","choices":[{"delta":{"content":"`+secret+`"}}],"usage":{"prompt_tokens":`+secret+`}}`))
		if err == nil || quotes(err) {
			t.Fatalf("meter error %v", err)
		}
	}
}

func TestMayHaveUsage(t *testing.T) {
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"content chunk", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"}}]}`, false},
		{"null usage", `{"choices":[{"delta":{"content":"x"}}],"usage":null}`, false},
		{"null usage with spaces", `{"usage" :  null}`, false},
		{"usage object", `{"choices":[],"usage":{"prompt_tokens":1}}`, true},
		{"usage after spaces", "{\"usage\"\n:\t{}}", true},
		{"null then object", `{"a":{"usage":null},"usage":{}}`, true},
		{"the word in content", `{"choices":[{"delta":{"content":"the usage of words"}}]}`, false},
		{"quoted word in content", `{"choices":[{"delta":{"content":"say \"usage\": 5"}}]}`, false},
		{"key at the end", `{"usage"`, false},
		{"empty", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mayHaveUsage([]byte(tt.data)); got != tt.want {
				t.Fatalf("mayHaveUsage(%s) = %v, want %v", tt.data, got, tt.want)
			}
		})
	}
}

func TestIsChatUsageOnlyChunk(t *testing.T) {
	tests := []struct {
		name string
		data string
		want bool
	}{
		{"usage chunk", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`, true},
		{"usage chunk with spaces", `{"choices": [ ], "usage": {"prompt_tokens": 9}}`, true},
		{"content chunk", `{"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}`, false},
		{"content chunk with usage", `{"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"prompt_tokens":9}}`, false},
		{"empty choices, null usage", `{"choices":[],"usage":null}`, false},
		{"no choices key", `{"usage":{"prompt_tokens":9}}`, false},
		{"null choices", `{"choices":null,"usage":{"prompt_tokens":9}}`, false},
		{"done", `[DONE]`, false},
		{"malformed", `{"choices":[],"usage":{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsChatUsageOnlyChunk([]byte(tt.data)); got != tt.want {
				t.Fatalf("IsChatUsageOnlyChunk = %v, want %v", got, tt.want)
			}
		})
	}
}

type event struct{ name, data string }

func observeAll(t *testing.T, m Meter, events []event) {
	t.Helper()
	for i, e := range events {
		if err := m.Observe(e.name, []byte(e.data)); err != nil {
			t.Fatalf("event %d (%s): %v", i, e.name, err)
		}
	}
}

func TestChatMeter(t *testing.T) {
	tests := []struct {
		name   string
		events []event
		want   Usage
		ok     bool
	}{
		{"usage chunk at the end", []event{
			{"", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}`},
			{"", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hello"}}],"usage":null}`},
			{"", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`},
			{"", `{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":2100,"completion_tokens":2,"total_tokens":2102,"prompt_tokens_details":{"cached_tokens":2048}}}`},
			{"", `[DONE]`},
		}, Usage{InputTokens: 52, CacheReadTokens: 2048, OutputTokens: 2}, true},
		{"running usage, last wins", []event{
			{"", `{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":10,"completion_tokens":1}}`},
			{"", `{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":10,"completion_tokens":2}}`},
			{"", `{"choices":[{"delta":{"content":"c"}}],"usage":null}`},
		}, Usage{InputTokens: 10, OutputTokens: 2}, true},
		{"no usage", []event{
			{"", `{"choices":[{"delta":{"content":"a"}}]}`},
			{"", ` [DONE] `},
		}, Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewChatMeter()
			observeAll(t, m, tt.events)
			if got, ok := m.Usage(); got != tt.want || ok != tt.ok {
				t.Fatalf("Usage = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestChatMeterKeepsUsageAfterBadChunk(t *testing.T) {
	m := NewChatMeter()
	observeAll(t, m, []event{{"", `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}`}})
	if err := m.Observe("", []byte(`{"usage":{"prompt_tokens":-3}}`)); err == nil {
		t.Fatal("negative usage accepted")
	}
	if got, ok := m.Usage(); !ok || got != (Usage{InputTokens: 5, OutputTokens: 1}) {
		t.Fatalf("Usage = %+v, %v", got, ok)
	}
}

func TestResponsesMeter(t *testing.T) {
	created := `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[],"usage":null}}`
	delta := `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"usage: yes"}`
	completed := `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"usage: yes"}]}],
		"usage":{"input_tokens":4000,"input_tokens_details":{"cached_tokens":3072},"output_tokens":77,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":4077}}}`
	tests := []struct {
		name   string
		events []event
		want   Usage
		ok     bool
	}{
		{"completed with event names", []event{{"response.created", created}, {"response.output_text.delta", delta}, {"response.completed", completed}},
			Usage{InputTokens: 928, CacheReadTokens: 3072, OutputTokens: 77}, true},
		{"completed without event names", []event{{"", created}, {"", delta}, {"", completed}},
			Usage{InputTokens: 928, CacheReadTokens: 3072, OutputTokens: 77}, true},
		{"incomplete", []event{{"response.incomplete", `{"type":"response.incomplete","response":{"status":"incomplete","usage":{"input_tokens":10,"output_tokens":4096}}}`}},
			Usage{InputTokens: 10, OutputTokens: 4096}, true},
		{"failed with usage", []event{{"response.failed", `{"type":"response.failed","response":{"status":"failed","usage":{"input_tokens":10,"output_tokens":1}}}`}},
			Usage{InputTokens: 10, OutputTokens: 1}, true},
		{"failed without usage", []event{{"response.failed", `{"type":"response.failed","response":{"status":"failed","usage":null}}`}},
			Usage{}, false},
		{"usage on another event is ignored", []event{{"response.in_progress", `{"type":"response.in_progress","response":{"usage":{"input_tokens":1}}}`}},
			Usage{}, false},
		{"cut before completion", []event{{"response.created", created}, {"response.output_text.delta", delta}},
			Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewResponsesMeter()
			observeAll(t, m, tt.events)
			if got, ok := m.Usage(); got != tt.want || ok != tt.ok {
				t.Fatalf("Usage = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	m := NewResponsesMeter()
	err := m.Observe("response.completed", []byte(`{"type":"response.completed","response":{"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":5}}}}`))
	if err == nil || !strings.Contains(err.Error(), "response.completed: response.usage.input_tokens_details.cached_tokens (5) is above") {
		t.Fatalf("error = %v", err)
	}
}

func TestMessagesMeter(t *testing.T) {
	start := `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"modela-opus-5-5","stop_reason":null,
		"usage":{"input_tokens":25,"cache_creation_input_tokens":1500,"cache_read_input_tokens":8000,"cache_creation":{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1000},"output_tokens":1}}}`
	block := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The \"usage\": field"}}`
	delta := `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`
	tests := []struct {
		name   string
		events []event
		want   Usage
		ok     bool
	}{
		{"full sequence", []event{
			{"message_start", start},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"ping", `{"type": "ping"}`},
			{"content_block_delta", block},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", delta},
			{"message_stop", `{"type":"message_stop"}`},
		}, Usage{InputTokens: 25, CacheReadTokens: 8000, CacheWriteTokens: 500, CacheWrite1hTokens: 1000, OutputTokens: 15}, true},
		{"without event names", []event{{"", start}, {"", delta}},
			Usage{InputTokens: 25, CacheReadTokens: 8000, CacheWriteTokens: 500, CacheWrite1hTokens: 1000, OutputTokens: 15}, true},
		{"cut after start", []event{{"message_start", start}, {"content_block_delta", block}},
			Usage{InputTokens: 25, CacheReadTokens: 8000, CacheWriteTokens: 500, CacheWrite1hTokens: 1000, OutputTokens: 1}, true},
		{"latest output wins", []event{{"message_start", start},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":7}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":30}}`}},
			Usage{InputTokens: 25, CacheReadTokens: 8000, CacheWriteTokens: 500, CacheWrite1hTokens: 1000, OutputTokens: 30}, true},
		// A newer API repeats input and cache fields in message_delta; the
		// repeated total keeps message_start's 1-hour breakdown: 1h 1000,
		// 5m max(500, 1800-1000) = 800.
		{"delta repeats input and cache", []event{{"message_start", start},
			{"message_delta", `{"type":"message_delta","usage":{"input_tokens":30,"cache_creation_input_tokens":1800,"cache_read_input_tokens":9000,"output_tokens":40}}`}},
			Usage{InputTokens: 30, CacheReadTokens: 9000, CacheWriteTokens: 800, CacheWrite1hTokens: 1000, OutputTokens: 40}, true},
		{"no breakdown anywhere", []event{
			{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":200,"output_tokens":1}}}`},
			{"message_delta", `{"type":"message_delta","usage":{"output_tokens":9}}`}},
			Usage{InputTokens: 3, CacheWriteTokens: 200, OutputTokens: 9}, true},
		{"nothing", []event{{"ping", `{"type":"ping"}`}}, Usage{}, false},
		{"event name only", []event{{"message_delta", `{"usage":{"output_tokens":4}}`}}, Usage{OutputTokens: 4}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMessagesMeter()
			observeAll(t, m, tt.events)
			if got, ok := m.Usage(); got != tt.want || ok != tt.ok {
				t.Fatalf("Usage = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
	m := NewMessagesMeter()
	if err := m.Observe("message_delta", []byte(`{"type":"message_delta","usage":{"output_tokens":-1}}`)); err == nil ||
		!strings.Contains(err.Error(), "message_delta: usage.output_tokens is negative") {
		t.Fatalf("error = %v", err)
	}
	if _, ok := m.Usage(); ok {
		t.Fatal("usage after a rejected event")
	}
}

// contentChunk is a typical chat-completions content chunk without usage.
var contentChunk = []byte(`{"id":"chatcmpl-9f2b7c1e","object":"chat.completion.chunk","created":1768000000,"model":"modelb-6-astra","system_fingerprint":"fp_1a2b3c","choices":[{"index":0,"delta":{"content":" the quick brown fox"},"logprobs":null,"finish_reason":null}],"usage":null}`)

func BenchmarkChatMeterObserve(b *testing.B) {
	m := NewChatMeter()
	b.ReportAllocs()
	b.SetBytes(int64(len(contentChunk)))
	for b.Loop() {
		if err := m.Observe("", contentChunk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatMeterObserveUsageChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-9f2b7c1e","object":"chat.completion.chunk","created":1768000000,"model":"modelb-6-astra","choices":[],"usage":{"prompt_tokens":2100,"completion_tokens":2,"total_tokens":2102,"prompt_tokens_details":{"cached_tokens":2048}}}`)
	m := NewChatMeter()
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Observe("", chunk); err != nil {
			b.Fatal(err)
		}
	}
}
