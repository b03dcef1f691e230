package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// claudeCodeBody is a messages request as current Claude Code sends it:
// system blocks and a system-role turn inside messages, cache_control on
// text, tool_result and tool_use blocks, thinking, context_management,
// output_config, metadata, tools with extra fields and an unknown field.
const claudeCodeBody = `{"model":"modela-sonnet-5-5","max_tokens":32000,"stream":false,` +
	`"system":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral","ttl":"1h"}}],` +
	`"messages":[` +
	`{"role":"user","content":[{"type":"text","text":"<reminder>context</reminder>"},{"type":"text","text":"list the files","cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"I will run ls.","signature":"simsig_e1a2c1afc29a043d"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"},"cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.go b.go"}],"cache_control":{"type":"ephemeral"}}]},` +
	`{"role":"system","content":"The user changed the working directory."},` +
	`{"role":"user","content":"now count them canary-4242"}],` +
	`"tools":[{"name":"Bash","description":"run a command","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},{"name":"mcp__docs__search","description":"search","input_schema":{"type":"object"},"defer_loading":true},{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}],` +
	`"thinking":{"type":"enabled","budget_tokens":31999},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
	`"output_config":{"effort":"high"},"metadata":{"user_id":"user_1"},"temperature":1,"a_field_from_next_year":{"x":[1]}}`

func TestMessagesAcceptClientShapes(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	want, err := MessagesUsage([]byte(claudeCodeBody))
	if err != nil {
		t.Fatalf("MessagesUsage: %v", err)
	}
	status, _, b := call(t, ts, http.MethodPost, "/v1/messages?beta=true", claudeCodeBody, anthropicHdr)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	m := decode[anthMessage](t, b)
	u := m.Usage
	if u == nil || u.InputTokens != want.Prompt || u.CacheReadInputTokens != 0 ||
		u.CacheCreation.Ephemeral5m != want.CacheWrite || u.CacheCreation.Ephemeral1h != want.CacheWrite1h || u.OutputTokens != want.Completion {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
	// Every breakpoint writes: the 1h system block, then 5m up to the last
	// breakpoint (the tool_result); the system turn and the last user turn
	// are plain input.
	if want.CacheWrite1h == 0 || want.CacheWrite == 0 {
		t.Errorf("cache writes %+v: the breakpoints were not seen", want)
	}
	if wantIn := int64(MessageTokens+Tokens("The user changed the working directory.")) + MessageTokens + Tokens("now count them canary-4242"); want.Prompt != wantIn {
		t.Errorf("input_tokens %d, want %d (the system turn and the last user turn)", want.Prompt, wantIn)
	}
	// Thinking is enabled: a thinking block, then the text.
	if len(m.Content) != 2 || m.Content[0].Type != "thinking" || !strings.Contains(m.Content[1].Text, "canary-4242") {
		t.Errorf("the reply is not thinking then the text echoing the last user turn: %+v", m.Content)
	}
	// The same request again reads what the first one wrote.
	_, _, b = call(t, ts, http.MethodPost, "/v1/messages?beta=true", claudeCodeBody, anthropicHdr)
	u = decode[anthMessage](t, b).Usage
	if u.CacheReadInputTokens != want.CacheWrite+want.CacheWrite1h || u.CacheCreationInputTokens != 0 {
		t.Errorf("repeat usage %+v: want every written token read", u)
	}
}

func TestCountTokens(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	full, err := MessagesUsage([]byte(claudeCodeBody))
	if err != nil {
		t.Fatal(err)
	}
	total := full.Prompt + full.Cached + full.CacheWrite + full.CacheWrite1h
	// Without max_tokens, as clients send it.
	var v map[string]any
	if err := json.Unmarshal([]byte(claudeCodeBody), &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "max_tokens")
	delete(v, "stream")
	body, _ := json.Marshal(v)
	n, err := CountTokens(body)
	if err != nil || n != total {
		t.Fatalf("CountTokens = %d, %v; want %d", n, err, total)
	}
	for range 2 { // counting neither reads nor writes the prompt cache
		status, _, b := call(t, ts, http.MethodPost, "/v1/messages/count_tokens?beta=true", string(body), anthropicHdr)
		if status != http.StatusOK || string(b) != `{"input_tokens":`+itoa(total)+`}` {
			t.Fatalf("status %d: %s, want input_tokens %d", status, b, total)
		}
	}
	_, _, b := call(t, ts, http.MethodPost, "/v1/messages", claudeCodeBody, anthropicHdr)
	if u := decode[anthMessage](t, b).Usage; u.CacheReadInputTokens != 0 {
		t.Errorf("count_tokens wrote the prompt cache: %+v", u)
	}

	for _, tc := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		typ, msg   string
	}{
		{"no version header", `{"model":"modela-fable-5-1","messages":[{"role":"user","content":"x"}]}`, nil, 400, "invalid_request_error", "anthropic-version"},
		{"no messages", `{"model":"modela-fable-5-1"}`, anthropicHdr, 400, "invalid_request_error", "messages"},
		{"bad role", `{"model":"modela-fable-5-1","messages":[{"role":"robot","content":"x"}]}`, anthropicHdr, 400, "invalid_request_error", "messages.0.role"},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 400, "invalid_request_error", "model"},
		{"responses model", `{"model":"modelb-6-astra","messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 404, "not_found_error", "not served by /v1/messages/count_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/messages/count_tokens", tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			e := decode[anthErrBody](t, b)
			if e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("error body %s, want type %q message containing %q", b, tc.typ, tc.msg)
			}
		})
	}
	if status, _, _ := call(t, ts, http.MethodGet, "/v1/messages/count_tokens", "", anthropicHdr); status != http.StatusMethodNotAllowed {
		t.Errorf("GET count_tokens = %d, want 405", status)
	}
}

func itoa(n int64) string { return string(appendInt(nil, n)) }

type compaction struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Output    []struct {
		ID               string          `json:"id"`
		Type             string          `json:"type"`
		Role             string          `json:"role"`
		Content          json.RawMessage `json:"content"`
		EncryptedContent string          `json:"encrypted_content"`
	} `json:"output"`
	Usage *struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

func TestCompact(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	items := `[{"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox rules"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug canary-5150"}]},` +
		`{"type":"reasoning","summary":[],"content":null,"encrypted_content":"simenc_gAAAAB"},` +
		`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"call_1"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"main.go"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]},` +
		`{"role":"user","content":"thanks"}]`
	cases := []struct {
		name     string
		body     string
		users    []string // the content of the user messages kept, as JSON
		wantResp string   // the responses request that counts the same input
	}{
		{
			name:     "codex items",
			body:     `{"model":"modelb-6-astra","instructions":"You are a coding agent.","input":` + items + `,"tools":[],"parallel_tool_calls":false,"reasoning":{"effort":"high"},"text":{"verbosity":"low"},"prompt_cache_key":"k1"}`,
			users:    []string{`[{"type":"input_text","text":"fix the bug canary-5150"}]`, `[{"type":"input_text","text":"thanks"}]`},
			wantResp: `{"model":"modelb-6-astra","instructions":"You are a coding agent.","input":` + items + `}`,
		},
		{
			name:     "string input",
			body:     `{"model":"modelc-4.7","input":"a long conversation"}`,
			users:    []string{`[{"type":"input_text","text":"a long conversation"}]`},
			wantResp: `{"model":"modelc-4.7","input":"a long conversation"}`,
		},
		{
			name: "previous_response_id alone",
			body: `{"model":"modelb-6.1-sol","previous_response_id":"resp_1","instructions":"abcdefgh"}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := CompactUsage([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantResp != "" {
				r, err := ResponsesUsage([]byte(tc.wantResp))
				if err != nil {
					t.Fatal(err)
				}
				if want.Prompt != r.Prompt || want.Cached != r.Cached {
					t.Errorf("compact counts %+v, a responses call with that input %+v", want, r)
				}
			} else if want.Prompt != 2 {
				t.Errorf("input_tokens %d, want 2 (the instructions)", want.Prompt)
			}
			status, _, b := call(t, ts, http.MethodPost, "/v1/responses/compact", tc.body, nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			if strings.Contains(string(b), "sandbox rules") || strings.Contains(string(b), "main.go") {
				t.Errorf("the compaction kept more than the user messages: %s", b)
			}
			got := decode[compaction](t, b)
			if !strings.HasPrefix(got.ID, "resp_") || got.Object != "response.compaction" || got.CreatedAt == 0 {
				t.Errorf("envelope %s", b)
			}
			if len(got.Output) != len(tc.users)+1 {
				t.Fatalf("%d output items, want %d user messages and a compaction: %s", len(got.Output), len(tc.users), b)
			}
			for i, u := range tc.users {
				o := got.Output[i]
				if o.Type != "message" || o.Role != "user" || string(o.Content) != u {
					t.Errorf("output %d = %+v, want the user message %s", i, o, u)
				}
			}
			last := got.Output[len(got.Output)-1]
			if last.Type != "compaction" || !strings.HasPrefix(last.ID, "cmp_") || last.EncryptedContent == "" {
				t.Errorf("last item %+v, want a compaction", last)
			}
			u := got.Usage
			if u == nil || u.InputTokens != want.Prompt || u.InputTokensDetails.CachedTokens != want.Cached ||
				u.OutputTokens != CompactTokens || u.TotalTokens != want.Prompt+CompactTokens {
				t.Errorf("usage %+v, want %+v", u, want)
			}
		})
	}

	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"no model", `{"input":"x"}`, 400, "`model`"},
		{"messages model", `{"model":"modela-opus-5-5","input":"x"}`, 404, "not served by /v1/responses/compact"},
		{"input an object", `{"model":"modelb-6-astra","input":{"a":1}}`, 400, "input"},
		{"bad json", `{"model"`, 400, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/responses/compact", tc.body, nil)
			if status != tc.status || !strings.Contains(string(b), tc.msg) {
				t.Errorf("status %d body %s, want %d containing %q", status, b, tc.status, tc.msg)
			}
		})
	}
}

// Codex CLI's remote compaction v2: a responses call whose input ends with
// a compaction_trigger item answers one compaction item, JSON or streamed.
func TestResponsesCompactionTrigger(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	body := `{"model":"modelb-6.1-sol","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"read notes canary-31"}]},` +
		`{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"},{"type":"function_call_output","call_id":"c1","output":"hi"},{"type":"compaction_trigger"}],` +
		`"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k"}`
	want, err := ResponsesUsage([]byte(body))
	if err != nil || want.Completion != CompactTokens || want.Prompt == 0 {
		t.Fatalf("ResponsesUsage = %+v, %v", want, err)
	}
	status, _, b := call(t, ts, http.MethodPost, "/v1/responses", body, nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	var got struct {
		Status string `json:"status"`
		Usage  struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	item, _ := raw["output"].([]any)
	if got.Status != "completed" || len(item) != 1 || item[0].(map[string]any)["type"] != "compaction" ||
		item[0].(map[string]any)["encrypted_content"] == "" || !strings.HasPrefix(item[0].(map[string]any)["id"].(string), "cmp_") {
		t.Fatalf("answer %s, want one compaction item", b)
	}
	if strings.Contains(string(b), "canary-31") {
		t.Errorf("the compaction carries prompt text: %s", b)
	}
	if got.Usage.InputTokens != want.Prompt || got.Usage.OutputTokens != CompactTokens {
		t.Errorf("usage %+v, want %+v", got.Usage, want)
	}

	stream := strings.Replace(body, `"store":false`, `"stream":true,"store":false`, 1)
	evs, err := postStream(t, ts, "/v1/responses", stream, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range evs {
		names = append(names, ev.name)
	}
	if strings.Join(names, ",") != "response.created,response.in_progress,response.output_item.added,response.output_item.done,response.completed" {
		t.Fatalf("events %v", names)
	}
	last := evs[len(evs)-1].data
	if !strings.Contains(last, `"type":"compaction"`) || !strings.Contains(last, `"output_tokens":32`) {
		t.Errorf("response.completed %s", last)
	}
}
