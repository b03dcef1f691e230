package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real coding CLIs, pinned in clients/package.json; make test-clients
// installs them (npm ci --prefix clients) and sets RELAY_TEST_CLIENTS=1.
const (
	clientsEnv    = "RELAY_TEST_CLIENTS"
	claudeModel   = "modela-sonnet-5-5" // a /v1/messages model of the sim
	codexModel    = "modelb-6.1-sol"    // a /v1/responses model of the sim
	simReplyStart = "Simulated reply from"
	clientTimeout = 4 * time.Minute
)

// TestRealClients drives Claude Code (claude -p) and Codex (codex exec, once
// with a custom provider over /v1/responses and once with the built-in
// OpenAI provider) against relay demo: each must answer one prompt with the
// sim's reply, exit 0, and leave a charge on the demo account. Then each
// runs a scripted tool loop on a model only a line of another protocol
// serves, with the demo's standard key (clients_loop_test.go). The CLIs
// talk only to 127.0.0.1 (through a tap that records what the gateway
// answered), run with a fresh HOME, telemetry and update checks off, and a
// proxy that goes nowhere for anything not on 127.0.0.1.
func TestRealClients(t *testing.T) {
	if os.Getenv(clientsEnv) == "" {
		t.Skipf("the real-CLI test runs under make test-clients (%s=1; needs npm)", clientsEnv)
	}
	root, _ := filepath.Abs("../..")
	bin := filepath.Join(root, "clients", "node_modules", ".bin")
	for _, c := range []string{"claude", "codex"} {
		if _, err := os.Stat(filepath.Join(bin, c)); err != nil {
			t.Fatalf("%s not installed: run npm ci --prefix clients (make test-clients does): %v", c, err)
		}
	}
	d, std := startStandardDemo(t)
	tap := newTap(t, d.addr)

	t.Run("claude", func(t *testing.T) {
		h := newHome(t, "")
		h.env = append(h.env,
			"ANTHROPIC_BASE_URL="+tap.url,
			"ANTHROPIC_API_KEY="+d.key,
			"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=1")
		h.run(t, d, tap, claudeModel, filepath.Join(bin, "claude"), "-p", "Say hello in five words.", "--model", claudeModel)
	})
	t.Run("codex-custom-provider", func(t *testing.T) {
		h := newHome(t, fmt.Sprintf(`model = %q
model_provider = "relay"
%s
[model_providers.relay]
name = "ModelRelay"
base_url = "%s/v1"
env_key = "RELAY_API_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 1
`, codexModel, codexQuiet, tap.url))
		h.env = append(h.env, "RELAY_API_KEY="+d.key)
		h.run(t, d, tap, codexModel, filepath.Join(bin, "codex"), "exec", "--strict-config", "--skip-git-repo-check", "Say hello in five words.")
	})
	// Codex reads the built-in provider's base URL from openai_base_url (it
	// no longer reads OPENAI_BASE_URL), and codex exec its key from
	// CODEX_API_KEY (it does not send OPENAI_API_KEY). It first tries a
	// websocket on GET /v1/responses and falls back to HTTPS on 426.
	openai := fmt.Sprintf("model = %q\nopenai_base_url = \"%s/v1\"\n", codexModel, tap.url) + codexQuiet
	t.Run("codex-openai-provider", func(t *testing.T) {
		h := newHome(t, openai)
		h.env = append(h.env, "CODEX_API_KEY="+d.key)
		h.run(t, d, tap, codexModel, filepath.Join(bin, "codex"), "exec", "--strict-config", "--skip-git-repo-check", "Say hello in five words.")
	})
	// A resumed session over the compaction limit compacts before its turn:
	// a POST /v1/responses ending in a compaction_trigger item, answered
	// with one compaction output item that the next turn sends back.
	t.Run("codex-openai-provider-compaction", func(t *testing.T) {
		h := newHome(t, "model_auto_compact_token_limit = 5\n"+openai)
		h.env = append(h.env, "CODEX_API_KEY="+d.key)
		codex := filepath.Join(bin, "codex")
		h.run(t, d, tap, codexModel, codex, "exec", "--strict-config", "--skip-git-repo-check", "Say hello in five words.")
		mark := tap.mark()
		h.run(t, d, tap, codexModel, codex, "exec", "--strict-config", "--skip-git-repo-check", "resume", "--last", "Say it again.")
		if !strings.Contains(tap.since(mark), "[compaction]") {
			t.Errorf("the resumed session sent no compaction request:\n%s", tap.since(mark))
		}
	})
	runLoops(t, d, std, tap, bin)
}

// codexQuiet turns off Codex's update check, analytics, feedback and
// OpenTelemetry export (top-level keys, then tables).
const codexQuiet = `check_for_update_on_startup = false
`

const codexQuietTables = `
[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
`

// home is a fresh HOME (and, for Codex, CODEX_HOME holding config.toml)
// with a work directory and an environment built from nothing but PATH.
type home struct {
	dir, work string
	env       []string
}

func newHome(t *testing.T, codexConfig string) *home {
	t.Helper()
	dir := t.TempDir()
	h := &home{dir: dir, work: filepath.Join(dir, "work")}
	for _, d := range []string{h.work, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TERM=dumb",
		"LANG=C.UTF-8",
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		// Anything not for 127.0.0.1 goes to a proxy that is not there.
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	if codexConfig != "" {
		ch := filepath.Join(dir, ".codex")
		if err := os.MkdirAll(ch, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ch, "config.toml"), []byte(codexConfig+codexQuietTables), 0o600); err != nil {
			t.Fatal(err)
		}
		h.env = append(h.env, "CODEX_HOME="+ch)
	}
	return h
}

// run runs one CLI command and asserts that it answered with the sim's
// reply, that the gateway answered every request it made with a success
// (a websocket upgrade with 426), and that the demo account was charged for
// model.
func (h *home) run(t *testing.T, d *demo, tap *tap, model, bin string, args ...string) {
	t.Helper()
	before := d.charges(t, model)
	mark := tap.mark()
	h.answer(t, tap, mark, bin, args...)
	if after := d.charges(t, model); after <= before {
		t.Errorf("%s: no new charge for %s on account demo (%d before, %d after)", filepath.Base(bin), model, before, after)
	}
}

// answer runs one CLI command in the work directory and asserts that it
// exited 0 with the sim's reply on stdout and that the gateway answered
// every request it made since mark with a success.
func (h *home) answer(t *testing.T, tap *tap, mark int, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = h.work
	cmd.Env = h.env
	cmd.Stdin = nil // /dev/null: codex exec otherwise waits for more input
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start).Round(100 * time.Millisecond)
	reqs := tap.since(mark)
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if n := strings.Count(a, "\n"); n > 0 {
			shown[i] = fmt.Sprintf("<prompt of %d lines>", n+1)
		}
	}
	name := filepath.Base(bin) + " " + strings.Join(shown, " ")
	t.Logf("%s: exit %v in %s; requests through the gateway:\n%s", name, err, took, reqs)
	if err != nil || !strings.Contains(stdout.String(), simReplyStart) {
		t.Errorf("%s did not answer the prompt with the sim's reply: %v (after %s)\nrequests:\n%s\nstdout:\n%s\nstderr (tail):\n%s",
			name, err, took, reqs, tail(stdout.String(), 2000), tail(stderr.String(), 4000))
	}
	if bad := tap.failures(mark); len(bad) > 0 {
		t.Errorf("%s: the gateway refused %d request(s):\n  %s", name, len(bad), strings.Join(bad, "\n  "))
	}
}

// charges counts the demo account's entries that took money for model.
func (d *demo) charges(t *testing.T, model string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.addr+"/admin/accounts/demo/charges?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Kind   string      `json:"kind"`
			Model  string      `json:"model"`
			Amount json.Number `json:"amount_usd"` // USD, exact decimal
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("charges: %s %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range out.Data {
		if e.Model == model && nanoOf(t, e.Amount.String()) < 0 {
			n++
		}
	}
	return n
}

// tap is a reverse proxy in front of the gateway that records, per request,
// the method, path, status, and for an error the gateway's error body, so a
// failing run says which request failed and why; and, for the tool loops,
// the request id the gateway answered with and the body of each POST.
type tap struct {
	url string
	mu  sync.Mutex
	log []tapRecord
}

type tapRecord struct {
	line   string
	ok     bool // 2xx, or 426 to a websocket upgrade
	method string
	path   string // without the query
	status int
	rid    string // X-Request-Id
	body   []byte // a POST's body as the client sent it
	coding string // its Content-Encoding, if any
}

// tapBody is the context key of the request body the tap read.
type tapBody struct{}

func newTap(t *testing.T, gatewayAddr string) *tap {
	target, _ := url.Parse("http://" + gatewayAddr)
	tp := &tap{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		r := resp.Request
		rec := tapRecord{method: r.Method, path: r.URL.Path, status: resp.StatusCode,
			rid: resp.Header.Get("X-Request-Id"), coding: r.Header.Get("Content-Encoding")}
		rec.body, _ = r.Context().Value(tapBody{}).([]byte)
		line := fmt.Sprintf("%s %s -> %d", r.Method, r.URL.RequestURI(), resp.StatusCode)
		upgrade := r.Header.Get("Upgrade") != ""
		if upgrade {
			line += " (Upgrade: " + r.Header.Get("Upgrade") + ")"
		}
		var meta struct {
			Kind string `json:"request_kind"`
		}
		if json.Unmarshal([]byte(r.Header.Get("X-Codex-Turn-Metadata")), &meta) == nil && meta.Kind != "" {
			line += " [" + meta.Kind + "]"
		}
		ok := resp.StatusCode/100 == 2 || upgrade && resp.StatusCode == http.StatusUpgradeRequired
		if resp.StatusCode >= 400 {
			// Error bodies are the gateway's own JSON, never caller content.
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			resp.ContentLength = int64(len(b))
			resp.Header.Del("Content-Length")
			line += " " + strings.TrimSpace(string(b))
		}
		rec.line, rec.ok = line, ok
		tp.add(rec)
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		tp.add(tapRecord{line: fmt.Sprintf("%s %s -> proxy error: %v", r.Method, r.URL.RequestURI(), err), method: r.Method, path: r.URL.Path})
		w.WriteHeader(http.StatusBadGateway)
	}
	// The body is read before it is relayed, and handed to ModifyResponse
	// through the request's context (the proxy's outgoing request keeps it).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			r = r.WithContext(context.WithValue(r.Context(), tapBody{}, b))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tp.url = srv.URL
	return tp
}

func (tp *tap) add(r tapRecord) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.log = append(tp.log, r)
}

// failures lists the requests since mark the gateway did not serve.
func (tp *tap) failures(mark int) []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for _, r := range tp.log[mark:] {
		if !r.ok {
			out = append(out, r.line)
		}
	}
	return out
}

// records returns the records since mark.
func (tp *tap) records(mark int) []tapRecord {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tapRecord(nil), tp.log[mark:]...)
}

func (tp *tap) mark() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.log)
}

func (tp *tap) since(mark int) string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if len(tp.log) == mark {
		return "  (none)"
	}
	lines := make([]string, 0, len(tp.log)-mark)
	for _, r := range tp.log[mark:] {
		lines = append(lines, r.line)
	}
	return "  " + strings.Join(lines, "\n  ")
}
