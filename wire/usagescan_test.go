package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzUsageFastPath: on every well-formed JSON body the usage readers answer
// exactly what decoding the whole body answers (values, presence and error).
func FuzzUsageFastPath(f *testing.F) {
	for _, s := range []string{
		`{"id":"c1","choices":[{"message":{"content":"hi \"usage\":{}"}}],"usage":{"prompt_tokens":1200,"completion_tokens":34,"prompt_tokens_details":{"cached_tokens":1024}}}`,
		`{"usage":{"input_tokens":10,"output_tokens":3,"input_tokens_details":{"cached_tokens":2}}}`,
		`{"usage":{"input_tokens":10,"cache_read_input_tokens":2,"cache_creation_input_tokens":5,"cache_creation":{"ephemeral_1h_input_tokens":3},"output_tokens":4}}`,
		`{"usage":null}`, `{"Usage":{"prompt_tokens":1}}`, `{"usage":{"prompt_tokens":-1}}`, `{"usage":[1]}`, `[1]`,
		`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`, `{"a":{"usage":{}}}`, `{"usage":{"prompt_tokens":1.5}}`,
		// The reflection-free scan of chat and responses usage (usageScanner).
		`{"usage":{"prompt_tokens":null,"completion_tokens":-0}}`, `{"usage":{"prompt_tokens":"5"}}`, `{"usage":{"prompt_tokens":1e3}}`,
		`{"usage":{"prompt_tokens":12345678901234567890}}`, `{"usage":{"prompt_tokens":123456789012345678}}`,
		`{"usage":{"prompt_tokens_details":[1]}}`, `{"usage":{"prompt_tokens_details":null,"prompt_tokens":3}}`,
		`{"usage":{"PROMPT_TOKENS":4,"completion_tokens":1}}`, `{"usage":{"prompt_tokens":4,"prompt_tokens":5}}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":10}}}`, `{"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":null}}}`,
		`{"usage":{"input_tokens":5,"input_tokens_details":{"Cached_Tokens":2}}}`, `{"usage":{"prompt_tokens":-3}}`,
	} {
		f.Add([]byte(s))
	}
	readers := []struct {
		name       string
		fast, full func([]byte) (Usage, bool, error)
	}{
		{"chat", ChatUsage, chatUsageFull},
		{"responses", ResponsesUsage, responsesUsageFull},
		{"messages", MessagesUsage, messagesUsageFull},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		for _, r := range readers {
			u1, ok1, err1 := r.fast(body)
			if !valid {
				continue // the fast path may bill a body malformed elsewhere; it must not panic
			}
			u2, ok2, err2 := r.full(body)
			if !reflect.DeepEqual(u1, u2) || ok1 != ok2 || (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
				t.Fatalf("%s(%s): fast %+v %v %v, full %+v %v %v", r.name, body, u1, ok1, err1, u2, ok2, err2)
			}
		}
	})
}

// BenchmarkChatUsage: the fast path against decoding the whole answer, on a
// small chat completion like the benchmark's.
func BenchmarkChatUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-0123456789","object":"chat.completion","created":1760000000,"model":"modelf-flash","choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."},"finish_reason":"stop"}],"usage":{"prompt_tokens":70,"completion_tokens":30,"total_tokens":100,"prompt_tokens_details":{"cached_tokens":0}}}`)
	for _, r := range []struct {
		name string
		fn   func([]byte) (Usage, bool, error)
	}{{"fast", ChatUsage}, {"full", chatUsageFull}} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, err := r.fn(body); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
