package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/gateway/lines"
	"github.com/modelrelay/modelrelay/plugins"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
	"github.com/modelrelay/modelrelay/wire"
)

// clientFixture is one request as a coding client sends it
// (testdata/clients/README.md).
type clientFixture struct {
	name   string
	method string
	target string // path and query
	header [][2]string
	body   []byte
}

// parseFixture reads `# comments`, `METHOD /target`, header lines, a blank
// line, then the body as it is.
func parseFixture(data []byte) (clientFixture, error) {
	var f clientFixture
	rest := data
	line := func() (string, bool) {
		if len(rest) == 0 {
			return "", false
		}
		l, r, _ := bytes.Cut(rest, []byte("\n"))
		rest = r
		return string(l), true
	}
	for {
		l, ok := line()
		if !ok {
			return f, fmt.Errorf("no request line")
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		m, target, ok := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(target, "/") {
			return f, fmt.Errorf("bad request line %q", l)
		}
		f.method, f.target = m, target
		break
	}
	for {
		l, ok := line()
		if !ok {
			return f, fmt.Errorf("no blank line before the body")
		}
		if l == "" {
			break
		}
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return f, fmt.Errorf("bad header line %q", l)
		}
		f.header = append(f.header, [2]string{k, v})
	}
	f.body = rest
	return f, nil
}

func loadClientFixtures(t *testing.T) []clientFixture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(moduleRoot(), "testdata", "clients", "*", "*.http"))
	if len(files) < 10 {
		t.Fatalf("only %d client fixtures", len(files))
	}
	var out []clientFixture
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseFixture(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		f.name = filepath.Base(filepath.Dir(p)) + "/" + strings.TrimSuffix(filepath.Base(p), ".http")
		out = append(out, f)
	}
	return out
}

// upstreamExchange is what a recording upstream saw and answered.
type upstreamExchange struct {
	uri    string
	header http.Header
	body   []byte
	status int
	answer []byte
}

// recordingUpstream is a simulated provider that keeps every request it
// receives and every answer it sends.
type recordingUpstream struct {
	sim *sim.Server
	url string
	mu  sync.Mutex
	got []upstreamExchange
}

func newRecordingUpstream(t testing.TB) *recordingUpstream {
	u := &recordingUpstream{sim: sim.New(sim.Options{})}
	hs := httptest.NewServer(u)
	t.Cleanup(hs.Close)
	t.Cleanup(u.sim.Close)
	u.url = hs.URL
	return u
}

type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *teeWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}
func (w *teeWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	tw := &teeWriter{ResponseWriter: w}
	u.sim.ServeHTTP(tw, r)
	u.mu.Lock()
	u.got = append(u.got, upstreamExchange{uri: r.URL.RequestURI(), header: r.Header.Clone(), body: body, status: tw.status, answer: tw.buf.Bytes()})
	u.mu.Unlock()
}

func (u *recordingUpstream) last(t testing.TB) upstreamExchange {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		t.Fatal("the provider received nothing")
	}
	return u.got[len(u.got)-1]
}

// recordedEnv is newEnv with the standard route's two lines (std-a,
// std-msg) on recording upstreams.
func recordedEnv(t *testing.T, opts ...envOption) (e *env, openai, anthropic *recordingUpstream) {
	openai, anthropic = newRecordingUpstream(t), newRecordingUpstream(t)
	opts = append([]envOption{func(c *config.Config) {
		c.Lines[0].BaseURL, c.Lines[1].BaseURL = openai.url, anthropic.url
	}}, opts...)
	return newEnv(t, opts...), openai, anthropic
}

// answerUsage is the usage a provider's answer reports, read as the
// gateway's pricing package reads it.
func answerUsage(t testing.TB, endpoint string, answer []byte) pricing.Usage {
	t.Helper()
	if !bytes.HasPrefix(answer, []byte("event:")) && !bytes.HasPrefix(answer, []byte("data:")) {
		parse := wire.ResponsesUsage
		if endpoint == pricing.EndpointMessages {
			parse = wire.MessagesUsage
		}
		u, ok, err := parse(answer)
		if err != nil || !ok {
			t.Fatalf("no usage in the answer (%v): %s", err, truncate(answer, 400))
		}
		return u
	}
	m := wire.NewResponsesMeter()
	if endpoint == pricing.EndpointMessages {
		m = wire.NewMessagesMeter()
	}
	for _, ev := range bytes.Split(answer, []byte("\n\n")) {
		var name string
		var data []byte
		sc := bufio.NewScanner(bytes.NewReader(ev))
		sc.Buffer(nil, len(ev)+1)
		for sc.Scan() {
			l := sc.Bytes()
			if v, ok := bytes.CutPrefix(l, []byte("event: ")); ok {
				name = string(v)
			} else if v, ok := bytes.CutPrefix(l, []byte("data: ")); ok {
				data = append([]byte(nil), v...)
			}
		}
		if data != nil {
			if err := m.Observe(name, data); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
		}
	}
	u, ok := m.Usage()
	if !ok {
		t.Fatalf("no usage in the stream: %s", truncate(answer, 400))
	}
	return u
}

// priceOf is what the model's plugin charges for u on endpoint.
func priceOf(t testing.TB, e *env, endpoint, model, route string, u pricing.Usage) pricing.Nano {
	t.Helper()
	res, err := e.host.Settle(context.Background(), abi.SettleRequest{Model: model, Route: route, Endpoint: endpoint, Usage: plugins.UsageToABI(u)})
	if err != nil {
		t.Fatal(err)
	}
	return pricing.Nano(res.Charge)
}

// TestClientShapesRelayed sends the requests recorded from Claude Code and
// Codex CLI (testdata/clients) through the gateway to the simulated
// provider: each answers 200, reaches the provider byte for byte (body,
// path and query, every header the gateway does not own), comes back to
// the client unchanged, and is charged exactly the plugin's price of the
// usage the provider reported — count_tokens is not charged at all.
func TestClientShapesRelayed(t *testing.T) {
	t.Parallel()
	e, openai, anthropic := recordedEnv(t)
	e.account("acme", "1000")
	key := e.key("acme", "standard")
	for _, f := range loadClientFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			path, _, _ := strings.Cut(f.target, "?")
			ep := endpointFor(path)
			if ep == nil {
				t.Fatalf("%s is not a relayed endpoint", path)
			}
			up := openai
			if ep.protocol == config.ProtocolAnthropic {
				up = anthropic
			}
			req, err := http.NewRequest(f.method, e.url+f.target, bytes.NewReader(f.body))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range f.header {
				req.Header.Set(h[0], strings.ReplaceAll(h[1], "$KEY", key))
			}
			before := e.balance("acme")
			entries, _ := e.charges("acme", 1000)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, truncate(got, 600))
			}
			x := up.last(t)
			checkRelayedAsSent(t, f, x, key, got)
			checkShapeCharged(t, e, ep, f, x, before, entries)
		})
	}
}

// checkRelayedAsSent wants the provider to have received the fixture's
// body, target and headers (but those the gateway drops) and not the
// caller's key, and the client to have received the provider's answer, got;
// a compaction's answer holds exactly one compaction item.
func checkRelayedAsSent(t *testing.T, f clientFixture, x upstreamExchange, key string, got []byte) {
	t.Helper()
	if !bytes.Equal(x.body, f.body) {
		t.Errorf("the provider received a different body (%d bytes, sent %d)", len(x.body), len(f.body))
	}
	if x.uri != f.target {
		t.Errorf("the provider was asked for %q, the client asked for %q", x.uri, f.target)
	}
	for _, h := range f.header {
		k := http.CanonicalHeaderKey(h[0])
		if !lines.Forwards(k) {
			continue
		}
		if v := x.header.Get(k); v != h[1] {
			t.Errorf("header %s reached the provider as %q, sent %q", k, v, h[1])
		}
	}
	if strings.Contains(fmt.Sprint(x.header), key) {
		t.Error("the caller's key reached the provider")
	}
	if !bytes.Equal(got, x.answer) {
		t.Errorf("the client received a different answer than the provider sent:\n%s\n%s", truncate(got, 300), truncate(x.answer, 300))
	}
	if bytes.Contains(f.body, []byte(`{"type":"compaction_trigger"}`)) {
		// Codex: "remote compaction v2 expected exactly one compaction output item".
		i := bytes.LastIndex(x.answer, []byte(`"type":"response.completed"`))
		if i < 0 || bytes.Count(x.answer[i:], []byte(`"type":"compaction"`)) != 1 || bytes.Count(x.answer[i:], []byte(`"type":"message"`)) != 0 {
			t.Errorf("the compaction's answer does not hold exactly one compaction item: %s", truncate(x.answer[max(i, 0):], 600))
		}
	}
}

// checkShapeCharged wants nothing held after the call, and acme charged
// once the price of the answer's usage on ep — or, for an uncharged
// endpoint (count_tokens), nothing: before and entries are acme's balance
// and journal before the call.
func checkShapeCharged(t *testing.T, e *env, ep *endpoint, f clientFixture, x upstreamExchange, before store.Account, entries []store.Entry) {
	t.Helper()
	after := e.balance("acme")
	now, _ := e.charges("acme", 1000)
	if after.Held != 0 {
		t.Errorf("%s still held after the call", after.Held.Fixed())
	}
	if ep.uncharged {
		if after.Balance != before.Balance || len(now) != len(entries) {
			t.Errorf("count_tokens was charged: balance %s → %s, %d new journal entries", before.Balance.Fixed(), after.Balance.Fixed(), len(now)-len(entries))
		}
		return
	}
	u := answerUsage(t, ep.name, x.answer)
	var model struct{ Model string }
	if err := json.Unmarshal(f.body, &model); err != nil {
		t.Fatal(err)
	}
	want := priceOf(t, e, ep.name, model.Model, "standard", u)
	if want <= 0 || before.Balance-after.Balance != want {
		t.Errorf("charged %s, want %s for %+v", (before.Balance - after.Balance).Fixed(), want.Fixed(), u)
	}
	if len(now) != len(entries)+1 || now[0].Kind != store.KindCharge || now[0].Usage != u || now[0].Endpoint != ep.name || now[0].Model != model.Model {
		t.Errorf("journal %+v, want one charge of %+v", now[0], u)
	}
}

// endpointFor is the relayed endpoint of a path (nil when none).
func endpointFor(path string) *endpoint {
	for _, ep := range endpoints {
		if ep.path == path || contains(ep.aliases, path) {
			return ep
		}
	}
	return nil
}

// TestCountTokens: POST /v1/messages/count_tokens is relayed to the
// model's messages line and answered as the provider answers; it holds
// and charges nothing (an account without credit may count), leaves no
// journal entry, keeps ?beta=true, forwards anthropic-version and
// anthropic-beta, and refuses as /v1/messages refuses (401, 403, 400).
func TestCountTokens(t *testing.T) {
	t.Parallel()
	e, _, anthropic := recordedEnv(t)
	e.account("acme", "5")
	e.account("broke", "0")
	key := e.key("acme", "standard")
	brokeKey := e.key("broke", "standard")
	ecoKey := e.key("acme", "economy")
	exclKey := e.key("acme", "standard", "modela-sonnet-5-5")
	body := `{"model":"modela-sonnet-5-5","system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],` +
		`"messages":[{"role":"user","content":"count me"},{"role":"system","content":"a system turn"}],"tools":[{"name":"t","input_schema":{"type":"object"},"defer_loading":true}]}`
	n, err := sim.CountTokens([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"input_tokens":%d}`, n)
	hdr := func(kv ...string) []string {
		return append([]string{"anthropic-version", "2023-06-01", "anthropic-beta", "token-counting-2024-11-01"}, kv...)
	}

	for _, tc := range []struct {
		name, key, path string
		hdr             []string
	}{
		{"x-api-key, ?beta=true", "", "/v1/messages/count_tokens?beta=true", hdr("x-api-key", key)},
		{"bearer", key, "/v1/messages/count_tokens", hdr()},
		{"an account without credit", brokeKey, "/v1/messages/count_tokens?beta=true", hdr()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, h, data := e.do("POST", tc.path, tc.key, body, tc.hdr...)
			if st != 200 || string(data) != want {
				t.Fatalf("%d %s, want %s", st, data, want)
			}
			if h.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			x := anthropic.last(t)
			if x.uri != tc.path || string(x.body) != body {
				t.Errorf("the provider got %s %s", x.uri, x.body)
			}
			if x.header.Get("Anthropic-Version") != "2023-06-01" || x.header.Get("Anthropic-Beta") != "token-counting-2024-11-01" {
				t.Errorf("headers not forwarded: %v", x.header)
			}
		})
	}
	for _, acct := range []string{"acme", "broke"} {
		b := e.balance(acct)
		es, _ := e.charges(acct, 100)
		credits := 0
		if acct == "acme" {
			credits = 1
		}
		if b.Held != 0 || len(es) != credits || (acct == "acme" && b.Balance != 5*pricing.NanoPerUSD) || (acct == "broke" && b.Balance != 0) {
			t.Errorf("%s: balance %s held %s, %d journal entries: count_tokens held or charged", acct, b.Balance.Fixed(), b.Held.Fixed(), len(es))
		}
	}
	if strings.Contains(e.logs.String(), "count me") {
		t.Error("the prompt reached the log")
	}

	calls := len(anthropic.got)
	for _, tc := range []struct {
		name, key string
		hdr       []string
		body      string
		status    int
		msg       string
	}{
		{"no key", "", hdr(), body, 401, ""},
		{"unknown key", "sk-unknown-key-0000000000000000", hdr(), body, 401, ""},
		{"model not on the key's route", ecoKey, hdr(), body, 403, "route"},
		{"model excluded by the key", exclKey, hdr(), body, 403, "excluded"},
		{"model not sold", key, hdr(), strings.Replace(body, "modela-sonnet-5-5", "no-such-model", 1), 403, "not sold"},
		{"a responses model", key, hdr(), strings.Replace(body, "modela-sonnet-5-5", "modelb-6-astra", 1), 403, "not served by /v1/messages/count_tokens"},
		{"no version header", key, nil, body, 400, "anthropic-version"},
		{"no messages", key, hdr(), `{"model":"modela-sonnet-5-5"}`, 400, "messages"},
		{"not JSON", key, hdr(), `{"model":`, 400, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := e.do("POST", "/v1/messages/count_tokens", tc.key, tc.body, tc.hdr...)
			msg, _, _ := errBody(t, data)
			if st != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %s, want %d naming %q", st, data, tc.status, tc.msg)
			}
		})
	}
	if len(anthropic.got) != calls {
		t.Errorf("refused calls reached the provider")
	}
}

// TestCountTokensRateLimit: count_tokens takes a token from the key's
// bucket, the same bucket its messages calls take from.
func TestCountTokensRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *config.Config) {
		c.Routes[0].Rate = &config.RateConfig{Rate: 0.001, Burst: 2} // standard: a burst of 2, then a wait of ~17 min
	})
	e.account("acme", "5")
	key := e.key("acme", "standard")
	v := []string{"anthropic-version", "2023-06-01"}
	count := `{"model":"modela-fable-5-1","messages":[{"role":"user","content":"x"}]}`
	if st, _, data := e.do("POST", "/v1/messages/count_tokens", key, count, v...); st != 200 {
		t.Fatalf("count_tokens within the burst: %d %s", st, data)
	}
	if st, _, data := e.do("POST", "/v1/messages", key, `{"model":"modela-fable-5-1","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, v...); st != 200 {
		t.Fatalf("messages within the burst: %d %s", st, data)
	}
	st, h, data := e.do("POST", "/v1/messages/count_tokens", key, count, v...)
	if _, typ, _ := errBody(t, data); st != 429 || typ != "rate_limit_error" || h.Get("Retry-After") == "" {
		t.Fatalf("past the burst: %d %s (Retry-After %q)", st, data, h.Get("Retry-After"))
	}
}

// TestResponsesCompact: POST /v1/responses/compact is relayed to the
// responses models' lines and charged exactly what a responses call with
// the same usage costs — the same prices and plugin — from the usage its
// answer reports; the journal records it as a responses call.
func TestResponsesCompact(t *testing.T) {
	t.Parallel()
	e, openai, _ := recordedEnv(t)
	e.account("acme", "5")
	key := e.key("acme", "standard")
	body := `{"model":"modelb-6.1-sol","instructions":"You are a coding agent.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` +
		strings.Repeat("a long conversation ", 200) + `"}]},{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`
	st, _, data := e.do("POST", "/v1/responses/compact", key, body)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	x := openai.last(t)
	if x.uri != "/v1/responses/compact" || string(x.body) != body || !bytes.Equal(x.answer, data) {
		t.Fatalf("relayed as %s, answer changed: %v", x.uri, !bytes.Equal(x.answer, data))
	}
	u, ok, err := wire.ResponsesUsage(data)
	c, cerr := sim.CompactUsage([]byte(body))
	if err != nil || !ok || cerr != nil || u.InputTokens+u.CacheReadTokens != c.Prompt || u.CacheReadTokens != c.Cached || u.OutputTokens != sim.CompactTokens {
		t.Fatalf("usage %+v (%v %v), sim %+v (%v)", u, ok, err, c, cerr)
	}
	want := priceOf(t, e, pricing.EndpointResponses, "modelb-6.1-sol", "standard", u)
	if want <= 0 {
		t.Fatalf("price %d", want)
	}
	b := e.balance("acme")
	es, _ := e.charges("acme", 10)
	if b.Balance != 5*pricing.NanoPerUSD-want || b.Held != 0 {
		t.Errorf("balance %s held %s, want %s charged", b.Balance.Fixed(), b.Held.Fixed(), want.Fixed())
	}
	if es[0].Kind != store.KindCharge || es[0].Endpoint != pricing.EndpointResponses || es[0].Usage != u || es[0].Amount != -want || es[0].Note != "" {
		t.Errorf("journal %+v", es[0])
	}
	// A /v1/responses call that reports the same usage is charged the same.
	resp := `{"model":"modelb-6.1-sol","instructions":"You are a coding agent.","input":` + body[strings.Index(body, `[{"type":"message"`):len(body)-1] + `,"max_output_tokens":` + fmt.Sprint(sim.CompactTokens) + `}`
	ru, err := sim.ResponsesUsage([]byte(resp))
	if err != nil || ru.Prompt != c.Prompt || ru.Cached != c.Cached || ru.Completion != sim.CompactTokens {
		t.Fatalf("responses usage %+v %v, compact %+v", ru, err, c)
	}
	if st, _, data := e.do("POST", "/v1/responses", key, resp); st != 200 {
		t.Fatalf("responses: %d %s", st, data)
	}
	b2 := e.balance("acme")
	if b.Balance-b2.Balance != want {
		t.Errorf("the responses call with the same usage cost %s, compact %s", (b.Balance - b2.Balance).Fixed(), want.Fixed())
	}
	b = b2

	for _, tc := range []struct {
		name, key, body string
		status          int
		msg             string
	}{
		{"no key", "", body, 401, ""},
		{"a messages model", key, `{"model":"modela-opus-5-5","input":"x"}`, 403, "not served by /v1/responses/compact"},
		{"no model", key, `{"input":"x"}`, 400, "model"},
		{"input an object", key, `{"model":"modelb-6-astra","input":{"a":1}}`, 400, "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, data := e.do("POST", "/v1/responses/compact", tc.key, tc.body)
			msg, _, _ := errBody(t, data)
			if st != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("%d %s, want %d naming %q", st, data, tc.status, tc.msg)
			}
		})
	}
	if b2 := e.balance("acme"); b2.Balance != b.Balance {
		t.Errorf("a refused call was charged: %s → %s", b.Balance.Fixed(), b2.Balance.Fixed())
	}
}
