package sim

import (
	"net/http"
	"strings"
	"testing"
)

const (
	gemJSON   = "/v1beta/models/modelf-flash:generateContent"
	gemStream = "/v1beta/models/modelf-flash:streamGenerateContent?alt=sse"
	gemBody   = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
)

// TestGeminiJSON checks the answer and its usage against the counting
// rule of gemini_request.go.
func TestGeminiJSON(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	long := strings.Repeat("abcd", 1500) // 1500 tokens
	cases := []struct {
		name                      string
		body                      string
		prompt, cached, candidate int64
		finish, contains          string
	}{
		{
			name: "system, turns, an inline image",
			body: `{"systemInstruction":{"parts":[{"text":"be brief"}]},"contents":[{"role":"user","parts":[{"text":"hello there"}]},{"role":"model","parts":[{"text":"ok"}]},` +
				`{"role":"user","parts":[{"text":"canary-77"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}],"generationConfig":{"temperature":0.2,"stopSequences":["x"],"responseMimeType":"text/plain"}}`,
			prompt:    2 + (4 + 3) + (4 + 1) + (4 + 3 + PartTokens),
			candidate: ReplyWords, finish: "STOP", contains: "Simulated reply from modelf-flash: canary-77",
		},
		{
			name:   "implicit caching of a long prompt",
			body:   `{"contents":[{"parts":[{"text":"` + long + `"}]}]}`,
			prompt: 4 + 1500, cached: cachedTokens(4 + 1500), candidate: ReplyWords, finish: "STOP",
		},
		{
			name:   "maxOutputTokens, snake_case",
			body:   `{"system_instruction":{"parts":[{"text":"abcd"}]},"generation_config":{"max_output_tokens":5},"contents":[{"parts":[{"text":"one two"}]}]}`,
			prompt: 1 + 4 + 2, candidate: 5, finish: "MAX_TOKENS", contains: "Simulated reply from modelf-flash: one",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, b := call(t, ts, http.MethodPost, gemJSON, tc.body, nil)
			if status != 200 || hdr.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d: %s", status, b)
			}
			c := decode[geminiChunk](t, b)
			var a lAnswer
			a.addGemini(t, c)
			if a.prompt != tc.prompt || a.cached != tc.cached || a.output != tc.candidate || a.reasoning != 0 || a.finish != tc.finish {
				t.Fatalf("answer %+v", a)
			}
			if (c.UsageMetadata.CachedContentTokenCount != nil) != (tc.cached > 0) || c.UsageMetadata.ThoughtsTokenCount != nil {
				t.Errorf("optional usage fields: %s", b)
			}
			if !strings.Contains(a.text, tc.contains) || int64(len(strings.Fields(a.text))) != tc.candidate {
				t.Errorf("text %q", a.text)
			}
			if u, err := GeminiUsage([]byte(tc.body)); err != nil || u.Prompt != a.prompt || u.Cached != a.cached || u.Completion != a.output || u.Capped != (tc.finish == "MAX_TOKENS") {
				t.Errorf("GeminiUsage %+v %v", u, err)
			}
		})
	}
}

func TestGeminiStream(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 4})
	evs, err := postStream(t, ts, gemStream, gemBody, nil)
	if err != nil || len(evs) != 4+1 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	a := geminiProto.parseSSE(t, evs)
	if want, _ := ReplyText("modelf-flash", "hi", 0); a.text != want || a.finish != "STOP" || a.prompt != 5 || a.output != ReplyWords {
		t.Fatalf("streamed %+v", a)
	}
	// With the thought shown: one more event, before the content.
	evs, err = postStream(t, ts, gemStream, `{"generationConfig":{"thinkingConfig":{"includeThoughts":true}},"contents":[{"parts":[{"text":"hi"}]}]}`, nil)
	if err != nil || len(evs) != 1+4+1 || !strings.Contains(evs[0].data, `"thought":true,"thoughtSignature":"simsig_`) {
		t.Fatalf("%v %+v", err, evs)
	}
	// Cut after two content chunks: no last chunk.
	_, cut := newTestServer(t, Options{Chunks: 4, CutAfter: 2})
	evs, err = postStream(t, cut, gemStream, gemBody, nil)
	if err == nil || len(evs) != 2 || strings.Contains(evs[1].data, "finishReason") {
		t.Fatalf("cut stream: %d events, %v", len(evs), err)
	}
}

func TestGeminiErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"model of another family", "POST", "/v1beta/models/modela-opus-5-5:generateContent", gemBody, 404, "models/modela-opus-5-5 is not found"},
		{"unknown model", "POST", "/v1beta/models/nope:streamGenerateContent?alt=sse", gemBody, 404, "models/nope is not found"},
		{"unknown method", "POST", "/v1beta/models/modelf-flash:countTokens", gemBody, 404, "Unknown request URL"},
		{"GET", "GET", gemJSON, "", 405, "use POST"},
		{"no alt=sse", "POST", "/v1beta/models/modelf-flash:streamGenerateContent", gemBody, 400, "alt:"},
		{"no contents", "POST", gemJSON, `{"contents":[]}`, 400, "contents: contents is not specified"},
		{"bad role", "POST", gemJSON, `{"contents":[{"role":"system","parts":[{"text":"x"}]}]}`, 400, "contents[0].role: Please use a valid role"},
		{"maxOutputTokens 0", "POST", gemJSON, `{"generationConfig":{"maxOutputTokens":0},` + gemBody[1:], 400, "generationConfig.maxOutputTokens"},
		{"parts of wrong type", "POST", gemJSON, `{"contents":[{"parts":"x"}]}`, 400, "contents.parts"},
		{"not JSON", "POST", gemJSON, `{`, 400, "invalid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, tc.method, tc.path, tc.body, nil)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			if msg := errorMessage(t, "/v1beta/", status, b); !strings.Contains(msg, tc.msg) {
				t.Fatalf("message %q, want %q", msg, tc.msg)
			}
		})
	}
}

func TestGeminiAuthAndFaults(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{APIKey: "k-1"})
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		status     int
	}{
		{"x-goog-api-key", gemJSON, map[string]string{"x-goog-api-key": "k-1"}, 200},
		{"?key=", gemJSON + "?key=k-1", nil, 200},
		{"Bearer", gemJSON, map[string]string{"Authorization": "Bearer k-1"}, 200},
		{"wrong key", gemJSON, map[string]string{"x-goog-api-key": "k-2"}, 401},
		{"no key", gemJSON, nil, 401},
		{"?key= on another endpoint", "/v1/chat/completions?key=k-1", nil, 401},
	} {
		body := gemBody
		if strings.HasPrefix(tc.path, "/v1/") {
			body = chatBody
		}
		status, _, b := call(t, ts, http.MethodPost, tc.path, body, tc.hdr)
		if status != tc.status {
			t.Fatalf("%s: status %d: %s", tc.name, status, b)
		}
		if status == 401 && strings.HasPrefix(tc.path, "/v1beta/") {
			if e := decode[googleErrBody](t, b); e.Error.Status != "UNAUTHENTICATED" {
				t.Errorf("%s: %s", tc.name, b)
			}
		}
	}
	for _, tc := range []struct {
		opts       Options
		status     int
		gs, msg    string
		retryAfter string
	}{
		{Options{Status: 429, RetryAfter: 4}, 429, "RESOURCE_EXHAUSTED", "Rate limit", "4"},
		{Options{Status: 503}, 503, "UNAVAILABLE", "overloaded", ""},
		{Options{Status: 529}, 529, "UNAVAILABLE", "overloaded", ""},
		{Options{ErrorRate: 1}, 500, "INTERNAL", "simulated", ""},
	} {
		_, fts := newTestServer(t, tc.opts)
		status, hdr, b := call(t, fts, http.MethodPost, gemStream, gemBody, nil)
		e := decode[googleErrBody](t, b)
		if status != tc.status || e.Error.Code != tc.status || e.Error.Status != tc.gs || !strings.Contains(e.Error.Message, tc.msg) || hdr.Get("Retry-After") != tc.retryAfter {
			t.Errorf("fault %d: %d %s (Retry-After %q)", tc.status, status, b, hdr.Get("Retry-After"))
		}
	}
}
