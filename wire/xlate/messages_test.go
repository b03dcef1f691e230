package xlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Goldens under testdata/messages are rewritten, instead of compared, with
// XLATE_MSG_UPDATE=1 (an environment variable, not a flag, so that no
// other format's tests can collide with it); review the diff after.
func msgGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "messages", name)
	if os.Getenv("XLATE_MSG_UPDATE") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden:\n got: %s\nwant: %s", name, got, want)
	}
}

func msgReadFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "messages", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// msgNeutralJSON is v as indented JSON with its zero fields left out: the
// form of the neutral goldens.
func msgNeutralJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(msgStripZero(x), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// msgStripZero deletes the zero fields of Go structs (keys in capitals),
// never a key of raw JSON a struct holds (a schema's "additionalProperties":
// false stays).
func msgStripZero(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			e = msgStripZero(e)
			if k == "" || k[0] < 'A' || k[0] > 'Z' {
				continue
			}
			switch z := e.(type) {
			case nil:
				delete(x, k)
				continue
			case string, float64, bool:
				if reflect.ValueOf(z).IsZero() {
					delete(x, k)
					continue
				}
			case map[string]any:
				if len(z) == 0 {
					delete(x, k)
					continue
				}
			case []any:
				if len(z) == 0 {
					delete(x, k)
					continue
				}
			}
			x[k] = e
		}
	case []any:
		for i := range x {
			x[i] = msgStripZero(x[i])
		}
	}
	return v
}

// msgMustValid fails unless b is one valid JSON value.
func msgMustValid(t *testing.T, b []byte) {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON: %s", b)
	}
}

func TestMsgParseRequestGolden(t *testing.T) {
	for _, name := range []string{"request_tools", "request_simple"} {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRequest(Messages, msgReadFixture(t, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			msgGolden(t, name+".neutral.json", msgNeutralJSON(t, r))
			built, err := BuildRequest(Messages, r)
			if err != nil {
				t.Fatal(err)
			}
			msgMustValid(t, built)
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, built, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			msgGolden(t, name+".built.json", pretty.Bytes())
		})
	}
}

// TestMsgRequestRoundTrip: messages → neutral → messages → neutral keeps
// the conversation (text, images, thinking and its signatures, tool calls
// and results with their ids) and the settings; only the system blocks
// are joined into one string.
func TestMsgRequestRoundTrip(t *testing.T) {
	for _, name := range []string{"request_tools.json", "request_simple.json"} {
		first, err := msgParseRequest(msgReadFixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		built, err := msgBuildRequest(first)
		if err != nil {
			t.Fatal(err)
		}
		second, err := msgParseRequest(built)
		if err != nil {
			t.Fatal(err)
		}
		want := *first
		want.System = []string{strings.Join(first.System, "\n\n")}
		if len(first.Messages) != len(second.Messages) {
			t.Fatalf("%s: %d messages, then %d", name, len(first.Messages), len(second.Messages))
		}
		for i := range want.Messages {
			if !reflect.DeepEqual(want.Messages[i], second.Messages[i]) {
				t.Errorf("%s: message %d\n got %+v\nwant %+v", name, i, second.Messages[i], want.Messages[i])
			}
		}
		if !reflect.DeepEqual(want.System, second.System) || !reflect.DeepEqual(msgCompactTools(want.Tools), msgCompactTools(second.Tools)) {
			t.Errorf("%s: system or tools changed:\n got %q %+v\nwant %q %+v", name, second.System, second.Tools, want.System, want.Tools)
		}
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"tool_choice", second.ToolChoice, want.ToolChoice},
			{"parallel", second.ParallelToolCalls, want.ParallelToolCalls},
			{"max_tokens", second.MaxTokens, want.MaxTokens},
			{"stop", second.Stop, want.Stop},
			{"user", second.User, want.User},
			{"stream", second.Stream, want.Stream},
		} {
			if !reflect.DeepEqual(f.got, f.want) {
				t.Errorf("%s: %s is %v, want %v", name, f.name, f.got, f.want)
			}
		}
	}
}

// msgCompactTools is tools with their parameters compacted, as the
// builder writes them.
func msgCompactTools(tools []Tool) []Tool {
	out := make([]Tool, len(tools))
	for i, t := range tools {
		var b bytes.Buffer
		_ = json.Compact(&b, t.Parameters)
		t.Parameters = b.Bytes()
		out[i] = t
	}
	return out
}

func TestMsgParseRequestErrors(t *testing.T) {
	deep := `{"messages":[{"role":"user","content":[{"type":"tool_use","input":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}]}]}`
	user := func(blocks string) string {
		return `{"max_tokens":10,"messages":[{"role":"user","content":[` + blocks + `]}]}`
	}
	assistant := func(blocks string) string {
		return `{"max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[` + blocks + `]}]}`
	}
	cases := []struct {
		body        string
		field       string // *Invalid's Field
		unsupported string // or *Unsupported's Feature
	}{
		{`{`, "body", ""},
		{`[]`, "body", ""},
		{deep, "body", ""},
		{`{"messages":[]}`, "messages", ""},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].role", ""},
		{`{"messages":[{"role":"user","content":"x"},{"role":"system","content":[{"type":"image"}]}]}`, "messages[1].content[0]", ""},
		{`{"messages":[{"role":"user","content":"x"},{"role":"system","content":7}]}`, "messages[1].content", ""},
		{`{"messages":[{"role":"user"}]}`, "messages[0].content", ""},
		{`{"messages":[{"role":"user","content":7}]}`, "messages[0].content", ""},
		{`{"messages":["x"]}`, "messages[0]", ""},
		{assistant(`{"type":"tool_use","name":"f","input":{}}`), "messages[1].content[0].id", ""},
		{assistant(`{"type":"text","text":"a"},{"type":"tool_use","id":7,"name":"f","input":{}}`), "messages[1].content[1].id", ""},
		{assistant(`{"type":"tool_use","id":"t","name":"f","input":[1]}`), "messages[1].content[0].input", ""},
		{assistant(`{"type":"tool_use","id":"t","name":"f"}`), "messages[1].content[0].input", ""},
		{assistant(`{"type":"thinking","signature":"s"}`), "messages[1].content[0].thinking", ""},
		{assistant(`{"type":"redacted_thinking"}`), "messages[1].content[0].data", ""},
		{assistant(`{"type":"tool_result","tool_use_id":"t"}`), "messages[1].content[0].type", ""},
		{user(`{"type":"tool_use","id":"t","name":"f","input":{}}`), "messages[0].content[0].type", ""},
		{user(`{"text":"x"}`), "messages[0].content[0].type", ""},
		{user(`{"type":"text"}`), "messages[0].content[0].text", ""},
		{user(`{"type":"image","source":{"type":"base64","data":"x"}}`), "messages[0].content[0].source", ""},
		{user(`{"type":"image","source":{"type":"ftp"}}`), "messages[0].content[0].source.type", ""},
		{user(`{"type":"image","source":{"type":"file","file_id":"f"}}`), "", "an image given by file_id"},
		{user(`{"type":"tool_result"}`), "messages[0].content[0].tool_use_id", ""},
		{user(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{}}]}`), "", "the document content block in a tool_result"},
		{user(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}`), "", "the document content block"},
		{user(`{"type":"search_result","source":"https://x","title":"t","content":[]}`), "", "the search_result content block"},
		{user(`{"type":"container_upload","file_id":"f"}`), "", "the container_upload content block"},
		{assistant(`{"type":"mcp_tool_use","id":"m","name":"n","server_name":"s","input":{}}`), "", "the mcp_tool_use content block"},
		{user(`{"type":"document","source":7,"title":{}}`), "", "the document content block"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "", "the web_search_20250305 tool"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"bash_20250124","name":"bash"}]}`, "", "the bash_20250124 tool"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]}`, "", "the text_editor_20250728 tool"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1024}]}`, "", "the computer_20250124 tool"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`, "", "the code_execution_20250825 tool"},
		{`{"messages":[{"role":"user","content":"x"}],"mcp_servers":[{"type":"url","url":"https://x","name":"n"}]}`, "", "mcp_servers"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"input_schema":{}}]}`, "tools[0].name", ""},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":[]}]}`, "tools[0].input_schema", ""},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"sometimes"}}`, "tool_choice.type", ""},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool"}}`, "tool_choice.name", ""},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":"many"}`, "max_tokens", ""},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}`, "max_tokens", ""},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}`, "max_tokens", ""},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, "temperature", ""},
		{`{"messages":[{"role":"user","content":"x"}],"top_k":[1]}`, "top_k", ""},
		{`{"messages":[{"role":"user","content":"x"}],"metadata":{"user_id":7}}`, "metadata.user_id", ""},
		{`{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled"}}`, "thinking.budget_tokens", ""},
		{`{"messages":[{"role":"user","content":"x"}],"thinking":{"type":"on"}}`, "thinking.type", ""},
		{`{"messages":[{"role":"user","content":"x"}],"output_format":{"type":"json_object"}}`, "output_format.type", ""},
		{`{"messages":[{"role":"user","content":"x"}],"output_config":{"format":{"type":"json_schema"}}}`, "output_config.format.schema", ""},
		{`{"messages":[{"role":"user","content":"x"}],"system":[{"type":"image"}]}`, "system[0]", ""},
		{`{"messages":[{"role":"user","content":"x"}],"system":7}`, "system", ""},
	}
	for _, c := range cases {
		_, err := msgParseRequest([]byte(c.body))
		var inv *Invalid
		var uns *Unsupported
		switch {
		case c.unsupported != "":
			if !errors.As(err, &uns) || uns.Feature != c.unsupported {
				t.Errorf("%.120s: error %v, want Unsupported %q", c.body, err, c.unsupported)
			}
		case !errors.As(err, &inv) || inv.Field != c.field:
			t.Errorf("%.120s: error %v, want Invalid at %q", c.body, err, c.field)
		}
	}
}

// TestMsgParseRequestDetails checks what the goldens show only in part:
// tool results named from their calls, cache_control dropped, the
// parallel-call switch, and each thinking form.
func TestMsgParseRequestDetails(t *testing.T) {
	r, err := msgParseRequest(msgReadFixture(t, "request_tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	res := r.Messages[2].Parts[0]
	if res.Type != ToolResult || res.Name != "get_weather" || res.ID != "toolu_01A09q90qw90lq917835lq9" {
		t.Errorf("tool result %+v: want get_weather's", res)
	}
	if p := r.ParallelToolCalls; p == nil || *p {
		t.Errorf("parallel tool calls %v, want false", p)
	}
	for body, want := range map[string]Reasoning{
		`"thinking":{"type":"enabled","budget_tokens":2000}`:                            {Budget: 2000},
		`"thinking":{"type":"disabled"}`:                                                {Off: true},
		`"thinking":{"type":"adaptive"}`:                                                {Effort: "medium"},
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}`:               {Effort: "low"},
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"max","format":null}`: {Effort: "high"},
	} {
		r, err := msgParseRequest([]byte(`{"messages":[{"role":"user","content":"x"}],` + body + `}`))
		if err != nil || r.Reasoning == nil || *r.Reasoning != want {
			t.Errorf("%s: reasoning %+v (%v), want %+v", body, r.Reasoning, err, want)
		}
	}
	var uns *Unsupported
	_, err = msgParseRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"` + strings.Repeat("x", 500) + `","name":"n"}]}`))
	if !errors.As(err, &uns) || len(uns.Feature) > 100 || !strings.HasPrefix(uns.Feature, `the "xxx`) {
		t.Errorf("a long tool type: %v", err)
	}
	_, err = msgParseRequest([]byte(`{"messages":[{"role":"user","content":[{"type":"a b\n"}]}]}`))
	if !errors.As(err, &uns) || uns.Feature != `the "a b\n" content block` {
		t.Errorf("an odd block type: %v", err)
	}
	r, err = msgParseRequest([]byte(`{"messages":[{"role":"user","content":"x"}],"output_format":{"type":"json_schema","schema":{"type":"object"}},"tool_choice":{"type":"any","disable_parallel_tool_use":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Format; f == nil || f.Type != "json_schema" || string(f.Schema) != `{"type":"object"}` || !f.Strict {
		t.Errorf("format %+v", f)
	}
	if p := r.ParallelToolCalls; p == nil || !*p || r.ToolChoice.Mode != ChoiceRequired {
		t.Errorf("tool choice %+v, parallel %v", r.ToolChoice, p)
	}
}

// msgClientBodies are the request bodies Claude Code sends (the gateway's
// client fixtures and the recordings they were made from).
func msgClientBodies(t *testing.T) map[string][]byte {
	t.Helper()
	bodies := map[string][]byte{}
	dir := filepath.Join("..", "..", "testdata", "clients")
	https, _ := filepath.Glob(filepath.Join(dir, "claude-code", "messages-*.http"))
	recs, _ := filepath.Glob(filepath.Join(dir, "claude-code", "rec-*.http"))
	for _, name := range append(https, recs...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		_, body, ok := bytes.Cut(b, []byte("\n\n"))
		if !ok {
			t.Fatalf("%s: no body", name)
		}
		bodies[filepath.Base(name)] = body
	}
	recorded, _ := filepath.Glob(filepath.Join(dir, "recorded", "claude-*.json"))
	for _, name := range recorded {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		bodies[filepath.Base(name)] = rec.Body
	}
	if len(bodies) < 10 {
		t.Fatalf("found %d Claude Code requests", len(bodies))
	}
	return bodies
}

// TestMsgClaudeCodeRequests: every request Claude Code was seen to send
// reads (system turns inside messages join the instructions, the tool
// search tool is left out, context_management dropped) and is built again
// for an Anthropic upstream without losing a turn.
func TestMsgClaudeCodeRequests(t *testing.T) {
	for name, body := range msgClientBodies(t) {
		r, err := msgParseRequest(body)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var w struct {
			System   json.RawMessage `json:"system"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &w); err != nil {
			t.Fatal(err)
		}
		turns := 0
		for _, m := range w.Messages {
			if m.Role != "system" {
				turns++
			} else if len(r.System) == 0 {
				t.Errorf("%s: a system turn is not in System", name)
			}
		}
		if len(r.Messages) != turns || len(r.Tools) == 0 && name != "messages-title.http" {
			t.Errorf("%s: %d messages (want %d), %d tools", name, len(r.Messages), turns, len(r.Tools))
		}
		for _, tool := range r.Tools {
			if strings.HasPrefix(tool.Name, "tool_search_tool") {
				t.Errorf("%s: the tool search tool is kept", name)
			}
		}
		built, err := msgBuildRequest(r)
		if err != nil {
			t.Errorf("%s: build: %v", name, err)
			continue
		}
		back, err := msgParseRequest(built)
		if err != nil || !reflect.DeepEqual(back.Messages, msgMergeTurns(r.Messages)) {
			t.Errorf("%s: built again, the messages differ (%v)", name, err)
		}
	}
}

func TestMsgSystemTurnEffort(t *testing.T) {
	r, err := msgParseRequest([]byte(`{"system":"top","messages":[{"role":"user","content":"hi"},{"role":"system","content":[{"type":"text","text":"turn"}],"output_config":{"effort":"low"}}],"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.System, []string{"top", "turn"}) || len(r.Messages) != 1 || r.Reasoning == nil || r.Reasoning.Effort != "low" {
		t.Errorf("system %q, %d messages, reasoning %+v", r.System, len(r.Messages), r.Reasoning)
	}
}

// msgMergeTurns is msgs with consecutive turns of one role merged, tool
// results first: what the builder sends.
func msgMergeTurns(msgs []Message) []Message {
	var out []Message
	for _, m := range msgs {
		if n := len(out); n > 0 && out[n-1].Role == m.Role {
			out[n-1].Parts = append(out[n-1].Parts, m.Parts...)
			continue
		}
		out = append(out, Message{Role: m.Role, Parts: append([]Part(nil), m.Parts...)})
	}
	for i := range out {
		var results, rest []Part
		for _, p := range out[i].Parts {
			if p.Type == ToolResult {
				results = append(results, p)
			} else {
				rest = append(rest, p)
			}
		}
		out[i].Parts = append(results, rest...)
	}
	return out
}
