package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/wire"
)

// tee is a simulated provider that keeps its last answer's body, so a
// test can price the call from what the upstream reported.
type tee struct {
	srv   *httptest.Server
	mu    sync.Mutex
	last  []byte
	path  string
	calls int
}

func newTee(t testing.TB) *tee {
	s := sim.New(sim.Options{})
	tt := &tee{}
	tt.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recordWriter{ResponseWriter: w}
		s.ServeHTTP(rec, r)
		tt.mu.Lock()
		tt.last, tt.path = rec.buf.Bytes(), r.URL.Path
		tt.calls++
		tt.mu.Unlock()
	}))
	t.Cleanup(tt.srv.Close)
	t.Cleanup(s.Close)
	return tt
}

func (tt *tee) answer() (path string, body []byte, calls int) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.path, bytes.Clone(tt.last), tt.calls
}

type recordWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *recordWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recordWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// translateEnv is a gateway whose standard route serves each text model
// family only over a line of one protocol, every text model on every text
// endpoint: chat-only models (modele-k3) on an openai-chat line, modela
// on an anthropic line, modelf on a gemini line, modelb on an openai line.
func translateEnv(t *testing.T) (*env, map[string]*tee) {
	tees := map[string]*tee{"chat": newTee(t), "anthropic": newTee(t), "gemini": newTee(t), "openai": newTee(t)}
	e := newEnv(t, func(c *config.Config) {
		c.Lines = []config.LineConfig{
			{Name: "x-openai", Protocol: config.ProtocolOpenAI, BaseURL: tees["openai"].srv.URL, Models: []string{"modelb-6-astra"}, Route: "standard"},
			{Name: "x-chat", Protocol: config.ProtocolOpenAIChat, BaseURL: tees["chat"].srv.URL, Models: []string{"modele-k3"}, Route: "standard"},
			{Name: "x-msg", Protocol: config.ProtocolAnthropic, BaseURL: tees["anthropic"].srv.URL, Models: []string{"modela-opus-5-5"}, Route: "standard"},
			{Name: "x-gem", Protocol: config.ProtocolGemini, BaseURL: tees["gemini"].srv.URL, Models: []string{"modelf-flash"}, Route: "standard"},
		}
		c.Serve = []config.ServeConfig{{Models: []string{"*"}, Route: "standard", Endpoints: config.TextEndpoints}}
	})
	return e, tees
}

// callerBody is a small request of shape to model.
func callerBody(shape, model, prompt string, stream bool) string {
	switch shape {
	case "messages":
		return `{"model":"` + model + `","max_tokens":64,"stream":` + boolText(stream) + `,"system":"Be brief.","messages":[{"role":"user","content":"` + prompt + `"}]}`
	case "responses":
		return `{"model":"` + model + `","max_output_tokens":64,"stream":` + boolText(stream) + `,"instructions":"Be brief.","input":"` + prompt + `"}`
	default:
		return `{"model":"` + model + `","max_tokens":64,"stream":` + boolText(stream) + `,"stream_options":` + map[bool]string{true: `{"include_usage":true}`, false: `null`}[stream] + `,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"` + prompt + `"}]}`
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

var shapePaths = map[string]string{"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}

// upstreamUsage reads the usage the upstream reported, in its own shape,
// computed here by hand from its answer (JSON) or by the meter of its
// shape (stream).
func upstreamUsage(t *testing.T, protocol string, body []byte, stream bool) pricing.Usage {
	t.Helper()
	var u pricing.Usage
	var ok bool
	var err error
	switch {
	case stream:
		m := map[string]func() wire.Meter{"chat": wire.NewChatMeter, "openai": wire.NewChatMeter, "anthropic": wire.NewMessagesMeter, "gemini": wire.NewGeminiMeter}[protocol]()
		rd := wire.NewEventReader(bytes.NewReader(body))
		for {
			ev, err := rd.Next()
			if len(ev) > 0 {
				name, data := wire.ParseEvent(ev)
				_ = m.Observe(string(name), data)
			}
			if err != nil {
				break
			}
		}
		u, ok = m.Usage()
	case protocol == "gemini":
		var raw struct {
			U map[string]int64 `json:"usageMetadata"`
		}
		err = json.Unmarshal(body, &raw)
		u = pricing.Usage{InputTokens: raw.U["promptTokenCount"] - raw.U["cachedContentTokenCount"], CacheReadTokens: raw.U["cachedContentTokenCount"],
			OutputTokens: raw.U["candidatesTokenCount"] + raw.U["thoughtsTokenCount"]}
		ok = raw.U != nil
	case protocol == "anthropic":
		var raw struct {
			U map[string]any `json:"usage"`
		}
		err = json.Unmarshal(body, &raw)
		n := func(k string) int64 { f, _ := raw.U[k].(float64); return int64(f) }
		u = pricing.Usage{InputTokens: n("input_tokens"), CacheReadTokens: n("cache_read_input_tokens"), CacheWriteTokens: n("cache_creation_input_tokens"), OutputTokens: n("output_tokens")}
		ok = raw.U != nil
	default:
		var raw struct {
			U struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
				Details    struct {
					Cached int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		err = json.Unmarshal(body, &raw)
		u = pricing.Usage{InputTokens: raw.U.Prompt - raw.U.Details.Cached, CacheReadTokens: raw.U.Details.Cached, OutputTokens: raw.U.Completion}
		ok = raw.U.Prompt > 0
	}
	if err != nil || !ok {
		t.Fatalf("upstream usage (%s): ok %v err %v in %q", protocol, ok, err, body)
	}
	return u
}

// TestTranslatedCallsChargeExactly calls each text endpoint on a model
// served only by a line of another protocol, JSON and streamed: the answer
// is in the caller's shape, exactly one upstream call is made, and the
// charge is the upstream's reported usage priced, to the nano-USD.
func TestTranslatedCallsChargeExactly(t *testing.T) {
	t.Parallel()
	e, tees := translateEnv(t)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	cases := []struct{ caller, model, line, path string }{
		{"chat", "modela-opus-5-5", "anthropic", "/v1/messages"},
		{"chat", "modelf-flash", "gemini", "/v1beta/models/modelf-flash:"},
		{"responses", "modele-k3", "chat", "/v1/chat/completions"},
		{"responses", "modela-opus-5-5", "anthropic", "/v1/messages"},
		{"responses", "modelf-flash", "gemini", "/v1beta/models/modelf-flash:"},
		{"messages", "modele-k3", "chat", "/v1/chat/completions"},
		{"messages", "modelf-flash", "gemini", "/v1beta/models/modelf-flash:"},
		{"messages", "modelb-6-astra", "openai", "/v1/chat/completions"},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			name := c.caller + "→" + c.line
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				_, _, before := tees[c.line].answer()
				st, h, data := e.do("POST", shapePaths[c.caller], key, callerBody(c.caller, c.model, "Tell me about the sea.", stream), "Anthropic-Version", "2023-06-01")
				if st != 200 {
					t.Fatalf("%d %s", st, data)
				}
				path, up, after := tees[c.line].answer()
				if after != before+1 || !strings.HasPrefix(path, c.path) {
					t.Fatalf("upstream calls %d→%d at %q, want one at %s", before, after, path, c.path)
				}
				checkCallerShape(t, c.caller, c.model, stream, h, data)
				u := upstreamUsage(t, c.line, up, stream)
				want := expectedCharge(t, e, c.model, "standard", u)
				got := lastCharge(t, e, "acme")
				if got.Usage != u || -got.Amount != want {
					t.Fatalf("charged %s for %+v, want %s for the upstream's %+v", (-got.Amount).Fixed(), got.Usage, want.Fixed(), u)
				}
				if !stream && h.Get(costHeader) != want.Fixed() {
					t.Fatalf("%s: %q, want %s", costHeader, h.Get(costHeader), want.Fixed())
				}
			})
		}
	}
}

// checkCallerShape asserts the answer is in the caller's own shape.
func checkCallerShape(t *testing.T, caller, model string, stream bool, h http.Header, data []byte) {
	t.Helper()
	if stream {
		if !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("content type %q", h.Get("Content-Type"))
		}
		s := string(data)
		want := map[string][]string{
			"chat":      {`"object":"chat.completion.chunk"`, `"id":"chatcmpl-`, "data: [DONE]"},
			"messages":  {"event: message_start", `"id":"msg_`, "event: content_block_delta", "event: message_delta", "event: message_stop"},
			"responses": {"event: response.created", `"id":"resp_`, "event: response.output_text.delta", "event: response.completed"},
		}[caller]
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Fatalf("stream lacks %q:\n%s", w, s)
			}
		}
		return
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("answer: %v %s", err, data)
	}
	id, _ := v["id"].(string)
	prefix := map[string]string{"chat": "chatcmpl-", "messages": "msg_", "responses": "resp_"}[caller]
	object := map[string]string{"chat": "chat.completion", "messages": "", "responses": "response"}[caller]
	if !strings.HasPrefix(id, prefix) || v["model"] != model || (object != "" && v["object"] != object) {
		t.Fatalf("answer id %q model %v object %v, want %s… %s %s: %s", id, v["model"], v["object"], prefix, model, object, data)
	}
	if caller == "messages" && v["type"] != "message" {
		t.Fatalf("not a message: %s", data)
	}
}

// TestTranslationRefusesWhatTheTargetCannotExpress: a feature the line's
// protocol cannot express is a 400 naming it and the model, and nothing
// is held or charged.
func TestTranslationRefusesWhatTheTargetCannotExpress(t *testing.T) {
	t.Parallel()
	e, tees := translateEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "standard")
	cases := []struct{ path, body, feature string }{
		{"/v1/responses", `{"model":"modela-opus-5-5","input":"hi","tools":[{"type":"web_search"}]}`, "web_search"},
		{"/v1/responses", `{"model":"modele-k3","input":"hi","previous_response_id":"resp_123"}`, "previous_response_id"},
		{"/v1/responses", `{"model":"modelf-flash","input":"hi","store":true}`, "store"},
		{"/v1/chat/completions", `{"model":"modela-opus-5-5","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, "audio"},
	}
	for _, c := range cases {
		_, _, before := tees["anthropic"].answer()
		st, _, data := e.do("POST", c.path, key, c.body)
		if st != 400 {
			t.Fatalf("%s: %d %s", c.body, st, data)
		}
		msg, _, _ := errBody(t, data)
		if !strings.Contains(msg, c.feature) || !strings.Contains(msg, "modela-opus-5-5") && !strings.Contains(msg, "modele-k3") && !strings.Contains(msg, "modelf-flash") {
			t.Errorf("%s: message %q should name %q and the model", c.body, msg, c.feature)
		}
		if _, _, after := tees["anthropic"].answer(); after != before {
			t.Errorf("%s: the refused call reached the upstream", c.body)
		}
	}
	if b := e.balance("acme"); b.Balance != 5*pricing.NanoPerUSD || b.Held != 0 {
		t.Fatalf("balance %s held %s after refusals", b.Balance.Fixed(), b.Held.Fixed())
	}
}

// TestTranslatedUpstreamErrors: an upstream error reaches a caller of
// another protocol in the spec's error shape, Anthropic's 529 as a 503.
func TestTranslatedUpstreamErrors(t *testing.T) {
	t.Parallel()
	var status = 529
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, func(c *config.Config) {
		c.Lines = []config.LineConfig{{Name: "x-msg", Protocol: config.ProtocolAnthropic, BaseURL: up.URL, Models: []string{"modela-opus-5-5"}, Route: "standard"}}
		c.Retry.MaxTries = 1
	})
	e.account("acme", "5")
	key := e.key("acme", "standard")
	st, _, data := e.do("POST", "/v1/chat/completions", key, chatBody("modela-opus-5-5", "hi"))
	if st != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", st, data)
	}
	msg, _, _ := errBody(t, data)
	if !strings.Contains(msg, "Overloaded") && !strings.Contains(strings.ToLower(msg), "overloaded") {
		t.Fatalf("message %q", msg)
	}
	if b := e.balance("acme"); b.Balance != 5*pricing.NanoPerUSD || b.Held != 0 {
		t.Fatalf("balance %s held %s", b.Balance.Fixed(), b.Held.Fixed())
	}
}

// TestServeShowsWhereModelsAnswer: /v1/models shows the endpoints serve
// adds on the key's route, /api/pricing (and so the price page) those it
// adds on any route; a model without them stays refused on the others.
func TestServeShowsWhereModelsAnswer(t *testing.T) {
	t.Parallel()
	e, _ := translateEnv(t)
	e.account("acme", "5")
	endpointsOf := func(data []byte, model string) []string {
		var v struct {
			Data []struct {
				ID        string   `json:"id"`
				Endpoints []string `json:"supported_endpoint_types"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		for _, m := range v.Data {
			if m.ID == model {
				return m.Endpoints
			}
		}
		t.Fatalf("%s not listed: %s", model, data)
		return nil
	}
	_, _, std := e.do("GET", "/v1/models", e.key("acme", "standard"), nil)
	if got := strings.Join(endpointsOf(std, "modele-k3"), ","); got != "chat_completions,responses,messages" {
		t.Errorf("standard key: modele-k3 on %s", got)
	}
	_, _, eco := e.do("GET", "/v1/models", e.key("acme", "economy"), nil)
	if got := strings.Join(endpointsOf(eco, "modele-k3"), ","); got != "chat_completions" {
		t.Errorf("economy key: modele-k3 on %s", got)
	}
	var table struct {
		Models []struct {
			ID        string   `json:"model_name"`
			Endpoints []string `json:"supported_endpoint_types"`
		} `json:"data"`
	}
	_, _, pt := e.do("GET", "/api/pricing", "", nil)
	if err := json.Unmarshal(pt, &table); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range table.Models {
		if m.ID == "modele-k3" {
			found = strings.Join(m.Endpoints, ",") == "chat_completions,responses,messages"
		}
	}
	if !found {
		t.Errorf("/api/pricing does not show modele-k3 on every text endpoint: %s", pt)
	}
	st, _, data := e.do("POST", "/v1/messages", e.key("acme", "economy"), callerBody("messages", "modele-k3", "hi", false), "Anthropic-Version", "2023-06-01")
	if st != 403 {
		t.Fatalf("economy key, messages on modele-k3: %d %s", st, data)
	}
}

// TestChatLineBesideATranslatingLineRelaysAsSent: a chat call on a model
// served by an openai-chat line and an anthropic line goes to the chat line
// first and comes back byte for byte, JSON and streamed — the other line's
// translation takes nothing from a line that speaks the caller's API.
func TestChatLineBesideATranslatingLineRelaysAsSent(t *testing.T) {
	t.Parallel()
	chat, msgs := newTee(t), newTee(t)
	e := newEnv(t, func(c *config.Config) {
		c.Lines = []config.LineConfig{
			{Name: "x-msg", Protocol: config.ProtocolAnthropic, BaseURL: msgs.srv.URL, Models: []string{"modela-opus-5-5"}, Route: "standard"},
			{Name: "x-chat", Protocol: config.ProtocolOpenAIChat, BaseURL: chat.srv.URL, Models: []string{"modela-opus-5-5"}, Route: "standard"},
		}
	})
	e.account("acme", "5")
	key := e.key("acme", "standard")
	for _, stream := range []bool{false, true} {
		st, _, data := e.do("POST", "/v1/chat/completions", key, callerBody("chat", "modela-opus-5-5", "hi", stream))
		if st != 200 {
			t.Fatalf("stream %v: %d %s", stream, st, data)
		}
		path, up, _ := chat.answer()
		if path != "/v1/chat/completions" || !bytes.Equal(up, data) {
			t.Fatalf("stream %v: the client got other bytes than the chat line sent (%s):\n%s\nvs\n%s", stream, path, data, up)
		}
	}
	if _, _, n := msgs.answer(); n != 0 {
		t.Fatalf("the anthropic line got %d calls", n)
	}
}
