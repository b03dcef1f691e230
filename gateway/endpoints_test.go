package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

// lastCharge is the newest journal entry of an account, which must be a charge.
func lastCharge(t *testing.T, e *env, account string) store.Entry {
	t.Helper()
	es, err := e.charges(account, 1)
	if err != nil || len(es) != 1 || es[0].Kind != store.KindCharge {
		t.Fatalf("no charge: %+v %v", es, err)
	}
	return es[0]
}

func TestResponses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "economy")
	c := sdkClient(e, key)
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model: "modelb-6-astra",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Write one line about gateways")},
	}

	res, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.OutputText(), "Write one line about gateways") || res.Usage.OutputTokens == 0 {
		t.Fatalf("response %q usage %+v", res.OutputText(), res.Usage)
	}
	plain := lastCharge(t, e, "acme")
	// sim: input "Write one line about gateways" = 29 bytes → ceil(29/4) = 8
	// tokens + 4 for the input item = 12; no cache (below 1024).
	// Reply: 24 words = 24 output tokens.
	// economy modelb-6-astra: input $0.80/M, output $6.40/M:
	// 12 × 800_000_000 + 24 × 6_400_000_000 = 9_600_000_000 + 153_600_000_000
	// = 163_200_000_000 nano·tokens/M → / 1e6 = 163_200 nano.
	if plain.Usage != (pricing.Usage{InputTokens: 12, OutputTokens: 24}) || plain.Amount != -163_200 {
		t.Fatalf("plain charge %+v", plain)
	}

	s := c.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	completed := false
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			completed = true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if !completed || text.String() != res.OutputText() {
		t.Fatalf("stream text %q, completed %v", text.String(), completed)
	}
	streamed := lastCharge(t, e, "acme")
	if streamed.RequestID == plain.RequestID || streamed.Amount != plain.Amount || streamed.Usage != plain.Usage {
		t.Fatalf("stream charge %+v, plain %+v", streamed, plain)
	}

	// Fields newer than any schema pass through untouched.
	body := `{"model":"modelc-4.7","input":[{"role":"user","content":"hi"}],"store":false,"include":["reasoning.encrypted_content"],
	  "reasoning":{"effort":"high","summary":"auto"},"metadata":{"ticket":"42"},"tools":[{"type":"future_tool_2027","x":1}]}`
	if st, _, data := e.do("POST", "/v1/responses", key, body); st != 200 {
		t.Fatalf("pass-through fields: %d %s", st, data)
	}

	// Other models: 403 naming the endpoint and what it serves.
	st, _, data := e.do("POST", "/v1/responses", key, `{"model":"modelf-flash","input":"hi"}`)
	msg, _, _ := errBody(t, data)
	if st != 403 || !strings.Contains(msg, "/v1/responses") || !strings.Contains(msg, "modelb-6-astra, modelb-6.1-sol, modelc-4.7") {
		t.Fatalf("403: %d %q", st, msg)
	}
	if st, _, data := e.do("POST", "/v1/responses", key, `{"model":"modelb-6-astra"}`); st != 400 || !strings.Contains(string(data), "input") {
		t.Fatalf("missing input: %d %s", st, data)
	}
}

// capture records what the gateway sends upstream, then answers as the sim.
type capture struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
	sim  *sim.Server
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Clone(context.Background()))
	c.body = append(c.body, b)
	c.mu.Unlock()
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	c.sim.ServeHTTP(w, r)
}

func (c *capture) last() (*http.Request, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[len(c.reqs)-1], c.body[len(c.body)-1]
}

func TestMessages(t *testing.T) {
	t.Parallel()
	cp := &capture{sim: sim.New(sim.Options{})}
	up := httptest.NewServer(cp)
	defer up.Close()
	e := newEnv(t, func(c *config.Config) {
		c.Lines[1].BaseURL = up.URL // std-msg
		c.Lines[1].SetUpstreamKey("upstream-secret")
	})
	e.account("acme", "20")
	key := e.key("acme", "auto")
	ac := anthropic.NewClient(aoption.WithBaseURL(e.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model:     "modela-sonnet-5-5",
		MaxTokens: 200,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello from the SDK"))},
	}
	text, plain := checkSDKMessage(t, e, cp, ac, params)
	streamed := sdkMessageStream(t, ac, params)
	checkRawEventSequence(t, e, key)
	if streamed != text {
		t.Errorf("streamed text %q != %q", streamed, text)
	}
	if s := lastCharge(t, e, "acme"); s.Amount != plain.Amount || s.Usage != plain.Usage {
		t.Fatalf("stream charge %+v, plain %+v", s, plain)
	}
	raw := `{"model":"modela-opus-5-5","max_tokens":50,"messages":[{"role":"user","content":"raw call"}]}`
	checkRawMessagePassedThrough(t, e, cp, key, raw)

	for _, tc := range []struct {
		name, body, field string
		hdr               []string
	}{
		{"no version header", raw, "anthropic-version", nil},
		{"no max_tokens", `{"model":"modela-opus-5-5","messages":[{"role":"user","content":"x"}]}`, "max_tokens", []string{"Anthropic-Version", "2023-06-01"}},
		{"message without role", `{"model":"modela-opus-5-5","max_tokens":5,"messages":[{"content":"x"}]}`, "messages[0].role", []string{"Anthropic-Version", "2023-06-01"}},
		{"messages not an array", `{"model":"modela-opus-5-5","max_tokens":5,"messages":"x"}`, "messages", []string{"Anthropic-Version", "2023-06-01"}},
	} {
		st, _, data := e.do("POST", "/v1/messages", key, tc.body, tc.hdr...)
		msg, _, _ := errBody(t, data)
		if st != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %q", tc.name, st, msg)
		}
	}
	// Roles and block types newer than any schema pass through.
	newer := `{"model":"modela-opus-5-5","max_tokens":20,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"future_block","data":1}]}],"thinking":{"type":"enabled","budget_tokens":1024},"container":"x"}`
	if st, _, data := e.do("POST", "/v1/messages", key, newer, "Anthropic-Version", "2023-06-01"); st != 200 {
		t.Fatalf("newer fields: %d %s", st, data)
	}
	// Models other than modela: 403.
	if st, _, data := e.do("POST", "/v1/messages", key, `{"model":"modelb-6-astra","max_tokens":5,"messages":[]}`, "Anthropic-Version", "2023-06-01"); st != 403 {
		t.Fatalf("modelb on messages: %d %s", st, data)
	}
}

// checkSDKMessage sends params with the Anthropic SDK and wants the
// answer, the upstream key (not the caller's) and a version header sent
// on, no system prompt added, and the charge of its tokens; it returns
// the answer's text and its charge.
func checkSDKMessage(t *testing.T, e *env, cp *capture, ac anthropic.Client, params anthropic.MessageNewParams) (string, store.Entry) {
	t.Helper()
	msg, err := ac.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "Hello from the SDK") {
		t.Fatalf("message %+v", msg.Content)
	}
	req, sent := cp.last()
	if req.Header.Get("X-Api-Key") != "upstream-secret" || req.Header.Get("Authorization") != "" || req.Header.Get("Anthropic-Version") == "" {
		t.Errorf("upstream headers: key %q auth %q version %q", req.Header.Get("X-Api-Key"), req.Header.Get("Authorization"), req.Header.Get("Anthropic-Version"))
	}
	if strings.Contains(string(sent), `"system"`) {
		t.Errorf("the service must add no system prompt: %s", sent)
	}
	plain := lastCharge(t, e, "acme")
	// "Hello from the SDK" = 18 bytes → 5 tokens + 4 per message = 9 input;
	// 24 output. standard sonnet: 9 × 2.70 + 24 × 13.50 $/M
	// = 24_300_000_000 + 324_000_000_000 = 348_300_000_000 / 1e6 = 348_300 nano.
	if plain.Usage != (pricing.Usage{InputTokens: 9, OutputTokens: 24}) || plain.Amount != -348_300 {
		t.Fatalf("plain charge %+v", plain)
	}
	return msg.Content[0].Text, plain
}

// sdkMessageStream streams params with the SDK, wants every kind of event
// in the stream, and returns the streamed text.
func sdkMessageStream(t *testing.T, ac anthropic.Client, params anthropic.MessageNewParams) string {
	t.Helper()
	stream := ac.Messages.NewStreaming(context.Background(), params)
	var acc anthropic.Message
	kinds := map[string]int{}
	for stream.Next() {
		ev := stream.Current()
		kinds[ev.Type]++
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if kinds[k] == 0 {
			t.Errorf("event %s missing from the relayed stream: %v", k, kinds)
		}
	}
	return acc.Content[0].Text
}

// checkRawEventSequence: the SDK hides pings; the raw stream carries the
// full sequence in order.
func checkRawEventSequence(t *testing.T, e *env, key string) {
	t.Helper()
	rawStream := `{"model":"modela-sonnet-5-5","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Hello from the SDK"}]}`
	_, _, streamData := e.do("POST", "/v1/messages", key, rawStream, "Anthropic-Version", "2023-06-01")
	var seq []string
	for _, l := range strings.Split(string(streamData), "\n") {
		if name, ok := strings.CutPrefix(l, "event: "); ok && (len(seq) == 0 || seq[len(seq)-1] != name) {
			seq = append(seq, name)
		}
	}
	if got := strings.Join(seq, ","); got != "message_start,content_block_start,ping,content_block_delta,content_block_stop,message_delta,message_stop" {
		t.Errorf("event sequence %s", got)
	}
}

// checkRawMessagePassedThrough sends raw the way older clients do:
// x-api-key + anthropic-version, a beta header and a query string, and
// wants them all passed through; the neutral version header
// (docs/api.md#versioning) works too.
func checkRawMessagePassedThrough(t *testing.T, e *env, cp *capture, key, raw string) {
	t.Helper()
	st, _, data := e.do("POST", "/v1/messages?beta=true", "", raw, "X-Api-Key", key, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "prompt-caching-2024-07-31")
	if st != 200 || !strings.Contains(string(data), `"type":"message"`) {
		t.Fatalf("raw x-api-key call: %d %s", st, data)
	}
	req, sent := cp.last()
	if req.URL.RawQuery != "beta=true" || req.Header.Get("Anthropic-Beta") != "prompt-caching-2024-07-31" || req.Header.Get("Anthropic-Version") != "2023-06-01" || string(sent) != raw {
		t.Errorf("pass-through: query %q beta %q version %q body %s", req.URL.RawQuery, req.Header.Get("Anthropic-Beta"), req.Header.Get("Anthropic-Version"), sent)
	}
	if st, _, data := e.do("POST", "/v1/messages", key, raw, "Vendorx-Version", "2023-06-01"); st != 200 {
		t.Fatalf("vendorx-version: %d %s", st, data)
	}
}

// Prompt caching billed to the nano-USD: 5-minute and 1-hour writes, then
// reads, streamed and not.
func TestMessagesCacheBilling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "20")
	key := e.key("acme", "standard")
	system := strings.Repeat("You are a careful assistant. ", 40) // 1160 bytes = 290 tokens
	doc := strings.Repeat("Reference text for caching. ", 50)     // 1400 bytes = 350 tokens
	body := func(question string, stream bool) string {
		b, _ := json.Marshal(map[string]any{
			"model": "modela-opus-5-5", "max_tokens": 30, "stream": stream,
			"system": []map[string]any{{"type": "text", "text": system, "cache_control": map[string]string{"type": "ephemeral", "ttl": "1h"}}},
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{
				{"type": "text", "text": doc, "cache_control": map[string]string{"type": "ephemeral"}},
				{"type": "text", "text": question},
			}}},
		})
		return string(b)
	}
	call := func(question string, stream bool) store.Entry {
		st, _, data := e.do("POST", "/v1/messages", key, body(question, stream), "Anthropic-Version", "2023-06-01")
		if st != 200 {
			t.Fatalf("%d %s", st, data)
		}
		return lastCharge(t, e, "acme")
	}
	first := call("First question?", false)
	second := call("Second question?", true)
	wantFirst, err := sim.MessagesUsage([]byte(body("First question?", false)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first %+v second %+v sim %+v", first.Usage, second.Usage, wantFirst)
	// First call: the 1-hour breakpoint covers the system prompt, the
	// 5-minute one the document; both are written.
	if first.Usage.CacheWrite1hTokens == 0 || first.Usage.CacheWriteTokens == 0 || first.Usage.CacheReadTokens != 0 {
		t.Fatalf("first call should write both caches: %+v", first.Usage)
	}
	if second.Usage.CacheReadTokens != first.Usage.CacheWrite1hTokens+first.Usage.CacheWriteTokens || second.Usage.CacheWriteTokens+second.Usage.CacheWrite1hTokens != 0 {
		t.Fatalf("second call should read what the first wrote: %+v", second.Usage)
	}
	// Prices of modela-opus-5-5 on standard ($/M): input 13.50, output 67.50,
	// cache_read 1.35, cache_write 16.875, cache_write_1h 27.
	price := func(u pricing.Usage) pricing.Nano {
		sum := u.InputTokens*13_500_000_000 + u.OutputTokens*67_500_000_000 + u.CacheReadTokens*1_350_000_000 +
			u.CacheWriteTokens*16_875_000_000 + u.CacheWrite1hTokens*27_000_000_000
		return pricing.Nano((sum + 999_999) / 1_000_000)
	}
	for _, c := range []store.Entry{first, second} {
		if c.Amount != -price(c.Usage) {
			t.Errorf("charge %d, hand-priced %d for %+v", -c.Amount, price(c.Usage), c.Usage)
		}
	}
	// By hand: first = 4 input, 354 5-minute writes, 290 1-hour writes, 30 output:
	// 4×13.50 + 354×16.875 + 290×27 + 30×67.50 = 54 + 5973.75 + 7830 + 2025
	// = 15882.75 $·tokens/M → $0.01588275 = 15_882_750 nano.
	// second = 4 input, 644 cache reads, 30 output:
	// 4×13.50 + 644×1.35 + 30×67.50 = 54 + 869.4 + 2025 = 2948.4 → 2_948_400 nano.
	if first.Amount != -15_882_750 || second.Amount != -2_948_400 {
		t.Errorf("charges %d and %d, want 15_882_750 and 2_948_400", -first.Amount, -second.Amount)
	}
}

// Above long_context.min_input_tokens the long-context prices apply.
func TestMessagesLongContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.account("acme", "20")
	key := e.key("acme", "standard")
	// 820,000 bytes → 205,000 tokens, + 4 for the message = 205,004 input
	// tokens, above sonnet's 200,000 threshold; max_tokens caps output at 10.
	body, _ := json.Marshal(map[string]any{"model": "modela-sonnet-5-5", "max_tokens": 10,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("abcd", 205_000)}}})
	st, _, data := e.do("POST", "/v1/messages", key, body, "Anthropic-Version", "2023-06-01")
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	c := lastCharge(t, e, "acme")
	// Long-context sonnet: input $5.40/M, output $20.25/M:
	// 205_004 × 5.40 + 10 × 20.25 = 1_107_021.6 + 202.5 = 1_107_224.1 $·tokens/M
	// → $1.1072241 = 1_107_224_100 nano.
	if c.Usage != (pricing.Usage{InputTokens: 205_004, OutputTokens: 10}) || c.Amount != -1_107_224_100 {
		t.Fatalf("long-context charge %+v", c)
	}
}
