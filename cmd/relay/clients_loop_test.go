package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/gateway/config"
)

// The tool loops: each real CLI runs, with the demo's standard key, a
// multi-turn loop of scripted tool calls (sim:call lines in its prompt,
// naming the CLI's own tools with real arguments) against a model that only
// a line of another protocol serves, so that every one of its requests is
// translated. The tools really run: they write and edit files in the CLI's
// work directory, which the test reads afterwards.

// loopCall is one scripted tool call: a tool the CLI offers and its
// arguments.
type loopCall struct {
	tool string
	args map[string]any
}

// loopCase is one CLI's loop against one model.
type loopCase struct {
	name     string
	model    string
	protocol string // of the only line serving model on route standard
	endpoint string // the endpoint the CLI calls, as the access log names it
	path     string // its path
	calls    []loopCall
	files    map[string]string // what the work directory holds afterwards
}

// The contents the loops leave: notes.txt written then edited, copy.txt
// made by a shell command from it, then edited.
var loopFiles = map[string]string{"notes.txt": "alpha\ngamma\n", "copy.txt": "delta\ngamma\ntail\n"}

// claudeCalls is the loop of Claude Code's tools (Write, Read, Edit, Bash,
// their arguments as the pinned version declares them) in work.
func claudeCalls(work string) []loopCall {
	notes, cp := filepath.Join(work, "notes.txt"), filepath.Join(work, "copy.txt")
	return []loopCall{
		{"Write", map[string]any{"file_path": notes, "content": "alpha\nbeta\n"}},
		{"Read", map[string]any{"file_path": notes}},
		{"Edit", map[string]any{"file_path": notes, "old_string": "beta", "new_string": "gamma"}},
		{"Bash", map[string]any{"command": "cp notes.txt copy.txt && echo tail >> copy.txt", "description": "Copy the notes and add a line"}},
		{"Read", map[string]any{"file_path": cp}},
		{"Edit", map[string]any{"file_path": cp, "old_string": "alpha", "new_string": "delta"}},
	}
}

// codexCalls is the loop of Codex's tools: apply_patch (a custom freeform
// tool: its input is the patch) and exec_command (unified exec).
func codexCalls() []loopCall {
	patch := func(p string) map[string]any {
		return map[string]any{"input": "*** Begin Patch\n" + p + "*** End Patch\n"}
	}
	return []loopCall{
		{"apply_patch", patch("*** Add File: notes.txt\n+alpha\n+beta\n")},
		{"exec_command", map[string]any{"cmd": "cat notes.txt"}},
		{"apply_patch", patch("*** Update File: notes.txt\n@@\n alpha\n-beta\n+gamma\n")},
		{"exec_command", map[string]any{"cmd": "cp notes.txt copy.txt && echo tail >> copy.txt"}},
		{"exec_command", map[string]any{"cmd": "cat copy.txt"}},
		{"apply_patch", patch("*** Update File: copy.txt\n@@\n-alpha\n+delta\n gamma\n")},
	}
}

// loopPrompt is the prompt that scripts calls.
func loopPrompt(calls []loopCall) string {
	lines := []string{"Run the scripted tool loop, then say what you did."}
	for _, c := range calls {
		args, _ := json.Marshal(c.args)
		lines = append(lines, "sim:call "+c.tool+" "+string(args))
	}
	return strings.Join(lines, "\n")
}

// runLoops runs the three loops: Claude Code on a model of an openai-chat
// line and on one of a gemini line, Codex on one of an anthropic line.
func runLoops(t *testing.T, d *demo, std *standardDemo, tap *tap, bin string) {
	for _, c := range []loopCase{
		{name: "claude-loop-openai-chat", model: "modele-k3", protocol: config.ProtocolOpenAIChat, endpoint: "messages", path: "/v1/messages"},
		{name: "claude-loop-gemini", model: "modelf-flash", protocol: config.ProtocolGemini, endpoint: "messages", path: "/v1/messages"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHome(t, "")
			c.calls, c.files = claudeCalls(h.work), loopFiles
			h.env = append(h.env,
				"ANTHROPIC_BASE_URL="+tap.url,
				"ANTHROPIC_API_KEY="+std.key,
				"MAX_THINKING_TOKENS=8000",
				"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=1")
			// --allowedTools lets -p run the tools without asking
			// (--dangerously-skip-permissions is refused as root).
			h.loop(t, d, std, tap, &c, filepath.Join(bin, "claude"), "-p", loopPrompt(c.calls),
				"--model", c.model, "--allowedTools", "Write", "Read", "Edit", "Bash")
		})
	}
	t.Run("codex-loop-anthropic", func(t *testing.T) {
		c := loopCase{name: "codex-loop-anthropic", model: "modela-opus-5-5", protocol: config.ProtocolAnthropic,
			endpoint: "responses", path: "/v1/responses", calls: codexCalls(), files: loopFiles}
		h := newHome(t, "")
		h.codexLoopConfig(t, tap, c.model)
		h.env = append(h.env, "RELAY_API_KEY="+std.key)
		h.loop(t, d, std, tap, &c, filepath.Join(bin, "codex"), "exec", "--strict-config", "--skip-git-repo-check",
			"--dangerously-bypass-approvals-and-sandbox", loopPrompt(c.calls))
	})
}

// codexLoopConfig writes Codex's config for the loop: the custom provider
// over /v1/responses, reasoning at medium, and a model catalog entry for
// the model so that Codex offers it its coding tools (apply_patch as a
// freeform tool, exec_command); unknown models get no apply_patch. The
// hosted web_search tool and the multi-agent tools (a "namespace" tool) are
// off: no line but OpenAI's can run or express them, and the gateway
// refuses a translated request that offers them.
func (h *home) codexLoopConfig(t *testing.T, tap *tap, model string) {
	t.Helper()
	catalog := fmt.Sprintf(codexCatalog, model, model)
	ch := filepath.Join(h.dir, ".codex")
	if err := os.MkdirAll(ch, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ch, "catalog.json"), []byte(catalog), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`model = %q
model_provider = "relay"
model_reasoning_effort = "medium"
model_catalog_json = %q
web_search = "disabled"
%s
[features]
multi_agent = false

[model_providers.relay]
name = "ModelRelay"
base_url = "%s/v1"
env_key = "RELAY_API_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 1
`, model, filepath.Join(ch, "catalog.json"), codexQuiet, tap.url)
	if err := os.WriteFile(filepath.Join(ch, "config.toml"), []byte(conf+codexQuietTables), 0o600); err != nil {
		t.Fatal(err)
	}
	h.env = append(h.env, "CODEX_HOME="+ch)
}

// codexCatalog is a model catalog (model_catalog_json) of one model (%q
// its slug, then its name), with the fields the pinned Codex requires:
// a coding model with freeform apply_patch and unified exec, reasoning
// efforts low to high, no hosted search.
const codexCatalog = `{"models":[{"slug":%q,"display_name":%q,"description":"A model of relay demo.",
"default_reasoning_level":"medium","default_reasoning_summary":"none",
"supported_reasoning_levels":[{"effort":"low","description":"low"},{"effort":"medium","description":"medium"},{"effort":"high","description":"high"}],
"shell_type":"unified_exec","apply_patch_tool_type":"freeform","visibility":"list","supported_in_api":true,"priority":1,
"truncation_policy":{"mode":"tokens","limit":10000},"context_window":200000,"effective_context_window_percent":95,
"experimental_supported_tools":[],"input_modalities":["text"],"supports_search_tool":false,
"support_verbosity":false,"default_verbosity":null,"supports_image_detail_original":false,"supports_experimental_context":false,
"use_responses_lite":false,"supports_reasoning_effort_updates":false,"node_repl_auto_review_required":false,"node_repl_disabled":false,
"include_skills_usage_instructions":false,"include_plugin_usage_instructions":false,"include_apps_usage_instructions":false,
"additional_speed_tiers":[],"service_tiers":[],"availability_nux":null,"upgrade":null,
"base_instructions":"You are a coding agent. Use the tools to do what the user asks."}]}`

// loop runs the CLI on c's scripted loop and checks what it did: the
// files its tools left; one streamed model request per turn (the calls,
// then the final answer), none repeated, each answered 200 by c's line
// (translated), asking for thinking and sending back the thinking of every
// earlier turn; and one charge per model request.
func (h *home) loop(t *testing.T, d *demo, std *standardDemo, tap *tap, c *loopCase, bin string, args ...string) {
	t.Helper()
	line := demoLineOf(t, c.model, c.protocol)
	before := d.charges(t, c.model)
	mark := tap.mark()
	h.answer(t, tap, mark, bin, args...)
	for name, want := range c.files {
		got, err := os.ReadFile(filepath.Join(h.work, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q (%v), want %q: the tool calls did not all run", name, got, err, want)
		}
	}
	var reqs []tapRecord
	for _, r := range tap.records(mark) {
		if r.method == http.MethodPost && r.path == c.path {
			reqs = append(reqs, r)
		}
	}
	if len(reqs) != len(c.calls)+1 {
		t.Fatalf("%d requests on %s, want %d: one per tool call and the final answer, none repeated", len(reqs), c.path, len(c.calls)+1)
	}
	sent := make([]int, len(reqs))
	for i, r := range reqs {
		sent[i] = checkLoopRequest(t, i, &r, c)
	}
	checkOffered(t, reqs[0].body, c)
	logged := std.log.await(t, reqs)
	for i, r := range reqs {
		e := logged[r.rid]
		if len(e) != 1 || e[0].Line != line || e[0].Endpoint != c.endpoint || e[0].Status != 200 || !e[0].Stream || e[0].Model != c.model {
			t.Errorf("request %d (%s): access log %+v, want one streamed 200 on %s answered by line %s (%s)", i, r.rid, e, c.endpoint, line, c.protocol)
			continue
		}
		t.Logf("request %d %s: %s answered by %s (%s), %d earlier thinking sent back", i, r.rid, e[0].Endpoint, e[0].Line, c.protocol, sent[i])
	}
	charged := d.chargesByRequest(t, c.model)
	for i, r := range reqs {
		if charged[r.rid] != 1 {
			t.Errorf("request %d (%s) was charged %d times, want once", i, r.rid, charged[r.rid])
		}
	}
	if after := d.charges(t, c.model); after-before != len(reqs) {
		t.Errorf("%d new charges for %s, want %d: one per model request", after-before, c.model, len(reqs))
	}
}

// demoLineOf is the one line of the demo's route standard that serves
// model: it must speak protocol.
func demoLineOf(t *testing.T, model, protocol string) string {
	t.Helper()
	var names []string
	for _, l := range demoConfig("http://127.0.0.1:1", "127.0.0.1:0", "", "").Lines {
		if l.Route == "standard" && slices.Contains(l.Models, model) {
			if l.Protocol != protocol {
				t.Fatalf("line %s serves %s over %s, not %s", l.Name, model, l.Protocol, protocol)
			}
			names = append(names, l.Name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("lines of standard serving %s: %v, want exactly one", model, names)
	}
	return names[0]
}

// loopBody is what a model request of the loops says about thinking and
// the conversation: Messages fields (Claude Code) or Responses ones
// (Codex).
type loopBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Reasoning *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Input []struct {
		Type             string `json:"type"`
		EncryptedContent string `json:"encrypted_content"`
	} `json:"input"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

func readLoopBody(t *testing.T, i int, r *tapRecord) *loopBody {
	t.Helper()
	var b loopBody
	if r.coding != "" {
		t.Fatalf("request %d: body sent with Content-Encoding %s; the test reads plain JSON", i, r.coding)
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("request %d: body: %v", i, err)
	}
	return &b
}

// checkLoopRequest checks model request i (0: the first): for the model,
// streamed, answered 200, asking for thinking, and carrying back (it
// returns how many) the thinking of the i answers before it — Claude Code a thinking block
// first in each earlier assistant turn, Codex a reasoning item with its
// encrypted_content per earlier turn. The upstream refuses what it did not
// sign (the sim checks Anthropic signatures, Gemini thought signatures on
// the current turn's calls, and Anthropic's rule that a tool-calling turn
// starts with thinking), so a loop that finished got them back intact.
func checkLoopRequest(t *testing.T, i int, r *tapRecord, c *loopCase) int {
	t.Helper()
	b := readLoopBody(t, i, r)
	if b.Model != c.model || !b.Stream || r.status != 200 {
		t.Errorf("request %d: model %q stream %v status %d, want %s streamed, 200", i, b.Model, b.Stream, r.status, c.model)
	}
	sent := 0
	switch c.endpoint {
	case "messages":
		if b.Thinking == nil || (b.Thinking.Type != "enabled" && b.Thinking.Type != "adaptive") {
			t.Errorf("request %d asks for no thinking: %+v", i, b.Thinking)
		}
		for j, m := range b.Messages {
			var blocks []struct{ Type string }
			if m.Role != "assistant" || json.Unmarshal(m.Content, &blocks) != nil || len(blocks) == 0 {
				continue
			}
			if blocks[0].Type != "thinking" {
				t.Errorf("request %d: assistant message %d starts with %q, not its thinking", i, j, blocks[0].Type)
				continue
			}
			sent++
		}
	case "responses":
		if b.Reasoning == nil || b.Reasoning.Effort != "medium" {
			t.Errorf("request %d asks for no reasoning at medium: %+v", i, b.Reasoning)
		}
		for _, it := range b.Input {
			if it.Type == "reasoning" && it.EncryptedContent != "" {
				sent++
			}
		}
	}
	if sent != i {
		t.Errorf("request %d sends back the thinking of %d earlier answers, want %d", i, sent, i)
	}
	return sent
}

// checkOffered checks that the CLI offers every tool the loop calls (the
// sim answers a call of another with "Tool X is not offered.").
func checkOffered(t *testing.T, body []byte, c *loopCase) {
	t.Helper()
	b := readLoopBody(t, 0, &tapRecord{body: body})
	var offered []string
	for _, tool := range b.Tools {
		offered = append(offered, tool.Name)
	}
	for _, call := range c.calls {
		if !slices.Contains(offered, call.tool) {
			t.Errorf("the CLI does not offer %s; it offers %v", call.tool, offered)
		}
	}
}

// chargesByRequest counts the demo account's charges for model per
// request id.
func (d *demo) chargesByRequest(t *testing.T, model string) map[string]int {
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
			RequestID string      `json:"request_id"`
			Model     string      `json:"model"`
			Amount    json.Number `json:"amount_usd"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("charges: %s %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range out.Data {
		if e.Model == model && nanoOf(t, e.Amount.String()) < 0 {
			n[e.RequestID]++
		}
	}
	return n
}

// standardDemo is what startStandardDemo adds to the demo: the standard
// key and the gateway's log.
type standardDemo struct {
	key string
	log *demoLog
}

// startStandardDemo starts relay demo as startDemo does, with the access
// log on (-log-level info), and also reads the key of route standard it
// prints after key: ("standard key: sk-…").
func startStandardDemo(t *testing.T) (*demo, *standardDemo) {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := exec.Command(relayBin, "demo", "-addr", addr, "-data", filepath.Join(dir, "data"), "-plugins", pluginDir, "-log-level", "info")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	std := &standardDemo{log: &demoLog{buf: syncBuffer{&sync.Mutex{}, &bytes.Buffer{}}}}
	cmd.Stderr = std.log.buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	d := &demo{addr: addr}
	var printed bytes.Buffer
	timer := time.AfterFunc(120*time.Second, func() { _ = cmd.Process.Kill() })
	d.read(bufio.NewScanner(io.TeeReader(stdout, &printed)))
	timer.Stop()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	for l := range strings.Lines(printed.String()) {
		if k, ok := strings.CutPrefix(strings.TrimSpace(l), "standard key: "); ok {
			std.key = k
		}
	}
	if !strings.HasPrefix(d.key, "sk-") || !strings.HasPrefix(std.key, "sk-") || std.key == d.key || d.token == "" {
		t.Fatalf("demo output: key %q standard key %q token %q; stderr %s", d.key, std.key, d.token, tail(std.log.String(), 4000))
	}
	return d, std
}

// demoLog is the demo's stderr: JSON log lines, the access log among them.
type demoLog struct{ buf syncBuffer }

func (l *demoLog) String() string {
	l.buf.mu.Lock()
	defer l.buf.mu.Unlock()
	return l.buf.b.String()
}

// accessEntry is one access-log line ("msg":"request").
type accessEntry struct {
	Msg       string `json:"msg"`
	RequestID string `json:"request_id"`
	Endpoint  string `json:"endpoint"`
	Status    int    `json:"status"`
	Model     string `json:"model"`
	Line      string `json:"line"`
	Stream    bool   `json:"stream"`
}

// entries is the access log by request id.
func (l *demoLog) entries() map[string][]accessEntry {
	out := map[string][]accessEntry{}
	for line := range strings.Lines(l.String()) {
		var e accessEntry
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "request" && e.RequestID != "" {
			out[e.RequestID] = append(out[e.RequestID], e)
		}
	}
	return out
}

// await returns the access log once it holds every request of reqs (the
// log is flushed every 100 ms), or after 5 s.
func (l *demoLog) await(t *testing.T, reqs []tapRecord) map[string][]accessEntry {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e := l.entries()
		all := true
		for _, r := range reqs {
			all = all && r.rid != "" && len(e[r.rid]) > 0
		}
		if all || time.Now().After(deadline) {
			return e
		}
		time.Sleep(50 * time.Millisecond)
	}
}
