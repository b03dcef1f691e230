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

	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sdk/abi"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
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
	opts = append([]envOption{func(c *Config) {
		c.Lines[0].BaseURL, c.Lines[1].BaseURL = openai.url, anthropic.url
	}}, opts...)
	return newEnv(t, opts...), openai, anthropic
}

// answerUsage is the usage a provider's answer reports, read as the
// gateway's pricing package reads it.
func answerUsage(t testing.TB, endpoint string, answer []byte) pricing.Usage {
	t.Helper()
	if !bytes.HasPrefix(answer, []byte("event:")) && !bytes.HasPrefix(answer, []byte("data:")) {
		parse := pricing.ResponsesUsage
		if endpoint == pricing.EndpointMessages {
			parse = pricing.MessagesUsage
		}
		u, ok, err := parse(answer)
		if err != nil || !ok {
			t.Fatalf("no usage in the answer (%v): %s", err, truncate(answer, 400))
		}
		return u
	}
	m := pricing.NewResponsesMeter()
	if endpoint == pricing.EndpointMessages {
		m = pricing.NewMessagesMeter()
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
	res, err := e.host.Settle(context.Background(), abi.SettleRequest{Model: model, Route: route, Endpoint: endpoint, Usage: usageToABI(u)})
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
			if ep.protocol == ProtocolAnthropic {
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
			if !bytes.Equal(x.body, f.body) {
				t.Errorf("the provider received a different body (%d bytes, sent %d)", len(x.body), len(f.body))
			}
			if x.uri != f.target {
				t.Errorf("the provider was asked for %q, the client asked for %q", x.uri, f.target)
			}
			for _, h := range f.header {
				k := http.CanonicalHeaderKey(h[0])
				if dropRequestHeaders[k] {
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
		})
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
