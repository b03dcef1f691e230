package xlate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// respFixture reads a file of testdata/responses.
func respFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// respParse parses a fixture, failing the test on an error.
func respParse(t *testing.T, name string) *Request {
	t.Helper()
	r, err := ParseRequest(Responses, respFixture(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func respText(s string) Part { return Part{Type: Text, Text: s} }

func respCompact(t *testing.T, s string) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return json.RawMessage(s)
}

// respSameJSON compares two JSON texts by value.
func respSameJSON(t *testing.T, field string, got, want json.RawMessage) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", field, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", field, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", field, got, want)
	}
}

func TestRespParseFunctionTools(t *testing.T) {
	r := respParse(t, "request_function_tools.json")
	if r.Model != "gpt-4.1" || r.User != "user-1234" || r.MaxTokens != 1024 || r.Stream {
		t.Errorf("model %q user %q max %d stream %v", r.Model, r.User, r.MaxTokens, r.Stream)
	}
	if string(r.Temperature) != "0.2" || string(r.TopP) != "1" {
		t.Errorf("temperature %s top_p %s: want the numbers as written", r.Temperature, r.TopP)
	}
	if r.ParallelToolCalls == nil || *r.ParallelToolCalls {
		t.Errorf("parallel_tool_calls = %v, want false", r.ParallelToolCalls)
	}
	if !reflect.DeepEqual(r.Metadata, map[string]string{"team": "weather"}) {
		t.Errorf("metadata = %v", r.Metadata)
	}
	if r.ToolChoice == nil || *r.ToolChoice != (ToolChoice{Mode: ChoiceAuto}) {
		t.Errorf("tool_choice = %+v", r.ToolChoice)
	}
	want := []Message{{Role: RoleUser, Parts: []Part{respText("What is the weather like in Paris today?")}}}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages = %+v", r.Messages)
	}
	if len(r.Tools) != 1 {
		t.Fatalf("tools = %+v", r.Tools)
	}
	tool := r.Tools[0]
	if tool.Name != "get_weather" || tool.Description != "Get current temperature for a given location." || !tool.Strict {
		t.Errorf("tool = %+v", tool)
	}
	respSameJSON(t, "parameters", tool.Parameters, respCompact(t, `{"type":"object","properties":{"location":{"type":"string",
		"description":"City and country e.g. Bogotá, Colombia"}},"required":["location"],"additionalProperties":false}`))
}

func TestRespParseToolOutputs(t *testing.T) {
	r := respParse(t, "request_tool_outputs.json")
	if !reflect.DeepEqual(r.System, []string{"You are a weather bot. Use the get_weather tool."}) {
		t.Errorf("system = %q", r.System)
	}
	if r.ToolChoice == nil || *r.ToolChoice != (ToolChoice{Mode: ChoiceTool, Name: "get_weather"}) {
		t.Errorf("tool_choice = %+v", r.ToolChoice)
	}
	want := []Message{
		{Role: RoleUser, Parts: []Part{respText("What's the weather like in Paris and Bogotá today?")}},
		{Role: RoleAssistant, Parts: []Part{
			{Type: ToolCall, ID: "call_12345xyz", Name: "get_weather", Arguments: `{"location":"Paris, France"}`},
			{Type: ToolCall, ID: "call_67890abc", Name: "get_weather", Arguments: `{"location":"Bogotá, Colombia"}`},
		}},
		{Role: RoleUser, Parts: []Part{
			{Type: ToolResult, ID: "call_12345xyz", Name: "get_weather", Content: []Part{respText(`{"temperature": 14}`)}},
			{Type: ToolResult, ID: "call_67890abc", Name: "get_weather", Content: []Part{respText(`{"temperature": 18}`)}},
		}},
	}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", r.Messages, want)
	}
}

func TestRespParseReasoning(t *testing.T) {
	r := respParse(t, "request_reasoning.json")
	if r.Reasoning == nil || *r.Reasoning != (Reasoning{Effort: "medium", Summary: "auto"}) {
		t.Errorf("reasoning = %+v", r.Reasoning)
	}
	if !reflect.DeepEqual(r.System, []string{"Answer with the data the tools give."}) {
		t.Errorf("system = %q", r.System)
	}
	if len(r.Tools) != 1 || r.Tools[0].Strict {
		t.Errorf("tools = %+v: strict absent is false", r.Tools)
	}
	want := []Message{
		{Role: RoleUser, Parts: []Part{respText("What's the weather like in Paris today?")}},
		{Role: RoleAssistant, Parts: []Part{
			{Type: ReasoningItem, ID: "rs_6820f383d7c08191846711c5df8233bc0ac5ba57aafcbac7",
				Data: "gAAAAABoIPOGtl5yLr1MN3bQyE_wxT9SLiDGG_0Wi2rb8yQ8i6lKGSM1aQqKJm4",
				Text: "**Checking the weather**\n\nThe user asks about Paris.\n\n**Calling the tool**"},
			{Type: ToolCall, ID: "call_2dQG9X5hTZ7ZfBdbZ8Vn4sTa", Name: "get_weather", Arguments: `{"location":"Paris, France"}`},
		}},
		{Role: RoleUser, Parts: []Part{
			{Type: ToolResult, ID: "call_2dQG9X5hTZ7ZfBdbZ8Vn4sTa", Name: "get_weather", Content: []Part{respText(`{"temperature": 14}`)}},
		}},
	}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", r.Messages, want)
	}
}

func TestRespParseImage(t *testing.T) {
	r := respParse(t, "request_image.json")
	if !r.Stream {
		t.Error("stream: want true")
	}
	want := []Part{
		respText("what's in this image?"),
		{Type: Image, URL: "https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"},
		{Type: Image, MediaType: "image/jpeg", Data: "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJ"},
	}
	if len(r.Messages) != 1 || !reflect.DeepEqual(r.Messages[0].Parts, want) {
		t.Errorf("messages = %+v", r.Messages)
	}
	f := r.Format
	if f == nil || f.Type != "json_schema" || f.Name != "scene" || !f.Strict {
		t.Fatalf("format = %+v", f)
	}
	respSameJSON(t, "schema", f.Schema, respCompact(t, `{"type":"object","properties":{"summary":{"type":"string"}},
		"required":["summary"],"additionalProperties":false}`))
}

// TestRespParseMerging: consecutive assistant items make one assistant
// message, its reasoning first; consecutive outputs one user message.
func TestRespParseMerging(t *testing.T) {
	body := `{"model":"m","input":[
		{"role":"system","content":"s1"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"let me look"},{"type":"refusal","refusal":"no"}]},
		{"type":"reasoning","id":"rs_1","summary":[]},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"r1"},
		{"type":"function_call_output","call_id":"c2","output":[{"type":"input_image","image_url":"https://x/y.png"}]},
		{"role":"developer","content":[{"type":"input_text","text":"d1"},{"type":"input_text","text":"d2"}]},
		{"type":"message","role":"assistant","content":"done"},
		{"role":"user","content":"thanks"}
	],"instructions":"i0"}`
	r, err := ParseRequest(Responses, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.System, []string{"i0", "s1", "d1", "d2"}) {
		t.Errorf("system = %q", r.System)
	}
	want := []Message{
		{Role: RoleUser, Parts: []Part{respText("hi")}},
		{Role: RoleAssistant, Parts: []Part{
			{Type: ReasoningItem, ID: "rs_1"},
			respText("let me look"), respText("no"),
			{Type: ToolCall, ID: "c1", Name: "f", Arguments: "{}"},
		}},
		{Role: RoleUser, Parts: []Part{
			{Type: ToolResult, ID: "c1", Name: "f", Content: []Part{respText("r1")}},
			{Type: ToolResult, ID: "c2", Content: []Part{{Type: Image, URL: "https://x/y.png"}}},
		}},
		{Role: RoleAssistant, Parts: []Part{respText("done")}},
		{Role: RoleUser, Parts: []Part{respText("thanks")}},
	}
	if !reflect.DeepEqual(r.Messages, want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", r.Messages, want)
	}
}

func TestRespParseParams(t *testing.T) {
	r, err := ParseRequest(Responses, []byte(`{"model":"m","input":"hello","store":false,"background":false,
		"previous_response_id":"","safety_identifier":"sid","include":["reasoning.encrypted_content","x"],
		"reasoning":{"effort":"xhigh"},"text":{"format":{"type":"json_object"},"verbosity":"low"},"tool_choice":"required"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.User != "sid" || r.Reasoning.Effort != "high" || r.Format.Type != "json_object" || r.ToolChoice.Mode != ChoiceRequired {
		t.Errorf("request = %+v", r)
	}
	if !reflect.DeepEqual(r.Messages, []Message{{Role: RoleUser, Parts: []Part{respText("hello")}}}) {
		t.Errorf("messages = %+v", r.Messages)
	}
	r, err = ParseRequest(Responses, []byte(`{"model":"m","input":"x","reasoning":{"effort":"none"},"text":{"format":{"type":"text"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Reasoning.Off || r.Format != nil {
		t.Errorf("reasoning %+v format %+v: want off, free text", r.Reasoning, r.Format)
	}
	r, err = ParseRequest(Responses, []byte(`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Messages[0].Parts[0]; got.Arguments != "{}" {
		t.Errorf("a call without arguments has arguments %q, want {}", got.Arguments)
	}
}

// TestRespParseUnsupported: each feature of responses no other upstream
// has is refused, naming it.
func TestRespParseUnsupported(t *testing.T) {
	in := `"input":"x"`
	item := func(s string) string { return `"input":[` + s + `]` }
	user := func(part string) string { return item(`{"role":"user","content":[` + part + `]}`) }
	cases := []struct{ body, feature string }{
		{`"previous_response_id":"resp_1",` + in, "previous_response_id"},
		{`"store":true,` + in, "store: true"},
		{`"background":true,` + in, "background: true"},
		{`"conversation":"conv_1",` + in, "conversation"},
		{`"conversation":{"id":"conv_1"},` + in, "conversation"},
		{`"prompt":{"id":"pmpt_1"},` + in, "prompt (a stored prompt template)"},
		{item(`{"type":"item_reference","id":"msg_1"}`), "item_reference"},
		{item(`{"type":"web_search_call","id":"ws_1","status":"completed"}`), "the web_search_call input item"},
		{user(`{"type":"input_image","file_id":"file-1"}`), "input_image by file_id"},
		{user(`{"type":"input_file","file_id":"file-1"}`), "input_file"},
		{user(`{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}`), "audio input"},
		{item(`{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_url":"https://x"}]}`), "input_file"},
		{`"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]},` + in, "tool_choice allowed_tools"},
		{`"tool_choice":{"type":"web_search_preview"},` + in, "tool_choice web_search_preview"},
	}
	for _, tool := range []string{"web_search", "web_search_preview", "web_search_2025_08_26", "file_search",
		"code_interpreter", "computer_use_preview", "computer_use", "image_generation", "mcp", "local_shell",
		"namespace", "apply_patch", "shell"} {
		cases = append(cases, struct{ body, feature string }{`"tools":[{"type":"` + tool + `"}],` + in, "the " + tool + " tool"})
	}
	for _, c := range cases {
		_, err := ParseRequest(Responses, []byte(`{"model":"m",`+c.body+`}`))
		var u *Unsupported
		if !errors.As(err, &u) || u.Feature != c.feature {
			t.Errorf("%s: err %v, want Unsupported %q", c.body, err, c.feature)
		}
	}
}

// TestRespParseInvalid: what cannot be read is an Invalid naming the
// field's path.
func TestRespParseInvalid(t *testing.T) {
	cases := []struct{ body, field string }{
		{`[1]`, "body"},
		{`{"model":"m","input":"x"`, "body"},
		{`{"input":"x"}`, "model"},
		{`{"model":7,"input":"x"}`, "model"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":3}`, "input"},
		{`{"model":"m","input":"x","max_output_tokens":-1}`, "max_output_tokens"},
		{`{"model":"m","input":"x","max_output_tokens":1.5}`, "max_output_tokens"},
		{`{"model":"m","input":"x","temperature":"hot"}`, "temperature"},
		{`{"model":"m","input":"x","metadata":{"a":1}}`, "metadata.a"},
		{`{"model":"m","input":"x","metadata":[]}`, "metadata"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":5}]}]}`, "input[0].content[1].text"},
		{`{"model":"m","input":[{"type":"reasoning","summary":[{"text":3}]}]}`, "input[0].summary[0].text"},
		{`{"model":"m","input":"x","store":"yes"}`, "store"},
		{`{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name"},
		{`{"model":"m","input":"x","tools":[{"name":"f"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":[]}]}`, "tools[0].parameters"},
		{`{"model":"m","input":"x","tool_choice":"sometimes"}`, "tool_choice"},
		{`{"model":"m","input":"x","tool_choice":{"type":"function"}}`, "tool_choice.name"},
		{`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type"},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name"},
		{`{"model":"m","input":"x","reasoning":{"effort":"max"}}`, "reasoning.effort"},
		{`{"model":"m","input":[{"content":"x"}]}`, "input[0].type"},
		{`{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{`{"model":"m","input":[{"role":"user","content":"a"},{"role":"user"}]}`, "input[1].content"},
		{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0].call_id"},
		{`{"model":"m","input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"user","content":"c"},{"type":"function_call_output","call_id":7}]}`, "input[3].call_id"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png,abc"}]}]}`, "input[0].content[0].image_url"},
		{`{"model":"m","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0].type"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"video"}]}]}`, "input[0].content[0].type"},
		{`{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":"mrx1.!!"}]}`, "input[0].encrypted_content"},
		{`{"model":"m","input":[{"type":"reasoning","summary":[],"encrypted_content":"mrx1.W3sidCI6Inh4In1d"}]}`, "input[0].encrypted_content"},
	}
	for _, c := range cases {
		_, err := ParseRequest(Responses, []byte(c.body))
		var inv *Invalid
		if !errors.As(err, &inv) || inv.Field != c.field {
			t.Errorf("%s: err %v, want Invalid naming %q", c.body, err, c.field)
		}
	}
}

// TestRespParseDeep: a deeply nested body is an error, never a panic.
func TestRespParseDeep(t *testing.T) {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, body := range []string{
		deep,
		`{"model":"m","input":` + deep + `}`,
		`{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"a":` + deep + `}}]}`,
	} {
		if _, err := ParseRequest(Responses, []byte(body)); err == nil {
			t.Errorf("a body nested 20000 deep was read")
		}
	}
}
