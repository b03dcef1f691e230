package sim

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// cachedOf returns the cached tokens of a chat or responses JSON answer.
func cachedOf(t *testing.T, path string, body []byte) (prompt, cached int64) {
	t.Helper()
	var a struct {
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			InputTokens         int64 `json:"input_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			InputTokensDetails *struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: %v: %s", path, err, body)
	}
	u := a.Usage
	if u.PromptTokensDetails != nil {
		return u.PromptTokens, u.PromptTokensDetails.CachedTokens
	}
	if u.InputTokensDetails != nil {
		return u.InputTokens, u.InputTokensDetails.CachedTokens
	}
	t.Fatalf("%s: no cached tokens in %s", path, body)
	return 0, 0
}

// A chat or responses prompt sent with a prompt_cache_key is cached by the
// sim that saw it: the first time nothing is cached, a repeat reads the
// whole prompt (in whole blocks), the next turn reads the turns before it;
// another key, another sim (another account) or five minutes later is a
// miss. Without a key the stateless rule holds.
func TestKeyedPromptCache(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a long shared system prompt. ", 200) // 1,450 tokens
	chat := func(key string, turns int) string {
		msgs := []map[string]string{{"role": "system", "content": long}}
		for i := 0; i < turns; i++ {
			msgs = append(msgs, map[string]string{"role": "user", "content": fmt.Sprintf("question %d", i)})
		}
		b, _ := json.Marshal(map[string]any{"model": "modelf-flash", "messages": msgs, "prompt_cache_key": key})
		return string(b)
	}
	_, ts, clk := newClockServer(t, Options{})
	_, other := newTestServer(t, Options{})
	post := func(srv *httptest.Server, body string) (int64, int64) {
		t.Helper()
		st, _, b := call(t, srv, "POST", chatPath, body, nil)
		if st != 200 {
			t.Fatalf("status %d: %s", st, b)
		}
		return cachedOf(t, chatPath, b)
	}
	if _, c := post(ts, chat("conv-1", 1)); c != 0 {
		t.Fatalf("first call: %d cached, want 0", c)
	}
	p, c := post(ts, chat("conv-1", 1))
	if c != p/CacheBlock*CacheBlock || c == 0 {
		t.Fatalf("repeat: %d cached of %d, want the whole prompt in blocks", c, p)
	}
	// The next turn reads the first turn's prompt.
	p1 := p
	if _, c := post(ts, chat("conv-1", 2)); c != p1/CacheBlock*CacheBlock {
		t.Fatalf("next turn: %d cached, want %d", c, p1/CacheBlock*CacheBlock)
	}
	if _, c := post(ts, chat("conv-2", 1)); c != 0 {
		t.Fatalf("another key: %d cached, want 0", c)
	}
	if _, c := post(other, chat("conv-1", 1)); c != 0 {
		t.Fatalf("another sim: %d cached, want 0", c)
	}
	clk.advance(5*time.Minute + time.Second)
	if _, c := post(ts, chat("conv-1", 1)); c != 0 {
		t.Fatalf("after 5 minutes: %d cached, want 0", c)
	}
	// The usage helper reports the first time.
	if u, err := ChatUsage([]byte(chat("conv-1", 1))); err != nil || u.Cached != 0 {
		t.Fatalf("ChatUsage: %+v %v", u, err)
	}
	// A short prompt is never cached; no key: the stateless rule.
	short := `{"model":"modelf-flash","messages":[{"role":"user","content":"hi"}],"prompt_cache_key":"k"}`
	post(ts, short)
	if _, c := post(ts, short); c != 0 {
		t.Fatalf("short prompt: %d cached", c)
	}
	nokey := `{"model":"modelf-flash","messages":[{"role":"user","content":` + fmt.Sprintf("%q", long) + `}]}`
	if p, c := post(ts, nokey); c != cachedTokens(p) || c == 0 {
		t.Fatalf("no key: %d cached of %d", c, p)
	}

	// Responses: the same, over its input.
	resp := func(key string) string {
		b, _ := json.Marshal(map[string]any{"model": "modelb-6-astra", "instructions": long, "input": []any{
			map[string]any{"role": "user", "content": "hello"},
			map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
			map[string]any{"type": "function_call_output", "call_id": "c1", "output": "42"},
		}, "prompt_cache_key": key})
		return string(b)
	}
	for i, want := range []bool{false, true} {
		st, _, b := call(t, ts, "POST", "/v1/responses", resp("r-1"), nil)
		if st != 200 {
			t.Fatalf("responses: %d %s", st, b)
		}
		if p, c := cachedOf(t, "/v1/responses", b); (c > 0) != want || c > p {
			t.Fatalf("responses call %d: %d cached of %d", i+1, c, p)
		}
	}
}
