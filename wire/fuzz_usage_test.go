package wire

import "testing"

func fuzzUsageFunc(f *testing.F, fn func([]byte) (Usage, bool, error), seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		u, ok, err := fn(body)
		if err != nil && ok {
			t.Fatal("ok with an error")
		}
		if !ok && u != (Usage{}) {
			t.Fatalf("usage %+v without ok", u)
		}
		for _, v := range []int64{u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.OutputTokens} {
			if v < 0 {
				t.Fatalf("negative count in %+v", u)
			}
		}
	})
}

func FuzzChatUsage(f *testing.F) {
	fuzzUsageFunc(f, ChatUsage,
		`{"usage":{"prompt_tokens":1200,"completion_tokens":34,"prompt_tokens_details":{"cached_tokens":1024}}}`,
		`{"choices":[],"usage":null}`, `[DONE]`, `{"usage":{"prompt_tokens":1e3}}`)
}

func FuzzResponsesUsage(f *testing.F) {
	fuzzUsageFunc(f, ResponsesUsage,
		`{"usage":{"input_tokens":3000,"input_tokens_details":{"cached_tokens":2048},"output_tokens":500}}`,
		`{"usage":null}`)
}

func FuzzMessagesUsage(f *testing.F) {
	fuzzUsageFunc(f, MessagesUsage,
		`{"usage":{"input_tokens":21,"cache_creation_input_tokens":3000,"cache_read_input_tokens":10000,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},"output_tokens":393}}`,
		`{"usage":{"cache_creation":{}}}`)
}

func FuzzSystemOneUsage(f *testing.F) {
	fuzzUsageFunc(f, SystemOneUsage, `{"usage":{"input_tokens":812,"output_tokens":3}}`, `{}`)
}

// fuzzMeter feeds one event to a fresh meter, twice, and asks
// IsChatUsageOnlyChunk about its data. A rejected event must leave the usage
// as it was.
func fuzzMeter(f *testing.F, newMeter func() Meter, seeds ...[2]string) {
	for _, s := range seeds {
		f.Add(s[0], []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, event string, data []byte) {
		m := newMeter()
		before, beforeOK := m.Usage()
		err := m.Observe(event, data)
		after, afterOK := m.Usage()
		if err != nil && (after != before || afterOK != beforeOK) {
			t.Fatalf("a rejected event changed the usage: %+v → %+v", before, after)
		}
		_ = m.Observe(event, data) // a repeat must not panic either
		for _, v := range []int64{after.InputTokens, after.CacheReadTokens, after.CacheWriteTokens, after.CacheWrite1hTokens, after.OutputTokens} {
			if v < 0 {
				t.Fatalf("negative count in %+v", after)
			}
		}
		IsChatUsageOnlyChunk(data)
	})
}

func FuzzChatMeter(f *testing.F) {
	fuzzMeter(f, NewChatMeter,
		[2]string{"", `{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12}}`},
		[2]string{"", string(contentChunk)},
		[2]string{"", `[DONE]`})
}

func FuzzResponsesMeter(f *testing.F) {
	fuzzMeter(f, NewResponsesMeter,
		[2]string{"response.completed", `{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":4}}}`},
		[2]string{"", `{"type":"response.failed","response":{"usage":null}}`})
}

func FuzzMessagesMeter(f *testing.F) {
	fuzzMeter(f, NewMessagesMeter,
		[2]string{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_creation_input_tokens":1500,"cache_creation":{"ephemeral_1h_input_tokens":1000},"output_tokens":1}}}`},
		[2]string{"message_delta", `{"type":"message_delta","usage":{"output_tokens":15}}`})
}
