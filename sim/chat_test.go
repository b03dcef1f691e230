package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func TestChatJSON(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	long := strings.Repeat("abcd", 1500) // 1500 tokens
	cases := []struct {
		name       string
		body       string
		prompt     int64
		cached     int64
		completion int64
		finish     string
		contains   string
	}{
		{
			name:       "short prompt echoes canary",
			body:       `{"model":"modelf-flash","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"canary-7731 hello"}]}`,
			prompt:     4 + 2 + 4 + 5, // "be brief" 8 bytes, "canary-7731 hello" 17 bytes
			completion: ReplyWords,
			finish:     "stop",
			contains:   "Simulated reply from modelf-flash: canary-7731 hello",
		},
		{
			name:       "max_tokens caps",
			body:       `{"model":"modele-k3","max_tokens":5,"messages":[{"role":"user","content":"one two three"}]}`,
			prompt:     4 + 4,
			completion: 5,
			finish:     "length",
			contains:   "Simulated reply from modele-k3: one",
		},
		{
			name:       "max_completion_tokens wins over max_tokens",
			body:       `{"model":"modele-k3","max_tokens":5,"max_completion_tokens":7,"messages":[{"role":"user","content":"x"}]}`,
			prompt:     4 + 1,
			completion: 7,
			finish:     "length",
		},
		{
			name:       "cap above length does not cut",
			body:       `{"model":"modele-k3","max_tokens":1000,"messages":[{"role":"user","content":"x"}]}`,
			prompt:     5,
			completion: ReplyWords,
			finish:     "stop",
		},
		{
			name:       "content parts: text counted, image flat",
			body:       `{"model":"modelc-4.7","messages":[{"role":"user","content":[{"type":"text","text":"look at"},{"type":"image_url","image_url":{"url":"data:x"}},{"type":"text","text":"this canary-1"}]}]}`,
			prompt:     4 + 2 + PartTokens + 4,
			completion: ReplyWords,
			finish:     "stop",
			contains:   "look at this canary-1",
		},
		{
			name:       "long prompt has cached tokens",
			body:       `{"model":"modelb-6-astra","messages":[{"role":"user","content":"` + long + `"}]}`,
			prompt:     1504,
			cached:     1504 / 2 / 64 * 64,
			completion: 4 + 1 + 19, // one 6000-byte word, then filler
			finish:     "stop",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, http.MethodPost, "/v1/chat/completions", tc.body, nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			got := decode[chatCompletion](t, b)
			if got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") || got.Created == 0 || got.Model == "" {
				t.Errorf("envelope: %+v", got)
			}
			if len(got.Choices) != 1 || got.Choices[0].Message.Role != "assistant" {
				t.Fatalf("choices: %+v", got.Choices)
			}
			ch := got.Choices[0]
			if ch.FinishReason != tc.finish {
				t.Errorf("finish_reason %q, want %q", ch.FinishReason, tc.finish)
			}
			if !strings.Contains(ch.Message.Content, tc.contains) {
				t.Errorf("content %q does not contain %q", ch.Message.Content, tc.contains)
			}
			u := got.Usage
			if u.PromptTokens != tc.prompt || u.PromptTokensDetails.CachedTokens != tc.cached ||
				u.CompletionTokens != tc.completion || u.TotalTokens != tc.prompt+tc.completion {
				t.Errorf("usage %+v, want prompt %d cached %d completion %d", u, tc.prompt, tc.cached, tc.completion)
			}
			if n := int64(len(strings.Fields(ch.Message.Content))); n != u.CompletionTokens {
				t.Errorf("completion has %d words, usage says %d", n, u.CompletionTokens)
			}
			if r := u.CompletionTokensDetails.ReasoningTokens; r == nil || *r != 0 {
				t.Errorf("reasoning_tokens %v, want 0", r)
			}
			want, err := ChatUsage([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if want.Prompt != u.PromptTokens || want.Cached != u.PromptTokensDetails.CachedTokens ||
				want.Completion != u.CompletionTokens || want.Capped != (tc.finish == "length") {
				t.Errorf("ChatUsage %+v disagrees with the server %+v", want, u)
			}
		})
	}
}

func TestChatErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		msg    string
	}{
		{"bad json", `{"model":`, 400, "", "invalid JSON"},
		{"not an object", `[1,2]`, 400, "", "JSON object"},
		{"missing model", `{"messages":[{"role":"user","content":"x"}]}`, 400, "", "`model`"},
		{"unknown model", `{"model":"nope-1","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "The model `nope-1` does not exist"},
		{"image model on chat", `{"model":"modelb-image-2.5-flare","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "not served by /v1/chat/completions"},
		{"no messages", `{"model":"modele-k3","messages":[]}`, 400, "", "`messages`"},
		{"content wrong type", `{"model":"modele-k3","messages":[{"role":"user","content":5}]}`, 400, "", "content must be"},
		{"max_tokens zero", `{"model":"modele-k3","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "", "`max_tokens`"},
		{"max_tokens not a number", `{"model":"modele-k3","max_tokens":"a","messages":[{"role":"user","content":"x"}]}`, 400, "", "max_tokens"},
		{"missing role", `{"model":"modele-k3","messages":[{"content":"x"}]}`, 400, "", "messages[0].role"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/chat/completions", tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			e := decode[errBody](t, b)
			if !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", e.Error.Message, tc.msg)
			}
			if e.Error.Type != "invalid_request_error" {
				t.Errorf("type %q", e.Error.Type)
			}
			if tc.code != "" && (e.Error.Code == nil || *e.Error.Code != tc.code) {
				t.Errorf("code %v, want %q", e.Error.Code, tc.code)
			}
			if _, err := ChatUsage([]byte(tc.body)); err == nil {
				t.Errorf("ChatUsage accepted a body the server rejects")
			}
		})
	}
}

type chatChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

func TestChatStream(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 5})
	cases := []struct {
		name         string
		streamOpts   string
		includeUsage bool
		maxTokens    string
		finish       string
	}{
		{"no stream_options", ``, false, ``, "stop"},
		{"include_usage false", `,"stream_options":{"include_usage":false}`, false, ``, "stop"},
		{"include_usage true", `,"stream_options":{"include_usage":true}`, true, ``, "stop"},
		{"capped with usage", `,"stream_options":{"include_usage":true}`, true, `,"max_tokens":3`, "length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"modeld-5.3-Abliterated","stream":true` + tc.streamOpts + tc.maxTokens +
				`,"messages":[{"role":"user","content":"say canary-42 back"}]}`
			evs, err := postStream(t, ts, "/v1/chat/completions", body, nil)
			if err != nil {
				t.Fatalf("stream error: %v", err)
			}
			if last := evs[len(evs)-1]; last.data != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", last.data)
			}
			evs = evs[:len(evs)-1]
			want := 1 + 5 + 1 // role, content chunks, finish
			if tc.includeUsage {
				want++
			}
			if len(evs) != want {
				t.Fatalf("%d events, want %d", len(evs), want)
			}
			var text strings.Builder
			var id string
			for i, ev := range evs {
				if ev.name != "" {
					t.Errorf("event %d has a name %q", i, ev.name)
				}
				var raw map[string]json.RawMessage
				if err := json.Unmarshal([]byte(ev.data), &raw); err != nil {
					t.Fatal(err)
				}
				_, hasUsage := raw["usage"]
				if hasUsage != tc.includeUsage {
					t.Errorf("event %d: usage field present %v, want %v", i, hasUsage, tc.includeUsage)
				}
				c := decode[chatChunk](t, []byte(ev.data))
				if c.Object != "chat.completion.chunk" || c.Model != "modeld-5.3-Abliterated" {
					t.Errorf("event %d envelope %+v", i, c)
				}
				if id == "" {
					id = c.ID
				} else if c.ID != id {
					t.Errorf("event %d id %q, want %q", i, c.ID, id)
				}
				isUsage := tc.includeUsage && i == len(evs)-1
				if isUsage {
					if len(c.Choices) != 0 || c.Usage == nil {
						t.Fatalf("usage chunk: %s", ev.data)
					}
					want, err := ChatUsage([]byte(body))
					if err != nil {
						t.Fatal(err)
					}
					if c.Usage.PromptTokens != want.Prompt || c.Usage.CompletionTokens != want.Completion ||
						c.Usage.TotalTokens != want.Prompt+want.Completion {
						t.Errorf("usage %+v, want %+v", c.Usage, want)
					}
					continue
				}
				if c.Usage != nil {
					t.Errorf("event %d: usage %+v before the usage chunk", i, c.Usage)
				}
				if len(c.Choices) != 1 {
					t.Fatalf("event %d: %d choices", i, len(c.Choices))
				}
				ch := c.Choices[0]
				switch {
				case i == 0:
					if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.FinishReason != nil {
						t.Errorf("first chunk %s", ev.data)
					}
				case i <= 5:
					if ch.Delta.Content == nil || ch.FinishReason != nil {
						t.Errorf("content chunk %s", ev.data)
					} else {
						text.WriteString(*ch.Delta.Content)
					}
				default:
					if ch.FinishReason == nil || *ch.FinishReason != tc.finish {
						t.Errorf("final chunk %s, want finish %q", ev.data, tc.finish)
					}
				}
			}
			limit := int64(0)
			if tc.maxTokens != "" {
				limit = 3
			}
			wantText, _ := ReplyText("modeld-5.3-Abliterated", "say canary-42 back", limit)
			if text.String() != wantText {
				t.Errorf("streamed text %q, want %q", text.String(), wantText)
			}
		})
	}
}
