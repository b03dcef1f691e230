package xlate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func msgUserText(s string) Message {
	return Message{Role: RoleUser, Parts: []Part{{Type: Text, Text: s}}}
}

func TestMsgBuildRequest(t *testing.T) {
	no := false
	tools := []Tool{{Name: "f"}}
	cases := []struct {
		name string
		r    Request
		want string // the whole body
	}{
		{"defaults", Request{Model: "m", Messages: []Message{msgUserText("hi")}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"system joined, metadata left out", Request{Model: "m", System: []string{"a", "", "b"}, Metadata: map[string]string{"k": "v"}, User: "u", Stream: true, Messages: []Message{msgUserText("hi")}},
			`{"model":"m","max_tokens":4096,"system":"a\n\nb","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"metadata":{"user_id":"u"},"stream":true}`},
		{"merged turns, tool results first, unsigned thinking and reasoning items dropped", Request{Model: "m", Messages: []Message{
			msgUserText("q"),
			{Role: RoleAssistant, Parts: []Part{{Type: Thinking, Text: "unsigned"}, {Type: ReasoningItem, ID: "rs_1", Data: "x"}, {Type: ToolCall, ID: "c1", Name: "f"}}},
			{Role: RoleAssistant, Parts: []Part{{Type: ReasoningItem, ID: "rs_2"}}},
			{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "c2", Name: "f", Arguments: ` {"a": [1, 2]} `}}},
			msgUserText("and"),
			{Role: RoleUser, Parts: []Part{{Type: Text}, {Type: ToolResult, ID: "c1", Content: []Part{{Type: Text, Text: "r1"}}}, {Type: ToolResult, ID: "c2", IsError: true}}},
		}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{}},{"type":"tool_use","id":"c2","name":"f","input":{"a":[1,2]}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"r1"}]},{"type":"tool_result","tool_use_id":"c2","is_error":true},{"type":"text","text":"and"}]}]}`},
		{"images", Request{Model: "m", Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: Image, URL: "data:image/png;base64,AAAA"}, {Type: Image, URL: "https://x/y.png"}, {Type: Image, MediaType: "image/gif", Data: "R0lG"}}}}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"image","source":{"type":"url","url":"https://x/y.png"}},{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}]}]}`},
		{"signed thinking kept", Request{Model: "m", Messages: []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{{Type: Thinking, Text: "t", Signature: "s"}, {Type: RedactedThinking, Data: "d"}, {Type: Text, Text: "a"}}}}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"a"}]}]}`},
		{"tools, required, serial", Request{Model: "m", Messages: []Message{msgUserText("q")}, Tools: []Tool{{Name: "f", Description: "d", Strict: true}, {Name: "g", Parameters: json.RawMessage(`{ "type": "object" }`)}}, ToolChoice: &ToolChoice{Mode: ChoiceRequired}, ParallelToolCalls: &no},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"tools":[{"name":"f","description":"d","input_schema":{"type":"object","properties":{}},"strict":true},{"name":"g","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`},
		{"named tool", Request{Model: "m", Messages: []Message{msgUserText("q")}, Tools: tools, ToolChoice: &ToolChoice{Mode: ChoiceTool, Name: "f"}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"f"}}`},
		{"none", Request{Model: "m", Messages: []Message{msgUserText("q")}, Tools: tools, ToolChoice: &ToolChoice{Mode: ChoiceNone}, ParallelToolCalls: &no},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`},
		{"serial without a choice", Request{Model: "m", Messages: []Message{msgUserText("q")}, Tools: tools, ParallelToolCalls: &no},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`},
		{"no tools, no choice", Request{Model: "m", Messages: []Message{msgUserText("q")}, ToolChoice: &ToolChoice{Mode: ChoiceRequired}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}`},
		{"effort, clamped below max_tokens, sampling dropped", Request{Model: "m", Messages: []Message{msgUserText("q")}, Reasoning: &Reasoning{Effort: "high"}, Temperature: json.RawMessage("0.2"), TopK: json.RawMessage("5")},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"thinking":{"type":"enabled","budget_tokens":4095}}`},
		{"budget", Request{Model: "m", MaxTokens: 32000, Messages: []Message{msgUserText("q")}, Reasoning: &Reasoning{Budget: 5000, Effort: "low"}},
			`{"model":"m","max_tokens":32000,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"thinking":{"type":"enabled","budget_tokens":5000}}`},
		{"budget under 1024 after the clamp", Request{Model: "m", MaxTokens: 1024, Messages: []Message{msgUserText("q")}, Reasoning: &Reasoning{Effort: "minimal"}, Temperature: json.RawMessage("1e-1"), TopP: json.RawMessage("-0.5")},
			`{"model":"m","max_tokens":1024,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"temperature":1e-1,"top_p":-0.5}`},
		{"off", Request{Model: "m", Messages: []Message{msgUserText("q")}, Reasoning: &Reasoning{Off: true, Effort: "high"}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}`},
		{"forced tool turns thinking off", Request{Model: "m", Messages: []Message{msgUserText("q")}, Tools: tools, ToolChoice: &ToolChoice{Mode: ChoiceTool, Name: "f"}, Reasoning: &Reasoning{Effort: "high"}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"f"}}`},
		{"json_schema", Request{Model: "m", Messages: []Message{msgUserText("q")}, Stop: []string{"END", "\"q\""}, Format: &Format{Type: "json_schema", Name: "n", Schema: json.RawMessage(`{"type": "object"}`), Strict: true}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"stop_sequences":["END","\"q\""],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`},
		{"json_object", Request{Model: "m", Messages: []Message{msgUserText("q")}, Format: &Format{Type: "json_object"}},
			`{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}`},
	}
	for _, c := range cases {
		got, err := BuildRequest(Messages, &c.r)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// TestMsgThinkingInToolLoops: Anthropic refuses thinking when the last
// assistant turn calls tools without signed thinking first, as every tool
// loop of a chat or responses caller does; the builder then asks for none.
func TestMsgThinkingInToolLoops(t *testing.T) {
	call := Part{Type: ToolCall, ID: "c1", Name: "f", Arguments: "{}"}
	signed := Part{Type: Thinking, Text: "t", Signature: "s"}
	result := Message{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "c1"}}}
	cases := []struct {
		name     string
		msgs     []Message
		thinking bool
	}{
		{"no tool loop", []Message{msgUserText("q")}, true},
		{"unsigned tool turn", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{{Type: Thinking, Text: "chat reasoning"}, {Type: Text, Text: "a"}, call}}, result}, false},
		{"signed tool turn", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{signed, call}}, result}, true},
		{"signed, split over two messages", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{signed}}, {Role: RoleAssistant, Parts: []Part{call}}, result}, true},
		{"redacted first", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{{Type: RedactedThinking, Data: "d"}, call}}, result}, true},
		{"an earlier unsigned tool turn", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{call}}, result, {Role: RoleAssistant, Parts: []Part{{Type: Text, Text: "done"}}}, msgUserText("more")}, true},
		{"a last turn with no tool call", []Message{msgUserText("q"), {Role: RoleAssistant, Parts: []Part{{Type: Text, Text: "a"}}}, msgUserText("more")}, true},
	}
	for _, c := range cases {
		r := &Request{Model: "m", MaxTokens: 32000, Messages: c.msgs, Reasoning: &Reasoning{Effort: "medium"}}
		got, err := msgBuildRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(got), `"thinking":{"type":"enabled","budget_tokens":8192}`); has != c.thinking {
			t.Errorf("%s: thinking %v, want %v: %s", c.name, has, c.thinking, got)
		}
	}
}

func TestMsgBuildRequestErrors(t *testing.T) {
	q := []Message{msgUserText("q")}
	cases := []struct {
		r     Request
		field string
	}{
		{Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "call_7", Name: "f", Arguments: "[1]"}}}}}, `the arguments of tool call "call_7"`},
		{Request{Messages: []Message{{Role: RoleAssistant, Parts: []Part{{Type: ToolCall, ID: "call_8", Name: "f", Arguments: `{"a":`}}}}}, `the arguments of tool call "call_8"`},
		{Request{Messages: []Message{{Role: "tool", Parts: []Part{{Type: Text, Text: "x"}}}}}, "messages[0].role"},
		{Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: Image}}}}}, "messages[0].parts[0]"},
		{Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: Image, Data: "AAAA"}}}}}, "messages[0].parts[0].media_type"},
		{Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: Image, URL: "data:text/plain,hello"}}}}}, "messages[0].parts[0].url"},
		{Request{Messages: []Message{{Role: RoleUser, Parts: []Part{{Type: ToolResult, ID: "c", Content: []Part{{Type: Image}}}}}}}, "messages[0].parts[0].content[0]"},
		{Request{Messages: q, Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`"x"`)}}}, "tools[0].parameters"},
		{Request{Messages: q, Tools: []Tool{{Name: "f"}}, ToolChoice: &ToolChoice{Mode: ChoiceTool}}, "tool_choice.name"},
		{Request{Messages: q, Tools: []Tool{{Name: "f"}}, ToolChoice: &ToolChoice{Mode: "sometimes"}}, "tool_choice"},
		{Request{Messages: q, Temperature: json.RawMessage(`"hot"`)}, "temperature"},
		{Request{Messages: q, TopP: json.RawMessage(`1.`)}, "top_p"},
		{Request{Messages: q, Format: &Format{Type: "json_schema"}}, "format.schema"},
		{Request{Messages: q, Format: &Format{Type: "json_schema", Schema: json.RawMessage(`[]`)}}, "format.schema"},
		{Request{Messages: q, Format: &Format{Type: "xml"}}, "format.type"},
	}
	for _, c := range cases {
		_, err := msgBuildRequest(&c.r)
		var inv *Invalid
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%+v: error %v, want Invalid at %q", c.r, err, c.field)
		}
	}
}

// TestMsgAppendString checks the hand-written JSON string writer against
// encoding/json: both decode to the same string, for every kind of byte.
func TestMsgAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "\x00\x01\x1f\x7f", "tab\tnl\ncr\r", "é ✓ 😀", "bad \xff\xfe utf8 \xe2\x82", "\u2028\u2029", "<script>&"} {
		msgCheckString(t, s)
	}
	if got := string(appendString(nil, "a\"\\\n\x01\u2028")); got != `"a\"\\\n\u0001\u2028"` {
		t.Errorf("got %s", got)
	}
	if !strings.Contains(string(appendString(nil, "\xff")), `\ufffd`) {
		t.Error("invalid UTF-8 not replaced")
	}
}

func msgCheckString(t *testing.T, s string) {
	t.Helper()
	b := appendString(nil, s)
	var got string
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%q: wrote %s: %v", s, b, err)
	}
	ref, _ := json.Marshal(s)
	var want string
	_ = json.Unmarshal(ref, &want)
	if got != want {
		t.Fatalf("%q: reads back as %q, want %q", s, got, want)
	}
}
