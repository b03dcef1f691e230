package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/wire"
	"github.com/modelrelay/modelrelay/wire/xlate"
)

// Bad input through a translated call: upstreams that break their
// protocol, or answer in another one, and callers' bodies at the edges of
// what the gateway reads. Each must end in a clear error in the caller's
// shape; the hold is released (a JSON answer that cannot be translated is
// not charged) or charged by the rule for cut streams (the usage the
// stream reported, else the estimate); nothing stays held, and the
// gateway goes on answering.

// badUpstream answers each call by the mode its body names ("xbad:<mode>"
// in a prompt), in the protocol of its line: the events of answers[mode],
// or its JSON. It counts calls and keeps the last body.
type badUpstream struct {
	srv   *httptest.Server
	modes map[string]badAnswer
	mu    sync.Mutex
	calls int
	body  []byte
}

// badAnswer is one scripted answer: SSE events (each "event: …\ndata: …"
// without its blank line) or a JSON body.
type badAnswer struct {
	events []string
	json   string
}

var badMode = regexp.MustCompile(`xbad:([a-z-]+)`)

func newBadUpstream(t *testing.T, answers map[string]badAnswer) *badUpstream {
	u := &badUpstream{modes: answers}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.calls++
		u.body = body
		u.mu.Unlock()
		mode := "ok"
		if m := badMode.FindSubmatch(body); m != nil {
			mode = string(m[1])
		}
		a, ok := answers[mode]
		if !ok {
			http.Error(w, "no such mode", http.StatusTeapot)
			return
		}
		if a.events == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, a.json)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range a.events {
			_, _ = io.WriteString(w, ev+"\n\n")
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// answers are the SSE events of mode.
func (u *badUpstream) answers(mode string) []string { return u.modes[mode].events }

func (u *badUpstream) seen() (int, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls, u.body
}

// The scripted answers of each line's protocol.

func badMsgEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data }

var (
	badMsgStart = badMsgEvent("message_start", `{"type":"message_start","message":{"id":"msg_01Bad","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":31,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`)
	badMsgTool  = badMsgEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01Bad","name":"get_weather","input":{}}}`)
	badMsgArgs  = func(s string) string {
		js, _ := json.Marshal(s)
		return badMsgEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+string(js)+`}}`)
	}
	badMsgStop = badMsgEvent("content_block_stop", `{"type":"content_block_stop","index":0}`)
	badMsgEnd  = []string{
		badMsgEvent("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":57}}`),
		badMsgEvent("message_stop", `{"type":"message_stop"}`),
	}
	badMsgText = []string{
		badMsgStart,
		badMsgEvent("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		badMsgEvent("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Sunny."}}`),
		badMsgStop, badMsgEnd[0], badMsgEnd[1],
	}
	badMsgJSON = `{"id":"msg_01Ok","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Sunny."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":31,"output_tokens":3}}`

	badChatChunk = func(delta, finish string) string {
		return `data: {"id":"chatcmpl-bad","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	badChatJSON  = `{"id":"chatcmpl-bad","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Sunny."},"finish_reason":"stop"}],"usage":{"prompt_tokens":31,"completion_tokens":3,"total_tokens":34}}`
	badChatUsage = `data: {"id":"chatcmpl-bad","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":9,"total_tokens":40}}`
	badChatText  = []string{badChatChunk(`{"role":"assistant","content":"Sunny."}`, "null"), badChatChunk(`{}`, `"stop"`), badChatUsage, "data: [DONE]"}
	badChatCall  = badChatChunk(`{"tool_calls":[{"index":0,"id":"call_bad","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null")
	badChatArgs  = func(s string) string {
		js, _ := json.Marshal(s)
		return badChatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(js)+`}}]}`, "null")
	}

	badGemChunk = func(parts, finish string) string {
		return `data: {"candidates":[{"content":{"parts":` + parts + `,"role":"model"}` + finish + `,"index":0}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":4,"totalTokenCount":35},"modelVersion":"gemini-x","responseId":"gem-bad"}`
	}
	badGemJSON = `{"candidates":[{"content":{"parts":[{"text":"Sunny."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":3,"totalTokenCount":34},"modelVersion":"gemini-x","responseId":"gem-ok"}`
)

// badEnv is a gateway whose standard route serves modela-opus-5-5 over an
// anthropic line, modelf-flash over a gemini line and modele-k3 over an
// openai-chat line, each a badUpstream, every text model on every text
// endpoint; one try per call, so that an upstream's failure is the call's.
func badEnv(t *testing.T, limit int64) (*env, map[string]*badUpstream) {
	ups := map[string]*badUpstream{
		"anthropic": newBadUpstream(t, map[string]badAnswer{
			"ok":        {json: badMsgJSON},
			"ok-sse":    {events: badMsgText},
			"args":      {events: append([]string{badMsgStart, badMsgTool, badMsgArgs(`{"location": "Par`), badMsgArgs(`is"]]`), badMsgStop}, badMsgEnd...)},
			"cut":       {events: []string{badMsgStart, badMsgTool, badMsgArgs(`{"location": "Par`)}},
			"chatjson":  {json: badChatJSON},
			"chatsse":   {events: badChatText},
			"truncated": {json: badMsgJSON[:len(badMsgJSON)/2]},
		}),
		"chat": newBadUpstream(t, map[string]badAnswer{
			"ok":      {json: badChatJSON},
			"ok-sse":  {events: badChatText},
			"args":    {events: []string{badChatCall, badChatArgs(`{"location": "Par`), badChatArgs(`is"]]`), badChatChunk(`{}`, `"tool_calls"`), badChatUsage, "data: [DONE]"}},
			"cut":     {events: []string{badChatCall, badChatArgs(`{"location": "Par`)}},
			"msgjson": {json: badMsgJSON},
			"msgsse":  {events: badMsgText},
		}),
		"gemini": newBadUpstream(t, map[string]badAnswer{
			"ok":      {json: badGemJSON},
			"ok-sse":  {events: []string{badGemChunk(`[{"text":"Sunny."}]`, `,"finishReason":"STOP"`)}},
			"cut":     {events: []string{badGemChunk(`[{"text":"Sun"}]`, "")}},
			"msgjson": {json: badMsgJSON},
			"msgsse":  {events: badMsgText},
		}),
	}
	e := newEnv(t, func(c *config.Config) {
		c.Lines = []config.LineConfig{
			{Name: "x-msg", Protocol: config.ProtocolAnthropic, BaseURL: ups["anthropic"].srv.URL, Models: []string{"modela-opus-5-5"}, Route: "standard"},
			{Name: "x-chat", Protocol: config.ProtocolOpenAIChat, BaseURL: ups["chat"].srv.URL, Models: []string{"modele-k3"}, Route: "standard"},
			{Name: "x-gem", Protocol: config.ProtocolGemini, BaseURL: ups["gemini"].srv.URL, Models: []string{"modelf-flash"}, Route: "standard"},
		}
		c.Serve = []config.ServeConfig{{Models: []string{"*"}, Route: "standard", Endpoints: config.TextEndpoints}}
		c.Retry.MaxTries = 1
		c.Limits.MaxBodyBytes = limit
	})
	return e, ups
}

// badLines: each model's line protocol, its shape and its upstream's key.
var badLines = map[string]struct {
	protocol string
	up       string
}{
	"modela-opus-5-5": {config.ProtocolAnthropic, "anthropic"},
	"modele-k3":       {config.ProtocolOpenAIChat, "chat"},
	"modelf-flash":    {config.ProtocolGemini, "gemini"},
}

// badCall sends caller a small request to model whose prompt names mode.
func badCall(e *env, key, caller, model, mode string, stream bool) (int, http.Header, []byte, string) {
	body := callerBody(caller, model, "What is the weather? xbad:"+mode, stream)
	st, h, data := e.do("POST", shapePaths[caller], key, body, "Anthropic-Version", "2023-06-01")
	return st, h, data, body
}

// badCheckHealthy: nothing is held on the account, and the gateway still
// answers a good call to model.
func badCheckHealthy(t *testing.T, e *env, key, account, caller, model string) {
	t.Helper()
	if b := e.balance(account); b.Held != 0 {
		t.Fatalf("%s held after the call", b.Held.Fixed())
	}
	for _, stream := range []bool{false, true} {
		mode := "ok"
		if stream {
			mode = "ok-sse"
		}
		st, h, data, _ := badCall(e, key, caller, model, mode, stream)
		if st != 200 {
			t.Fatalf("the next call: %d %s", st, data)
		}
		checkCallerShape(t, caller, model, stream, h, data)
	}
	if b := e.balance(account); b.Held != 0 {
		t.Fatalf("%s held after the good calls", b.Held.Fixed())
	}
}

// badCutCharge is what a translated stream that failed is charged, by the
// rule for cut streams: the usage the upstream's events the gateway read
// (those up to the one whose translation failed) reported, in the
// upstream's shape; else the estimate from the caller's body and the text
// delivered.
func badCutCharge(t *testing.T, protocol string, caller xlate.Shape, events []string, callerBytes int) pricing.Usage {
	t.Helper()
	shape := lineShape(protocol)
	rd := readerFor(shape)
	meter := rd.meter()
	xs, err := xlate.NewStream(shape, caller, &xlate.Request{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	text := 0
	for _, ev := range events {
		name, data := wire.ParseEvent([]byte(ev + "\n\n"))
		_ = meter.Observe(string(name), data)
		if data != nil {
			text += rd.text(data)
		}
		if _, err := xs.Event(string(name), data); err != nil {
			break // the gateway reads no further
		}
	}
	if u, ok := meter.Usage(); ok {
		return u
	}
	return pricing.Usage{InputTokens: settleInputTokens(callerBytes), OutputTokens: pricing.EstimateTokens(text)}
}

// badStreamError checks that a caller's stream ends in its shape's error
// event naming what went wrong, without the end marker of a stream that
// succeeded.
func badStreamError(t *testing.T, caller string, data []byte, want string) {
	t.Helper()
	s := string(data)
	var errEvent, success string
	switch caller {
	case "chat":
		errEvent, success = `data: {"error":{"message":`, "data: [DONE]"
	case "messages":
		errEvent, success = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"upstream_error\"", "event: message_stop"
	default:
		errEvent, success = "event: response.failed\ndata: {\"type\":\"response.failed\"", "event: response.completed"
	}
	i := strings.LastIndex(s, errEvent)
	if i < 0 || strings.Contains(s, success) {
		t.Fatalf("the %s stream does not end in its error event (%q) or carries %q:\n%s", caller, errEvent, success, s)
	}
	last := s[i:]
	if !strings.Contains(last, want) {
		t.Fatalf("the error event does not say %q:\n%s", want, last)
	}
	for _, ev := range strings.Split(strings.TrimSpace(s), "\n\n") {
		_, js, _ := strings.Cut(ev, "data: ")
		if !json.Valid([]byte(js)) {
			t.Fatalf("a %s event that is not JSON: %q", caller, ev)
		}
	}
}

// TestTranslatedBadStreams: an upstream's stream that breaks its protocol
// — a tool call's arguments that are not JSON, a stream cut inside a tool
// call, a stream of another protocol — reaches each caller as an error
// event of the caller's shape, charged by the rule for cut streams.
func TestTranslatedBadStreams(t *testing.T) {
	t.Parallel()
	e, ups := badEnv(t, 0)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	cases := []struct {
		model, mode string
		want        string // in the error event's message
	}{
		{"modela-opus-5-5", "args", "could not be translated"},
		{"modela-opus-5-5", "cut", "could not be translated"},
		{"modela-opus-5-5", "chatsse", "could not be translated"},
		{"modele-k3", "args", "could not be translated"},
		{"modele-k3", "cut", "could not be translated"},
		{"modele-k3", "msgsse", "could not be translated"},
		{"modelf-flash", "cut", "could not be translated"},
		{"modelf-flash", "msgsse", "could not be translated"},
	}
	for _, c := range cases {
		for _, caller := range []string{"chat", "messages", "responses"} {
			if caller == "chat" && c.model == "modele-k3" || caller == "messages" && c.model == "modela-opus-5-5" {
				continue // the line serves the call as sent: nothing is translated
			}
			t.Run(c.model+"/"+c.mode+"/"+caller, func(t *testing.T) {
				line := badLines[c.model]
				before, _ := ups[line.up].seen()
				st, h, data, body := badCall(e, key, caller, c.model, c.mode, true)
				if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("%d %q %s", st, h.Get("Content-Type"), data)
				}
				if after, _ := ups[line.up].seen(); after != before+1 {
					t.Fatalf("%d upstream calls, want 1", after-before)
				}
				badStreamError(t, caller, data, c.want)
				events := ups[line.up].answers(c.mode)
				u := badCutCharge(t, line.protocol, xlate.Shape(caller), events, len(body))
				got := lastCharge(t, e, "acme")
				if want := expectedCharge(t, e, c.model, "standard", u); got.Usage != u || -got.Amount != want {
					t.Fatalf("charged %s for %+v, want %s for %+v", (-got.Amount).Fixed(), got.Usage, want.Fixed(), u)
				}
				badCheckHealthy(t, e, key, "acme", caller, c.model)
			})
		}
	}
}

// TestTranslatedBadAnswers: a JSON answer in another protocol than its
// line's (a chat completion from an anthropic line, a message from an
// openai-chat or a gemini line), or cut in half, cannot be translated: the caller gets a
// 502 saying so, and is not charged.
func TestTranslatedBadAnswers(t *testing.T) {
	t.Parallel()
	e, ups := badEnv(t, 0)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	cases := []struct{ model, mode string }{
		{"modela-opus-5-5", "chatjson"},
		{"modela-opus-5-5", "truncated"},
		{"modele-k3", "msgjson"},
		{"modelf-flash", "msgjson"},
	}
	for _, c := range cases {
		for _, caller := range []string{"chat", "messages", "responses"} {
			if caller == "chat" && c.model == "modele-k3" || caller == "messages" && c.model == "modela-opus-5-5" {
				continue // the line serves the call as sent: nothing is translated
			}
			t.Run(c.model+"/"+c.mode+"/"+caller, func(t *testing.T) {
				before := e.balance("acme")
				n, _ := ups[badLines[c.model].up].seen()
				st, h, data, _ := badCall(e, key, caller, c.model, c.mode, false)
				if st != http.StatusBadGateway {
					t.Fatalf("%d %s, want 502", st, data)
				}
				if after, _ := ups[badLines[c.model].up].seen(); after != n+1 {
					t.Fatalf("%d upstream calls, want 1", after-n)
				}
				msg, typ, code := errBody(t, data)
				if typ != "upstream_error" || code != "bad_upstream_answer" || !strings.Contains(msg, "could not be translated") ||
					!strings.Contains(msg, "not charged") || !strings.Contains(msg, shapePaths[caller]) {
					t.Fatalf("error %q %q %v", msg, typ, code)
				}
				if h.Get(costHeader) != "" {
					t.Fatalf("%s: %q on an answer not charged", costHeader, h.Get(costHeader))
				}
				if after := e.balance("acme"); after.Balance != before.Balance || after.Held != 0 {
					t.Fatalf("balance %s → %s, held %s: the call was charged or is still held", before.Balance.Fixed(), after.Balance.Fixed(), after.Held.Fixed())
				}
				badCheckHealthy(t, e, key, "acme", caller, c.model)
			})
		}
	}
}

// badSchema is a JSON Schema object of about n bytes: one object with
// many described properties, as a generated API client's tool might carry.
func badSchema(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	desc := strings.Repeat("The field's meaning, as the API documents it. ", 20)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"field_%d":{"type":"string","description":%q}`, i, desc)
	}
	b.WriteString(`},"required":["field_0"]}`)
	return b.Bytes()
}

// TestTranslatedHugeToolSchema: a 10 MB tool schema (below the default
// max_body_bytes of 16 MiB) is translated for an anthropic and a gemini
// line whole, in bounded time and memory, and charged the upstream's
// usage; under a max_body_bytes of 8 MiB it is a 400 naming the limit,
// before anything is held or sent. Not parallel: it measures what the
// gateway allocates.
func TestTranslatedHugeToolSchema(t *testing.T) {
	schema := badSchema(10 << 20)
	body := `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":"Fill the form. xbad:ok"}],` +
		`"tools":[{"type":"function","function":{"name":"fill_form","description":"Fill the form.","parameters":` + string(schema) + `}}]}`
	t.Run("translated", func(t *testing.T) {
		e, ups := badEnv(t, 0)
		e.account("acme", "100000")
		key := e.key("acme", "standard")
		for _, c := range []struct{ model, field string }{{"modela-opus-5-5", "input_schema"}, {"modelf-flash", "parametersJsonSchema"}} {
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			start := time.Now()
			st, _, data := e.do("POST", "/v1/chat/completions", key, fmt.Sprintf(body, c.model))
			took := time.Since(start)
			runtime.ReadMemStats(&m1)
			if st != 200 {
				t.Fatalf("%s: %d %s", c.model, st, data)
			}
			checkCallerShape(t, "chat", c.model, false, nil, data)
			// The caller's body is read, parsed, built and sent, and the
			// upstream (in this process) reads it: each a few copies of
			// 10 MB. Bound the whole at 40 copies and 20 seconds (a
			// loaded machine under -race).
			if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 40*uint64(len(schema)) || took > 20*time.Second {
				t.Errorf("%s: %d MB allocated in %s for a %d MB schema", c.model, alloc>>20, took, len(schema)>>20)
			}
			_, sent := ups[badLines[c.model].up].seen()
			if got := badFind(t, sent, c.field); !bytes.Equal(badCompact(t, got), badCompact(t, schema)) {
				t.Fatalf("%s: the upstream got a schema of %d bytes, not the caller's %d", c.model, len(got), len(schema))
			}
			u := upstreamUsage(t, badLines[c.model].up, []byte(map[string]string{"anthropic": badMsgJSON, "gemini": badGemJSON}[badLines[c.model].up]), false)
			if got, want := lastCharge(t, e, "acme"), expectedCharge(t, e, c.model, "standard", u); got.Usage != u || -got.Amount != want {
				t.Fatalf("%s: charged %s for %+v, want %s for %+v", c.model, (-got.Amount).Fixed(), got.Usage, want.Fixed(), u)
			}
			badCheckHealthy(t, e, key, "acme", "chat", c.model)
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		e, ups := badEnv(t, 8<<20)
		e.account("acme", "100000")
		key := e.key("acme", "standard")
		st, _, data := e.do("POST", "/v1/chat/completions", key, fmt.Sprintf(body, "modela-opus-5-5"))
		if st != http.StatusBadRequest {
			t.Fatalf("%d %s", st, data)
		}
		if msg, _, _ := errBody(t, data); !strings.Contains(msg, "limit") || !strings.Contains(msg, fmt.Sprint(8<<20)) {
			t.Fatalf("the 400 does not name the limit: %q", msg)
		}
		if n, _ := ups["anthropic"].seen(); n != 0 {
			t.Fatalf("the refused call reached the upstream")
		}
		if b := e.balance("acme"); b.Balance != 100000*pricing.NanoPerUSD || b.Held != 0 {
			t.Fatalf("balance %s held %s", b.Balance.Fixed(), b.Held.Fixed())
		}
		badCheckHealthy(t, e, key, "acme", "chat", "modela-opus-5-5")
	})
}

// badFind is the value of the first member named field anywhere in the
// JSON body.
func badFind(t *testing.T, body []byte, field string) json.RawMessage {
	t.Helper()
	var walk func(v any) (any, bool)
	walk = func(v any) (any, bool) {
		switch x := v.(type) {
		case map[string]any:
			if f, ok := x[field]; ok {
				return f, true
			}
			for _, y := range x {
				if f, ok := walk(y); ok {
					return f, true
				}
			}
		case []any:
			for _, y := range x {
				if f, ok := walk(y); ok {
					return f, true
				}
			}
		}
		return nil, false
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("the upstream's body: %v", err)
	}
	f, ok := walk(v)
	if !ok {
		t.Fatalf("no %s in the upstream's body", field)
	}
	js, _ := json.Marshal(f)
	return js
}

// badCompact is js re-encoded with its object members sorted, so that
// two encodings of one value compare equal.
func badCompact(t *testing.T, js []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return out
}

// TestTranslatedDeepBody: a caller's body nested 10,000 deep (deeper than
// any reader here goes) is a 400 naming the body, before anything is held
// or sent, for each caller's shape and target; the gateway answers on.
func TestTranslatedDeepBody(t *testing.T) {
	t.Parallel()
	e, ups := badEnv(t, 0)
	e.account("acme", "50")
	key := e.key("acme", "standard")
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	bodies := map[string]string{
		"chat":      `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","default":` + deep + `}}}]}`,
		"messages":  `{"model":"%s","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object","default":` + deep + `}}]}`,
		"responses": `{"model":"%s","max_output_tokens":64,"input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","default":` + deep + `}}]}`,
	}
	for caller, body := range bodies {
		for model, line := range badLines {
			if caller == "chat" && model == "modele-k3" || caller == "messages" && model == "modela-opus-5-5" {
				continue // the line serves the call as sent: nothing is translated
			}
			t.Run(caller+"/"+model, func(t *testing.T) {
				n, _ := ups[line.up].seen()
				st, _, data := e.do("POST", shapePaths[caller], key, fmt.Sprintf(body, model), "Anthropic-Version", "2023-06-01")
				if st != http.StatusBadRequest {
					t.Fatalf("%d %s", st, data[:min(len(data), 300)])
				}
				if msg, _, _ := errBody(t, data); !strings.Contains(msg, "body") {
					t.Fatalf("the 400 does not name the body: %q", msg)
				}
				if after, _ := ups[line.up].seen(); after != n {
					t.Fatalf("the refused call reached the upstream")
				}
				if b := e.balance("acme"); b.Balance != 50*pricing.NanoPerUSD || b.Held != 0 {
					t.Fatalf("balance %s held %s", b.Balance.Fixed(), b.Held.Fixed())
				}
			})
		}
	}
	// Just within the depth every reader here takes (the chat body's
	// five levels and 9,995 arrays: 10,000), the call is translated.
	within := strings.Repeat("[", 9995) + strings.Repeat("]", 9995)
	for _, model := range []string{"modela-opus-5-5", "modelf-flash"} {
		body := `{"model":"` + model + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","default":` + within + `}}}]}`
		if st, _, data := e.do("POST", "/v1/chat/completions", key, body); st != 200 {
			t.Fatalf("%s, 10,000 deep: %d %s", model, st, data[:min(len(data), 300)])
		}
	}
	badCheckHealthy(t, e, key, "acme", "responses", "modelf-flash")
}
